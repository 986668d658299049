"""Tests of what each member is started with (command line, environment, channel)."""

from __future__ import annotations

from pathlib import Path

from murmur import ids
from murmur.formation.launch import launchplan
from murmur.formation.launch.launchplan import RosterOptions, member_argv, member_env
from murmur.formation.wire import channel

from ._fakes import member, plan_for, roster


class TestArgv:
    def test_peer(self) -> None:
        """A peer runs its capsule at its version with --json in its own work folder."""
        argv = member_argv(["mur"], member("coder"), workdir=Path("/f/coder"),
                           project_dir=Path("/p"), options=RosterOptions(task="t"),
                           deadline="2030-01-01T00:00:00.000Z")
        assert argv == ("mur", "run", "--capsule", "local/coder", "--capsule-version", "0.1.0",
                        "--workdir", "/f/coder", "--project-dir", "/p", "--json",
                        "--deadline", "2030-01-01T00:00:00.000Z")

    def test_entry_with_task(self) -> None:
        """--task: the entry member runs single + exit with that task."""
        argv = member_argv(["mur"], member("lead", entry=True), workdir=Path("/p"),
                           project_dir=Path("/p"), options=RosterOptions(task="do x", json=True),
                           deadline=None)
        assert argv[-7:] == ("--lifecycle-task-acceptance", "single", "--lifecycle-after-task",
                             "exit", "--task", "do x", "--json")

    def test_entry_without_task(self) -> None:
        """No task: queue + sleep; no --json unless the launcher has it."""
        argv = member_argv(["mur"], member("lead", entry=True), workdir=Path("/p"),
                           project_dir=Path("/p"), options=RosterOptions(no_env_file=True,
                                                                         containment="scoped"),
                           deadline=None)
        assert "--json" not in argv and "--task" not in argv
        assert argv[argv.index("--lifecycle-task-acceptance") + 1] == "queue"
        assert argv[argv.index("--lifecycle-after-task") + 1] == "sleep"
        assert argv[-3:] == ("--no-env-file", "--containment", "scoped")


class TestEnv:
    def test_formation_variables(self) -> None:
        """Members get the formation id, the host-warnings flag and the formation's span (a new
        trace: the formation id's hex); stale ones are dropped."""
        frm = ids.new_id("frm")
        env = member_env({"PATH": "/bin", "MURMUR_FORMATION_CHANNEL": "9",
                          "MURMUR_SPAWNER": "{}", "MURMUR_FORMATION_ID": "frm_old"}, frm)
        assert env == {"PATH": "/bin", "MURMUR_FORMATION_ID": frm,
                       "MURMUR_HOST_WARNINGS_REPORTED": "1", "TRACEPARENT": f"00-{frm[4:]}-{frm[-16:]}-01"}

    def test_formation_joins_the_launchers_trace(self) -> None:
        """A launcher started with a TRACEPARENT puts its members in that trace."""
        frm = ids.new_id("frm")
        env = member_env({"TRACEPARENT": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}, frm)
        assert env["TRACEPARENT"] == f"00-{'a' * 32}-{frm[-16:]}-01"


class TestBuild:
    def test_channels_and_order(self) -> None:
        """Peers in roster order, each channel's first line its own verified credentials."""
        frm = ids.new_id("frm")
        admitted = roster(member("a"), member("lead", entry=True, callees=("a", "b")),
                          member("b", callees=("a",)))
        plan = plan_for(admitted, frm)
        assert [p.member.name for p in plan.peers] == ["a", "b"]
        assert plan.entry.name == "lead"
        first, callees = plan.peers[1].spec.channel.splitlines(keepends=True)
        b = channel.decode_credentials(first, formation_id=frm)
        assert b.member == "b" and b.callees == ("a",)
        # then what the launcher read of each callee's manifest (no agent here: no ceiling)
        assert channel.decode_later(callees) == channel.Callees((channel.CalleeFacts("a", "a", False),))
        assert plan.peers[0].spec.channel.count(b"\n") == 1  # `a` may call nobody: its first line only
        assert plan.peers[1].spec.peer and not plan.entry_spec.peer
        for spec in (plan.entry_spec, *(p.spec for p in plan.peers)):
            assert not any("mft1" in a for a in spec.argv)
            assert not any("mft1" in v for v in spec.env.values())

    def test_entry_addresses_and_role(self) -> None:
        """The entry's channel gains its callees' URLs and its role before it starts."""
        frm = ids.new_id("frm")
        admitted = roster(member("lead", entry=True, callees=("a",)), member("a"), member("b"))
        plan = plan_for(admitted, frm)
        spec = launchplan.entry_spec_with_addresses(
            plan, {"a": "http://127.0.0.1:1", "b": "http://127.0.0.1:2"})
        first, _callees, addrs, role = spec.channel.splitlines(keepends=True)
        assert channel.decode_credentials(first, formation_id=frm).callees == ("a",)
        decoded = channel.decode_later(addrs)
        assert isinstance(decoded, channel.Addresses)
        assert [(x.name, x.url) for x in decoded.addresses] == [("a", "http://127.0.0.1:1")]
        assert isinstance(channel.decode_later(role), channel.EntryRole)

    def test_a_callee_s_ceiling_is_read_from_its_admitted_manifest(self) -> None:
        """The callees line names each callee's capsule and its inference ceiling."""
        import attrs

        from murmur.manifest.model import DriverRef, Inference, Transport

        frm = ids.new_id("frm")
        inf = Inference(transport=Transport.HTTP, endpoint="http://127.0.0.1:9/v1", model="m",
                        driver=DriverRef("d"), max_turns=4, budget_tokens=20000)
        a = member("a")
        a = attrs.evolve(a, manifest=attrs.evolve(a.manifest, name="app-a", inference=inf))
        plan = plan_for(roster(member("lead", entry=True, callees=("a",)), a), frm)
        _first, callees = plan.entry_spec.channel.splitlines(keepends=True)
        assert channel.decode_later(callees) == channel.Callees((channel.CalleeFacts("a", "app-a", True, 4, 20000),))
