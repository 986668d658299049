"""``mur agent``: questions about capsules as agents. ``mur agent who``: the routing index.

``mur agent who [--can BINARY | --skill LABEL] [--as CAPSULE_OR_MEMBER] [--roster DIR]
[--json]`` prints who holds a binary (or matches a label) among the capsules installed in the
project and global stores and the running sessions, and, for ``--as`` (default with
``--roster``: its entry member), the routes to them: ready ones least-privileged first, then
blocked ones, each with its ``authorize:`` line. Exit 0 when something holds it, 1 when
nothing does (or a roster is refused), 2 for usage. ``spec/routing.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from murmur.routing import Catalog, Formation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``who`` subcommand and its options."""
    sub = parser.add_subparsers(dest="agent_command", metavar="<subcommand>")
    who = sub.add_parser(
        "who",
        prog="mur agent who",
        help="who can run what, and where work can be delegated",
        description="List capsules and formation members by what they hold (hard: the "
        "enforced capabilities) or match (soft: skills, description, model), and the "
        "dispatch routes from one of them, least-privileged first.",
    )
    what = who.add_mutually_exclusive_group()
    what.add_argument("--can", metavar="BINARY", help="who holds BINARY in capabilities.shell.allow")
    what.add_argument("--skill", metavar="LABEL", help="who matches LABEL (skill artifact, name, description, model)")
    who.add_argument("--as", dest="as_", metavar="CAPSULE_OR_MEMBER",
                     help="compute the routes as this member (with --roster) or capsule sees them")
    who.add_argument("--roster", metavar="DIR",
                     help="include this formation: its members, and its reachability edges as authorization")
    who.add_argument("--project", metavar="DIR", help="the project whose store to read (default: the current directory)")
    who.add_argument("--json", action="store_true", help="print one JSON document (schema murmur.agent-who/1)")


def run(args: argparse.Namespace) -> int:
    """Dispatch ``mur agent <subcommand>``; returns the exit status."""
    if getattr(args, "agent_command", None) != "who":
        from murmur.cli._common import emit
        from murmur.diagnostics import EXIT_USAGE, error

        print("usage: mur agent who [--can BINARY | --skill LABEL] [--as NAME] [--roster DIR] [--json]",
              file=sys.stderr)
        emit(error("E-CLI-001", "`mur agent` needs a subcommand",
                   hint="`mur agent who --can BINARY` names the capsules that may run BINARY; "
                   "`mur agent who --help` says more"))
        return EXIT_USAGE
    return who(args)


def who(args: argparse.Namespace) -> int:
    """``mur agent who``."""
    from murmur.cli._common import emit
    from murmur.diagnostics import EXIT_USAGE, error
    from murmur.formation import resolve_roster_path
    from murmur.routing import answer, gather_catalog, to_json, to_text

    if args.can is not None and not args.can.strip():
        emit(error("E-CLI-001", "--can needs a binary name", hint="e.g. `mur agent who --can cargo`"))
        return EXIT_USAGE
    roster = resolve_roster_path(args.roster) if args.roster is not None else None
    project = Path(args.project).resolve() if args.project else (
        roster.resolve().parent if roster is not None else Path.cwd())
    formation = _roster_formation(roster, _shown(roster)) if roster is not None else None
    got = gather_catalog(project_dir=project, formation=formation)
    for d in got.problems:
        emit(d)
    catalog = _with_roost_allow(got.catalog)
    asking, default_note = args.as_, None
    if asking is None and roster is None and (args.can or args.skill):
        catalog, asking, default_note = _default_asker(catalog, Path.cwd())
    try:
        try:
            ans = answer(catalog, can=args.can, skill=args.skill, asking=asking)
        except KeyError:
            # `local/NAME`, as `mur install` and `mur run --capsule` spell it, is the capsule NAME
            scope, sep, bare = (asking or "").rpartition("/")
            if not (sep and scope and bare):
                raise
            ans = answer(catalog, can=args.can, skill=args.skill, asking=bare)
            asking = bare
    except KeyError:
        where = "a member of the roster or an installed capsule" if roster else "an installed or running capsule"
        emit(error("E-CLI-001", f"--as {args.as_}: no such capsule or member",
                   hint=f"name {where}; `mur agent who` lists them"))
        return EXIT_USAGE
    if args.json:
        doc = to_json(ans, can=args.can, skill=args.skill, asking=asking,
                      roster=str(roster) if roster else None, edited=got.edited_why,
                      problems=[{"code": d.code, "message": d.message} for d in got.problems])
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(to_text(ans, can=args.can, skill=args.skill, edited=got.edited_why))
        if default_note is not None:
            sys.stdout.write(default_note + "\n")
    return 0 if ans.holders or ans.indirect else 1


def _default_asker(catalog: Catalog, cwd: Path) -> tuple[Catalog, str | None, str]:
    """The default asker (spec/routing.md "Routes"): with no ``--as`` and no
    ``--roster``, the capsule whose ``murmur.yaml`` is in ``cwd`` (the one ``mur run`` here
    runs: the front door), added to ``catalog`` as a source capsule when it is not installed.

    Returns:
        tuple[Catalog, str | None, str]: the catalog, the asker's name (None when ``cwd`` has
        no readable ``murmur.yaml``), and the note line the text form ends with.
    """
    import attrs

    from murmur.errors import DiagnosticError
    from murmur.manifest import load_manifest
    from murmur.routing import Capsule

    path = cwd / "murmur.yaml"
    if not path.is_file():
        return catalog, None, ("(no routes: no --as, and no murmur.yaml in the current directory to "
                               "ask as; `--as CAPSULE` computes the routes one capsule sees)")
    try:
        manifest = load_manifest(path)
    except DiagnosticError as exc:
        return catalog, None, (f"(no routes: the murmur.yaml here does not load ({exc.code}); "
                               "`--as CAPSULE` computes the routes one capsule sees)")
    if not any(c.name == manifest.name for c in catalog.capsules):
        catalog = attrs.evolve(catalog, capsules=(*catalog.capsules,
                                                  Capsule(manifest.name, manifest.version, manifest)))
    return catalog, manifest.name, (f"(routes as '{manifest.name}', the capsule in the current directory; "
                                    "`--as CAPSULE` asks as another)")


def _with_roost_allow(catalog: Catalog) -> Catalog:
    """``catalog`` with mur-roost's ``--spawn-allow`` read from the daemon at ``MURMUR_ROOST_URL``
    (its ``/health``), when one answers (spec/routing.md "The index")."""
    import os

    import attrs

    from murmur.routing import read_spawn_allow

    allow = read_spawn_allow(os.environ.get("MURMUR_ROOST_URL"))
    return catalog if allow is None else attrs.evolve(catalog, roost_spawn_allow=allow)


def _roster_formation(roster: Path, shown: str) -> Formation:
    """The roster's members and edges as the routing index reads them, admitted as
    ``mur run --roster`` would admit it (``shown``: how ``authorize:`` lines name it).

    Raises:
        DiagnosticError: the roster is refused (its admission diagnostic).
    """
    from murmur.formation import ReachabilityKind, admit_file
    from murmur.routing import Capsule, Formation, Member

    admitted = admit_file(roster)
    members = tuple(Member(m.name, Capsule(m.manifest.name, m.version, m.manifest), m.entry, m.callees)
                    for m in admitted.members)
    return Formation(shown, members, admitted.reachability is ReachabilityKind.ALL)


def _shown(path: Path) -> str:
    """The roster path as ``authorize:`` lines name it: relative to the cwd when inside it."""
    import os

    try:
        rel = os.path.relpath(path.resolve(), Path.cwd())
    except ValueError:
        return str(path)
    return str(path.resolve()) if rel.startswith("..") else rel
