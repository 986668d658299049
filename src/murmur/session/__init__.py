"""One capsule session: its door, tasks, lifecycle, trace, records and wind-down.

Specification: ``spec/session.md`` (the session), ``spec/door.md`` (its A2A door),
``spec/trace.md`` (its trace). :class:`Session` (:mod:`murmur.session.session`) wires the
parts; :mod:`murmur.session.setup` says what it is built from and its extension points.

Other packages import what is in ``__all__`` from here; each name's module is imported on
first use (``mur ps`` needs the running records, not the door).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.session.auth import AuthRefusal, Principal, invalid_token
    from murmur.session.completion_hook import CompletionRequest, CompletionVerdict
    from murmur.session.console import Console
    from murmur.session.contribution import Contribution, ServicesLayer, add_contributions
    from murmur.session.deadline import on_trio_clock, parse_deadline, rfc3339
    from murmur.session.describe import dumps_line
    from murmur.session.lifecycle import BUSY_MESSAGE, Policy, parse_idle_timeout
    from murmur.session.origin import ORIGIN_HEADER, TRUST_HEADER
    from murmur.session.records import create_records, records_dir_for, records_root
    from murmur.session.running_record import RunningRecord, list_running
    from murmur.session.session import Session
    from murmur.session.setup import SessionHandle, SessionSetup, SessionSummary, WindDownControl
    from murmur.session.signals import (
        CASCADE_SIGNAL,
        SESSION_SIGNALS,
        EarlySignals,
        counted,
        hold_signals_to_exit,
        install_early_handlers,
        signal_watcher,
    )
    from murmur.session.tasks.book import Task
    from murmur.session.tasks.runner import shell_env
    from murmur.session.trace import TraceWriteError
    from murmur.session.winddown import (
        WindDown,
        add_forced_exit_hook,
        cascade_wind_down,
        deadline_wind_down,
        forced_exit,
        lifeline_wind_down,
        signal_wind_down,
    )
    from murmur.session.wire import COMPLETION_NOT_AWAITED, RpcError

__all__ = [
    "BUSY_MESSAGE",
    "CASCADE_SIGNAL",
    "COMPLETION_NOT_AWAITED",
    "ORIGIN_HEADER",
    "SESSION_SIGNALS",
    "TRUST_HEADER",
    "AuthRefusal",
    "CompletionRequest",
    "CompletionVerdict",
    "Console",
    "Contribution",
    "EarlySignals",
    "Policy",
    "Principal",
    "RpcError",
    "RunningRecord",
    "ServicesLayer",
    "Session",
    "SessionHandle",
    "SessionSetup",
    "SessionSummary",
    "Task",
    "TraceWriteError",
    "WindDown",
    "WindDownControl",
    "add_contributions",
    "add_forced_exit_hook",
    "cascade_wind_down",
    "counted",
    "create_records",
    "deadline_wind_down",
    "dumps_line",
    "forced_exit",
    "hold_signals_to_exit",
    "install_early_handlers",
    "invalid_token",
    "lifeline_wind_down",
    "list_running",
    "on_trio_clock",
    "parse_deadline",
    "parse_idle_timeout",
    "records_dir_for",
    "records_root",
    "rfc3339",
    "shell_env",
    "signal_watcher",
    "signal_wind_down",
]

__getattr__ = lazy.face(__name__, {
    "auth": ["AuthRefusal", "Principal", "invalid_token"],
    "console": ["Console"],
    "deadline": ["on_trio_clock", "parse_deadline", "rfc3339"],
    "describe": ["dumps_line"],
    "completion_hook": ["CompletionRequest", "CompletionVerdict"],
    "contribution": ["Contribution", "ServicesLayer", "add_contributions"],
    "lifecycle": ["BUSY_MESSAGE", "Policy", "parse_idle_timeout"],
    "origin": ["ORIGIN_HEADER", "TRUST_HEADER"],
    "records": ["create_records", "records_dir_for", "records_root"],
    "tasks.runner": ["shell_env"],
    "running_record": ["RunningRecord", "list_running"],
    "session": ["Session"],
    "setup": ["SessionHandle", "SessionSetup", "SessionSummary", "WindDownControl"],
    "signals": [
        "CASCADE_SIGNAL", "SESSION_SIGNALS", "EarlySignals", "counted", "hold_signals_to_exit",
        "install_early_handlers", "signal_watcher",
    ],
    "tasks.book": ["Task"],
    "trace": ["TraceWriteError"],
    "winddown": [
        "WindDown",
        "add_forced_exit_hook",
        "cascade_wind_down",
        "deadline_wind_down",
        "forced_exit",
        "lifeline_wind_down",
        "signal_wind_down",
    ],
    "wire": ["COMPLETION_NOT_AWAITED", "RpcError"],
})
