"""A hint on every refusal to make or write a directory (murmur.paths.oserror_hint; issue 32)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from murmur.paths import oserror_hint

MUR = str(Path(sys.executable).with_name("mur"))


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "full"),
        (errno.EROFS, "read-only"),
        (errno.EACCES, "read-only or not yours"),
        (errno.ENOTDIR, "a file stands"),
        (errno.EEXIST, "give a directory"),
        (errno.EIO, "can be made"),
    ],
)
def test_each_failure_says_what_to_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str
) -> None:
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path / "home"))
    inside = oserror_hint(OSError(code, os.strerror(code)), tmp_path / "home" / "records")
    outside = oserror_hint(OSError(code, os.strerror(code)), tmp_path / "work")
    assert words in inside and words in outside
    if code != errno.EEXIST:
        assert "MURMUR_HOME" in inside and "MURMUR_HOME" not in outside


def _run(home: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MURMUR_HOME": home}
    return subprocess.run([MUR, "run", "--manifest", "hello", "--task", "hi", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def capsule(tmp_path: Path) -> Path:
    env = {**os.environ, "MURMUR_HOME": str(tmp_path / "home")}
    subprocess.run([MUR, "new", "hello"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60)
    return tmp_path


def test_a_workdir_that_is_a_file(capsule: Path) -> None:
    """`--workdir /dev/null` used to say only "File exists"."""
    out = _run(str(capsule / "home"), "--workdir", "/dev/null", cwd=capsule)
    assert out.returncode == 1
    assert "error[E-IO-003]: the workdir /dev/null exists and is not a directory" in out.stderr
    assert "hint: give a directory" in out.stderr


def test_a_home_that_cannot_hold_records(capsule: Path) -> None:
    """A MURMUR_HOME that is a file (as a read-only or full one): coded, with the way out."""
    (capsule / "afile").write_text("x")
    out = _run(str(capsule / "afile"), cwd=capsule)
    assert out.returncode == 1
    assert "error[E-IO-003]: the records directory" in out.stderr
    assert "hint:" in out.stderr and "point MURMUR_HOME at a writable directory" in out.stderr


def test_a_workdir_made_is_said(capsule: Path) -> None:
    """`--workdir` naming a directory that does not exist makes it, and says so on stderr."""
    out = _run(str(capsule / "home"), "--workdir", str(capsule / "new"), cwd=capsule)
    assert out.returncode == 0, out.stderr
    assert (capsule / "new").is_dir()
    assert f"made the workdir {capsule / 'new'}" in out.stderr
    again = _run(str(capsule / "home"), "--workdir", str(capsule / "new"), cwd=capsule)
    assert "made the workdir" not in again.stderr  # negative control: an existing one is not "made"


def test_demo_home_that_cannot_be_written() -> None:
    """`mur demo --home` on a directory no one may write: coded, with the way out."""
    from murmur.demo.layout import prepare_layout
    from murmur.errors import DiagnosticError

    target = Path("/sys/kernel/murmur-demo-home")  # sysfs refuses every mkdir, even root's
    with pytest.raises(DiagnosticError) as info:
        prepare_layout(target)
    d = info.value.diagnostics[0]
    assert d.code in ("E-IO-002", "E-IO-003")
    assert d.hint is not None and "leave out --home" in d.hint and "read-only" in d.hint
