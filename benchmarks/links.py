"""The capsule link's own start time beside its floors (issue 13; prints figures, never asserts).

Runs a generated stub (``NAME --help``: parse, no socket) and, in the same run, the floors
``sh -c true``, ``python3 -c pass`` and ``python3 -I -S -c pass``; prints medians in ms.
Usage: ``python benchmarks/links.py [RUNS]``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from murmur.links.stub import interpreter, write_links


def median_ms(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    with tempfile.TemporaryDirectory() as tmp:
        binary = write_links(Path(tmp) / "links", ["kid"])
        py = interpreter()
        rows = [
            ("sh -c true (floor)", ["sh", "-c", "true"]),
            ("python3 -c pass (floor)", [py, "-c", "pass"]),
            ("python3 -I -S -c pass (floor)", [py, "-I", "-S", "-c", "pass"]),
            ("link stub kid --help", [str(binary / "kid"), "--help"]),
        ]
        figures = {label: median_ms(argv, runs) for label, argv in rows}
    floor = figures["python3 -I -S -c pass (floor)"]
    for label, ms in figures.items():
        print(f"{label:32s} median {ms:6.1f} ms   x{ms / floor:4.2f} of python3 -I -S")


if __name__ == "__main__":
    main()
