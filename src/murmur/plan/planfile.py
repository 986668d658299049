"""Reading and validating a plan file into a :class:`~murmur.plan.steps.Plan` (spec/plan.md).

Every fault is a coded diagnostic (``E-PLN-001`` … ``E-PLN-009``) pointing at the plan file's
line; all faults found are reported together in one :class:`~murmur.errors.DiagnosticError`.
Grants are checked here, so a plan whose shell binary or delegated capsule is not granted by
the manifest is refused before any task runs.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.grants import grant_entry, plan_hint
from murmur.manifest import Manifest
from murmur.plan.condition import Condition, parse_condition
from murmur.plan.steps import (
    Action,
    CapsuleAction,
    MemberAction,
    OnError,
    Plan,
    ShellAction,
    Step,
    TemplateAction,
    WriteAction,
    ancestors,
    cycle,
)
from murmur.plan.template import Template, TemplateError, parse_template
from murmur.shell import ShellRefused, check_allowed
from murmur.userfile import UserFileError, read_user_text

__all__ = ["STEP_ID_RE", "load_plan", "parse_plan"]

STEP_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
MEMBER_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
RESERVED_VERSIONS = ("latest", "stable", "edge")
ACTION_KEYS = ("shell", "capsule", "member", "template", "write")
STEP_KEYS = frozenset(
    {
        *ACTION_KEYS, "id", "version", "task", "ok_exit_codes", "depends_on", "if", "on_error",
        "retries", "timeout", "description",
    }
)
TOP_KEYS = frozenset({"steps", "output", "description"})
MAX_PLAN_BYTES = 1 << 20
"""A larger plan file is refused unread (``E-PLN-001``)."""


class _Collector:
    """Accumulates diagnostics for one plan file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Diagnostic] = []

    def add(self, code: str, message: str, line: int | None, hint: str | None = None) -> None:
        self.found.append(error(code, message, hint=hint, path=self.path, line=line))


def _key_line(node: Any, key: str) -> int | None:
    """1-based line of ``key`` in a ruamel mapping, if known."""
    try:
        return int(node.lc.key(key)[0]) + 1
    except (AttributeError, KeyError, TypeError):
        return None


def _item_line(node: Any, index: int) -> int | None:
    try:
        return int(node.lc.item(index)[0]) + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return None


def _node_line(node: Any) -> int | None:
    try:
        return int(node.lc.line) + 1
    except (AttributeError, TypeError):
        return None


def _scalar_text(value: object) -> str | None:
    """A string, or an int written without quotes, as text; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (str, int)):
        return str(value)
    return None


def load_plan(capsule_root: Path, manifest: Manifest) -> Plan:
    """Read and validate the plan file ``manifest.plan`` names.

    Args:
        capsule_root (Path): the directory holding the capsule's files.
        manifest (Manifest): the capsule's validated manifest (grants are checked against it).

    Returns:
        Plan: the validated plan.

    Raises:
        DiagnosticError: ``E-PLN-001`` when the manifest names no plan, the path is absolute
            or leaves the capsule, or the file cannot be read; otherwise every fault
            :func:`parse_plan` finds.
    """
    display = str(capsule_root / (manifest.plan or "plan.yaml"))
    if not manifest.plan:
        raise DiagnosticError(
            error("E-PLN-001", "the manifest names no plan file", hint="add `plan: plan.yaml` to murmur.yaml")
        )
    rel = PurePosixPath(manifest.plan)
    if rel.is_absolute() or ".." in rel.parts or "\\" in manifest.plan:
        raise DiagnosticError(
            error(
                "E-PLN-001",
                f"the plan path `{manifest.plan}` must be relative and inside the capsule",
                hint="name a file beside murmur.yaml, e.g. `plan: plan.yaml`",
            )
        )
    path = capsule_root / rel
    try:
        text = read_user_text(path, limit=MAX_PLAN_BYTES)
    except UserFileError as exc:
        if exc.kind == "missing":
            raise DiagnosticError(
                error("E-PLN-001", f"the plan file `{manifest.plan}` does not exist", path=display,
                      hint="create it, or change `plan:` in murmur.yaml")
            ) from None
        raise DiagnosticError(
            error("E-PLN-001", f"the plan file `{manifest.plan}` cannot be read: {exc.reason}", path=display)
        ) from None
    return parse_plan(text, manifest, path=display)


def parse_plan(text: str, manifest: Manifest, *, path: str = "plan.yaml") -> Plan:
    """Validate plan YAML text against the manifest's grants (pure apart from parsing).

    Args:
        text (str): the plan file's content.
        manifest (Manifest): grants (``capabilities.shell.allow``, ``spawn.allow``).
        path (str): the file name used in diagnostics.

    Returns:
        Plan: the validated plan.

    Raises:
        DiagnosticError: every fault found (``E-PLN-002`` … ``E-PLN-009``), in file order.
    """
    try:
        return _parse_plan(text, manifest, path)
    except RecursionError:
        raise DiagnosticError(
            error("E-PLN-002", "the plan is not valid YAML: the document nests too deeply", path=path,
                  hint="a plan is a mapping of steps; flatten the document")
        ) from None


def _parse_plan(text: str, manifest: Manifest, path: str) -> Plan:
    out = _Collector(path)
    try:
        doc = YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        reason = exc.problem or exc.context or "invalid YAML"
        raise DiagnosticError(
            error("E-PLN-002", f"the plan is not valid YAML: {reason}", path=path, line=line)
        ) from None
    except YAMLError as exc:
        raise DiagnosticError(error("E-PLN-002", f"the plan is not valid YAML: {exc}", path=path)) from None
    if not isinstance(doc, CommentedMap):
        raise DiagnosticError(
            error("E-PLN-002", "the plan must be a mapping with `steps` and `output`", path=path, line=1,
                  hint="start from `steps:` (a list) and `output: \"{{ steps.ID.stdout }}\"`")
        )
    for key in doc:
        if key not in TOP_KEYS:
            out.add("E-PLN-002", f"unknown plan key `{key}`", _key_line(doc, str(key)),
                    hint="a plan has `steps`, `output` and an optional `description`")
    steps, declared, complete = _parse_steps(doc, manifest, out)
    output = _parse_output(doc, out)
    if steps:
        _check_graph(steps, declared, complete, out)
    if complete and output is not None:
        for ref in sorted(output.steps - declared):
            out.add("E-PLN-008", f"`output` reads step `{ref}`, which the plan does not declare",
                    _key_line(doc, "output"))
    if out.found:
        raise DiagnosticError(sorted(out.found, key=lambda d: (d.location.line or 0) if d.location else 0))
    assert output is not None
    return Plan(tuple(steps), output, path)


def _parse_output(doc: CommentedMap, out: _Collector) -> Template | None:
    if "output" not in doc:
        out.add("E-PLN-002", "the plan has no `output`", _node_line(doc) or 1,
                hint='declare the answer, e.g. `output: "{{ steps.ID.stdout }}"`')
        return None
    value = _scalar_text(doc["output"])
    if value is None:
        out.add("E-PLN-002", "`output` must be text (a template)", _key_line(doc, "output"))
        return None
    try:
        return parse_template(value)
    except TemplateError as exc:
        out.add("E-PLN-008", f"`output`: {exc.message}", _key_line(doc, "output"))
        return None


def _parse_steps(
    doc: CommentedMap, manifest: Manifest, out: _Collector
) -> tuple[list[Step], set[str], bool]:
    """The valid steps, every id declared (valid step or not), and whether all were valid."""
    raw = doc.get("steps")
    if not isinstance(raw, CommentedSeq) or not raw:
        out.add("E-PLN-002", "`steps` must be a non-empty list", _key_line(doc, "steps") or 1,
                hint="add `steps:` with at least one `- id: …` entry")
        return [], set(), False
    steps: list[Step] = []
    seen: dict[str, int | None] = {}
    declared: set[str] = set()
    ok = True
    for index, node in enumerate(raw):
        line = _item_line(raw, index)
        if not isinstance(node, CommentedMap):
            out.add("E-PLN-002", f"step {index + 1} must be a mapping with an `id`", line)
            ok = False
            continue
        raw_id = _scalar_text(node.get("id"))
        if raw_id is not None:
            declared.add(raw_id)
        step = _parse_step(node, line, manifest, out)
        if step is None:
            ok = False
            continue
        if step.id in seen:
            out.add("E-PLN-003", f"step id `{step.id}` is declared twice (first on line {seen[step.id]})", line,
                    hint="give every step its own id")
            ok = False
            continue
        seen[step.id] = line
        steps.append(step)
    return steps, declared, ok


def _parse_step(node: CommentedMap, line: int | None, manifest: Manifest, out: _Collector) -> Step | None:
    before = len(out.found)
    for key in node:
        if key not in STEP_KEYS:
            out.add("E-PLN-002", f"unknown step key `{key}`", _key_line(node, str(key)),
                    hint=f"a step has: {', '.join(sorted(STEP_KEYS))}")
    step_id = _scalar_text(node.get("id")) if "id" in node else None
    if step_id is None or not STEP_ID_RE.match(step_id):
        shown = "" if step_id is None else f" `{step_id}`"
        out.add("E-PLN-003", f"step id{shown} is missing or malformed", _key_line(node, "id") or line,
                hint="ids start with a letter or _, then letters, digits, _ or - (at most 64)")
        step_id = None
    label = f"step `{step_id}`" if step_id else "this step"
    action = _parse_action(node, line, label, manifest, out)
    depends_on = _parse_depends(node, label, out)
    condition = _parse_condition(node, label, out)
    on_error = OnError.FAIL
    if "on_error" in node:
        try:
            on_error = OnError(node["on_error"])
        except ValueError:
            out.add("E-PLN-002", f"{label}: `on_error` must be `fail` or `continue`", _key_line(node, "on_error"))
    retries = 0
    if "retries" in node:
        value = node["retries"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            out.add("E-PLN-002", f"{label}: `retries` must be a whole number >= 0", _key_line(node, "retries"))
        else:
            retries = value
    timeout: float | None = None
    if "timeout" in node:
        value = node["timeout"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            out.add("E-PLN-002", f"{label}: `timeout` must be a number of seconds > 0", _key_line(node, "timeout"))
        else:
            timeout = float(value)
    if "description" in node and _scalar_text(node["description"]) is None:
        out.add("E-PLN-002", f"{label}: `description` must be text", _key_line(node, "description"))
    if len(out.found) > before or step_id is None or action is None:
        return None
    return Step(step_id, action, depends_on, condition, on_error, retries, timeout, line)


def _template(node: CommentedMap, key: str, label: str, out: _Collector) -> Template | None:
    value = _scalar_text(node.get(key))
    if value is None:
        out.add("E-PLN-002", f"{label}: `{key}` must be text (a template)", _key_line(node, key))
        return None
    try:
        return parse_template(value)
    except TemplateError as exc:
        out.add("E-PLN-008", f"{label}: `{key}`: {exc.message}", _key_line(node, key))
        return None


def _parse_action(
    node: CommentedMap, line: int | None, label: str, manifest: Manifest, out: _Collector
) -> Action | None:
    present = [k for k in ACTION_KEYS if k in node]
    if len(present) != 1:
        found = ", ".join(f"`{k}`" for k in present) or "none"
        out.add("E-PLN-004", f"{label} needs exactly one of shell, capsule, member, template, write (found {found})",
                line, hint="split it into one step per action")
        return None
    kind = present[0]
    owned = (("task", ("capsule", "member")), ("version", ("capsule",)), ("ok_exit_codes", ("shell",)))
    for extra, owners in owned:
        if extra in node and kind not in owners:
            out.add("E-PLN-002", f"{label}: `{extra}` belongs to {' and '.join(owners)} steps", _key_line(node, extra))
    if kind == "shell":
        return _parse_shell(node, label, manifest, out)
    if kind == "capsule":
        return _parse_capsule(node, label, manifest, out)
    if kind == "member":
        member = _scalar_text(node["member"])
        if member is None or not MEMBER_RE.match(member):
            out.add("E-PLN-002", f"{label}: `member` must be a roster member name", _key_line(node, "member"),
                    hint="lowercase letters, digits and -, starting with a letter")
            return None
        if "task" not in node:
            out.add("E-PLN-002", f"{label}: a member step needs `task`", line, hint='add `task: "{{ task }}"`')
            return None
        task = _template(node, "task", label, out)
        return MemberAction(member, task) if task is not None else None
    if kind == "template":
        text = _template(node, "template", label, out)
        return TemplateAction(text) if text is not None else None
    return _parse_write(node, label, out)


def _parse_shell(node: CommentedMap, label: str, manifest: Manifest, out: _Collector) -> ShellAction | None:
    raw = node["shell"]
    where = _key_line(node, "shell")
    if not isinstance(raw, CommentedSeq) or not raw:
        out.add("E-PLN-002", f"{label}: `shell` must be a non-empty list (argv), not a command line", where,
                hint='write `shell: [grep, -rn, "{{ task }}", .]`; to use a shell, allowlist `sh` and write [sh, -c, "…"]')
        return None
    argv: list[Template] = []
    for i, item in enumerate(raw):
        text = _scalar_text(item)
        if text is None:
            out.add("E-PLN-002", f"{label}: shell argument {i + 1} must be text or a whole number",
                    _item_line(raw, i) or where, hint="quote it")
            return None
        try:
            argv.append(parse_template(text))
        except TemplateError as exc:
            out.add("E-PLN-008", f"{label}: shell argument {i + 1}: {exc.message}", _item_line(raw, i) or where)
            return None
    if not argv[0].is_literal:
        out.add("E-PLN-006", f"{label}: the binary (first shell element) must be written out, not templated",
                where, hint="name the binary literally so the grant can be checked at load")
        return None
    try:
        check_allowed(argv[0].source, manifest.shell_allow)
    except ShellRefused as exc:
        hint = plan_hint(exc.binary, exc.grant) if exc.grant else "name a bare binary found on PATH"
        out.add("E-PLN-006", f"{label}: {exc.reason}", where, hint=hint)
        return None
    ok_codes: tuple[int, ...] = (0,)
    if "ok_exit_codes" in node:
        codes = node["ok_exit_codes"]
        if (
            not isinstance(codes, CommentedSeq)
            or not codes
            or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in codes)
        ):
            out.add("E-PLN-002", f"{label}: `ok_exit_codes` must be a list of exit codes 0-255",
                    _key_line(node, "ok_exit_codes"), hint="e.g. `ok_exit_codes: [0, 1]` for grep")
            return None
        ok_codes = tuple(dict.fromkeys(int(c) for c in codes))
    return ShellAction(tuple(argv), ok_codes)


def _parse_capsule(node: CommentedMap, label: str, manifest: Manifest, out: _Collector) -> CapsuleAction | None:
    name = _scalar_text(node["capsule"])
    where = _key_line(node, "capsule")
    if name is None or not name.strip():
        out.add("E-PLN-002", f"{label}: `capsule` must name a capsule", where)
        return None
    if name not in manifest.spawn_allow:
        out.add("E-PLN-007", f"{label}: capsule `{name}` is not in capabilities.spawn.allow", where,
                hint=f"add it to murmur.yaml: "
                     f"`{grant_entry('capabilities.spawn.allow', manifest.spawn_allow, name)}`")
    version = _scalar_text(node.get("version")) if "version" in node else None
    if version is None or not version.strip() or version in RESERVED_VERSIONS:
        shown = f" (`{version}` is a reserved word)" if version in RESERVED_VERSIONS else ""
        out.add("E-PLN-007", f"{label}: a capsule step needs an exact `version`{shown}",
                _key_line(node, "version") or where, hint="write the installed version, e.g. `version: 0.1.0`")
        version = None
    if "task" not in node:
        out.add("E-PLN-002", f"{label}: a capsule step needs `task`", where, hint='add `task: "{{ task }}"`')
        return None
    task = _template(node, "task", label, out)
    if task is None or version is None:
        return None
    return CapsuleAction(name, version, task)


def _parse_write(node: CommentedMap, label: str, out: _Collector) -> WriteAction | None:
    raw = node["write"]
    where = _key_line(node, "write")
    if not isinstance(raw, CommentedMap) or set(raw) != {"path", "content"}:
        out.add("E-PLN-002", f"{label}: `write` must be a mapping with exactly `path` and `content`", where,
                hint='write: {path: report.md, content: "{{ steps.x.output }}"}')
        return None
    path = _template(raw, "path", label, out)
    content = _template(raw, "content", label, out)
    if path is None or content is None:
        return None
    if path.is_literal:
        problem = write_path_problem(path.source)
        if problem:
            out.add("E-PLN-009", f"{label}: {problem}", _key_line(raw, "path") or where,
                    hint="write inside the workdir with a relative path, e.g. `out/report.md`")
            return None
    return WriteAction(path, content)


def write_path_problem(path: str) -> str | None:
    """Why ``path`` may not be written by a write step (pure), or None when it may.

    A write path is relative, names a file (not ``.``), and never steps out with ``..``.
    """
    p = PurePosixPath(path)
    if not path.strip():
        return "the write path is empty"
    if p.is_absolute() or "\\" in path or "\0" in path:
        return f"the write path `{path}` must be relative to the workdir"
    if ".." in p.parts:
        return f"the write path `{path}` leaves the workdir"
    if not p.parts or p.parts == (".",):
        return f"the write path `{path}` names no file"
    return None


def _parse_depends(node: CommentedMap, label: str, out: _Collector) -> tuple[str, ...]:
    if "depends_on" not in node:
        return ()
    raw = node["depends_on"]
    where = _key_line(node, "depends_on")
    if not isinstance(raw, CommentedSeq):
        out.add("E-PLN-002", f"{label}: `depends_on` must be a list of step ids", where, hint="write `depends_on: [a, b]`")
        return ()
    ids: list[str] = []
    for item in raw:
        text = _scalar_text(item)
        if text is None:
            out.add("E-PLN-002", f"{label}: `depends_on` must be a list of step ids", where)
            return ()
        if text not in ids:
            ids.append(text)
    return tuple(ids)


def _parse_condition(node: CommentedMap, label: str, out: _Collector) -> Condition | None:
    if "if" not in node:
        return None
    raw = node["if"]
    text = str(raw).lower() if isinstance(raw, bool) else _scalar_text(raw)
    if text is None:
        out.add("E-PLN-002", f"{label}: `if` must be text (a condition)", _key_line(node, "if"))
        return None
    try:
        return parse_condition(text)
    except TemplateError as exc:
        out.add("E-PLN-008", f"{label}: `if`: {exc.message}", _key_line(node, "if"))
        return None


def _check_graph(steps: list[Step], declared: set[str], complete: bool, out: _Collector) -> None:
    """Dependencies name declared steps and form no cycle; templates read only ancestors.

    With ``complete`` false (some step was invalid), only unknown dependencies are checked.
    """
    deps = {s.id: s.depends_on for s in steps}
    graph_ok = complete
    for s in steps:
        for d in s.depends_on:
            if d == s.id:
                out.add("E-PLN-005", f"step `{s.id}` depends on itself", s.line)
                graph_ok = False
            elif d not in declared:
                out.add("E-PLN-005", f"step `{s.id}` depends on unknown step `{d}`", s.line,
                        hint=f"declared steps: {', '.join(sorted(declared))}")
                graph_ok = False
    if not graph_ok:
        return
    loop = cycle(deps)
    if loop is not None:
        first = next(s for s in steps if s.id == loop[0])
        out.add("E-PLN-005", f"the steps depend on each other in a cycle: {' -> '.join(loop)}", first.line,
                hint="remove one of these depends_on entries")
        return
    for s in steps:
        before = ancestors(deps, s.id)
        for ref in sorted(s.reads - before):
            if ref == s.id:
                out.add("E-PLN-008", f"step `{s.id}` reads its own result", s.line)
            elif ref not in deps:
                out.add("E-PLN-008", f"step `{s.id}` reads unknown step `{ref}`", s.line)
            else:
                out.add("E-PLN-008", f"step `{s.id}` reads step `{ref}` but does not depend on it", s.line,
                        hint=f"add `depends_on: [{ref}]` so `{ref}` finishes first")
