"""Formations (seed 004): rosters, admission, formation tokens, channels and the launcher.

Pure modules: :mod:`~murmur.formation.roster` (``roster.yaml`` schema, check 1),
:mod:`~murmur.formation.admission` (checks 2-8, ``W-ROS-001``, :class:`AdmittedRoster`),
:mod:`~murmur.formation.tokens` (``mft1`` Ed25519 tokens), :mod:`~murmur.formation.channel`
(formation channel lines), :mod:`~murmur.formation.scaffold` (``mur new --roster``).
"""
