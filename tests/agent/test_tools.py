"""Tool inventory, grants and refusals (pure)."""

from __future__ import annotations

import re

from murmur.agent.tools import (
    build_inventory,
    missing_grant,
    shell_args,
    shell_result_text,
    string_fields,
    wire_name,
)
from murmur.workload import TaskServices

from .scripted import agent_manifest

_WIRE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


async def _delegate(capsule: str, version: str, task: str, wait: bool) -> dict[str, object]:
    return {}


async def _call(member: str, task: str) -> dict[str, object]:
    return {}


class TestInventory:
    def test_shell_only(self) -> None:
        """One tool per allowlisted binary, nothing else without grants."""
        inv = build_inventory(agent_manifest("https://x", shell=("ls", "grep")), TaskServices())
        assert inv.names == ("ls", "grep")
        assert inv.specs[0].input_schema["required"] == ["args"]

    def test_no_tools(self) -> None:
        """A capsule with no grants is offered no tools."""
        assert build_inventory(agent_manifest("https://x"), TaskServices()).tools == ()

    def test_delegate_needs_spawn_allow_and_service(self) -> None:
        """delegate-task exists only with spawn.allow and the delegation service."""
        m = agent_manifest("https://x", spawn=("local/a",))
        assert build_inventory(m, TaskServices()).names == ()
        assert build_inventory(m, TaskServices(delegate=_delegate)).names == ("delegate-task",)
        assert build_inventory(agent_manifest("https://x"), TaskServices(delegate=_delegate)).names == ()

    def test_member_tools_need_callees(self) -> None:
        """call-member and end-without-answer exist only with callees."""
        m = agent_manifest("https://x")
        assert build_inventory(m, TaskServices(call_member=_call)).names == ()
        inv = build_inventory(m, TaskServices(call_member=_call, callees=("b", "a")))
        assert inv.names == ("call-member", "end-without-answer")
        assert inv.specs[0].input_schema["properties"]["member"]["enum"] == ["b", "a"]

    def test_binary_cannot_shadow_runtime_tool(self) -> None:
        """A binary named like a runtime tool is not offered as a shell tool."""
        m = agent_manifest("https://x", shell=("call-member", "ls"))
        inv = build_inventory(m, TaskServices(call_member=_call, callees=("a",)))
        assert [t.kind for t in inv.tools] == ["call-member", "end-without-answer", "shell"]

    def test_wire_names_are_provider_safe_and_unique(self) -> None:
        """Names with dots etc. are mapped to provider-safe, unique wire names."""
        inv = build_inventory(agent_manifest("https://x", shell=("python3.11", "python3_11")), TaskServices())
        wires = [t.spec.name for t in inv.tools]
        assert all(_WIRE.match(w) for w in wires) and len(set(wires)) == 2
        assert inv.by_wire_name(wires[0]).name == "python3.11"

    def test_long_wire_name_cut(self) -> None:
        """Wire names are at most 64 characters, even with a uniqueness suffix."""
        taken: set[str] = set()
        a, b = wire_name("x" * 100, taken), wire_name("x" * 100, taken)
        assert len(a) == 64 and len(b) == 64 and a != b


class TestMissingGrant:
    def test_names_each_grant(self) -> None:
        """Each refusal names the grant that would make the tool exist."""
        assert "capabilities.spawn.allow" in missing_grant("delegate-task")
        assert "reachability" in missing_grant("call-member")
        assert "reachability" in missing_grant("end-without-answer")
        assert "capabilities.shell.allow: [curl]" in missing_grant("curl")
        assert "capabilities.shell.allow: [ls, curl]" in missing_grant("curl", ("ls",))
        assert "does not provide" in missing_grant("share-file")


class TestInputs:
    def test_shell_args(self) -> None:
        """args must be a list of strings; extra fields and NULs are refused."""
        assert shell_args({"args": ["-l", "x"]}) == ["-l", "x"]
        assert shell_args({}) == []
        assert isinstance(shell_args(None), str)
        assert isinstance(shell_args({"args": "-l"}), str)
        assert isinstance(shell_args({"args": [1]}), str)
        assert isinstance(shell_args({"args": [], "cmd": "x"}), str)
        assert isinstance(shell_args({"args": ["a\x00b"]}), str)

    def test_string_fields(self) -> None:
        """Required string fields are returned, a missing or non-string one refused."""
        assert string_fields({"a": "1", "b": "2"}, ("a", "b")) == {"a": "1", "b": "2"}
        assert "`b`" in string_fields({"a": "1"}, ("a", "b"))
        assert "`a`" in string_fields({"a": 3}, ("a",))

    def test_shell_result_fenced(self) -> None:
        """The program's output is fenced under tool:<binary>, the status outside it."""
        text = shell_result_text("ls", 1, "out", "err", truncated=True)
        assert text.startswith("`ls` exited with status 1\n(output was cut")
        assert "<untrusted-content source=tool:ls>\nstdout:\nout\nstderr:\nerr\n</untrusted-content>" in text
