"""The table of malformed manifests: each maps to the exact code and line of its first fault.

Shared by the loader tests (in process) and the CLI tests (real ``mur build`` subprocesses).
"""

from __future__ import annotations

import attrs

HEAD = "name: demo\nversion: 0.1.0\n"  # lines 1-2 of most cases


@attrs.frozen
class Case:
    """A malformed manifest, the code it must produce, and the line (1-based) it points at."""

    id: str
    text: str
    code: str
    line: int


CASES: list[Case] = [
    # --- YAML shape (E-MAN-002) ---------------------------------------------------------
    Case("syntax-unclosed-flow", "name: demo\nversion: [0.1\n", "E-MAN-002", 3),
    Case("not-a-mapping", "- name: demo\n", "E-MAN-002", 1),
    Case("empty-document", "", "E-MAN-002", 1),
    Case("scalar-document", "just text\n", "E-MAN-002", 1),
    Case("two-documents", HEAD + "---\nname: other\n", "E-MAN-002", 3),
    Case("duplicate-key", HEAD + "name: again\n", "E-MAN-002", 3),
    Case("bad-indentation", "name: demo\n  version: 0.1.0\n", "E-MAN-002", 2),
    Case("tab-indent", "name: demo\nversion: 0.1.0\ncapabilities:\n\tshell: {}\n", "E-MAN-002", 4),
    # --- required fields (E-MAN-001) ----------------------------------------------------
    Case("missing-name", "version: 0.1.0\n", "E-MAN-001", 1),
    Case("missing-version", "name: demo\n", "E-MAN-001", 1),
    Case("name-without-value", "name:\nversion: 0.1.0\n", "E-MAN-001", 1),
    Case("artifact-missing-name", HEAD + "artifacts:\n  - version: 1.0.0\n", "E-MAN-001", 4),
    Case("artifact-missing-version", HEAD + "artifacts:\n  - name: helper\n", "E-MAN-001", 4),
    Case("process-without-command", HEAD + "inference:\n  transport: process\n", "E-MAN-001", 3),
    # --- identity -----------------------------------------------------------------------
    Case("name-uppercase", "name: Demo\nversion: 0.1.0\n", "E-BLD-001", 1),
    Case("name-leading-dash", "name: -demo\nversion: 0.1.0\n", "E-BLD-001", 1),
    Case("name-underscore", "name: my_capsule\nversion: 0.1.0\n", "E-BLD-001", 1),
    Case("name-too-long", f"name: {'a' * 101}\nversion: 0.1.0\n", "E-BLD-001", 1),
    Case("name-is-list", "name: [demo]\nversion: 0.1.0\n", "E-MAN-003", 1),
    Case("version-latest", "name: demo\nversion: latest\n", "E-REG-004", 2),
    Case("version-stable", "name: demo\nversion: stable\n", "E-REG-004", 2),
    Case("version-blank", "name: demo\nversion: ''\n", "E-MAN-003", 2),
    Case("version-space", "name: demo\nversion: 1 0\n", "E-MAN-003", 2),
    Case("version-mapping", "name: demo\nversion: {major: 1}\n", "E-MAN-003", 2),
    # --- unknown keys -------------------------------------------------------------------
    Case("unknown-top-key", HEAD + "descripton: typo\n", "E-MAN-003", 3),
    Case("unknown-nested-key", HEAD + "capabilities:\n  shell:\n    alow: [echo]\n", "E-MAN-003", 5),
    Case("unknown-lifecycle-key", HEAD + "lifecycle:\n  conversaton: stateless\n", "E-MAN-003", 4),
    Case("unknown-conversation", HEAD + "lifecycle:\n  conversation: forked\n", "E-MAN-003", 4),
    Case("record-not-on-off", HEAD + "context:\n  record: sometimes\n", "E-MAN-003", 4),
    # --- capabilities -------------------------------------------------------------------
    Case("allow-ftp", HEAD + "capabilities:\n  network:\n    allow:\n      - ftp://example.com\n",
         "E-CAP-001", 6),
    Case("allow-url-path", HEAD + "capabilities:\n  network:\n    allow: [https://example.com/v1]\n",
         "E-CAP-001", 5),
    Case("allow-bad-port", HEAD + "capabilities:\n  network:\n    allow: ['example.com:70000']\n",
         "E-CAP-001", 5),
    Case("allow-bad-host", HEAD + "capabilities:\n  network:\n    allow: ['exa mple.com']\n",
         "E-CAP-001", 5),
    Case("allow-not-list", HEAD + "capabilities:\n  network:\n    allow: example.com\n",
         "E-MAN-003", 5),
    Case("peer-fetch-empty", HEAD + "capabilities:\n  peer_fetch:\n    allow: []\n", "E-MAN-003", 5),
    Case("peer-fetch-query", HEAD + "capabilities:\n  peer_fetch:\n    allow: ['https://h?x=1']\n",
         "E-CAP-001", 5),
    Case("unix-sockets-yes", HEAD + "capabilities:\n  network:\n    unix_sockets: yes\n",
         "E-MAN-003", 5),
    Case("scope-absolute", HEAD + "capabilities:\n  filesystem:\n    scope: /etc\n", "E-CAP-002", 5),
    Case("scope-escapes", HEAD + "capabilities:\n  filesystem:\n    scope: a/../../b\n", "E-CAP-002", 5),
    Case("scope-drive", HEAD + "capabilities:\n  filesystem:\n    scope: 'C:\\data'\n", "E-CAP-002", 5),
    Case("workdir-exec-text", HEAD + "capabilities:\n  filesystem:\n    workdir_exec: 'true'\n",
         "E-MAN-003", 5),
    Case("store-slash", HEAD + "capabilities:\n  state:\n    store: a/b\n", "E-CAP-009", 5),
    Case("store-dot", HEAD + "capabilities:\n  state:\n    store: .hidden\n", "E-CAP-009", 5),
    Case("store-dotdot", HEAD + "capabilities:\n  state:\n    store: '..'\n", "E-CAP-009", 5),
    Case("shell-empty-block", HEAD + "capabilities:\n  shell: {}\n", "E-MAN-003", 4),
    Case("shell-empty-allow", HEAD + "capabilities:\n  shell:\n    allow: []\n", "E-MAN-003", 5),
    Case("shell-path", HEAD + "capabilities:\n  shell:\n    allow: [/bin/echo]\n", "E-MAN-003", 5),
    Case("baseline-env-assign", HEAD + "capabilities:\n  shell:\n    allow: [echo]\n"
         "    baseline_env: ['PATH=/bin']\n", "E-MAN-003", 6),
    Case("env-allow-bad", HEAD + "capabilities:\n  env:\n    allow: [MY-VAR]\n", "E-MAN-003", 5),
    Case("spawn-allow-bad", HEAD + "capabilities:\n  spawn:\n    allow: [Worker]\n", "E-MAN-003", 5),
    Case("containment-unknown", HEAD + "capabilities:\n  containment: strict\n", "E-MAN-003", 4),
    # --- artifacts ----------------------------------------------------------------------
    Case("artifact-reserved", HEAD + "artifacts:\n  - name: delegate-task\n    version: 1.0.0\n",
         "E-CAP-013", 4),
    Case("artifact-reserved-call-member", HEAD + "artifacts:\n  - {name: call-member, version: '1'}\n",
         "E-CAP-013", 4),
    Case("artifact-runtime-wasm", HEAD + "artifacts:\n  - name: t\n    version: 1.0.0\n"
         "    runtime: wasm\n", "E-MAN-005", 6),
    Case("artifact-source-not-local", HEAD + "artifacts:\n  - name: t\n    source: ./t\n",
         "E-MAN-003", 5),
    Case("artifacts-not-list", HEAD + "artifacts: {name: t}\n", "E-MAN-003", 3),
    # --- inference ----------------------------------------------------------------------
    Case("both-prompts", HEAD + "inference:\n  system_prompt: be brief\n  system_prompt_file: p.md\n",
         "E-MAN-003", 5),
    Case("http-with-command", HEAD + "inference:\n  transport: http\n  command: codex\n",
         "E-MAN-003", 5),
    Case("process-with-driver", HEAD + "inference:\n  transport: process\n  command: codex\n"
         "  max_tokens: 100\n", "E-MAN-003", 6),
    Case("process-endpoint-http-remote", HEAD + "inference:\n  transport: process\n  command: claude\n"
         "  endpoint: http://api.example.com\n", "E-MAN-003", 6),
    Case("process-protocol-unknown", HEAD + "inference:\n  transport: process\n  command: claude\n"
         "  protocol: gemini\n", "E-MAN-003", 6),
    Case("http-with-protocol", HEAD + "inference:\n  transport: http\n  protocol: stdio\n",
         "E-MAN-003", 5),
    Case("endpoint-http-remote", HEAD + "inference:\n  endpoint: http://api.example.com/v1\n",
         "E-MAN-003", 4),
    Case("endpoint-schemeless", HEAD + "inference:\n  endpoint: api.example.com\n", "E-MAN-003", 4),
    Case("max-turns-zero", HEAD + "inference:\n  max_turns: 0\n", "E-MAN-003", 4),
    Case("max-tokens-text", HEAD + "inference:\n  max_tokens: lots\n", "E-MAN-003", 4),
    Case("max-turns-float", HEAD + "inference:\n  max_turns: 1.5\n", "E-MAN-003", 4),
    Case("transport-unknown", HEAD + "inference:\n  transport: grpc\n", "E-MAN-003", 4),
    Case("driver-config-list", HEAD + "inference:\n  driver:\n    artifact: murmur-driver-openai\n"
         "    config: [a]\n", "E-MAN-003", 6),
    Case("prompt-file-escapes", HEAD + "inference:\n  system_prompt_file: ../secret.md\n",
         "E-MAN-003", 4),
    Case("inference-is-list", HEAD + "inference: [model]\n", "E-MAN-003", 3),
    # --- workload -----------------------------------------------------------------------
    Case("plan-and-inference", HEAD + "plan: plan.yaml\ninference:\n  model: m\n", "E-MAN-003", 4),
    Case("plan-absolute", HEAD + "plan: /etc/plan.yaml\n", "E-MAN-003", 3),
    # --- lifecycle ----------------------------------------------------------------------
    Case("acceptance-unknown", HEAD + "lifecycle:\n  task_acceptance: many\n", "E-MAN-003", 4),
    Case("after-task-unknown", HEAD + "lifecycle:\n  after_task: never\n", "E-MAN-003", 4),
    Case("queue-depth-negative", HEAD + "lifecycle:\n  queue_depth: -1\n", "E-MAN-003", 4),
    Case("queue-depth-quoted", HEAD + "lifecycle:\n  queue_depth: '3'\n", "E-MAN-003", 4),
    Case("delegation-deadline-zero", HEAD + "lifecycle:\n  delegation_deadline_secs: 0\n",
         "E-MAN-003", 4),
    # --- exports, authentication --------------------------------------------------------
    Case("peer-tasks-quoted-bool", HEAD + "exports:\n  peer_tasks:\n    accept: 'true'\n",
         "E-MAN-003", 5),
    Case("auth-beside-spawn", HEAD + "capabilities:\n  spawn:\n    allow: [worker]\n"
         "network:\n  authentication:\n    scheme: bearer\n", "E-MAN-003", 7),
    Case("auth-scheme-basic", HEAD + "network:\n  authentication:\n    scheme: basic\n",
         "E-MAN-003", 5),
    Case("auth-credential-colon", HEAD + "network:\n  authentication:\n    credentials:\n"
         "      'a:b': {scopes: [SendMessage]}\n", "E-MAN-003", 6),
    Case("auth-scope-old-name", HEAD + "network:\n  authentication:\n    credentials:\n"
         "      reviewer:\n        scopes: [message/send]\n", "E-MAN-003", 7),
    Case("auth-credentials-list", HEAD + "network:\n  authentication:\n    credentials: [a]\n",
         "E-MAN-003", 5),
    # --- trace.retain -------------------------------------------------------------------
    Case("retain-bare", HEAD + "trace:\n  retain:\n", "E-MAN-003", 4),
    Case("retain-empty-map", HEAD + "trace:\n  retain: {}\n", "E-MAN-003", 4),
    Case("retain-zero-sessions", HEAD + "trace:\n  retain:\n    max_sessions: 0\n", "E-MAN-003", 5),
    Case("retain-bad-age", HEAD + "trace:\n  retain:\n    max_age: 10 days\n", "E-MAN-003", 5),
    Case("retain-zero-age", HEAD + "trace:\n  retain:\n    max_age: 0d\n", "E-MAN-003", 5),
]
