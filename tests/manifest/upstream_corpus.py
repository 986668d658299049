"""The upstream manifest corpus (``tests/manifest/upstream/``) and the answer for each.

``Expect.stage`` is where the manifest is refused: ``load`` (the loader refuses it, so
``mur build`` and ``mur doctor`` both do), ``run`` (it loads and builds, but ``mur doctor``
and ``mur run`` refuse it), ``None`` (it builds and passes ``mur doctor``), or ``artifact``
(an artifact manifest that ``mur build`` packs as upstream does and ``mur doctor`` passes).
``absent`` names declared files the fixture's author does not have; ``installs`` names the
corpus artifacts (built and installed into the project store first) a capsule uses;
``page_files`` the files the page has its reader write beside the manifest (a prompt file;
a ``capsule.wasm`` is the page's bare module header, or the ``stand_in`` component for a
compiled one the fixture ships).
``codes`` are the refusal codes (or, when it passes, the warning codes). ``component`` marks
refusals because the manifest needs a WASM or native component this runtime does not run.

``run`` is how the example runs as its page says (``tests/manifest/test_upstream_runs.py``,
``mur run`` against a scripted provider standing in for the network): ``task`` (one task,
answered), ``script`` (a script capsule: its ``capsule.wasm`` invokes the installed tool),
``shell`` (the model runs a granted binary: a ``shell`` record), ``a2a`` (served: two tasks sent over A2A, answered in turn, then stopped),
``skill`` (the model calls the skill and gets ``skill.md``), ``fds`` (the fd-hygiene
check: the shell and native probes see no leaked descriptor), ``roost`` (a capsule that may
delegate: ``E-RUN-019`` with no mur-roost, where upstream runs it; a task, with one serving),
``cli`` (``transport: process``: the real agent CLI, its base URL pointing at the scripted
provider).
None: it does not run (``stage`` and ``codes`` say why).
"""

from __future__ import annotations

import attrs

UPSTREAM_COMMIT = "ed2318379886fd667bdc6a6430af9f0dd0d9c7c0"


@attrs.frozen
class Expect:
    file: str
    source: str
    stage: str | None
    codes: frozenset[str]
    component: bool = False
    host: str | None = None  # MURMUR_SANDBOX_HOST for the doctor run (what the host is made to lack)
    absent: tuple[str, ...] = ()
    installs: tuple[str, ...] = ()
    page_files: tuple[str, ...] = ()
    run: str | None = None
    stand_in: str | None = None  # the test component (tests/components/wat.py) for the author's capsule.wasm


def _e(file: str, source: str, stage: str | None, *codes: str, component: bool = False,
       host: str | None = None, absent: tuple[str, ...] = (), installs: tuple[str, ...] = (),
       page_files: tuple[str, ...] = (), run: str | None = None, stand_in: str | None = None) -> Expect:
    return Expect(file, source, stage, frozenset(codes), component, host, absent, installs, page_files, run,
                  stand_in)


_D = "docs/content/"
_F = "crates/murmur-cli/tests/fixtures/"
_SBR = _D + "reference/shell-binary-reachability-manual-verification.md"
_WEL = _D + "reference/workdir-exec-landlock-manual-verification.md"

CORPUS: tuple[Expect, ...] = (
    # agent capsules with a built-in driver: build and pass
    _e("docs-capsules-13.yaml", _D + "concepts/capsules.md:13", None, run="shell"),
    _e("docs-deploy-capsule-cloud-45.yaml", _D + "how-to/deploy-capsule-cloud.md:45", None, "W-MAN-001", run="task"),
    # artifact manifests (tools, hooks, skills, native binaries): packed as upstream packs them
    _e("docs-manifest-25.yaml", _D + "reference/manifest.md:25", "artifact"),
    _e("docs-package-skill-artifact-142.yaml", _D + "how-to/package-skill-artifact.md:142", "artifact"),
    _e("docs-package-skill-artifact-158.yaml", _D + "how-to/package-skill-artifact.md:158", "artifact"),
    _e("docs-subprocess-fd-hygiene-verification-228.yaml", _D + "reference/subprocess-fd-hygiene-verification.md:228", "artifact"),
    _e("fixture-graduation-tool.yaml", _F + "graduation/tool/murmur.yaml", "artifact"),
    _e("fixture-happy.yaml", _F + "happy/murmur.yaml", "artifact"),
    _e("fixture-native-tool.yaml", _F + "native-tool/murmur.yaml", "artifact", "W-SEC-019"),
    _e("fixture-skill-happy.yaml", _F + "skill-happy/murmur.yaml", "artifact"),
    # artifact manifests upstream's build refuses too: a wasm role with no root .wasm to pack
    # (the hook examples show the manifest alone; `runtime: native` is packed as wasm upstream)
    _e("docs-hooks-54.yaml", _D + "concepts/hooks.md:54", "load", "E-BLD-003", component=True),
    _e("docs-session-loop-87.yaml", _D + "concepts/session-loop.md:87", "load", "E-BLD-003", component=True),
    _e("docs-python-native-105.yaml", _D + "language-guides/python-native.md:105", "load", "E-BLD-003", component=True),
    _e("fixture-skill-missing-skill-md.yaml", _F + "skill-missing-skill-md/murmur.yaml", "load", "E-IO-003",
       component=True, absent=("skill.md",)),
    # capsules that use wasm/native/tool/hook artifacts
    _e("docs-python-206.yaml", _D + "language-guides/python.md:206", "load", "E-MAN-005", component=True),
    _e("docs-python-native-134.yaml", _D + "language-guides/python-native.md:134", "load", "E-MAN-005", component=True),
    _e("docs-subprocess-fd-hygiene-verification-250.yaml", _D + "reference/subprocess-fd-hygiene-verification.md:250", None,
       installs=("docs-subprocess-fd-hygiene-verification-228.yaml",), run="fds"),
    # upstream's graduation capsule: its capsule.wasm (unlisted) invokes the graduation tool
    _e("fixture-graduation-capsule.yaml", _F + "graduation/capsule/murmur.yaml", None,
       installs=("fixture-graduation-tool.yaml",), page_files=("capsule.wasm",), stand_in="graduation",
       run="script"),
    # the reference "supported shape": its threaded conversation loads; its tool and hook do not run
    _e("docs-manifest-42.yaml", _D + "reference/manifest.md:42", "run", "E-REG-001"),
    # an upstream driver component
    _e("docs-network-namespace-egress-proxy-manual-ve-103.yaml", _D + "reference/network-namespace-egress-proxy-manual-verification.md:103", "run", "E-RUN-006", component=True),
    # capsules with no workload: upstream runs their own capsule.wasm
    # a script capsule (no workload, one root .wasm): the stand-in bytes are no component
    _e("docs-python-173.yaml", _D + "language-guides/python.md:173", "run", "E-CMP-002", component=True),
    _e("docs-shell-binary-reachability-manual-verific-129.yaml", _SBR + ":129", "run", "E-CAP-003", host="no-mountns", page_files=("capsule.wasm",)),
    _e("docs-shell-binary-reachability-manual-verific-175.yaml", _SBR + ":175", "run", "E-CAP-003", host="no-mountns", page_files=("capsule.wasm",)),
    _e("docs-shell-binary-reachability-manual-verific-199.yaml", _SBR + ":199", "run", "E-CAP-003", host="no-mountns", page_files=("capsule.wasm",)),
    _e("docs-shell-binary-reachability-manual-verific-236.yaml", _SBR + ":236", "run", "E-CAP-003", host="no-mountns", page_files=("capsule.wasm",)),
    _e("docs-shell-binary-reachability-manual-verific-265.yaml", _SBR + ":265", "run", "E-CAP-003", host="no-mountns", page_files=("capsule.wasm",)),
    _e("docs-shell-binary-reachability-manual-verific-308.yaml", _SBR + ":308", "run", "E-CAP-003", host="no-mountns", page_files=("capsule.wasm",)),
    _e("docs-staged-runtime-bind-mount-manual-verific-223.yaml", _D + "reference/staged-runtime-bind-mount-manual-verification.md:223", "run", "E-CAP-003", host="no-mountns", page_files=("capsule.wasm",)),
    _e("docs-workdir-exec-landlock-manual-verificatio-270-1.yaml", _WEL + ":270 (we-default)", "run", "E-CMP-002", component=True, page_files=("capsule.wasm",)),
    _e("docs-workdir-exec-landlock-manual-verificatio-270-2.yaml", _WEL + ":270 (we-true)", "run", "E-CMP-002", component=True, page_files=("capsule.wasm",)),
    _e("docs-workdir-exec-landlock-manual-verificatio-270-3.yaml", _WEL + ":270 (we-scoped)", "run", "E-CAP-003", host="no-landlock", page_files=("capsule.wasm",)),
    # a containment floor a host without mount namespaces cannot back (upstream refuses it there too)
    _e("docs-sealed-containment-manual-verification-122.yaml", _D + "reference/sealed-containment-manual-verification.md:122", "run", "E-CAP-003",
       host="no-mountns"),
    # invalid upstream too
    _e("docs-resource-limits-manual-verification-136.yaml", _D + "reference/resource-limits-manual-verification.md:136", "load", "E-MAN-001"),
    _e("fixture-malformed.yaml", _F + "malformed/murmur.yaml", "load", "E-MAN-002"),
    _e("fixture-missing-name.yaml", _F + "missing-name/murmur.yaml", "load", "E-MAN-001"),
    _e("fixture-missing-version.yaml", _F + "missing-version/murmur.yaml", "load", "E-MAN-001"),
)

# The tabbed examples (``=== "Anthropic"`` / ``"OpenAI"`` / ``"DeepSeek"``): one manifest per
# provider tab, each kept as the page renders it.
_HOW = _D + "how-to/"
_TABBED: tuple[Expect, ...] = (
    # getting-started/quickstart.md: the minimal agent, and the subscription (CLI) variant
    _e("docs-quickstart-22.yaml", _D + "getting-started/quickstart.md:22", None, run="task"),
    _e("docs-quickstart-47.yaml", _D + "getting-started/quickstart.md:47", None, run="task"),
    _e("docs-quickstart-72.yaml", _D + "getting-started/quickstart.md:72", None, run="task"),
    _e("docs-quickstart-189.yaml", _D + "getting-started/quickstart.md:189", None, run="cli"),
    _e("docs-quickstart-201.yaml", _D + "getting-started/quickstart.md:201", None, run="cli"),
    # how-to pages
    _e("docs-capsule-system-prompt-21.yaml", _HOW + "capsule-system-prompt.md:21", None, run="task"),
    _e("docs-capsule-system-prompt-51.yaml", _HOW + "capsule-system-prompt.md:51", None, run="task"),
    _e("docs-capsule-system-prompt-81.yaml", _HOW + "capsule-system-prompt.md:81", None, run="task"),
    _e("docs-capsules-a2a-messaging-40.yaml", _HOW + "capsules-a2a-messaging.md:40", None, run="a2a"),
    _e("docs-capsules-a2a-messaging-73.yaml", _HOW + "capsules-a2a-messaging.md:73", None, run="a2a"),
    _e("docs-capsules-a2a-messaging-106.yaml", _HOW + "capsules-a2a-messaging.md:106", None, run="a2a"),
    _e("docs-capsules-a2a-messaging-182.yaml", _HOW + "capsules-a2a-messaging.md:182", None, run="task"),
    _e("docs-capsules-a2a-messaging-208.yaml", _HOW + "capsules-a2a-messaging.md:208", None, run="task"),
    _e("docs-capsules-a2a-messaging-234.yaml", _HOW + "capsules-a2a-messaging.md:234", None, run="task"),
    _e("docs-different-ways-to-run-murmur-21.yaml", _HOW + "different-ways-to-run-murmur.md:21", None, run="task"),
    _e("docs-different-ways-to-run-murmur-46.yaml", _HOW + "different-ways-to-run-murmur.md:46", None, run="task"),
    _e("docs-different-ways-to-run-murmur-71.yaml", _HOW + "different-ways-to-run-murmur.md:71", None, run="task"),
    _e("docs-generate-manifest-250.yaml", _HOW + "generate-manifest.md:250", None, run="roost"),
    _e("docs-generate-manifest-281.yaml", _HOW + "generate-manifest.md:281", None, run="roost"),
    _e("docs-generate-manifest-312.yaml", _HOW + "generate-manifest.md:312", None, run="roost"),
    _e("docs-lock-down-capsule-31.yaml", _HOW + "lock-down-capsule.md:31", None, run="shell"),
    _e("docs-lock-down-capsule-59.yaml", _HOW + "lock-down-capsule.md:59", None, run="shell"),
    _e("docs-lock-down-capsule-87.yaml", _HOW + "lock-down-capsule.md:87", None, run="shell"),
    _e("docs-long-running-capsule-22.yaml", _HOW + "long-running-capsule.md:22", None, run="a2a"),
    _e("docs-long-running-capsule-53.yaml", _HOW + "long-running-capsule.md:53", None, run="a2a"),
    _e("docs-long-running-capsule-84.yaml", _HOW + "long-running-capsule.md:84", None, run="a2a"),
    _e("docs-topology-view-90.yaml", _HOW + "topology-view.md:90", None, run="task"),
    _e("docs-topology-view-118.yaml", _HOW + "topology-view.md:118", None, run="task"),
    _e("docs-topology-view-146.yaml", _HOW + "topology-view.md:146", None, run="task"),
    _e("docs-topology-view-266.yaml", _HOW + "topology-view.md:266", None, run="a2a"),
    _e("docs-topology-view-298.yaml", _HOW + "topology-view.md:298", None, run="a2a"),
    _e("docs-topology-view-330.yaml", _HOW + "topology-view.md:330", None, run="a2a"),
    # a skill artifact the page builds (package-skill-artifact.md:158) and the capsule using it
    _e("docs-package-skill-artifact-217.yaml", _HOW + "package-skill-artifact.md:217", None,
       installs=("docs-package-skill-artifact-158.yaml",), run="skill"),
    _e("docs-package-skill-artifact-248.yaml", _HOW + "package-skill-artifact.md:248", None,
       installs=("docs-package-skill-artifact-158.yaml",), run="skill"),
    _e("docs-package-skill-artifact-279.yaml", _HOW + "package-skill-artifact.md:279", None,
       installs=("docs-package-skill-artifact-158.yaml",), run="skill"),
    # upstream's default artifacts (WASM tools and hooks from its registry): not installed here
    _e("docs-agent-eval-score-20.yaml", _HOW + "agent-eval-score.md:20", "run", "E-REG-001"),
    _e("docs-agent-eval-score-73.yaml", _HOW + "agent-eval-score.md:73", "run", "E-REG-001"),
    _e("docs-agent-eval-score-126.yaml", _HOW + "agent-eval-score.md:126", "run", "E-REG-001"),
    _e("docs-context-compaction-24.yaml", _HOW + "context-compaction.md:24", "run", "E-REG-001"),
    _e("docs-context-compaction-55.yaml", _HOW + "context-compaction.md:55", "run", "E-REG-001"),
    _e("docs-context-compaction-86.yaml", _HOW + "context-compaction.md:86", "run", "E-REG-001"),
    _e("docs-generate-manifest-154.yaml", _HOW + "generate-manifest.md:154", "run", "E-REG-001"),
    _e("docs-generate-manifest-185.yaml", _HOW + "generate-manifest.md:185", "run", "E-REG-001"),
    _e("docs-generate-manifest-216.yaml", _HOW + "generate-manifest.md:216", "run", "E-REG-001"),
    _e("docs-grafana-tempo-spans-121.yaml", _HOW + "grafana-tempo-spans.md:121", "run", "E-REG-001"),
    _e("docs-grafana-tempo-spans-156.yaml", _HOW + "grafana-tempo-spans.md:156", "run", "E-REG-001"),
    _e("docs-grafana-tempo-spans-191.yaml", _HOW + "grafana-tempo-spans.md:191", "run", "E-REG-001"),
    _e("docs-hitl-request-input-20.yaml", _HOW + "hitl-request-input.md:20", "run", "E-REG-001"),
    _e("docs-hitl-request-input-55.yaml", _HOW + "hitl-request-input.md:55", "run", "E-REG-001"),
    _e("docs-hitl-request-input-90.yaml", _HOW + "hitl-request-input.md:90", "run", "E-REG-001"),
    _e("docs-task-decomposition-single-capsule-27.yaml", _HOW + "task-decomposition-single-capsule.md:27", "run",
       "E-REG-001", page_files=("instructions.md",)),
    _e("docs-task-decomposition-single-capsule-75.yaml", _HOW + "task-decomposition-single-capsule.md:75", "run",
       "E-REG-001", page_files=("instructions.md",)),
    _e("docs-task-decomposition-single-capsule-123.yaml", _HOW + "task-decomposition-single-capsule.md:123", "run",
       "E-REG-001", page_files=("instructions.md",)),
)
CORPUS = CORPUS + _TABBED
