"""Rosters: ``roster.yaml``'s schema and loader, admission, the ``mur new --roster`` scaffold.

Runs in the launcher (and in ``mur agent who``); spec/roster.md.
"""
