"""Tests of the demo's pure pieces: commands, environment, the roost line, the --keep script."""

from __future__ import annotations

import shlex
from pathlib import Path

from murmur.demo.commands import (
    child_environment,
    desk_command,
    formation_command,
    install_command,
    parse_roost_port,
    rerun_script,
    roost_command,
)
from murmur.demo.layout import Layout, task_text
from murmur.exitstatus import shell_status

LAYOUT = Layout(Path("/d"))
MUR = ["mur"]


class TestCommands:
    def test_install_is_a_global_install_of_the_directory(self) -> None:
        """Each capsule is built and installed with `mur install -g DIR`."""
        assert install_command(MUR, Path("/d/audit/lead")) == ["mur", "install", "-g", "/d/audit/lead"]

    def test_roost_admits_only_the_desk(self) -> None:
        """mur-roost: a free port, the private store, exactly one --spawn-allow name."""
        cmd = roost_command(["mur-roost"], LAYOUT)
        assert cmd == ["mur-roost", "--port", "0", "--registry-path", "/d/home/artifacts",
                       "--spawn-allow", "audit-desk"]
        assert cmd.count("--spawn-allow") == 1

    def test_desk_is_an_installed_capsule_session_with_a_readiness_line(self) -> None:
        """The desk runs local/audit-desk in its own workdir and prints one JSON line."""
        assert desk_command(MUR, LAYOUT) == [
            "mur", "run", "--capsule", "local/audit-desk", "--capsule-version", "0.1.0",
            "--workdir", "/d/desk", "--project-dir", "/d/audit", "--no-env-file", "--json"]

    def test_formation_task_names_the_target(self) -> None:
        """The formation runs the copied roster with the task `audit <absolute path>`."""
        assert formation_command(MUR, LAYOUT, Path("/src/x y")) == [
            "mur", "run", "--roster", "/d/audit", "--task", "audit /src/x y", "--no-env-file", "--json"]
        assert task_text(Path("/a")) == "audit /a"


class TestEnvironment:
    def test_drops_what_the_demo_owns(self) -> None:
        """MURMUR_HOME, the roost URL, formation and spawner variables never leak in."""
        env = child_environment(
            {"PATH": "/usr/bin", "LANG": "C", "MURMUR_HOME": "/elsewhere", "MURMUR_ROOST_URL": "x",
             "MURMUR_FORMATION_ID": "frm_x", "MURMUR_SPAWNER": "{}", "MURMUR_SPAWNER_LIFELINE": "7",
             "MURMUR_MUR_BINARY": "/fake", "AUDIT_DESK_URL": "http://x", "MURMUR_A2A_TIMEOUT_SECS": "9"},
            LAYOUT, None)
        assert env == {"PATH": "/usr/bin", "LANG": "C", "MURMUR_HOME": "/d/home",
                       "MURMUR_A2A_TIMEOUT_SECS": "9"}

    def test_interpreter_directory_goes_first_on_path(self, tmp_path: Path) -> None:
        """When the interpreter's directory holds python3, checks run with that Python."""
        (tmp_path / "python3").write_text("")
        env = child_environment({"PATH": f"/usr/bin:{tmp_path}:/bin"}, LAYOUT, tmp_path)
        assert env["PATH"] == f"{tmp_path}:/usr/bin:/bin"

    def test_directory_without_python3_leaves_path_alone(self, tmp_path: Path) -> None:
        """No python3 beside the interpreter: PATH is kept as it was."""
        env = child_environment({"PATH": "/usr/bin"}, LAYOUT, tmp_path)
        assert env["PATH"] == "/usr/bin"

    def test_missing_path_gets_a_default(self) -> None:
        """An environment without PATH gets the usual default."""
        assert child_environment({}, LAYOUT, None)["PATH"] == "/usr/local/bin:/usr/bin:/bin"


class TestRoostLine:
    def test_port_from_the_listening_line(self) -> None:
        """The first startup line gives the port the OS chose."""
        assert parse_roost_port(b"mur-roost: listening on 127.0.0.1:41234\n") == 41234

    def test_other_lines_give_nothing(self) -> None:
        """The ceiling line, garbage and a non-numeric port are not the listening line."""
        assert parse_roost_port(b"mur-roost: machine ceiling 64 live capsules (--max-live-capsules)") is None
        assert parse_roost_port(b"mur-roost: listening on 127.0.0.1:http") is None
        assert parse_roost_port(b"\xff\xfe") is None


class TestRerunScript:
    def test_commands_a_user_can_paste(self) -> None:
        """--keep prints the home, mur-roost, the desk and the formation, paths quoted."""
        layout = Layout(Path("/tmp/a b"))
        lines = rerun_script(layout, Path("/src/it's"))
        assert lines[0] == "export MURMUR_HOME='/tmp/a b/home'"
        assert lines[1].startswith("mur-roost --port 7700 --registry-path '/tmp/a b/home/artifacts' "
                                   "--spawn-allow audit-desk")
        assert "MURMUR_ROOST_URL=http://127.0.0.1:7700 mur run --capsule local/audit-desk" in lines[2]
        formation = lines[3]
        assert formation.startswith("AUDIT_DESK_URL=http://127.0.0.1:<port> mur run --roster '/tmp/a b/audit' --task ")
        assert shlex.split(formation.split("--task ", 1)[1]) == ["audit /src/it's"]


class TestStatus:
    def test_shell_form(self) -> None:
        """Exit codes pass through; death by a signal is 128 + the signal."""
        assert (shell_status(0), shell_status(3), shell_status(-9), shell_status(-15)) == (0, 3, 137, 143)
