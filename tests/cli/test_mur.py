"""The `mur` dispatcher: usage, unknown names, a deleted working directory, command help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from murmur.cli import mur

MUR = str(Path(sys.executable).parent / "mur")


class TestUsage:
    def test_no_arguments_usage_on_stderr(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`mur` alone prints the usage to stderr (not stdout) and exits 2."""
        assert mur.main([]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("usage: mur <command>")

    def test_help_on_stdout(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`mur --help` prints the usage to stdout and exits 0."""
        assert mur.main(["--help"]) == 0
        assert capsys.readouterr().out.startswith("usage: mur <command>")

    def test_unknown_option(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`mur --bogus` is an unknown option, not an unknown command (exit 2)."""
        assert mur.main(["--bogus"]) == 2
        assert capsys.readouterr().err.startswith("mur: unknown option '--bogus'")

    def test_unknown_command(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`mur frob` is an unknown command (exit 2)."""
        assert mur.main(["frob"]) == 2
        assert capsys.readouterr().err.startswith("mur: unknown command 'frob'")

    def test_stop_help_explains_addresses(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`mur stop --help` says what a session address is."""
        assert mur.main(["stop", "--help"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "ses_" in out and "suffix of 4 or more" in out and "@N" in out and "frm_" in out


class TestDeletedCwd:
    @pytest.mark.parametrize("command", ["run", "list", "new", "doctor"])
    def test_refused_with_e_io_001(self, tmp_path: Path, command: str) -> None:
        """Run from a deleted directory: E-IO-001 with a hint, exit 1, no internal error."""
        gone = tmp_path / "gone"
        gone.mkdir()
        proc = subprocess.run(
            ["sh", "-c", 'cd "$1" && rmdir "$1" && exec "$2" "$3" x', "sh", str(gone), MUR, command],
            text=True, capture_output=True, timeout=60, check=False,
        )
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("error[E-IO-001]: the current directory no longer exists")
        assert "hint: `cd`" in proc.stderr and "internal error" not in proc.stderr

    def test_missing_cwd_detected(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """missing_cwd() is None while the cwd exists and E-IO-001 once getcwd fails."""
        assert mur.missing_cwd() is None

        def gone() -> str:
            raise FileNotFoundError(2, "No such file or directory")

        monkeypatch.setattr(mur.os, "getcwd", gone)
        d = mur.missing_cwd()
        assert d is not None and d.code == "E-IO-001"


_NOT_UTF8 = b"\xff\xfeab"


class TestNotUtf8:
    """`mur run` records its arguments, its work folder and MURMUR_HOME in UTF-8 traces and
    records: a byte string that is not UTF-8 in any of them is refused before anything
    starts, coded with a hint, never an internal error (exit 70) or a failed trace write."""

    @pytest.fixture
    def capsule(self, tmp_path: Path) -> Path:
        d = tmp_path / "cap"
        d.mkdir()
        (d / "murmur.yaml").write_text("name: cap\nversion: 0.1.0\nplan: plan.yaml\n"
                                       "capabilities:\n  shell:\n    allow: [echo]\n")
        (d / "plan.yaml").write_text('steps:\n  - id: a\n    shell: [echo, hi]\noutput: "{{ steps.a.stdout }}"\n')
        return d

    def _mur(self, cwd: Path, home: bytes, *argv: bytes) -> subprocess.CompletedProcess[bytes]:
        import os

        env = {k: v for k, v in os.environb.items() if not k.startswith(b"MURMUR_")}
        env[b"MURMUR_HOME"] = home
        return subprocess.run([MUR.encode(), b"run", *argv], cwd=cwd, env=env, capture_output=True,
                              timeout=60, check=False)

    @pytest.mark.parametrize(
        ("argv", "rc", "code"),
        [
            ((b"--task", _NOT_UTF8), 2, b"E-CLI-002"),
            ((b"--task=" + _NOT_UTF8,), 2, b"E-CLI-002"),
            ((b"--context", _NOT_UTF8, b"--task", b"x"), 2, b"E-CLI-002"),
            ((b"--system-prompt", _NOT_UTF8, b"--task", b"x"), 2, b"E-CLI-002"),
            ((b"--workdir", b"WORK/" + _NOT_UTF8, b"--task", b"x"), 2, b"E-CLI-002"),
            ((b"--roster", b"--task", _NOT_UTF8), 2, b"E-CLI-002"),
        ],
    )
    def test_an_argument(self, capsule: Path, tmp_path: Path, argv: tuple[bytes, ...], rc: int, code: bytes) -> None:
        argv = tuple(a.replace(b"WORK/", bytes(tmp_path) + b"/") for a in argv)
        proc = self._mur(capsule, bytes(tmp_path / "home"), *argv)
        assert proc.returncode == rc, proc.stderr
        assert proc.stderr.startswith(b"error[" + code + b"]: "), proc.stderr
        assert b"not UTF-8" in proc.stderr and b"\n  hint: " in proc.stderr
        assert not (tmp_path / "home" / "records").exists()  # refused before any records
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cap"]  # no workdir made either

    def test_the_work_folder(self, capsule: Path, tmp_path: Path) -> None:
        odd = Path(bytes(tmp_path).decode() + "/" + os_fsdecode(_NOT_UTF8))
        odd.mkdir()
        for name in ("murmur.yaml", "plan.yaml"):
            (odd / name).write_bytes((capsule / name).read_bytes())
        proc = self._mur(odd, bytes(tmp_path / "home"), b"--task", b"x")
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith(b"error[E-IO-003]: the current directory"), proc.stderr
        assert b"not UTF-8" in proc.stderr and b"\n  hint: " in proc.stderr
        assert not (tmp_path / "home" / "records").exists()

    def test_murmur_home(self, capsule: Path, tmp_path: Path) -> None:
        proc = self._mur(capsule, bytes(tmp_path) + b"/" + _NOT_UTF8, b"--task", b"x")
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith(b"error[E-IO-003]: MURMUR_HOME"), proc.stderr
        assert b"not UTF-8" in proc.stderr and b"\n  hint: " in proc.stderr
        assert list(tmp_path.iterdir()) == [capsule]


def os_fsdecode(b: bytes) -> str:
    import os

    return os.fsdecode(b)


@pytest.mark.parametrize(
    ("args", "env", "launches"),
    [(["--roster"], {}, True), (["--roster=r.yaml", "--json"], {}, True), (["--json", "--roster", "x"], {}, True),
     (["--capsule", "local/a"], {}, False), (["--", "--roster"], {}, False),
     (["--roster"], {"MURMUR_FORMATION_ID": "frm_x"}, False)],
)
def test_launches_formation_is_read_before_parsing(args: list[str], env: dict[str, str], launches: bool) -> None:
    """Whether `mur run` starts the warm starter first thing (spec/formation.md)."""
    from murmur.cli.mur import launches_formation

    assert launches_formation(args, env) is launches
