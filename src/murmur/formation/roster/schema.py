"""``roster.yaml``: its schema, its loader, and where each value sits in the file.

A roster declares a formation: the capsules that run together as its **members**, the one
**entry member** that receives the formation's task, and which members may call which
(``spec/roster.md`` "Schema"). This module is admission check 1 — "the file
reads and has the shape above" — and nothing else: every shape fault is ``E-ROS-001`` naming
the file, the line and the key path. The semantic checks (unique names, one entry member,
rules naming members, ...) are :mod:`murmur.formation.roster.admission`.

The loader composes the YAML node graph rather than constructing Python values, so that

* every value keeps its 1-based line (diagnostics point at the roster line);
* an unquoted number such as ``version: 1.10`` reads as its own text, ``"1.10"``;
* a duplicate key is a shape fault instead of silently winning.

A key written with no value (``entry:``) is the same as an absent key.
"""

from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import NoReturn

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.manifest import (
    MAX_FLOW_DEPTH,
    RESERVED_VERSIONS,
    VERSION_RE,
    flow_depth_exceeded,
    is_capsule_name,
)
from murmur.userfile import UserFileError, read_user_text

ROSTER_FILENAME = "roster.yaml"
"""The only file name ``mur run --roster`` and ``mur doctor --roster`` accept."""

MEMBER_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
"""A member's name within its roster (``spec/roster.md`` "Schema")."""

MAX_ROSTER_BYTES = 1 << 20
"""A larger ``roster.yaml`` is refused before parsing (1 MiB)."""

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_TAG + t for t in ("str", "int", "float", "bool", "null"))
_TEXT_TAGS = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL})
"""Scalars a text field reads as written: an unquoted ``null``, ``~``, ``true`` or ``1.10``
is that text in a name or a version, as in ``murmur.yaml``."""

_TOP_KEYS = ("roster_version", "members", "reachability", "max_tree_total", "max_same_capsule_chain",
             "budget_tokens")
_CAP_KEYS = ("max_tree_total", "max_same_capsule_chain")  # the tree caps (spec/roster.md "Tree caps")
_MEMBER_KEYS = ("name", "capsule", "version", "entry")
_RULE_KEYS = ("from", "to")


class ReachabilityKind(enum.Enum):
    """How ``reachability`` was written: absent or ``[]``, the word ``all``, or rules."""

    NONE = "none"
    ALL = "all"
    RULES = "rules"


@attrs.frozen
class Named:
    """A member name as written in a reachability rule, with its 1-based line."""

    name: str
    line: int


@attrs.frozen
class RosterMember:
    """One ``members[]`` entry, exactly as written.

    Attributes:
        name (str): the member's name within this roster (matches :data:`MEMBER_NAME_RE`).
        capsule (str): the installed capsule's full name, ``<scope>/<name>``.
        version (str): the exact version (never blank or a reserved word).
        entry (bool): ``entry: true`` (absent or blank is ``False``).
        line (int): 1-based line of the member's ``name:`` value.
        entry_line (int | None): 1-based line of its ``entry:`` value, when written.
    """

    name: str
    capsule: str
    version: str
    entry: bool
    line: int
    entry_line: int | None = None

    @property
    def coordinate(self) -> str:
        """``<capsule>@<version>``."""
        return f"{self.capsule}@{self.version}"


@attrs.frozen
class ReachabilityRule:
    """One ``reachability[]`` rule: ``from`` may call each member in ``to``.

    Attributes:
        caller (Named): the rule's ``from``.
        callees (tuple[Named, ...]): the rule's ``to``, in the order written (at least one,
            never ``from`` itself; may repeat a name — an edge written twice is one edge).
        line (int): 1-based line where the rule starts.
    """

    caller: Named
    callees: tuple[Named, ...]
    line: int


@attrs.frozen
class Roster:
    """A ``roster.yaml`` that has the documented shape (admission check 1 passed).

    Attributes:
        path (str): the roster file as the operator named it (used in diagnostics).
        members (tuple[RosterMember, ...]): in roster order (at least one).
        reachability (ReachabilityKind): how ``reachability`` was written.
        rules (tuple[ReachabilityRule, ...]): the rules, in order (empty unless ``RULES``).
        members_line (int): 1-based line of the ``members:`` key.
        max_tree_total (int | None): the per-tree total of delegations (None: not written).
        max_same_capsule_chain (int | None): the same-capsule chain cap (None: not written).
        budget_tokens (int | None): the formation tree's token budget (spec/roster.md "Tree
            budget"; None: not written).
    """

    path: str
    members: tuple[RosterMember, ...]
    reachability: ReachabilityKind = ReachabilityKind.NONE
    rules: tuple[ReachabilityRule, ...] = ()
    members_line: int = 1
    max_tree_total: int | None = None
    max_same_capsule_chain: int | None = None
    budget_tokens: int | None = None


def resolve_roster_path(arg: Path | str | None, *, cwd: Path | None = None) -> Path:
    """Which ``roster.yaml`` a ``--roster`` argument names.

    Args:
        arg (Path | str | None): the argument: a project directory, the ``roster.yaml``
            inside one, or ``None``/blank for ``./roster.yaml``.
        cwd (Path | None): the directory relative paths start from (default: the cwd).

    Returns:
        Path: the roster file (it may not exist; :func:`load_roster` reports that).

    Raises:
        DiagnosticError: ``E-ROS-001`` when ``arg`` names a file called anything other than
            ``roster.yaml``.
    """
    base = cwd or Path.cwd()
    if arg is None or str(arg).strip() == "":
        return base / ROSTER_FILENAME
    path = base / Path(arg)
    if path.is_dir():
        return path / ROSTER_FILENAME
    if path.name == ROSTER_FILENAME:
        return path
    if not path.exists():
        message = f"--roster names '{arg}', which does not exist"
    else:
        message = (f"--roster names the file '{arg}'; a roster file is always called "
                   f"{ROSTER_FILENAME}")
    raise DiagnosticError(
        error(
            "E-ROS-001",
            f"{ROSTER_FILENAME}: {message}",
            hint=f"pass the project directory, or the {ROSTER_FILENAME} inside it",
        )
    )


def load_roster(path: Path, *, display: str | None = None) -> Roster:
    """Read ``path`` and check it has the roster shape (admission check 1).

    Args:
        path (Path): the ``roster.yaml`` to read.
        display (str | None): how diagnostics name the file (default: ``str(path)``).

    Returns:
        Roster: the parsed roster.

    Raises:
        DiagnosticError: ``E-ROS-001`` when the file is missing or unreadable, is not YAML,
            or breaks any shape rule; the diagnostic points at the offending line.
    """
    shown = display if display is not None else str(path)
    try:
        text = read_user_text(path, limit=MAX_ROSTER_BYTES)
    except UserFileError as exc:
        if exc.kind == "missing":
            _refuse(
                shown,
                None,
                f"{ROSTER_FILENAME}: no roster at {shown}",
                hint="write one (`mur new --roster NAME` makes a two-member example)",
            )
        if exc.kind == "too_large":
            _refuse(shown, None, f"{ROSTER_FILENAME}: {shown} is larger than 1 MiB",
                    hint="a roster names its members and their edges; keep data and prompts "
                    "out of it (a real roster is a few kilobytes)")
        if exc.kind == "not_utf8":
            _refuse(shown, None, f"{ROSTER_FILENAME}: {shown} is not UTF-8 text",
                    hint="save the file as UTF-8 (e.g. `iconv -t UTF-8`), or check that the "
                    "path names the roster and not a binary file")
        _refuse(shown, None, f"{ROSTER_FILENAME}: {shown} cannot be read: {exc.reason}",
                hint="a roster is a regular file" if exc.kind in ("not_regular", "directory") else None)
    return parse_roster(text, path=shown)


def parse_roster(text: str, *, path: str = ROSTER_FILENAME) -> Roster:
    """Parse roster text (admission check 1) without touching the file system.

    Args:
        text (str): the YAML text of a ``roster.yaml``.
        path (str): how diagnostics name the file.

    Returns:
        Roster: the parsed roster.

    Raises:
        DiagnosticError: ``E-ROS-001`` for any YAML or shape fault, with its line.
    """
    return _Parser(path).parse(text)


def _refuse(path: str, line: int | None, message: str, *, hint: str | None = None) -> NoReturn:
    raise DiagnosticError(error("E-ROS-001", message, hint=hint, path=path, line=line))


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


class _Parser:
    """One pass over the composed node graph; raises at the first shape fault."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, node: Node | None, message: str, *, hint: str | None = None) -> NoReturn:
        _refuse(self.path, _line(node) if node is not None else None,
                f"{ROSTER_FILENAME}: {message}", hint=hint)

    def parse(self, text: str) -> Roster:
        too_deep = flow_depth_exceeded(text)
        if too_deep is not None:  # before composing: deep nesting costs seconds to refuse
            _refuse(self.path, too_deep, f"{ROSTER_FILENAME}: the document nests more than "
                    f"{MAX_FLOW_DEPTH} levels of [ and {{",
                    hint="a roster is a mapping of lists of mappings; flatten the document")
        yaml = YAML(typ="safe", pure=True)
        try:
            root = yaml.compose(text)
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = int(mark.line) + 1 if mark is not None else None
            problem = exc.problem or exc.context or "invalid YAML"
            _refuse(self.path, line, f"{ROSTER_FILENAME}: not valid YAML: {problem}",
                    hint="fix the YAML syntax at that line (`mur new --roster NAME` writes a "
                    "valid example)")
        except YAMLError as exc:
            _refuse(self.path, None, f"{ROSTER_FILENAME}: not valid YAML: {exc}",
                    hint="fix the YAML syntax")
        except RecursionError:
            _refuse(self.path, None, f"{ROSTER_FILENAME}: the document nests too deeply",
                    hint="a roster is a mapping of lists of mappings; flatten the document")
        if root is None or _is_null(root):
            _refuse(self.path, 1, f"{ROSTER_FILENAME}: the file is empty; `roster_version: 1` "
                    "and `members` are required",
                    hint="`mur new --roster NAME` writes a two-member example to start from")
        top = self.mapping(root, "the document", _TOP_KEYS, "")
        version_node = self.required(top, "roster_version", root, "")
        if version_node.tag != _INT or not isinstance(version_node, ScalarNode):
            self.fail(version_node, "`roster_version` must be the integer 1")
        if _int_value(version_node.value) != 1:
            self.fail(version_node, f"`roster_version` is {version_node.value}; this "
                      "runtime reads roster_version 1 only")
        members_key, members_node = self.required_with_key(top, "members", root, "")
        members = self.members(members_node)
        kind, rules = self.reachability(top.get("reachability"))
        caps = {k: self.count(top[k][1], k) for k in _CAP_KEYS if k in top}
        budget = self.positive(top["budget_tokens"][1], "budget_tokens") if "budget_tokens" in top else None
        return Roster(self.path, members, kind, rules, _line(members_key), caps.get("max_tree_total"),
                      caps.get("max_same_capsule_chain"), budget)

    def count(self, node: Node, path: str) -> int:
        """A tree cap: an integer of 0 or more (``"3"``, ``3.0`` and ``true`` are refused)."""
        value = _int_value(node.value) if isinstance(node, ScalarNode) and node.tag == _INT else None
        if value is None or value < 0:
            self.fail(node, f"`{path}` must be a whole number of 0 or more",
                      hint=f"e.g. `{path}: 20`; leave the key out for no cap")
        return value

    def positive(self, node: Node, path: str) -> int:
        """A token budget: an integer of 1 or more (``"3"``, ``3.0``, ``true`` and ``0`` are refused)."""
        value = _int_value(node.value) if isinstance(node, ScalarNode) and node.tag == _INT else None
        if value is None or value < 1:
            self.fail(node, f"`{path}` must be a whole number of 1 or more",
                      hint=f"e.g. `{path}: 200000` (input + output tokens over the whole tree); leave the key out for no budget")
        return value

    # --- structure helpers -------------------------------------------------------------

    def mapping(self, node: Node, what: str, allowed: tuple[str, ...],
                where: str) -> dict[str, tuple[ScalarNode, Node]]:
        """A mapping node's entries by key, refusing non-string, duplicate and unknown keys;
        keys written with no value are dropped (a key with no value is an absent key); a
        value spelled ``null`` or ``~`` is kept, because in a text field it is that text."""
        if not isinstance(node, MappingNode):
            self.fail(node, f"{what} must be a mapping")
        out: dict[str, tuple[ScalarNode, Node]] = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _NULL:
                self.fail(key, f"{what} has a key that is not a plain name")
            name = str(key.value)
            path = f"{where}{name}"
            if name not in allowed:
                self.fail(key, f"unknown key `{path}`",
                          hint="allowed here: " + ", ".join(f"`{where}{k}`" for k in allowed))
            if name in out:
                self.fail(key, f"`{path}` is written twice")
            out[name] = (key, value)
        return {k: kv for k, kv in out.items() if not _is_empty(kv[1])}

    def required(self, entries: dict[str, tuple[ScalarNode, Node]], key: str,
                 parent: Node, where: str) -> Node:
        return self.required_with_key(entries, key, parent, where)[1]

    def required_with_key(self, entries: dict[str, tuple[ScalarNode, Node]], key: str,
                          parent: Node, where: str) -> tuple[ScalarNode, Node]:
        if key not in entries:
            self.fail(parent, f"`{where}{key}` is required")
        return entries[key]

    def string(self, node: Node, path: str) -> str:
        if not isinstance(node, ScalarNode) or node.tag not in _TEXT_TAGS:
            self.fail(node, f"`{path}` must be a string")
        return str(node.value)

    # --- members -----------------------------------------------------------------------

    def members(self, node: Node) -> tuple[RosterMember, ...]:
        if not isinstance(node, SequenceNode):
            self.fail(node, "`members` must be a list of members")
        if not node.value:
            self.fail(node, "`members` is empty; a roster has at least one member")
        return tuple(self.member(item, i) for i, item in enumerate(node.value))

    def member(self, node: Node, index: int) -> RosterMember:
        where = f"members[{index}]."
        entries = self.mapping(node, f"`members[{index}]`", _MEMBER_KEYS, where)
        name_node = self.required(entries, "name", node, where)
        name = self.string(name_node, f"{where}name")
        if not MEMBER_NAME_RE.fullmatch(name):
            self.fail(name_node, f"member name '{name}' is not a valid member name",
                      hint="a member name is a lowercase letter followed by up to 31 "
                      "lowercase letters, digits or '-' (^[a-z][a-z0-9-]{0,31}$)")
        capsule_node = self.required(entries, "capsule", node, where)
        capsule = self.string(capsule_node, f"{where}capsule")
        self.check_capsule(capsule_node, name, capsule)
        version_node = self.required(entries, "version", node, where)
        version = self.version(version_node, name, f"{where}version")
        entry = False
        entry_line: int | None = None
        if "entry" in entries and not _is_null(entries["entry"][1]):
            entry_node = entries["entry"][1]
            if not isinstance(entry_node, ScalarNode) or entry_node.tag != _BOOL:
                self.fail(entry_node, f"`{where}entry` must be true or false")
            entry = str(entry_node.value).lower() == "true"
            entry_line = _line(entry_node)
        return RosterMember(name, capsule, version, entry, _line(name_node), entry_line)

    def check_capsule(self, node: Node, member: str, capsule: str) -> None:
        parts = capsule.split("/")
        if len(parts) == 1:
            self.fail(node, f"member '{member}' names capsule '{capsule}' without its scope",
                      hint=f"write its full name: `local/{capsule}` for a capsule installed "
                      f"from its .mur.zip, or `<scope>/{capsule}` for one installed from a "
                      "registry")
        if len(parts) != 2 or not all(is_capsule_name(p) for p in parts):
            self.fail(node, f"member '{member}' names capsule '{capsule}', which is not "
                      "an artifact name `<scope>/<name>`",
                      hint="scope and name are lowercase letters, digits and '-'")

    def version(self, node: Node, member: str, path: str) -> str:
        if not isinstance(node, ScalarNode) or node.tag not in _TEXT_TAGS:
            self.fail(node, f"`{path}` must be a version string")
        text = str(node.value)
        if text.strip() == "":
            self.fail(node, f"member '{member}' has a blank version; a member is a capsule "
                      "at an exact version")
        if text.strip().lower() in RESERVED_VERSIONS:
            self.fail(node, f"member '{member}' pins version '{text}'; a member is a capsule "
                      "at an exact version",
                      hint="write the exact version you installed (`mur list` shows it)")
        if not VERSION_RE.fullmatch(text):
            self.fail(node, f"member '{member}' has version {text!r}, which is not a version",
                      hint="a version is a letter or digit, then letters, digits, '.', '_', '+' "
                      "or '-' (at most 64 characters)")
        return text

    # --- reachability ------------------------------------------------------------------

    def reachability(self, entry: tuple[ScalarNode, Node] | None
                     ) -> tuple[ReachabilityKind, tuple[ReachabilityRule, ...]]:
        if entry is None:
            return ReachabilityKind.NONE, ()
        node = entry[1]
        if _is_null(node):
            return ReachabilityKind.NONE, ()
        if isinstance(node, ScalarNode):
            if node.tag == _STR and node.value == "all":
                return ReachabilityKind.ALL, ()
            self.fail(node, "`reachability` must be `all` or a list of rules")
        if not isinstance(node, SequenceNode):
            self.fail(node, "`reachability` must be `all` or a list of rules")
        if not node.value:
            return ReachabilityKind.NONE, ()
        return ReachabilityKind.RULES, tuple(self.rule(item, i) for i, item in enumerate(node.value))

    def rule(self, node: Node, index: int) -> ReachabilityRule:
        where = f"reachability[{index}]."
        entries = self.mapping(node, f"`reachability[{index}]`", _RULE_KEYS, where)
        from_node = self.required(entries, "from", node, where)
        caller = Named(self.string(from_node, f"{where}from"), _line(from_node))
        to_node = self.required(entries, "to", node, where)
        if not isinstance(to_node, SequenceNode):
            self.fail(to_node, f"`{where}to` must be a list of member names")
        if not to_node.value:
            self.fail(to_node, f"`{where}to` is empty; a rule lists at least one member")
        callees: list[Named] = []
        for j, item in enumerate(to_node.value):
            callee = Named(self.string(item, f"{where}to[{j}]"), _line(item))
            if callee.name == caller.name:
                self.fail(item, f"the reachability rule from '{caller.name}' lists "
                          f"'{caller.name}' itself in `to`; a member never calls itself")
            callees.append(callee)
        return ReachabilityRule(caller, tuple(callees), _line(node))


def _is_null(node: Node) -> bool:
    """A null scalar in any spelling (``null``, ``~``, or no value at all)."""
    return isinstance(node, ScalarNode) and node.tag == _NULL


def _is_empty(node: Node) -> bool:
    """A key written with no value (``name:``), which is an absent key."""
    return _is_null(node) and node.value == ""


def _int_value(text: str) -> int | None:
    try:
        return int(str(text).replace("_", ""), 0)
    except ValueError:
        return None
