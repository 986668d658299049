"""What crosses between the launcher and its members: channel lines, formation tokens, the
environment names that place a ``mur run`` in a formation (pure).

spec/formation.md, spec/formation-tokens.md.
"""
