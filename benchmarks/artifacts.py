"""Figures for manifests and artifacts: loader throughput, build / install / resolve times.

Run: ``.venv/bin/python benchmarks/artifacts.py``. Prints figures; asserts nothing.
Uses a temporary MURMUR_HOME and project directory.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["MURMUR_HOME"] = str(root / "home")
        from murmur.errors import DiagnosticError
        from murmur.manifest.load import parse_manifest
        from murmur.manifest.scaffold import write_capsule_scaffold
        from murmur.registry import build, install, resolve

        src = write_capsule_scaffold("bench", root)
        text = (src / "murmur.yaml").read_text()
        bad = "name: Bad\nversion: latest\nbogus: 1\ncapabilities:\n  filesystem:\n    scope: /x\n"

        def bad_parse() -> None:
            try:
                parse_manifest(bad, path="m")
            except DiagnosticError:
                pass

        good = _timed(lambda: parse_manifest(text, path="m"), 2000)
        faulty = _timed(bad_parse, 2000)
        print(f"parse valid manifest:     {statistics.median(good) * 1e6:8.0f} us median "
              f"({1 / statistics.mean(good):,.0f}/s)")
        print(f"parse 4-fault manifest:   {statistics.median(faulty) * 1e6:8.0f} us median")
        # a larger capsule: 200 files of 4 KiB
        for i in range(200):
            (src / "data" / f"{i:03}").parent.mkdir(exist_ok=True)
            (src / "data" / f"{i:03}").write_bytes(os.urandom(4096))
        builds = _timed(lambda: build(src), 20)
        archive = build(src)
        print(f"build (201 files, {archive.stat().st_size // 1024} KiB): "
              f"{statistics.median(builds) * 1e3:8.1f} ms median")
        project = root / "project"
        project.mkdir()
        installs = _timed(lambda: install(archive, global_=False, project_dir=project), 20)
        print(f"install (same archive):   {statistics.median(installs) * 1e3:8.1f} ms median")
        resolves = _timed(lambda: resolve("local/bench", "0.1.0", project_dir=project), 200)
        print(f"resolve (hash + manifest): {statistics.median(resolves) * 1e3:7.2f} ms median")


if __name__ == "__main__":
    main()
