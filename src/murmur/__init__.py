"""murmur: a runtime for packaged AI agents ("capsules").

The packages are layered, pure decisions lowest and the command line on top; each package's
tier and what it may import are in ``spec/architecture.md`` (``tests/test_layers.py`` holds
the imports to it).
"""

__version__ = "0.1.0"
