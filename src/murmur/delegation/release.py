"""A launch that falls short gives its mur-roost slot back at once.

Design: ``spec/delegation.md``, "Launching a child" (a launch that falls short leaves
nothing), and ``spec/roost.md``, "When a session's process ends". A granted ``POST /spawn``
reserves a slot in the parent's ``live_children`` and in the machine census until the child
redeems the approval or the approval expires 60 s later. A child that never registered (it
could not be started, exited at launch, never reported ready) leaves that reservation behind,
so a few quick failures would refuse every delegation of the parent for a minute.

The parent's runtime still holds the approval. Once the child has been stopped and reaped,
:func:`give_back` redeems it in the child's place -- ``POST /register`` with the approval,
under a fresh session id, for the very artifact it names -- and at once deregisters that
session ``failed``: exactly the exchange any launched session may make, so the daemon releases the
slot the way it always does. Neither token leaves this function: the approval is presented
once, the credential it earns is used once and dropped.

Outcomes (:class:`Slot`):

* ``GIVEN_BACK`` -- redeemed here and deregistered: the slot is free now.
* ``NOT_HELD`` -- the daemon refused the redemption (``403``): the approval reserves nothing
  any more (the child redeemed it -- then the child's own session holds the slot until it
  deregisters or its process ends -- or it expired, or its granting session has ended).
* ``STILL_HELD`` -- the daemon could not be asked, could not resolve the artifact (``500``), or
  the exchange ran out of its bound: the reservation lapses at the approval's expiry (or, when
  the redemption went through and the deregistration did not, when this process ends).
"""

from __future__ import annotations

import enum

import trio

from murmur.ids import new_id
from murmur.roost import RoostClient, RoostError, RoostRefused, SpawnApproval

__all__ = ["GIVE_BACK_BOUND", "Slot", "give_back"]

GIVE_BACK_BOUND = 5.0  # seconds the whole exchange may take (two requests)


class Slot(enum.Enum):
    """What became of a spawn's reservation after :func:`give_back`."""

    GIVEN_BACK = "given_back"
    NOT_HELD = "not_held"
    STILL_HELD = "still_held"


async def give_back(roost_url: str, grant: SpawnApproval, *, bound: float = GIVE_BACK_BOUND) -> Slot:
    """Redeem ``grant`` in the child's place and deregister it ``failed``; never raises.

    Call it only once the child it was granted for has been reaped (or never started), so
    the child cannot present the approval afterwards. It runs shielded from cancellation (it
    is clean-up), bounded by ``bound``.

    Args:
        roost_url (str): the daemon that granted the spawn (``MURMUR_ROOST_URL``).
        grant (SpawnApproval): the granted spawn: approval, name and version.
        bound (float): seconds for the whole exchange.

    Returns:
        Slot: ``GIVEN_BACK``, ``NOT_HELD`` or ``STILL_HELD`` (see the module docstring).
    """
    with trio.CancelScope(shield=True, deadline=trio.current_time() + bound):
        async with RoostClient(roost_url, timeout=bound) as roost:
            try:
                credential = await roost.register(new_id("ses"), grant.name, grant.version, approval=grant.approval)
            except RoostRefused as exc:
                return Slot.NOT_HELD if exc.status == 403 else Slot.STILL_HELD
            except RoostError:
                return Slot.STILL_HELD
            try:
                await roost.deregister(credential, "failed")
            except RoostError:
                return Slot.STILL_HELD  # held by a session of this process until it ends
            return Slot.GIVEN_BACK
    return Slot.STILL_HELD
