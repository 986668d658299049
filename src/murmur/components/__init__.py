"""Hosting WebAssembly components: upstream's tools, drivers, hooks and script capsules.

Only sessions that have a component import the modules that import ``wasmtime``
(:mod:`murmur.components.engine`, :mod:`murmur.components.host`); the pure parts
(:mod:`.versions`, :mod:`.inspect`, :mod:`.limits`) import nothing heavy.
Specification: ``spec/components.md``.
"""
