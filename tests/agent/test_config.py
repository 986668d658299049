"""The inference block checked at launch: drivers, endpoints, prompts, process commands."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import attrs
import pytest

from murmur.agent import make_agent_workload
from murmur.agent.config import agent_config, driver_kind
from murmur.errors import DiagnosticError
from murmur.manifest.model import DriverRef, Inference, Manifest, Transport
from murmur.workload import TaskServices

from .scripted import agent_manifest


def _with(manifest: Manifest, **changes: object) -> Manifest:
    assert manifest.inference is not None
    return attrs.evolve(manifest, inference=attrs.evolve(manifest.inference, **changes))


def _code(manifest: Manifest, root: Path = Path("."), env: dict[str, str] | None = None) -> str:
    with pytest.raises(DiagnosticError) as info:
        agent_config(manifest, root, environ=env or {"PATH": "/usr/bin:/bin"})
    return info.value.code


class TestDrivers:
    def test_builtin_names(self) -> None:
        """Both upstream driver names are built in, bare or scoped."""
        assert driver_kind("murmur-driver-openai") == "openai"
        assert driver_kind("murmur-driver-anthropic") == "anthropic"
        assert driver_kind("murmur/murmur-driver-openai") == "openai"
        assert driver_kind("murmur-driver-gemini") is None

    def test_deepseek_is_the_openai_dialect(self) -> None:
        """Upstream's DeepSeek driver speaks OpenAI Chat Completions: the name is built in,
        a manifest naming it resolves to the OpenAI driver, and the component check passes it
        (it was E-RUN-006 / an uninstalled E-REG-001 artifact before)."""
        from murmur.manifest.support import is_builtin_driver, unsupported

        assert driver_kind("murmur-driver-deepseek") == "openai" and is_builtin_driver("murmur/murmur-driver-deepseek")
        manifest = _with(agent_manifest("https://api.deepseek.com"), driver=DriverRef("murmur-driver-deepseek"))
        cfg = agent_config(manifest, Path("."), environ={"API_KEY": "k"})
        assert (cfg.driver, cfg.endpoint) == ("openai", "https://api.deepseek.com")
        assert unsupported(manifest) == []

    def test_no_driver_is_e_run_005(self) -> None:
        """transport http without driver.artifact refuses with E-RUN-005."""
        assert _code(_with(agent_manifest("https://x"), driver=None)) == "E-RUN-005"

    def test_unknown_driver_is_e_run_006(self) -> None:
        """An unknown driver artifact refuses with E-RUN-006."""
        assert _code(_with(agent_manifest("https://x"), driver=DriverRef("other-driver"))) == "E-RUN-006"

    def test_config_resolved(self) -> None:
        """A good block resolves; the key stays a reference."""
        cfg = agent_config(agent_manifest("https://api.example.com/v1"), Path("."), environ={"API_KEY": "k"})
        assert (cfg.driver, cfg.endpoint, cfg.model, cfg.max_turns) == (
            "openai", "https://api.example.com/v1", "test-model", 10)
        assert cfg.api_key_ref == "${API_KEY}" and cfg.key_name == "API_KEY"
        assert "${API_KEY}" not in repr(cfg)

    def test_a_session_under_a_gateway_need_not_hold_its_key(self) -> None:
        """spec/gateway.md "Keys": a descendant handed MURMUR_GATEWAY_ENDPOINT starts without
        ${API_KEY} (the gateway attaches the tree's key); without the gateway it is refused."""
        manifest = agent_manifest("https://api.example.com/v1")
        cfg = agent_config(manifest, Path("."), environ={"MURMUR_GATEWAY_ENDPOINT": "http://127.0.0.1:9"})
        assert cfg.api_key_ref == "${API_KEY}"
        with pytest.raises(DiagnosticError) as refused:
            agent_config(manifest, Path("."), environ={})
        assert refused.value.code == "E-MAN-003" and "API_KEY" in refused.value.diagnostics[0].message

    def test_no_inference_block(self) -> None:
        """A manifest without inference is not an agent capsule."""
        assert _code(Manifest(name="x", version="1")) == "E-MAN-003"


class TestEndpoint:
    @pytest.mark.parametrize("url", ["https://api.openai.com/v1", "http://127.0.0.1:8000/v1",
                                     "http://localhost:11434", "http://[::1]:9/v1", "http://127.5.6.7"])
    def test_accepted(self, url: str) -> None:
        """https anywhere; http only to loopback."""
        agent_config(agent_manifest(url), Path("."), environ={"API_KEY": "k"})

    @pytest.mark.parametrize("url", ["http://example.com/v1", "http://10.0.0.1", "ftp://127.0.0.1",
                                     "api.openai.com/v1", "https://x/v1?key=1", ""])
    def test_refused(self, url: str) -> None:
        """Plain http off loopback, other schemes, schemeless, queries: E-MAN-003."""
        assert _code(agent_manifest(url)) == "E-MAN-003"

    def test_model_required(self) -> None:
        """http transport needs a model."""
        assert _code(_with(agent_manifest("https://x"), model=None)) == "E-MAN-003"


class TestSystemPrompt:
    def test_inline_trimmed(self) -> None:
        """An inline prompt is trimmed."""
        cfg = agent_config(agent_manifest("https://x", system_prompt="  hi \n"), Path("."), environ={"API_KEY": "k"})
        assert (cfg.system_prompt, cfg.system_prompt_source) == ("hi", "inline")

    def test_file_verbatim(self, tmp_path: Path) -> None:
        """A prompt file is read verbatim, relative to the capsule root."""
        (tmp_path / "prompt.md").write_text("  line\n")
        cfg = agent_config(_with(agent_manifest("https://x"), system_prompt_file="prompt.md"), tmp_path, environ={"API_KEY": "k"})
        assert (cfg.system_prompt, cfg.system_prompt_source) == ("  line\n", "file")

    def test_unreadable_file_is_e_run_009(self, tmp_path: Path) -> None:
        """A missing prompt file refuses with E-RUN-009."""
        assert _code(_with(agent_manifest("https://x"), system_prompt_file="nope.md"), tmp_path) == "E-RUN-009"

    def test_both_keys_refused(self) -> None:
        """system_prompt and system_prompt_file together are E-MAN-003."""
        m = _with(agent_manifest("https://x", system_prompt="a"), system_prompt_file="b")
        assert _code(m) == "E-MAN-003"

    def test_override_wins(self) -> None:
        """--system-prompt overrides the manifest's prompt."""
        cfg = agent_config(agent_manifest("https://x", system_prompt="a"), Path("."), environ={"API_KEY": "k"},
                           system_prompt_override="b")
        assert (cfg.system_prompt, cfg.system_prompt_source) == ("b", "override")


class TestProcessCommand:
    def _process(self, command: str | None) -> Manifest:
        return Manifest(name="x", version="1",
                        inference=Inference(transport=Transport.PROCESS, command=command))

    def test_found_on_path(self, tmp_path: Path) -> None:
        """A bare command on PATH resolves into argv."""
        tool = tmp_path / "my-agent"
        tool.write_text("#!/bin/sh\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
        cfg = agent_config(self._process("my-agent --print 'a b'"), tmp_path, environ={"PATH": str(tmp_path)})
        assert cfg.command == ("my-agent", "--print", "a b") and cfg.transport == "process"

    def test_missing_is_e_run_006(self, tmp_path: Path) -> None:
        """A command not on PATH refuses with E-RUN-006."""
        assert _code(self._process("nope-agent"), env={"PATH": str(tmp_path)}) == "E-RUN-006"

    @pytest.mark.parametrize("command", [None, "  ", "/bin/sh -c x", "'unclosed"])
    def test_bad_commands(self, command: str | None) -> None:
        """Missing, blank, path and unsplittable commands are E-MAN-003."""
        assert _code(self._process(command)) == "E-MAN-003"


class TestWorkloadFactory:
    def test_make_agent_workload_checks(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """make_agent_workload refuses a bad block and builds a good one."""
        monkeypatch.setenv("API_KEY", "k")
        with pytest.raises(DiagnosticError):
            make_agent_workload(agent_manifest("http://example.com"), Path("."))
        work = make_agent_workload(agent_manifest("https://x", shell=("ls",)), Path("."))
        assert work.environ is os.environ
        assert work.tools_declared(TaskServices()) == ("ls",)
