"""host.py: the pure parsers, the forced class, and the doctor line (spec/session.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from murmur.containment import host
from murmur.containment.host import CGROUP, GROUPS, HostClass, detect

HYBRID = """\
23 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

PURE_V2 = """\
22 28 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
26 22 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
"""


# -- mountinfo ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "decoded"),
    [
        ("/plain/path", "/plain/path"),
        ("/with\\040space", "/with space"),
        ("/tab\\011and\\012newline", "/tab\tand\nnewline"),
        ("/back\\134slash", "/back\\slash"),
        ("/two\\040\\040spaces", "/two  spaces"),
        ("/short\\04", "/short\\04"),  # not three digits: kept as written
        ("/letters\\abc", "/letters\\abc"),
        ("/end\\", "/end\\"),
        ("", ""),
    ],
)
def test_unescape_mount_field(field: str, decoded: str) -> None:
    assert host.unescape_mount_field(field) == decoded


def test_cgroup2_mount_hybrid_is_the_unified_mount() -> None:
    assert host.cgroup2_mount(HYBRID) == Path("/sys/fs/cgroup/unified")


def test_cgroup2_mount_pure_v2_with_optional_fields() -> None:
    assert host.cgroup2_mount(PURE_V2) == Path("/sys/fs/cgroup")


def test_cgroup2_mount_v1_only_is_none() -> None:
    v1 = "\n".join(line for line in HYBRID.splitlines() if "cgroup2" not in line)
    assert host.cgroup2_mount(v1) is None
    assert host.cgroup2_mount("") is None


def test_cgroup2_mount_decodes_an_escaped_mount_point() -> None:
    text = "50 31 0:40 / /mnt/my\\040cgroups rw,relatime shared:9 master:3 - cgroup2 none rw\n"
    assert host.cgroup2_mount(text) == Path("/mnt/my cgroups")


def test_cgroup2_mount_first_of_two_and_skips_junk_lines() -> None:
    text = (
        "garbage without a separator\n"
        "1 2 - cgroup2 x rw\n"  # too few fields before the separator
        "60 1 0:41 / /first rw - cgroup2 cgroup2 rw\n"
        "61 1 0:42 / /second rw - cgroup2 cgroup2 rw\n"
    )
    assert host.cgroup2_mount(text) == Path("/first")


def test_cgroup2_mount_a_v1_type_named_like_v2_is_not_taken() -> None:
    text = "70 1 0:43 / /fake rw - cgroup cgroup2 rw,name=cgroup2\n"
    assert host.cgroup2_mount(text) is None


# -- /proc/<pid>/cgroup ---------------------------------------------------------------------


def test_v2_path_hybrid_root() -> None:
    text = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
    assert host.v2_path(text) == "/"


def test_v2_path_nested_and_stripped() -> None:
    assert host.v2_path("0::/user.slice/user-1000.slice/session-2.scope\n") == (
        "/user.slice/user-1000.slice/session-2.scope"
    )
    assert host.v2_path("0::/a b/c  \n") == "/a b/c"


def test_v2_path_empty_is_the_root_and_v1_only_is_none() -> None:
    assert host.v2_path("0::\n") == "/"
    assert host.v2_path("4:memory:/x\n1:cpu:/\n") is None
    assert host.v2_path("") is None


def test_own_cgroup_is_what_proc_says() -> None:
    text = Path("/proc/self/cgroup").read_text(encoding="utf-8")
    assert host.own_cgroup() == host.v2_path(text)
    assert host.pid_cgroup(os.getpid()) == host.own_cgroup()


def test_pid_cgroup_of_a_missing_pid_is_none() -> None:
    assert host.pid_cgroup(2**22 + 12345) is None  # above pid_max's ceiling: never a process


# -- detect and the doctor line ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["groups", "GROUPS", " groups\n"])
def test_detect_forced_groups(value: str) -> None:
    got = detect({"MURMUR_CONTAINMENT": value})
    assert got.name == GROUPS
    assert got.mount is None and got.base is None
    assert "MURMUR_CONTAINMENT=groups" in got.why


def test_detect_other_values_let_the_host_decide() -> None:
    assert detect({"MURMUR_CONTAINMENT": "cgroup"}) == detect({})
    assert detect({"MURMUR_CONTAINMENT": ""}) == detect({})


def test_detect_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MURMUR_CONTAINMENT", "groups")
    assert detect().name == GROUPS


def test_detect_on_this_host_is_consistent() -> None:
    got = detect({}, probe=True)
    assert got.name in (CGROUP, GROUPS)
    if got.name == CGROUP:
        assert got.mount == host.cgroup2_mount(Path("/proc/self/mountinfo").read_text())
        assert got.own == host.own_cgroup()
        assert got.base is not None and (got.base / "cgroup.procs").exists()
        assert not any(p.name.startswith(f"murmur-probe-{os.getpid()}") for p in got.base.iterdir())
    else:
        assert got.base is None and got.why


def test_doctor_line_cgroup() -> None:
    h = HostClass(CGROUP, Path("/sys/fs/cgroup"), "/x", "cgroup v2 at /sys/fs/cgroup, beneath /x")
    assert h.doctor_line() == "teardown: cgroup v2 (every process a session starts is contained)"
    assert h.base == Path("/sys/fs/cgroup/x")


def test_mount_favors_dynmods_reads_the_super_options() -> None:
    unified = Path("/sys/fs/cgroup/unified")
    assert not host.mount_favors_dynmods(HYBRID, unified)
    assert host.mount_favors_dynmods(HYBRID.replace("cgroup2 cgroup2 rw", "cgroup2 cgroup2 rw,favordynmods"), unified)
    assert host.mount_favors_dynmods(PURE_V2.replace("rw,nsdelegate", "rw,nsdelegate,favordynmods"),
                                     Path("/sys/fs/cgroup"))
    assert not host.mount_favors_dynmods(PURE_V2, Path("/sys/fs/cgroup"))
    # a mount option of that name (not a super option) is not the cgroup flag
    assert not host.mount_favors_dynmods(HYBRID.replace("/sys/fs/cgroup/unified rw,", "/sys/fs/cgroup/unified favordynmods,"),
                                         unified)
    assert not host.mount_favors_dynmods("", unified)


def test_doctor_notes_the_slow_join_only_on_a_cgroup_host_without_favordynmods() -> None:
    mount = Path("/sys/fs/cgroup")
    slow = HostClass(CGROUP, mount, "/x", "cgroup v2 at /sys/fs/cgroup, beneath /x", dynmods=False)
    (note,) = slow.doctor_notes()
    assert "lacks favordynmods" in note and "mount -o remount,favordynmods /sys/fs/cgroup" in note
    assert HostClass(CGROUP, mount, "/x", "why", dynmods=True).doctor_notes() == []
    assert detect({"MURMUR_CONTAINMENT": "groups"}).doctor_notes() == []


def test_detect_reads_favordynmods_from_this_hosts_mount() -> None:
    got = detect({})
    if got.name != CGROUP:
        assert got.dynmods is None
        return
    assert got.mount is not None
    assert got.dynmods is host.mount_favors_dynmods(Path("/proc/self/mountinfo").read_text(), got.mount)


def test_doctor_line_groups_says_what_it_cannot_catch_and_why() -> None:
    h = detect({"MURMUR_CONTAINMENT": "groups"})
    line = h.doctor_line()
    assert line.startswith(
        "teardown: process groups (a process that leaves its group can outlive a SIGKILLed session"
    )
    assert line.endswith("; MURMUR_CONTAINMENT=groups asks for it)")


def test_base_is_none_outside_the_cgroup_class() -> None:
    assert HostClass(GROUPS, Path("/sys/fs/cgroup"), "/x", "why").base is None
    assert HostClass(CGROUP, None, "/x", "why").base is None
    assert HostClass(CGROUP, Path("/m"), "/", "why").base == Path("/m")


def test_force_problem_names_the_accepted_values() -> None:
    """Only blank, `auto` and `groups` (any case, trimmed) are usable; anything else says so."""
    from murmur.containment.host import force_problem

    for usable in ({}, {"MURMUR_CONTAINMENT": ""}, {"MURMUR_CONTAINMENT": " Auto "}, {"MURMUR_CONTAINMENT": "GROUPS"}):
        assert force_problem(usable) is None
    problem = force_problem({"MURMUR_CONTAINMENT": "cgroups"})
    assert problem is not None and "'cgroups'" in problem and "`groups` or `auto`" in problem


def test_mount_read_only_reads_mount_and_super_options() -> None:
    """`ro` in the per-mount options or the super options is read-only; other mounts do not count."""
    unified = Path("/sys/fs/cgroup/unified")
    assert not host.mount_read_only(HYBRID, unified)
    assert host.mount_read_only(HYBRID.replace("/sys/fs/cgroup/unified rw,", "/sys/fs/cgroup/unified ro,"), unified)
    assert host.mount_read_only(HYBRID.replace("cgroup2 cgroup2 rw", "cgroup2 cgroup2 ro"), unified)
    assert not host.mount_read_only(HYBRID.replace("/sys/fs/cgroup/cpu rw,", "/sys/fs/cgroup/cpu ro,"), unified)
    assert not host.mount_read_only("", unified)


def test_detect_names_a_read_only_mount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only cgroup2 mount is named as such, not as "cannot be written by this user"."""
    real = Path("/proc/self/mountinfo").read_text()
    mount, own = host.cgroup2_mount(real), host.own_cgroup()
    if mount is None or own is None or not (mount / own.lstrip("/") / "cgroup.procs").exists():
        pytest.skip("no visible cgroup v2 group on this host")
    lines = []
    for line in real.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if sep and right.split()[:1] == ["cgroup2"]:
            fields[5] = ",".join(["ro", *(o for o in fields[5].split(",") if o != "rw")])
            line = " ".join(fields) + sep + right
        lines.append(line)
    fake = tmp_path / "mountinfo"
    fake.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(host, "_MOUNTINFO", fake)
    got = detect({})
    assert got.name == GROUPS
    assert got.why == f"the cgroup v2 mount {mount} is read-only"
    assert "read-only" in got.doctor_line()
