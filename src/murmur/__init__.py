"""murmur: a runtime for packaged AI agents ("capsules").

Layering (lowest first): ``diagnostics``/``ids``/``timing`` are leaves; ``manifest`` and
``registry`` build on them; ``roost``, ``session``, ``plan``, ``agent``, ``delegation`` and
``formation`` build on those; ``cli`` is the thin edge that maps commands to functions.
"""

__version__ = "0.1.0"
