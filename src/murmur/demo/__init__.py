"""``mur demo``: the example audit formation, end to end (README, "What the demo just did").

The demo runs the capsules shipped in ``murmur/examples/audit/`` the way a user would by hand:

1. copy the example into a private directory (a temporary one, or ``--home DIR``) and build and
   install every capsule into a private ``MURMUR_HOME`` (``mur install -g``);
2. start ``mur-roost`` on a free loopback port with exactly one ``--spawn-allow`` name, the
   check desk's (the only top-level capsule that delegates);
3. start the check desk (``mur run --capsule local/audit-desk``): an ordinary session outside
   the formation, registered at mur-roost, on a public loopback door;
4. run the formation: ``mur run --roster <project> --task "audit PATH"`` with the desk's URL
   in ``AUDIT_DESK_URL`` (the ``checker`` member's one ``capabilities.env.allow`` name);
5. print progress on stderr as members come up and report (read from their traces), print
   the entry member's ``out/result.txt`` (the report) and its path, stop the desk and
   mur-roost, and exit with the formation's status.

Why the desk is outside the formation: a roster with any edge needs ``network.authentication``
on every member (E-ROS-006) and ``murmur.yaml`` refuses ``network.authentication`` beside a
non-empty ``capabilities.spawn.allow`` (E-MAN-003), so no member of a roster with edges can
delegate (spec/roster.md, "Admission order"; spec/manifest.md, the cross-field rules). The
checker member reaches the delegating desk over loopback HTTP instead.

Every process the demo starts runs in a process group of its own and is stopped and reaped
before the demo returns, whatever ends it: the end of the formation, Ctrl-C / SIGTERM /
SIGHUP (a second one freezes and SIGKILLs the whole tree at once, the formation's members and
the delegated child included, and only then removes a temporary demo directory), an error. A
small watchdog process holds the read end of a pipe only the demo writes to; if the demo itself
dies (even by SIGKILL), the watchdog reads EOF, stops every group the demo had started and
what those started, and then removes a temporary demo directory.

Modules: :mod:`~murmur.demo.layout` (options, bounds, directories, the target),
:mod:`~murmur.demo.commands` (the commands and their environment; pure),
:mod:`~murmur.demo.progress` (trace records to progress lines), :mod:`~murmur.demo.watchdog`,
:mod:`~murmur.demo.processes` (child processes), :mod:`~murmur.demo.sweep` (killing a whole
process tree), :mod:`~murmur.demo.run` (the run itself).
"""

from __future__ import annotations

from murmur.demo.layout import DemoOptions, DemoOutcome, Layout, Timers
from murmur.demo.run import DemoRun, demo, run_demo

__all__ = ["DemoOptions", "DemoOutcome", "DemoRun", "Layout", "Timers", "demo", "run_demo"]
