"""Tests of .mur.zip packing and guarded unpacking: the hostile-archive table."""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur.errors import DiagnosticError
from murmur.registry import archive, install
from registry.helpers import (
    MANIFEST,
    PLAN,
    corrupt_second_entry,
    encrypted_entry,
    make_zip,
    symlink_info,
    with_nul_name,
)

M = ("murmur.yaml", MANIFEST.encode())
P = ("plan.yaml", PLAN.encode())

HOSTILE: list[tuple[str, Callable[[], bytes], str]] = [
    ("not-a-zip", lambda: b"this is not a zip file", "E-BLD-007"),
    ("empty-file", lambda: b"", "E-BLD-007"),
    ("truncated", lambda: make_zip([M, P])[:-30], "E-BLD-007"),
    ("dotdot", lambda: make_zip([M, P, ("../evil.txt", b"x")]), "E-BLD-003"),
    ("dotdot-inside", lambda: make_zip([M, P, ("a/../../evil.txt", b"x")]), "E-BLD-003"),
    ("absolute", lambda: make_zip([M, P, ("/etc/evil", b"x")]), "E-BLD-003"),
    ("drive-letter", lambda: make_zip([M, P, ("C:/evil", b"x")]), "E-BLD-003"),
    ("drive-relative", lambda: make_zip([M, P, ("c:evil", b"x")]), "E-BLD-003"),
    ("backslash-root", lambda: make_zip([M, P, ("\\evil", b"x")]), "E-BLD-003"),
    ("backslash-dotdot", lambda: make_zip([M, P, ("a\\..\\..\\evil", b"x")]), "E-BLD-003"),
    ("dot-part", lambda: make_zip([M, P, ("./plan2.yaml", b"x")]), "E-BLD-003"),
    ("empty-part", lambda: make_zip([M, P, ("a//b", b"x")]), "E-BLD-003"),
    ("nul-in-name", with_nul_name, "E-BLD-003"),
    ("duplicate", lambda: make_zip([M, P, ("plan.yaml", b"other")]), "E-BLD-004"),
    ("duplicate-case", lambda: make_zip([M, P, ("PLAN.yaml", b"other")]), "E-BLD-004"),
    ("file-and-dir", lambda: make_zip([M, P, ("data", b"x"), ("data/inner", b"y")]), "E-BLD-004"),
    ("symlink", lambda: make_zip([M, P, (symlink_info("link"), b"/etc/passwd")]), "E-BLD-005"),
    ("encrypted", encrypted_entry, "E-BLD-007"),
    ("ratio-bomb", lambda: make_zip([M, P, ("zeros", b"\0" * (4 << 20))],
                                    compression=zipfile.ZIP_DEFLATED), "E-BLD-006"),
    ("no-manifest", lambda: make_zip([P]), "E-BLD-008"),
    ("manifest-not-at-root", lambda: make_zip([("sub/murmur.yaml", M[1]), P]), "E-BLD-008"),
    ("bad-crc", corrupt_second_entry, "E-BLD-007"),
    ("packed-manifest-invalid", lambda: make_zip([("murmur.yaml", b"name: Bad\nversion: 1\n")]),
     "E-BLD-001"),
]


class TestHostileArchives:
    def test_table_size(self) -> None:
        """The archive table has a row for every guard."""
        assert len(HOSTILE) >= 20

    @pytest.mark.parametrize(("case", "make", "code"), HOSTILE, ids=[h[0] for h in HOSTILE])
    def test_refused_with_code_and_store_untouched(
        self, tmp_path: Path, murmur_home: Path, case: str, make: Callable[[], bytes], code: str
    ) -> None:
        """Each hostile archive is refused with its code; nothing lands anywhere."""
        project = tmp_path / "project"
        project.mkdir()
        src = tmp_path / f"{case}.mur.zip"
        src.write_bytes(make())
        before = sorted(tmp_path.rglob("*"))
        with pytest.raises(DiagnosticError) as info:
            install(src, global_=False, project_dir=project)
        assert info.value.code == code, str(info.value)
        assert sorted(tmp_path.rglob("*")) == before  # not even an empty store directory
        assert sorted(murmur_home.rglob("*")) == []

    def test_limits_entries_and_total(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Too many entries, or too many bytes in total, are E-BLD-006."""
        src = tmp_path / "a.mur.zip"
        src.write_bytes(make_zip([M, P, ("a", b"1"), ("b", b"2")]))
        monkeypatch.setattr(archive, "MAX_ENTRIES", 3)
        with pytest.raises(DiagnosticError) as info:
            install(src, global_=False, project_dir=tmp_path)
        assert info.value.code == "E-BLD-006"
        monkeypatch.setattr(archive, "MAX_ENTRIES", 100)
        monkeypatch.setattr(archive, "MAX_TOTAL_BYTES", len(MANIFEST) + 1)
        with pytest.raises(DiagnosticError) as info:
            install(src, global_=False, project_dir=tmp_path)
        assert info.value.code == "E-BLD-006"

    def test_packed_manifest_fault_is_located(self, tmp_path: Path) -> None:
        """A fault in the packed manifest points at <archive>!murmur.yaml:line."""
        src = tmp_path / "x.mur.zip"
        src.write_bytes(make_zip([("murmur.yaml", b"name: demo\nversion: latest\n")]))
        with pytest.raises(DiagnosticError) as info:
            install(src, global_=False, project_dir=tmp_path)
        loc = info.value.diagnostics[0].location
        assert loc is not None and loc.path == f"{src}!murmur.yaml" and loc.line == 2


class TestNames:
    @pytest.mark.parametrize("name", ["a", "a/b", "dir/", "a.b/c-d_e"])
    def test_safe(self, name: str) -> None:
        """Ordinary relative names are safe."""
        assert archive.name_problem(name) is None

    @pytest.mark.parametrize("name", ["", "/a", "..", "a/..", "C:x", "a\\b", "a\x00", "./a", "a//b"])
    def test_unsafe(self, name: str) -> None:
        """Absolute, climbing, drive, backslash, NUL and empty/dot parts are unsafe."""
        assert archive.name_problem(name) is not None


class TestPack:
    def test_fixed_metadata_and_order(self) -> None:
        """Entries are sorted, dated 1980-01-01, mode 0644, stored."""
        data = archive.pack([("b/z", b"2"), ("a", b"1"), ("B", b"3")])
        with zipfile.ZipFile(__import__("io").BytesIO(data)) as zf:
            infos = zf.infolist()
        assert [i.filename for i in infos] == ["B", "a", "b/z"]
        for i in infos:
            assert i.date_time == archive.FIXED_DATE
            assert (i.external_attr >> 16) & 0o7777 == 0o644
            assert i.compress_type == zipfile.ZIP_STORED

    def test_same_input_same_bytes(self) -> None:
        """Packing is a pure function of names and contents."""
        entries = [("x", b"1"), ("y/z", b"22")]
        assert archive.pack(entries) == archive.pack(list(reversed(entries)))


class TestNameProperty:
    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.sampled_from(["a", "b.txt", "..", ".", "", "C:", "\\", "/", "\x00", "x\\..",
                                     "dir/", "c:x", " "]), min_size=1, max_size=6))
    def test_safe_names_stay_inside(self, parts: list[str]) -> None:
        """Any name the guard accepts resolves to a path strictly inside the destination."""
        name = "/".join(parts)
        if archive.name_problem(name) is not None:
            return
        dest = PurePosixPath("/store/entry")
        joined = PurePosixPath(posixpath.normpath(str(dest / name)))
        assert dest in joined.parents
        assert "\x00" not in name and "\\" not in name
