"""Lazy re-exports for a package's public face (PEP 562 module ``__getattr__``).

A package whose modules are not all needed by every command names its public face in
``__all__`` and imports it only when first used, so ``from murmur.roost import RoostClient``
costs what ``from murmur.roost.client import RoostClient`` does and nothing more::

    if TYPE_CHECKING:
        from murmur.roost.client import RoostClient
    __all__ = ["RoostClient"]
    __getattr__ = lazy.face(__name__, {"client": ["RoostClient"]})

The ``TYPE_CHECKING`` imports give the type checker the same names; ``tests/test_faces.py``
keeps the two lists identical.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping


def face(package: str, exports: Mapping[str, Iterable[str]]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that imports each exported name on first use.

    Args:
        package (str): the package's ``__name__``.
        exports (Mapping[str, Iterable[str]]): submodule name (relative to ``package``) ->
            the names it provides to the face.

    Returns:
        Callable[[str], object]: the ``__getattr__``; it caches each name in the package's
        namespace and raises ``AttributeError`` for any other name (so ``from package import
        submodule`` still imports the submodule).
    """
    origin = {name: f"{package}.{module}" for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        module = origin.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # the import statement's own path (not importlib.import_module), so ``python -X
        # importtime`` lists the module under its own name instead of adding its time to
        # whichever module first used the name
        __import__(module)
        value = getattr(sys.modules[module], name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
