"""Formations: rosters, admission, formation tokens, channels and the launcher.

Pure modules: :mod:`~murmur.formation.roster` (``roster.yaml`` schema, check 1),
:mod:`~murmur.formation.admission` (checks 2-8, ``W-ROS-001``, :class:`AdmittedRoster`),
:mod:`~murmur.formation.tokens` (``mft1`` Ed25519 tokens), :mod:`~murmur.formation.channel`
(formation channel lines), :mod:`~murmur.formation.scaffold` (``mur new --roster``),
:mod:`~murmur.formation.call_policy`, :mod:`~murmur.formation.offers` and
:mod:`~murmur.formation.reach` (``call-member``'s rules, answers and reach).

``call-member`` itself: :mod:`~murmur.formation.calls` (the engine) over
:mod:`~murmur.formation.addresses` (callees' door URLs) and :mod:`murmur.a2a`.
"""
