"""`mur ps` with records that are not what they seem (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from murmur.cli.mur import main
from murmur.session.running_record import record_path


def ps(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["ps", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_one_malformed_record_is_skipped_and_reported_once(murmur_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = record_path("ses_junk")
    junk.parent.mkdir(parents=True)
    junk.write_text("{not json")
    code, out, err = ps(capsys)
    assert (code, out) == (0, "no running capsules\n")
    aside = junk.parent / "unreadable" / "ses_junk.json"
    assert err.startswith(f"warning[W-RUN-009]: skipped the running record {aside}: it is malformed (not valid JSON")
    assert "E-RUN-028" not in err
    assert ps(capsys) == (0, "no running capsules\n", "")  # once
    code, out, err = ps(capsys, "--json")
    assert (code, out, err) == (0, "[]\n", "")


def test_unreadable_directory_is_e_run_028(murmur_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = record_path("ses_x").parent
    d.parent.mkdir(parents=True, exist_ok=True)
    d.write_text("")
    code, out, err = ps(capsys)
    assert (code, out) == (1, "")
    assert err.startswith(f"error[E-RUN-028]: the running records directory {d} cannot be read: Not a directory")
