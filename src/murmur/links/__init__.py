"""Capsule links: any process a session started delegates by running a capsule's name.

Specification: ``spec/links.md``. :mod:`.stub` writes the links directory, :mod:`.peer`
decides who may ask, :mod:`.protocol` holds the request/answer shapes and the exit statuses,
:mod:`.context` the ``mur context`` text, :mod:`.service` the capability socket a session serves.

Other packages import what is in ``__all__`` from here; each name's module is imported on
first use (``mur context`` needs the text, not the socket).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.links.context import general_text
    from murmur.links.service import install_links

__all__ = ["general_text", "install_links"]

__getattr__ = lazy.face(__name__, {"context": ["general_text"], "service": ["install_links"]})
