"""Helpers for registry tests: capsule directories and hand-made (hostile) archives."""

from __future__ import annotations

import io
import stat
import warnings
import zipfile
from pathlib import Path

MANIFEST = "name: demo\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n  shell:\n    allow: [echo]\n"
PLAN = "steps:\n  - id: answer\n    shell: [echo, \"{{ task }}\"]\noutput: \"{{ steps.answer.stdout }}\"\n"


def capsule_dir(root: Path, *, name: str = "demo", version: str = "0.1.0", extra: str = "") -> Path:
    """Write a small plan capsule source directory under ``root/name`` and return it."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    text = MANIFEST.replace("name: demo", f"name: {name}").replace("0.1.0", version) + extra
    (d / "murmur.yaml").write_text(text)
    (d / "plan.yaml").write_text(PLAN)
    return d


def make_zip(entries: list[tuple[str | zipfile.ZipInfo, bytes]], *,
             compression: int = zipfile.ZIP_STORED) -> bytes:
    """Zip bytes holding exactly ``entries`` (duplicates allowed)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns on duplicate names; that is the point
        with zipfile.ZipFile(buf, "w", compression=compression) as zf:
            for name, data in entries:
                zf.writestr(name, data)
    return buf.getvalue()


def symlink_info(name: str) -> zipfile.ZipInfo:
    """A ZipInfo that marks its entry as a unix symlink."""
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def encrypted_entry() -> bytes:
    """An archive whose entry `secret` carries the 'encrypted' flag in both its headers."""
    data = bytearray(make_zip([("murmur.yaml", MANIFEST.encode()), ("secret", b"x")]))
    name = b"secret"
    for sig, flag_at, name_at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        start = 0
        while (i := data.find(sig, start)) >= 0:
            if data[i + name_at:i + name_at + len(name)] == name:
                data[i + flag_at] |= 0x1
            start = i + 4
    return bytes(data)


def with_nul_name() -> bytes:
    """An archive whose second entry's name holds a NUL byte (patched in place)."""
    data = make_zip([("murmur.yaml", MANIFEST.encode()), ("evilXname", b"x")])
    return data.replace(b"evilXname", b"evil\x00name")


def corrupt_second_entry() -> bytes:
    """A valid manifest, then an entry whose bytes no longer match its CRC."""
    data = make_zip([("murmur.yaml", MANIFEST.encode()), ("plan.yaml", PLAN.encode()),
                     ("z.txt", b"AAAAAAAAAAAAAAAA")])
    return data.replace(b"AAAAAAAAAAAAAAAA", b"AAAAAAAABAAAAAAA")
