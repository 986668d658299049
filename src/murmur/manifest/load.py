"""Loading ``murmur.yaml``: text to a validated :class:`~murmur.manifest.model.Manifest`.

Three passes, all faults collected and reported together in document order:

1. :func:`murmur.manifest.yamltext.parse_located` turns the text into located values (every
   scalar kept as the text written, so the schema, not the YAML resolver, decides types);
2. a cattrs converter with ``forbid_extra_keys`` structures those values into the attrs model
   (wrong types, unknown keys, missing required fields), its error tree flattened per leaf;
3. :mod:`murmur.manifest.rules` checks the values themselves (names, allow-list entry forms,
   scopes, cross-field rules) on the same located tree.

Each fault becomes a :class:`~murmur.diagnostics.Diagnostic` at ``path:line:col``; any fault
raises one :class:`~murmur.errors.DiagnosticError` holding all of them. ``${VAR}`` references
(:mod:`murmur.manifest.refs`) are left as written unless an environment is passed.
Specification: ``spec/manifest.md``.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from cattrs.gen import make_dict_structure_fn, override

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.manifest import model
from murmur.manifest.faults import Fault, FaultGroup, FieldPath, locate
from murmur.manifest.refs import DEFAULT_SKIP, resolve_faults
from murmur.manifest.rules import check_rules, parse_duration
from murmur.manifest.upstream_keys import apply_policy
from murmur.manifest.yamltext import (
    YMap,
    YSeq,
    YStr,
    as_bool,
    as_int,
    is_null,
    lift,
    parse_located,
    to_plain,
)
from murmur.userfile import UserFileError, read_user_file

MANIFEST_FILE = "murmur.yaml"
MAX_MANIFEST_BYTES = 1 << 20
"""A manifest larger than 1 MiB is refused unread (``E-MAN-004``)."""


# --- the converter: located values -> attrs model ------------------------------------


def _kind(value: object) -> str:
    if isinstance(value, YMap):
        return "a mapping"
    if isinstance(value, YSeq):
        return "a list"
    return f"`{value}`"


def _str_hook(value: object, _: object) -> str:
    if isinstance(value, YStr):
        return str(value)
    raise Fault("E-MAN-003", f"expected text, found {_kind(value)}")


def _int_hook(value: object, _: object) -> int:
    n = as_int(value)
    if n is None:
        raise Fault("E-MAN-003", f"expected a whole number, found {_kind(value)}")
    return n


def _bool_hook(value: object, _: object) -> bool:
    b = as_bool(value)
    if b is None:
        raise Fault("E-MAN-003", f"expected true or false, found {_kind(value)}")
    return b


def _enum_hook(value: object, cl: type[enum.Enum]) -> enum.Enum:
    allowed = [str(m.value) for m in cl]
    if isinstance(value, YStr):
        for m in cl:
            if m.value == str(value):
                return m
    raise Fault(
        "E-MAN-003",
        f"expected one of {', '.join(allowed)}, found {_kind(value)}",
        hint=f"use one of: {', '.join(allowed)}",
    )


def _str_tuple_hook(value: object, _: object) -> tuple[str, ...]:
    if not isinstance(value, YSeq):
        raise Fault("E-MAN-003", f"expected a list, found {_kind(value)}",
                    hint="write the entries as a YAML list, e.g. `[a, b]`")
    items: list[str] = []
    faults: list[tuple[FieldPath, BaseException]] = []
    for i, item in enumerate(value):
        try:
            items.append(_str_hook(item, str))
        except Fault as exc:
            faults.append(((i,), exc))
    if faults:
        raise FaultGroup(faults)
    return tuple(items)


def _driver_config_hook(value: object, _: object) -> dict[str, object]:
    if not isinstance(value, YMap):
        raise Fault("E-MAN-003", f"`driver.config` must be a mapping, found {_kind(value)}")
    plain = to_plain(value)
    assert isinstance(plain, dict)
    return plain


def _duration_hook(value: object, _: object) -> int:
    if not isinstance(value, YStr):
        raise Fault("E-MAN-003", f"expected a duration, found {_kind(value)}")
    seconds = parse_duration(str(value))
    if seconds is None:
        raise Fault("E-MAN-003", f"`{value}` is not a duration",
                    hint="write a whole number with an optional s, m, h or d suffix, e.g. `7d`")
    return seconds


@attrs.frozen
class _CredentialBody:
    scopes: tuple[str, ...] = ()


def _is_textual(tp: object) -> bool:
    """True when a field's type accepts plain text (so `null` stays the text `null`)."""
    if tp is str:
        return True
    return str in typing.get_args(tp)


class _Converter:
    """The cattrs converter for located values (built once, reused)."""

    def __init__(self) -> None:
        conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
        conv.register_structure_hook(str, _str_hook)
        conv.register_structure_hook(int, _int_hook)
        conv.register_structure_hook(bool, _bool_hook)
        conv.register_structure_hook_func(
            lambda t: isinstance(t, type) and issubclass(t, enum.Enum), _enum_hook
        )
        conv.register_structure_hook_func(lambda t: t == tuple[str, ...], _str_tuple_hook)
        conv.register_structure_hook_func(
            lambda t: t == tuple[model.DoorCredential, ...], self._credentials_hook
        )
        conv.register_structure_hook_func(
            lambda t: t == tuple[model.ArtifactRef, ...], self._artifacts_hook
        )
        conv.register_structure_hook_factory(attrs.has, self._attrs_factory)
        self.conv = conv

    def _attrs_factory(self, cl: type[Any]) -> Callable[[object, object], Any]:
        overrides: dict[str, Any] = {}
        if cl is model.DriverRef:
            overrides["config"] = override(struct_hook=_driver_config_hook)
        if cl is model.Retain or cl is model.ContextRetain:
            overrides["max_age"] = override(struct_hook=_duration_hook)
        base = make_dict_structure_fn(cl, self.conv, **overrides)
        fields = attrs.fields_dict(attrs.resolve_types(cl))
        textual = {n for n, f in fields.items() if _is_textual(f.type)}

        def hook(value: object, _: object) -> Any:
            if not isinstance(value, YMap):
                raise Fault("E-MAN-003", f"expected a mapping, found {_kind(value)}")
            kept = {k: v for k, v in value.items() if k in textual or not is_null(v)}
            return base(kept, cl)

        return hook

    def _artifacts_hook(self, value: object, _: object) -> tuple[model.ArtifactRef, ...]:
        if not isinstance(value, YSeq):
            raise Fault("E-MAN-003", f"`artifacts` must be a list, found {_kind(value)}")
        out: list[model.ArtifactRef] = []
        faults: list[tuple[FieldPath, BaseException]] = []
        for i, item in enumerate(value):
            try:
                out.append(self.conv.structure(item, model.ArtifactRef))
            except (Fault, FaultGroup, ClassValidationError) as exc:
                faults.append(((i,), exc))
        if faults:
            raise FaultGroup(faults)
        return tuple(out)

    def _credentials_hook(self, value: object, _: object) -> tuple[model.DoorCredential, ...]:
        if not isinstance(value, YMap):
            raise Fault(
                "E-MAN-003",
                f"`credentials` must map credential names to their scopes, found {_kind(value)}",
                hint="write `credentials: {reviewer: {scopes: [SendMessage, GetTask]}}`",
            )
        out: list[model.DoorCredential] = []
        faults: list[tuple[FieldPath, BaseException]] = []
        for name in value.key_pos:  # document order, including names with no body
            if name not in value:
                out.append(model.DoorCredential(name=name))
                continue
            try:
                parsed = self.conv.structure(value[name], _CredentialBody)
                out.append(model.DoorCredential(name=name, scopes=parsed.scopes))
            except (Fault, FaultGroup, ClassValidationError) as exc:
                faults.append(((name,), exc))
        if faults:
            raise FaultGroup(faults)
        return tuple(out)

    def structure(self, root: YMap) -> tuple[model.Manifest | None, list[Fault]]:
        """Structure ``root``; return the manifest (or None) and every fault found."""
        try:
            return self.conv.structure(root, model.Manifest), []
        except (ClassValidationError, Fault, FaultGroup) as exc:
            return None, _flatten(exc, ())


_CONVERTER: _Converter | None = None


def _converter() -> _Converter:
    global _CONVERTER
    if _CONVERTER is None:
        _CONVERTER = _Converter()
    return _CONVERTER


def _field_name(exc: BaseException) -> str | None:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote):
            return note.name
    return None


def _dotted(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "the manifest"


def _known_keys(cl: type[Any] | None) -> list[str]:
    return [f.name for f in attrs.fields(cl)] if cl is not None and attrs.has(cl) else []


def _flatten(exc: BaseException, prefix: FieldPath) -> list[Fault]:
    """Flatten a cattrs / Fault error tree to one :class:`Fault` per leaf, with paths."""
    if isinstance(exc, Fault):
        return [exc.at(prefix)]
    if isinstance(exc, FaultGroup):
        out: list[Fault] = []
        for rel, sub in exc.items:
            out += _flatten(sub, prefix + rel)
        return out
    if isinstance(exc, ForbiddenExtraKeysError):
        import difflib  # only for an unknown key's did-you-mean: a valid manifest loads none

        known = _known_keys(exc.cl)
        faults = []
        for key in sorted(exc.extra_fields):
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
            hint = f"did you mean `{close[0]}`?" if close else (
                f"known keys here: {', '.join(known)}" if known else None
            )
            where = _dotted(prefix) if prefix else "the manifest"
            faults.append(
                Fault("E-MAN-003", f"unknown key `{key}` in {where}", hint=hint,
                      path=(*prefix, key), at_key=True)
            )
        return faults
    if isinstance(exc, ClassValidationError | IterableValidationError):
        out = []
        for sub in exc.exceptions:
            name = _field_name(sub)
            if isinstance(sub, KeyError) and name is not None:
                out.append(
                    Fault("E-MAN-001", f"`{_dotted((*prefix, name))}` is required",
                          hint=f"add `{name}:`", path=prefix, at_key=True)
                )
                continue
            out += _flatten(sub, (*prefix, name) if name is not None else prefix)
        return out
    return [Fault("E-MAN-003", f"invalid value: {exc}", path=prefix)]


# --- public API --------------------------------------------------------------------------


def _diagnostics(faults: Sequence[Fault], root: object, path: str) -> list[Diagnostic]:
    """Located diagnostics for ``faults``, in document order, duplicates removed."""
    located: list[tuple[tuple[int, int], int, Diagnostic]] = []
    for i, f in enumerate(faults):
        line, col = locate(root, f.path, at_key=f.at_key)
        diag = error(f.code, f.message, hint=f.hint, path=path, line=line, col=col)
        order = (line if line is not None else 1 << 30, col if col is not None else 0)
        located.append((order, i, diag))
    located.sort(key=lambda t: (t[0], t[1]))
    seen: set[tuple[str, str, int | None, int | None]] = set()
    out = []
    for _, _, d in located:
        key = (d.code, d.message, d.location.line if d.location else None,
               d.location.col if d.location else None)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _from_located(
    root: object,
    *,
    path: str,
    env: Mapping[str, str] | None,
    skip: Sequence[str],
    warnings: list[Diagnostic] | None = None,
) -> model.Manifest:
    if not isinstance(root, YMap):
        found = "an empty document" if root is None else _kind(root)
        raise DiagnosticError(
            error("E-MAN-002", f"a manifest must be a mapping of keys, found {found}",
                  path=path, line=getattr(root, "line", 1), col=getattr(root, "col", 1),
                  hint="start with `name: my-capsule` and `version: 0.1.0`")
        )
    policy = apply_policy(root)
    manifest, faults = _converter().structure(root)
    faults = [*policy.refusals, *faults, *check_rules(root)]
    if not faults and manifest is not None and env is not None:
        manifest, ref_faults = resolve_faults(manifest, env, skip=skip)
        faults += ref_faults
    if faults or manifest is None:
        raise DiagnosticError(_diagnostics(faults, root, path))
    if warnings is not None:
        warnings.extend(_diagnostics(policy.inert, root, path))
    return manifest


def parse_manifest(
    text: str,
    *,
    path: str,
    env: Mapping[str, str] | None = None,
    skip: Sequence[str] = DEFAULT_SKIP,
    warnings: list[Diagnostic] | None = None,
) -> model.Manifest:
    """Parse and validate the text of a ``murmur.yaml``.

    Args:
        text (str): the YAML text.
        path (str): the file name diagnostics point at (``path:line:col``).
        env (Mapping[str, str] | None): when given, ``${VAR}`` references are resolved
            against it (see :mod:`murmur.manifest.refs`); None leaves them as written.
        skip (Sequence[str]): reference fields left unresolved even with ``env`` (default:
            ``inference.api_key``, which resolves only where inference happens).
        warnings (list[Diagnostic] | None): when given, gets one ``W-SEC-019`` per upstream
            key accepted without effect (the key policy, :mod:`murmur.manifest.upstream_keys`).

    Returns:
        Manifest: the validated manifest.

    Raises:
        DiagnosticError: every fault in the document, in document order (E-MAN-001/002/003,
        E-MAN-005 for an upstream feature this runtime does not support, E-BLD-001,
        E-CAP-001/002/009/013, E-REG-004).
    """
    root = parse_located(text, path=path)
    return _from_located(root, path=path, env=env, skip=skip, warnings=warnings)


def parse_manifest_bytes(
    data: bytes,
    *,
    path: str,
    env: Mapping[str, str] | None = None,
    skip: Sequence[str] = DEFAULT_SKIP,
    warnings: list[Diagnostic] | None = None,
) -> model.Manifest:
    """Like :func:`parse_manifest` for raw bytes (UTF-8, an optional BOM).

    Used for the manifest packed inside a ``.mur.zip``. Raises ``E-MAN-004`` when the bytes
    are not UTF-8 or exceed :data:`MAX_MANIFEST_BYTES`.
    """
    if len(data) > MAX_MANIFEST_BYTES:
        raise DiagnosticError(
            error("E-MAN-004", f"the manifest is larger than {MAX_MANIFEST_BYTES} bytes",
                  path=path, hint="a manifest is a short YAML file")
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DiagnosticError(
            error("E-MAN-004", f"the manifest is not UTF-8 text (byte {exc.start})", path=path,
                  hint="save the file as UTF-8")
        ) from None
    return parse_manifest(text, path=path, env=env, skip=skip, warnings=warnings)


def load_manifest(
    path: Path,
    *,
    env: Mapping[str, str] | None = None,
    skip: Sequence[str] = DEFAULT_SKIP,
    warnings: list[Diagnostic] | None = None,
) -> model.Manifest:
    """Read and validate a ``murmur.yaml`` file (a directory means its ``murmur.yaml``).

    Raises:
        DiagnosticError: ``E-MAN-004`` when the file cannot be read; otherwise as
        :func:`parse_manifest`.
    """
    if path.is_dir():
        path = path / MANIFEST_FILE
    shown = str(path)
    try:
        data = read_user_file(path, limit=MAX_MANIFEST_BYTES)
    except UserFileError as exc:
        if exc.kind == "too_large":
            return parse_manifest_bytes(b"x" * (MAX_MANIFEST_BYTES + 1), path=shown)
        hint = {
            "missing": "run in a capsule directory, or pass the manifest's path",
            "denied": "make the file readable by this user",
            "not_regular": "a manifest is a regular file",
        }.get(exc.kind)
        raise DiagnosticError(
            error("E-MAN-004", f"cannot read the manifest: {exc.reason}", path=shown, hint=hint)
        ) from None
    return parse_manifest_bytes(data, path=shown, env=env, skip=skip, warnings=warnings)


def manifest_from_mapping(
    mapping: Mapping[str, object],
    *,
    path: str = MANIFEST_FILE,
    env: Mapping[str, str] | None = None,
    skip: Sequence[str] = DEFAULT_SKIP,
    warnings: list[Diagnostic] | None = None,
) -> model.Manifest:
    """Validate a manifest given as plain data (e.g. parsed JSON) with the same rules.

    Text values are never re-typed (``"1.10"`` stays text); numbers and booleans are read as
    the YAML scalars they would have been; None means absent. Diagnostics carry ``path``
    without line numbers.
    """
    return _from_located(lift(dict(mapping)), path=path, env=env, skip=skip, warnings=warnings)
