"""The member side of a formation: joining one, the member's calls to others, its door's
formation-token verifier.

Runs inside a member's session; spec/formation.md. It may not import :mod:`murmur.formation.launch`
(``tests/test_layers.py``).
"""
