"""Manifest faults before they become diagnostics: a code, a message and a field path.

A :class:`Fault` names *where* by a field path (``("capabilities", "network", "allow", 2)``)
rather than by a line, so the pure rule checks need no knowledge of files; :func:`locate`
turns a path into the ``(line, col)`` of the located YAML value it names.
"""

from __future__ import annotations

from murmur.manifest.yamltext import YMap, YSeq, position

FieldPath = tuple[str | int, ...]
"""Keys and list indices from the document root down to a value."""


class Fault(Exception):
    """One manifest fault (raised inside converter hooks, returned by rule checks).

    Args:
        code (str): a diagnostic code from the catalogue.
        message (str): what is wrong; never a secret value.
        hint (str | None): what to change.
        path (FieldPath): where, from the root (hooks give it relative to their value).
        at_key (bool): point at the last key of ``path`` rather than at its value.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        hint: str | None = None,
        path: FieldPath = (),
        at_key: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.path = path
        self.at_key = at_key

    def at(self, prefix: FieldPath) -> Fault:
        """This fault with ``prefix`` put in front of its path."""
        return Fault(self.code, self.message, hint=self.hint, path=prefix + self.path,
                     at_key=self.at_key)


class FaultGroup(Exception):
    """Several faults from one hook, each under a relative path."""

    def __init__(self, items: list[tuple[FieldPath, BaseException]]) -> None:
        super().__init__(f"{len(items)} faults")
        self.items = items


def locate(root: object, path: FieldPath, *, at_key: bool = False) -> tuple[int | None, int | None]:
    """The (line, col) of the value ``path`` names in a located tree.

    Walks as far as the path exists; a missing step points at the deepest value found.
    With ``at_key`` the last step's key position is used (unknown keys, required fields
    missing from a mapping: the path then ends at the mapping's own key).
    """
    node = root
    best = position(root)
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, YMap) and isinstance(step, str):
            if step in node.key_pos and ((at_key and last) or step not in node):
                return node.key_pos[step]
            if step not in node:
                return best
            node = node[step]
        elif isinstance(node, YSeq) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            return best
        pos = position(node)
        if pos[0] is not None:
            best = pos
    return best
