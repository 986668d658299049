"""What a session tells the world about itself: its ``session_start`` fields, its readiness
object, its running record. Each is built from the setup (and the door's URL and credentials);
the session writes them.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from murmur import procstat
from murmur.procs import ReadyLine
from murmur.session.auth import BearerDoor, PublicDoor
from murmur.session.deadline import rfc3339
from murmur.session.running_record import RunningRecord
from murmur.session.setup import SessionSetup


def session_start_fields(setup: SessionSetup) -> dict[str, Any]:
    """The ``session_start`` record's fields (spec/trace.md ``session_start``), from the setup."""
    m = setup.manifest
    inf = m.inference
    caps = m.capabilities
    fields: dict[str, Any] = {
        "capsule_name": m.name,
        "capsule_version": m.version,
        "model": inf.model if inf else None,
        "max_turns": inf.max_turns if inf else None,
        "max_session_tokens": None,
        "capabilities": [k for k in ("network", "peer_fetch", "shell", "spawn", "env", "filesystem", "state") if getattr(caps, k) is not None],
        "tools_declared": [a.name for a in m.artifacts if a.runtime == "tool"],
        "containment_declared": caps.containment.value if caps.containment else "advisory",
        "containment_achieved": setup.containment.value,
        "workdir_exec": bool(caps.filesystem and caps.filesystem.workdir_exec),
        "resumed_from": None,
        "context_id": None,
        "workload": setup.workload_kind,
        "effective_grants": {
            "network_allow": list(m.network_allow),
            "shell_allow": list(m.shell_allow),
            "spawn_allow": list(m.spawn_allow),
            "env_allow": list(m.env_allow),
            "peer_tasks": m.accepts_peer_tasks,
        },
        "lifecycle": {
            "task_acceptance": setup.policy.acceptance.value,
            "queue_depth": setup.policy.queue_depth,
            "after_task": setup.policy.after_task.value,
        },
    }
    if setup.deadline is not None:
        fields["deadline"] = rfc3339(setup.deadline)
    fields.update(setup.trace_start_fields)
    if setup.lineage is not None:
        fields["lineage"] = setup.lineage
    return fields


def ready_line(setup: SessionSetup, url: str | None, auth: PublicDoor | BearerDoor) -> ReadyLine:
    """The typed readiness line (spec/session.md "Readiness"; tokens on an authenticated door).
    What a launcher reads back with :func:`murmur.procs.parse_ready_line`."""
    fields = dict(setup.readiness_fields)
    formation_id = fields.pop("formation_id", None) or setup.formation_id
    return ReadyLine(
        session_id=setup.session_id,
        url=url,
        name=setup.manifest.name,
        version=setup.manifest.version,
        pid=os.getpid(),
        workdir=str(setup.workdir),
        records_dir=str(setup.records.root),
        formation_id=formation_id,
        fields=fields,
        lineage=setup.lineage,
        tokens=dict(auth.tokens) if isinstance(auth, BearerDoor) else None,
    )


def readiness(setup: SessionSetup, url: str | None, auth: PublicDoor | BearerDoor) -> dict[str, Any]:
    """The ``--json`` readiness object: :func:`ready_line` as JSON (spec/session.md "Readiness")."""
    return ready_line(setup, url, auth).to_json()


def running_record(setup: SessionSetup, url: str | None, auth: PublicDoor | BearerDoor) -> RunningRecord:
    """The running record of this process's session (spec/session.md "Running records"); the
    operator token becomes ``door_token``, every other door credential ``credentials``."""
    tokens = dict(auth.tokens) if isinstance(auth, BearerDoor) else {}
    operator = tokens.pop("operator", None)
    return RunningRecord(
        session_id=setup.session_id,
        url=url or "",
        pid=os.getpid(),
        start_time=procstat.start_time(os.getpid()) or 0,
        name=setup.manifest.name,
        version=setup.manifest.version,
        workdir=str(setup.workdir),
        records_dir=str(setup.records.root),
        started_at=rfc3339(time.time()),
        formation_id=setup.formation_id,
        door_token=operator,
        credentials=tokens or None,
        **setup.running_fields,
        lineage=setup.lineage,
        delegations=dict(setup.delegation_counts),
    )


def dumps_line(obj: object) -> str:
    """Compact one-line JSON (the readiness line)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
