"""What a plain ``mur run`` imports (issue 19): a list of packages, never a time.

Each test runs ``murmur.cli.mur.main`` in a fresh interpreter (so nothing this test process
already imported counts) and reads ``sys.modules`` after the session has ended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from murmur.formation.wire.envnames import (
    CHANNEL_ENV,
    ID_ENV,
    LIFELINE_ENV,
    PEERS_ENV,
    names_formation,
)

MANIFEST = "name: imports\nversion: 0.1.0\nplan: plan.yaml\n{extra}"
PLAN = 'steps:\n  - id: say\n    template: "echo: {{ task }}"\noutput: "{{ steps.say.output }}"\n'
PROBE = """\
import json, sys
from murmur.cli.mur import main
rc = main(["run", "--task", "hi"])
third = sorted({m.split(".")[0] for m in sys.modules if not m.startswith("_")} - set(sys.stdlib_module_names))
print(json.dumps({"rc": rc, "third": third, "murmur": sorted(m for m in sys.modules if m.startswith("murmur.")),
                  "stdlib": sorted(m for m in sys.modules if m.split(".")[0] in sys.stdlib_module_names)}))
"""

# Everything a plain plan session needs: trio, hypercorn (and the HTTP codecs it imports),
# attrs/cattrs and ruamel.yaml for the manifest and the plan.
PLAIN_THIRD_PARTY = [
    "attr", "attrs", "cattrs", "h11", "h2", "hpack", "hypercorn", "hyperframe", "idna", "murmur",
    "outcome", "priority", "ruamel", "sniffio", "sortedcontainers", "trio", "typing_extensions", "wsproto",
]
# The parts of murmur a plain session never needs (formation member side, delegation side,
# roost client, agent transports).
NOT_FOR_A_PLAIN_SESSION = (
    "murmur.formation.member.member", "murmur.formation.member.membership", "murmur.formation.member.firstline",
    "murmur.formation.member.verifier", "murmur.formation.wire.edge_tokens", "murmur.formation.wire.channel",
    "murmur.delegation.contributor", "murmur.delegation.runtime", "murmur.roost.", "murmur.agent.",
    "murmur.gateway",  # the inference gateway: only for a session that calls models (spec/gateway.md)
)
# Standard-library modules a plain plan session never loads: imported where they are used
# (a did-you-mean hint, an over-long JSON integer, a shown command line) or never needed by a
# session. (ssl, hashlib, logging, inspect, platform, ipaddress, idna, textwrap and datetime are
# not here: trio, hypercorn, attrs and pathlib import them themselves, so every session has them.)
NOT_STDLIB_FOR_A_PLAIN_SESSION = (
    "difflib", "decimal", "shlex", "zipfile", "tarfile", "email", "http.client", "urllib.request",
    "sqlite3", "asyncio", "concurrent.futures", "uuid", "xml", "csv", "getpass",
)


def loaded(tmp_path: Path, extra: str = "", env: dict[str, str] | None = None) -> dict[str, object]:
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    (capsule / "murmur.yaml").write_text(MANIFEST.format(extra=extra))
    (capsule / "plan.yaml").write_text(PLAN)
    base = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    run_env = {**base, "MURMUR_HOME": str(tmp_path / "home"), **(env or {})}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=capsule, env=run_env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    got: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return got


def test_plain_plan_session_imports(tmp_path: Path) -> None:
    """A plain plan session loads exactly these third-party packages: no Quart, Werkzeug,
    cryptography or httpx, and none of the formation, delegation, roost or agent modules."""
    got = loaded(tmp_path)
    assert got["rc"] == 0
    assert got["third"] == PLAIN_THIRD_PARTY
    murmur_modules = got["murmur"]
    assert isinstance(murmur_modules, list)
    assert [m for m in murmur_modules if m.startswith(NOT_FOR_A_PLAIN_SESSION)] == []
    stdlib = got["stdlib"]
    assert isinstance(stdlib, list)
    assert sorted(set(stdlib) & set(NOT_STDLIB_FOR_A_PLAIN_SESSION)) == []


def test_delegating_manifest_loads_the_delegation_side(tmp_path: Path) -> None:
    """A manifest that may delegate still gets the delegation side (and its roost client)."""
    extra = (
        "lifecycle:\n  task_acceptance: queue\n  after_task: sleep\n"
        "capabilities:\n  spawn:\n    allow: [local/other]\n"
    )
    got = loaded(tmp_path, extra, env={"MURMUR_ROOST_URL": "http://127.0.0.1:9"})
    murmur_modules = got["murmur"]
    assert isinstance(murmur_modules, list)
    assert "murmur.delegation.contributor" in murmur_modules and "murmur.delegation.runtime" in murmur_modules
    assert "murmur.formation.member.member" not in murmur_modules


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({}, False),
        ({ID_ENV: "  "}, False),
        ({CHANNEL_ENV: "", LIFELINE_ENV: ""}, False),
        ({PEERS_ENV: ""}, True),
        ({ID_ENV: "frm_x"}, True),
        ({CHANNEL_ENV: "7"}, True),
        ({LIFELINE_ENV: "8"}, True),
    ],
)
def test_names_formation(environ: dict[str, str], named: bool) -> None:
    """The member side is loaded whenever it could refuse or join (blank variables are unset)."""
    assert names_formation(environ) is named


MEMBER_PROBE = """\
import json, sys
import murmur.cli.mur, murmur.assembly, murmur.formation.member.member, murmur.formation.wire.channel
third = sorted({m.split(".")[0] for m in sys.modules if not m.startswith("_")} - set(sys.stdlib_module_names))
print(json.dumps(third))
"""


def test_formation_member_side_imports_no_cryptography() -> None:
    """The member side (joining, the channel, the door's token check) loads no cryptography
    and no HTTP client until a token is checked or a call is made: only what a plain session
    loads (issue 19)."""
    out = subprocess.run([sys.executable, "-c", MEMBER_PROBE], capture_output=True, text=True, timeout=60, check=True)
    third = json.loads(out.stdout.splitlines()[-1])
    assert "cryptography" not in third and "httpx" not in third
    assert set(third) <= set(PLAIN_THIRD_PARTY)


def test_a_token_check_loads_cryptography_when_it_runs() -> None:
    """The lazy import still verifies: a forged token is refused and cryptography is then loaded."""
    probe = (
        "import sys\n"
        "from murmur.formation.wire.edge_tokens import FormationKey, FormationTokenError, VerifyKey\n"
        "assert 'cryptography' not in sys.modules\n"
        "key = FormationKey.generate()\n"
        "fid = 'frm_' + '0' * 32\n"
        "token = key.mint(formation=fid, caller='a', callee='b')\n"
        "vk = VerifyKey.from_b64(key.verify_key().to_b64())\n"
        "assert vk.verify(token, formation=fid, member='b').caller == 'a'\n"
        "forged = token[:-4] + ('AAAA' if not token.endswith('AAAA') else 'BBBA')\n"
        "try:\n    vk.verify(forged, formation=fid, member='b')\nexcept FormationTokenError as e:\n"
        "    print(e.reason.value)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() in (["bad_signature"], ["malformed"])


GC_PROBE = """\
import gc, json, sys
import murmur.cli.run_session as rs
seen = {}
real = rs.run_prepared
def run_prepared(setup, **kw):
    seen["at_start"] = gc.isenabled()
    resume = kw["when_ready"]
    def when_ready():
        resume()
        seen["after_ready"] = gc.isenabled()
    kw["when_ready"] = when_ready
    return real(setup, **kw)
rs.run_prepared = run_prepared
from murmur.cli.mur import main
rc = main(["run", "--task", "hi"])
print(json.dumps({"rc": rc, "end": gc.isenabled(), **seen}))
"""


def gc_states(tmp_path: Path, *, with_capsule: bool) -> dict[str, object]:
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    if with_capsule:
        (capsule / "murmur.yaml").write_text(MANIFEST.format(extra=""))
        (capsule / "plan.yaml").write_text(PLAN)
    base = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    out = subprocess.run(
        [sys.executable, "-c", GC_PROBE], cwd=capsule, env={**base, "MURMUR_HOME": str(tmp_path / "home")},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    got: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return got


def test_start_up_runs_without_the_cyclic_collector_until_ready(tmp_path: Path) -> None:
    """``mur run`` pauses the cyclic collector for its start-up and resumes it with the
    readiness line; it is running again when the command returns."""
    got = gc_states(tmp_path, with_capsule=True)
    assert got == {"rc": 0, "end": True, "at_start": False, "after_ready": True}


def test_a_refused_start_resumes_the_cyclic_collector(tmp_path: Path) -> None:
    """A start refused before readiness (no manifest: E-MAN-004) leaves the collector running."""
    got = gc_states(tmp_path, with_capsule=False)
    assert got == {"rc": 1, "end": True}
