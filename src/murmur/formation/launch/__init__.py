"""The launcher side of a formation: the launch plan, the supervisors, member processes,
readiness, the outcome, formation directories, ``mur stop``.

Runs in the ``mur run --roster`` process; spec/formation.md. Member code does not import it
(``tests/test_layers.py``).
"""
