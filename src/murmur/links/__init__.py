"""Capsule links: any process a session started delegates by running a capsule's name.

Specification: ``spec/links.md``. :mod:`.stub` writes the links directory, :mod:`.peer`
decides who may ask, :mod:`.protocol` holds the request/answer shapes and the exit statuses,
:mod:`.context` the ``mur context`` text, :mod:`.service` the capability socket a session serves.
"""
