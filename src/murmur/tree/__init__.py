"""The process tree: lineage, spawn sets, the host journal, ``mur ps --tree``, the cascade.

Specification: ``spec/tree.md``.
"""
