"""Callees' door URLs as they arrive on the formation channel, and the address records name.

Specification: ``spec/formation.md`` "`call-member`". A real door URL (loopback, a
port chosen at launch) is only ever used to send; every record, result and reason names the
member's virtual address :func:`virtual_address` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import trio


def virtual_address(member: str) -> str:
    """A member's virtual address, the only address records and messages name."""
    return f"http://{member}.formation.invalid"


class AddressBook:
    """Callees' door URLs as they arrive on the formation channel.

    :meth:`update` may be called before Trio runs (the first channel read happens while the
    session is prepared); :meth:`wait` is called in Trio.
    """

    def __init__(self, callees: Iterable[str]) -> None:
        self.callees = tuple(callees)
        self._urls: dict[str, str] = {}
        self._changed: trio.Event | None = None

    def update(self, urls: Mapping[str, str]) -> None:
        """Learn URLs; names that are not callees are ignored. A later URL replaces one."""
        for name, url in urls.items():
            if name in self.callees:
                self._urls[name] = url
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def get(self, name: str) -> str | None:
        """The URL known now, or None."""
        return self._urls.get(name)

    def urls(self) -> dict[str, str]:
        """Every URL known now."""
        return dict(self._urls)

    async def wait(self, name: str, timeout: float) -> str | None:
        """The URL of ``name``, waiting up to ``timeout`` seconds; None when none arrived.

        The wait is one cancel scope's; a caller's own scope (the call's deadline) may cut it
        shorter.
        """
        with trio.move_on_after(timeout):
            while (url := self._urls.get(name)) is None:
                if self._changed is None:
                    self._changed = trio.Event()
                await self._changed.wait()
            return url
        return self._urls.get(name)  # one that arrived as the wait ran out still counts
