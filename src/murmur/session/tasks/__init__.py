"""A task's life in one place (spec/session.md "Tasks", "Task states").

* :mod:`~murmur.session.tasks.book` — the tasks, their event logs, the one place a task changes
  state, and what the book holds of finished tasks;
* :mod:`~murmur.session.tasks.held` — a spilled answer, read back from the records directory;
* :mod:`~murmur.session.tasks.desk` — admission and the one record of which task runs;
* :mod:`~murmur.session.tasks.lanes` — which queued task runs next;
* :mod:`~murmur.session.tasks.runner` — one task at a time on the workload, in its own scope.

``Task``, ``TaskBook``, ``StreamEvent`` and ``InputSlot`` are importable from here too (what
``murmur.session.tasks`` offered when it was one module).
"""

from murmur.session.tasks.book import InputSlot, StreamEvent, Task, TaskBook

__all__ = ["InputSlot", "StreamEvent", "Task", "TaskBook"]
