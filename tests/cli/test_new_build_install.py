"""The real `mur` entry point in subprocesses: new, build, install, list, and every refusal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from manifest.malformed import CASES, Case
from registry.test_archive import HOSTILE

MUR = str(Path(sys.executable).parent / "mur")
SHA_RE = r"[0-9a-f]{64}"
T = TypeVar("T")
Hostile = tuple[str, Callable[[], bytes], str]

pytestmark = pytest.mark.e2e


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    return env


def mur(args: Sequence[str], *, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """Run `mur ARGS` in ``cwd`` with MURMUR_HOME=home and capture its output."""
    return subprocess.run([MUR, *args], cwd=cwd, env=_env(home), capture_output=True, text=True,
                          timeout=60, check=False)


def mur_many(jobs: list[tuple[list[str], Path]], home: Path) -> list[subprocess.CompletedProcess[str]]:
    """Run several `mur` invocations concurrently (they touch disjoint directories)."""
    results: list[subprocess.CompletedProcess[str]] = []
    for start in range(0, len(jobs), 8):
        batch = jobs[start:start + 8]
        procs = [subprocess.Popen([MUR, *args], cwd=cwd, env=_env(home), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for args, cwd in batch]
        try:
            for (args, _), p in zip(batch, procs, strict=True):
                out, err = p.communicate(timeout=60)
                results.append(subprocess.CompletedProcess([MUR, *args], p.returncode, out, err))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return results


class TestHappyPath:
    def test_new_build_install_list(self, tmp_path: Path, murmur_home: Path) -> None:
        """`mur new demo && cd demo && mur build && mur install && mur list` shows local/demo."""
        r = mur(["new", "demo"], cwd=tmp_path, home=murmur_home)
        assert r.returncode == 0, r.stderr
        demo = tmp_path / "demo"
        first = mur(["build"], cwd=demo, home=murmur_home)
        second = mur(["build"], cwd=demo, home=murmur_home)
        assert first.returncode == second.returncode == 0, first.stderr + second.stderr
        sha = re.search(rf"sha256 ({SHA_RE})", first.stdout)
        assert sha is not None and sha.group(1) in second.stdout  # same sources, same sha256
        r = mur(["install"], cwd=demo, home=murmur_home)
        assert r.returncode == 0, r.stderr
        listing = mur(["list"], cwd=demo, home=murmur_home)
        assert listing.returncode == 0
        assert re.search(rf"^project\s+local/demo\s+0\.1\.0\s+{sha.group(1)}$", listing.stdout, re.M), \
            listing.stdout

    def test_global_install_and_json(self, tmp_path: Path, murmur_home: Path) -> None:
        """-g installs into $MURMUR_HOME/artifacts; list --json shows both scopes."""
        mur(["new", "demo"], cwd=tmp_path, home=murmur_home)
        demo = tmp_path / "demo"
        r = mur(["install", "-g", "--json"], cwd=demo, home=murmur_home)
        assert r.returncode == 0, r.stderr
        record = json.loads(r.stdout)
        assert record["scope"] == "global" and record["name"] == "local/demo"
        assert (murmur_home / "artifacts" / "local" / "demo" / "0.1.0").is_dir()
        mur(["install"], cwd=demo, home=murmur_home)
        items = json.loads(mur(["list", "--json"], cwd=demo, home=murmur_home).stdout)
        assert [(i["scope"], i["name"], i["version"]) for i in items] == [
            ("project", "local/demo", "0.1.0"), ("global", "local/demo", "0.1.0")]
        assert items[0]["sha256"] == items[1]["sha256"] == record["sha256"]

    def test_install_zip_with_pin(self, tmp_path: Path, murmur_home: Path) -> None:
        """`mur install ZIP --pin` installs and writes murmur.lock; -g with --pin is misuse."""
        mur(["new", "demo"], cwd=tmp_path, home=murmur_home)
        built = mur(["build", "demo", "--json"], cwd=tmp_path, home=murmur_home)
        info = json.loads(built.stdout)
        r = mur(["install", info["path"], "--pin"], cwd=tmp_path, home=murmur_home)
        assert r.returncode == 0, r.stderr
        assert info["sha256"] in (tmp_path / "murmur.lock").read_text()
        misuse = mur(["install", info["path"], "--pin", "-g"], cwd=tmp_path, home=murmur_home)
        assert misuse.returncode == 2 and "not allowed with" in misuse.stderr

    def test_list_empty(self, tmp_path: Path, murmur_home: Path) -> None:
        """With nothing installed, list says so."""
        r = mur(["list"], cwd=tmp_path, home=murmur_home)
        assert r.returncode == 0 and r.stdout.strip() == "no installed artifacts"

    def test_roster_hook(self, tmp_path: Path, murmur_home: Path) -> None:
        """`mur new --roster NAME` writes a roster project."""
        r = mur(["new", "--roster", "team"], cwd=tmp_path, home=murmur_home)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "team" / "roster.yaml").is_file()

    @pytest.mark.parametrize("command", ["new", "build", "install", "list"])
    def test_help(self, tmp_path: Path, murmur_home: Path, command: str) -> None:
        """Every command has --help that exits 0."""
        r = mur([command, "--help"], cwd=tmp_path, home=murmur_home)
        assert r.returncode == 0 and f"usage: mur {command}" in r.stdout


def _assert_refusal(r: subprocess.CompletedProcess[str], code: str, where: str | None) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"error[{code}]: "), r.stderr
    if where is not None:
        assert re.search(rf"^  --> {re.escape(where)}", r.stderr, re.M), r.stderr


def _one_per_code(cases: Sequence[T], code: Callable[[T], str]) -> list[T]:
    """The first case of each refusal code (the real-process subset CI runs)."""
    seen: dict[str, T] = {}
    for case in cases:
        seen.setdefault(code(case), case)
    return list(seen.values())


def _in_process(args: list[str], cwd: Path, capsys: pytest.CaptureFixture[str],
                monkeypatch: pytest.MonkeyPatch) -> subprocess.CompletedProcess[str]:
    """`mur ARGS` run by the console script's own ``main`` in this process, captured as a
    subprocess's would be (an exception escaping ``main`` fails the test)."""
    from murmur.cli.mur import main

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([MUR, *args], code, out, err)


def _malformed_jobs(tmp_path: Path) -> list[tuple[list[str], Path]]:
    jobs = []
    for case in CASES:
        d = tmp_path / case.id
        d.mkdir()
        (d / "murmur.yaml").write_text(case.text)
        jobs.append((["build", case.id], tmp_path))
    return jobs


def _hostile_jobs(tmp_path: Path) -> list[tuple[list[str], Path]]:
    jobs = []
    for name, make, _ in HOSTILE:
        (tmp_path / f"{name}.mur.zip").write_bytes(make())
        jobs.append((["install", f"{name}.mur.zip"], tmp_path))
    return jobs


# Every malformed manifest and hostile archive goes through `mur`'s own `main` (in process),
# and one of each refusal code through the real entry point in a subprocess; every case as a
# subprocess is in the soak set (`nox -s soak`): the subprocess adds the console script and
# interpreter start-up, which are the same for every case.
MALFORMED_REAL = _one_per_code(CASES, lambda c: c.code)
HOSTILE_REAL = _one_per_code(HOSTILE, lambda h: h[2])


class TestRefusals:
    def test_every_malformed_manifest(self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
        """Each malformed manifest: coded error at file:line, exit 1, no traceback (`mur build`
        by its ``main``, in process)."""
        for case, (args, cwd) in zip(CASES, _malformed_jobs(tmp_path), strict=True):
            _assert_refusal(_in_process(args, cwd, capsys, monkeypatch), case.code, f"{case.id}/murmur.yaml:{case.line}:")

    @pytest.mark.parametrize("cases", [pytest.param(MALFORMED_REAL, id="one-per-code"),
                                       pytest.param(CASES, id="all", marks=pytest.mark.soak)])
    def test_malformed_manifests_through_the_real_entry_point(self, tmp_path: Path, murmur_home: Path,
                                                              cases: list[Case]) -> None:
        """The same refusals from the real `mur build` in subprocesses."""
        jobs = [job for job, case in zip(_malformed_jobs(tmp_path), CASES, strict=True) if case in cases]
        assert len({c.code for c in cases}) == len({c.code for c in CASES})
        for case, r in zip(cases, mur_many(jobs, murmur_home), strict=True):
            _assert_refusal(r, case.code, f"{case.id}/murmur.yaml:{case.line}:")

    def test_every_hostile_archive(self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
        """Each hostile archive: coded error naming the file, exit 1, store untouched (`mur
        install` by its ``main``, in process)."""
        for (name, _, code), (args, cwd) in zip(HOSTILE, _hostile_jobs(tmp_path), strict=True):
            _assert_refusal(_in_process(args, cwd, capsys, monkeypatch), code, f"{name}.mur.zip")
        assert not (tmp_path / ".murmur").exists()

    @pytest.mark.parametrize("cases", [pytest.param(HOSTILE_REAL, id="one-per-code"),
                                       pytest.param(HOSTILE, id="all", marks=pytest.mark.soak)])
    def test_hostile_archives_through_the_real_entry_point(self, tmp_path: Path, murmur_home: Path,
                                                           cases: list[Hostile]) -> None:
        """The same refusals from the real `mur install` in subprocesses; the store untouched."""
        jobs = [job for job, case in zip(_hostile_jobs(tmp_path), HOSTILE, strict=True) if case in cases]
        assert len({h[2] for h in cases}) == len({h[2] for h in HOSTILE})
        for (name, _, code), r in zip(cases, mur_many(jobs, murmur_home), strict=True):
            _assert_refusal(r, code, f"{name}.mur.zip")
        assert not (tmp_path / ".murmur").exists()

    @pytest.mark.parametrize(("args", "setup", "code"), [
        (["new", "Bad_Name"], None, "E-NEW-002"),
        (["new", "demo"], lambda p: (p / "demo").mkdir(), "E-NEW-003"),
        (["build", "missing"], None, "E-IO-001"),
        (["build"], None, "E-MAN-004"),
        (["install", "nope.mur.zip"], None, "E-IO-001"),
    ])
    def test_command_refusals(self, tmp_path: Path, murmur_home: Path, args: list[str],
                              setup: Callable[[Path], object] | None, code: str) -> None:
        """Bad names, existing paths and missing inputs are coded refusals."""
        if setup is not None:
            setup(tmp_path)
        _assert_refusal(mur(args, cwd=tmp_path, home=murmur_home), code, None)
