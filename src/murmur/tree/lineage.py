"""Lineage and the effective spawn set of one session (pure; spec/tree.md "Lineage").

Every session records where it sits in the process tree::

    {"parent": "session:ses_…" | "formation:frm_…" | null, "root": "ses_…" | "frm_…",
     "depth": 1, "spawn": ["worker-a"], "delegation_id": "dlg_…",
     "formation_id": "frm_…", "member": "coder"}

A root (an operator's ``mur run``) has ``parent: null``, ``root`` its own id and ``depth: 1``;
a formation member has ``parent: "formation:frm_…"``, ``root: "frm_…"``, ``depth: 1``; a
delegated child has its parent's root and its parent's depth + 1. Keys that do not apply are
absent.

A delegated child's lineage is handed down by its parent's runtime in ``MURMUR_LINEAGE``
(runtime-owned, applied last, like ``MURMUR_SPAWNER``): compact JSON holding the *child's*
``parent``, ``root``, ``depth``, ``delegation_id`` (and ``formation_id``), and as ``spawn`` the
parent's effective spawn set, the ceiling of the child's. The child checks it against its
spawner handle; a value that does not parse, or disagrees with the handle, refuses the launch
with ``E-TRE-001``. Nothing in it can make the child shallower or wider than its parent.

Effective spawn set = ``capabilities.spawn.allow`` ∩ the parent's set (a delegated child)
∩ ``--spawn a,b`` ∩ ``MURMUR_SPAWN`` (``none`` or ``--no-spawn``: the empty set). A narrowing
naming a capsule outside the manifest narrows to the intersection and warns once
(``W-TRE-001``). No I/O here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.ids import is_id

LINEAGE_ENV = "MURMUR_LINEAGE"
SPAWN_ENV = "MURMUR_SPAWN"
MAX_DEPTH = 64
"""A handed-down depth beyond this is not a lineage this runtime wrote."""
_MAX_LEN = 65536  # room for a link's caller (16 words of 200 characters, JSON-escaped)
CALLER_WORDS, CALLER_CHARS = 16, 200
"""A link's calling command, as lineage records it: at most 16 words, each cut to 200 characters."""
_MAX_NAMES = 256
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@-]{0,127}$")
_HINT = (
    "MURMUR_LINEAGE is set by a delegating capsule's runtime on the child it launches, beside "
    "MURMUR_SPAWNER; unset both to run this capsule on its own"
)
_HANDED_KEYS = frozenset({"parent", "root", "depth", "spawn", "delegation_id", "formation_id", "via", "caller"})


@attrs.frozen
class Lineage:
    """Where a session sits in the process tree.

    Attributes:
        parent (str | None): ``session:ses_…``, ``formation:frm_…`` or None (a root).
        root (str): the id of the tree's root (``ses_…`` or ``frm_…``).
        depth (int): 1 for a root or a formation member; parent's depth + 1 for a child.
        spawn (tuple[str, ...]): the effective spawn set, in manifest order.
        delegation_id (str | None): ``dlg_…`` for a delegated child.
        formation_id (str | None): the formation the tree belongs to, when it does.
        member (str | None): the member name of a formation member.
        entry (bool): a formation's entry member (``"entry": true`` in the JSON; absent otherwise).
        via (str | None): ``link`` for a child started through a capsule link
            (spec/links.md "Lineage"); None otherwise.
        caller (tuple[str, ...] | None): with ``via``: the link's calling command, at most
            16 words of at most 200 characters each (for display).
    """

    parent: str | None
    root: str
    depth: int
    spawn: tuple[str, ...]
    delegation_id: str | None = None
    formation_id: str | None = None
    member: str | None = None
    via: str | None = None
    caller: tuple[str, ...] | None = None
    entry: bool = False

    @property
    def parent_id(self) -> str | None:
        """The parent's bare id (``ses_…`` or ``frm_…``), or None for a root."""
        return self.parent.split(":", 1)[1] if self.parent else None

    def to_json(self) -> dict[str, Any]:
        """The ``lineage`` object (keys that do not apply left out; ``parent`` always present)."""
        out: dict[str, Any] = {"parent": self.parent, "root": self.root, "depth": self.depth,
                               "spawn": list(self.spawn)}
        for key in ("delegation_id", "formation_id", "member", "via"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.caller is not None:
            out["caller"] = list(self.caller)
        if self.entry:
            out["entry"] = True
        return out

    def hand_down(self, session_id: str, delegation_id: str, *, caller: Sequence[str] | None = None) -> str:
        """The ``MURMUR_LINEAGE`` value this session's runtime gives a child it launches.

        Args:
            session_id (str): this session's id (the child's parent).
            delegation_id (str): the delegation's ``dlg_…`` id.
            caller (Sequence[str] | None): a link's calling command (a child started through
                a capsule link): recorded as ``via: "link"`` and ``caller``, cut to
                :data:`CALLER_WORDS` words of :data:`CALLER_CHARS` characters.

        Returns:
            str: compact JSON: the child's parent, root, depth and delegation id, and this
            session's effective spawn set as the child's ceiling.
        """
        data: dict[str, Any] = {
            "parent": f"session:{session_id}",
            "root": self.root,
            "depth": self.depth + 1,
            "spawn": list(self.spawn),
            "delegation_id": delegation_id,
        }
        if self.formation_id is not None:
            data["formation_id"] = self.formation_id
        if caller is not None:
            data["via"] = "link"
            data["caller"] = cut_caller(caller)
        return json.dumps(data, separators=(",", ":"), ensure_ascii=True)


def cut_caller(words: Sequence[str]) -> list[str]:
    """A link's calling command as lineage keeps it: 16 words, each cut to 200 characters (pure)."""
    return [str(w)[:CALLER_CHARS] for w in list(words)[:CALLER_WORDS]]


@attrs.frozen
class Handed:
    """A parsed ``MURMUR_LINEAGE``: what the parent's runtime handed this child."""

    parent: str
    root: str
    depth: int
    ceiling: tuple[str, ...]
    delegation_id: str
    formation_id: str | None = None
    via: str | None = None
    caller: tuple[str, ...] | None = None


def _is_name(value: object) -> bool:
    return isinstance(value, str) and _NAME_RE.match(value) is not None


def handed_problem(data: Any) -> str | None:
    """Why ``data`` (decoded JSON) is not a handed-down lineage, or None when it is one.

    The reason names a field or a shape, never a value.
    """
    if not isinstance(data, dict):
        return "the value is not a JSON object"
    unknown = sorted(set(data) - _HANDED_KEYS)
    if unknown:
        return f"the field `{unknown[0]}` is not a lineage field"
    for key in ("parent", "root", "depth", "spawn", "delegation_id"):
        if key not in data:
            return f"the field `{key}` is missing"
    parent = data["parent"]
    if not isinstance(parent, str) or not parent.startswith("session:") or not is_id(parent[8:], "ses"):
        return "the field `parent` is not `session:` followed by a session id"
    root = data["root"]
    if not isinstance(root, str) or not (is_id(root, "ses") or is_id(root, "frm")):
        return "the field `root` is not a session or formation id"
    depth = data["depth"]
    if not isinstance(depth, int) or isinstance(depth, bool):
        return "the field `depth` is not an integer"
    if depth < 2:
        return "the field `depth` is below 2 (a delegated child is at least one level below its root)"
    if depth > MAX_DEPTH:
        return f"the field `depth` is above {MAX_DEPTH}"
    spawn = data["spawn"]
    if not isinstance(spawn, list) or len(spawn) > _MAX_NAMES or not all(_is_name(n) for n in spawn):
        return "the field `spawn` is not a list of capsule names"
    delegation = data["delegation_id"]
    if not isinstance(delegation, str) or not is_id(delegation, "dlg"):
        return "the field `delegation_id` is not a delegation id (dlg_…)"
    formation = data.get("formation_id")
    if formation is not None and (not isinstance(formation, str) or not is_id(formation, "frm")):
        return "the field `formation_id` is not a formation id (frm_…)"
    via, caller = data.get("via"), data.get("caller")
    if via is not None and via != "link":
        return "the field `via` is not `link`"
    if (via is None) != (caller is None):
        return "the fields `via` and `caller` are not given together"
    if caller is not None and (
        not isinstance(caller, list) or len(caller) > CALLER_WORDS
        or not all(isinstance(w, str) and len(w) <= CALLER_CHARS for w in caller)
    ):
        return f"the field `caller` is not a list of at most {CALLER_WORDS} words of {CALLER_CHARS} characters"
    return None


def parse_handed(value: str | None, *, spawner_session: str | None, spawner_delegation: str | None) -> Handed | None:
    """Parse and check ``MURMUR_LINEAGE`` against the spawner handle.

    Args:
        value (str | None): the variable's value; None or blank means "not handed".
        spawner_session (str | None): ``session_id`` of ``MURMUR_SPAWNER`` (None: no handle).
        spawner_delegation (str | None): its ``delegation_id``.

    Returns:
        Handed | None: the handed lineage, or None for a session nobody delegated.

    Raises:
        DiagnosticError: ``E-TRE-001`` — the value does not parse, disagrees with the spawner
            handle, or one of the two is present without the other. The message names the
            reason, never the value.
    """
    present = value is not None and bool(value.strip())
    if not present:
        if spawner_session is not None:
            raise _refuse("MURMUR_SPAWNER is set but MURMUR_LINEAGE is not (a delegating runtime sets both)")
        return None
    assert value is not None
    if spawner_session is None:
        raise _refuse("MURMUR_LINEAGE is set without MURMUR_SPAWNER (a lineage is handed only to a delegated child)")
    if len(value) > _MAX_LEN:
        raise _refuse(f"{LINEAGE_ENV} is not a readable lineage: the value is too long")
    try:
        data = json.loads(value)
    except ValueError:
        raise _refuse(f"{LINEAGE_ENV} is not a readable lineage: the value is not JSON") from None
    problem = handed_problem(data)
    if problem is not None:
        raise _refuse(f"{LINEAGE_ENV} is not a readable lineage: {problem}")
    if data["parent"] != f"session:{spawner_session}":
        raise _refuse(f"{LINEAGE_ENV} names another parent than MURMUR_SPAWNER does")
    if data["delegation_id"] != spawner_delegation:
        raise _refuse(f"{LINEAGE_ENV} names another delegation than MURMUR_SPAWNER does")
    return Handed(
        parent=data["parent"],
        root=data["root"],
        depth=data["depth"],
        ceiling=tuple(dict.fromkeys(data["spawn"])),
        delegation_id=data["delegation_id"],
        formation_id=data.get("formation_id"),
        via=data.get("via"),
        caller=tuple(data["caller"]) if isinstance(data.get("caller"), list) else None,
    )


def _refuse(message: str) -> DiagnosticError:
    return DiagnosticError(error("E-TRE-001", message, hint=_HINT))


# -- the spawn set ------------------------------------------------------------------------------


@attrs.frozen
class Narrowing:
    """One narrowing of the spawn set, as the operator gave it.

    Attributes:
        source (str): ``--spawn``, ``--no-spawn`` or ``MURMUR_SPAWN``.
        names (tuple[str, ...]): the names it keeps (empty: nothing).
    """

    source: str
    names: tuple[str, ...]


def parse_names(text: str) -> tuple[str, ...]:
    """``a,b`` (spaces allowed) as names; ``none`` (or nothing) is the empty set.

    Raises:
        ValueError: an entry is not a capsule name (the message names the entry).
    """
    stripped = text.strip()
    if stripped.lower() == "none" or not stripped:
        return ()
    out: list[str] = []
    for part in stripped.split(","):
        name = part.strip()
        if not _is_name(name) or name.lower() == "none":
            raise ValueError(f"`{name}` is not a capsule name" if name else "an entry between commas is empty")
        out.append(name)
    return tuple(dict.fromkeys(out))


def narrowings(
    *, spawn_flag: str | None, no_spawn: bool, environ: Mapping[str, str]
) -> tuple[Narrowing, ...]:
    """The narrowings present for this run.

    Args:
        spawn_flag (str | None): ``--spawn`` (None when not given).
        no_spawn (bool): ``--no-spawn``.
        environ (Mapping[str, str]): the session's environment (``MURMUR_SPAWN``).

    Raises:
        DiagnosticError: ``E-TRE-002`` naming the source and the bad entry.
    """
    out: list[Narrowing] = []
    for source, text in ((SPAWN_ENV, environ.get(SPAWN_ENV)), ("--spawn", spawn_flag)):
        if text is None:
            continue
        if source == SPAWN_ENV and not text.strip():
            continue  # an empty MURMUR_SPAWN is unset
        try:
            out.append(Narrowing(source, parse_names(text)))
        except ValueError as exc:
            raise DiagnosticError(
                error("E-TRE-002", f"{source} cannot be read: {exc}",
                      hint="give capsule names separated by commas (`a,b`), or `none` for the empty set")
            ) from None
    if no_spawn:
        out.append(Narrowing("--no-spawn", ()))
    return tuple(out)


@attrs.frozen
class SpawnDecision:
    """The effective spawn set and the warnings it produced.

    Attributes:
        spawn (tuple[str, ...]): the effective set, in manifest order.
        warnings (tuple[Diagnostic, ...]): at most one ``W-TRE-001``.
        narrowed (bool): something other than the manifest shaped it.
    """

    spawn: tuple[str, ...]
    warnings: tuple[Diagnostic, ...] = ()
    narrowed: bool = False


def effective_spawn(
    manifest_allow: Sequence[str],
    *,
    ceiling: Sequence[str] | None = None,
    narrow: Iterable[Narrowing] = (),
) -> SpawnDecision:
    """``manifest_allow`` ∩ ``ceiling`` ∩ every narrowing; never wider than any of them.

    Args:
        manifest_allow (Sequence[str]): ``capabilities.spawn.allow``.
        ceiling (Sequence[str] | None): the parent's effective set (a delegated child).
        narrow (Iterable[Narrowing]): ``--spawn``, ``--no-spawn``, ``MURMUR_SPAWN``.

    Returns:
        SpawnDecision: the set; one ``W-TRE-001`` naming every narrowing entry outside the
        manifest (or the parent's set).
    """
    keep = list(dict.fromkeys(manifest_allow))
    narrowed = False
    if ceiling is not None:
        allowed = set(ceiling)
        narrowed = narrowed or any(n not in allowed for n in keep)
        keep = [n for n in keep if n in allowed]
    outside: list[str] = []
    sources: list[str] = []
    for n in narrow:
        narrowed = True
        sources.append(n.source)
        for name in n.names:
            beyond = name not in manifest_allow or (ceiling is not None and name not in ceiling)
            if beyond and name not in outside:
                outside.append(name)
        wanted = set(n.names)
        keep = [name for name in keep if name in wanted]
    warnings: tuple[Diagnostic, ...] = ()
    if outside:
        where = "capabilities.spawn.allow" + (" or the parent's spawn set" if ceiling is not None else "")
        shown = ", ".join(f"'{n}'" for n in outside)
        warnings = (
            error(
                "W-TRE-001",
                f"{' / '.join(dict.fromkeys(sources))} names {shown}, outside {where}; "
                f"the spawn set is narrowed to [{', '.join(keep)}]",
                hint="a spawn set only narrows: name capsules the manifest already allows",
            ),
        )
    return SpawnDecision(tuple(keep), warnings, narrowed)


def refusal_sentence(name: str) -> str:
    """The sentence a delegation outside the effective spawn set is refused with."""
    return f"spawn refused: '{name}' is not in this session's spawn set (narrowed by --spawn / MURMUR_SPAWN)"


# -- building a session's lineage ----------------------------------------------------------------


def root_lineage(session_id: str, spawn: Sequence[str]) -> Lineage:
    """An operator's ``mur run`` nobody delegated: parent null, root itself, depth 1."""
    return Lineage(None, session_id, 1, tuple(spawn))


def member_lineage(formation_id: str, member: str | None, spawn: Sequence[str], *, entry: bool = False) -> Lineage:
    """A formation member: parent ``formation:frm_…``, root the formation, depth 1."""
    return Lineage(f"formation:{formation_id}", formation_id, 1, tuple(spawn), formation_id=formation_id, member=member,
                   entry=entry)


def child_lineage(handed: Handed, spawn: Sequence[str]) -> Lineage:
    """A delegated child from what its parent's runtime handed it.

    ``spawn`` must already be within ``handed.ceiling`` (see :func:`effective_spawn`); a set
    that is not is cut to it here too, so no caller can widen it.
    """
    ceiling = set(handed.ceiling)
    return Lineage(
        handed.parent,
        handed.root,
        handed.depth,
        tuple(n for n in spawn if n in ceiling),
        delegation_id=handed.delegation_id,
        formation_id=handed.formation_id,
        via=handed.via,
        caller=handed.caller,
    )


def narrows(parent: Lineage, child: Lineage) -> bool:
    """Whether ``child`` sits strictly below ``parent`` and holds no more than it (the invariant)."""
    return (
        child.root == parent.root
        and child.depth == parent.depth + 1
        and set(child.spawn) <= set(parent.spawn)
    )


def lineage_from_json(data: Mapping[str, Any] | None) -> Lineage | None:
    """A :class:`Lineage` from its JSON object (as recorded), or None when it is not one."""
    if not isinstance(data, Mapping):
        return None
    root, depth, spawn = data.get("root"), data.get("depth"), data.get("spawn")
    if not isinstance(root, str) or not isinstance(depth, int) or not isinstance(spawn, list):
        return None
    parent = data.get("parent")

    def opt(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    caller = data.get("caller")
    return Lineage(
        parent if isinstance(parent, str) else None,
        root,
        depth,
        tuple(n for n in spawn if isinstance(n, str)),
        delegation_id=opt("delegation_id"),
        formation_id=opt("formation_id"),
        member=opt("member"),
        via=opt("via"),
        caller=tuple(str(w) for w in caller) if isinstance(caller, list) else None,
        entry=data.get("entry") is True,
    )
