"""A process that registers a session at mur-roost and then holds still (tests/roost/test_watch.py).

``peer_client.py URL NAME SESSION_ID MODE``; an approval, if any, is read from stdin's first
line (empty: the top-level path). MODE ``hold`` registers and waits; ``deregister`` registers,
deregisters ``complete`` and waits; ``spawn`` registers, asks ``POST /spawn`` for
``worker-a@0.1.0`` and waits holding the approval. Prints ``registered <status>`` (and
``deregistered <status>`` / ``spawned <status>``) once each answer is in, then waits for stdin
to close.
"""

from __future__ import annotations

import sys

import httpx

URL, NAME, SESSION_ID, MODE = sys.argv[1:5]


def main() -> None:
    approval = sys.stdin.readline().strip()
    headers = {"x-murmur-spawn-approval": approval} if approval else {}
    with httpx.Client(base_url=URL, timeout=30.0) as client:
        r = client.post("/register", json={"session_id": SESSION_ID, "name": NAME, "version": "0.1.0"},
                        headers=headers)
        print(f"registered {r.status_code}", flush=True)
        if MODE == "deregister" and r.status_code == 200:
            cred = r.json()["credential"]
            d = client.post("/deregister", json={"outcome": "complete"},
                            headers={"x-murmur-spawn-credential": cred})
            print(f"deregistered {d.status_code}", flush=True)
        if MODE == "spawn" and r.status_code == 200:
            cred = r.json()["credential"]
            s = client.post("/spawn", json={"name": "worker-a", "version": "0.1.0"},
                            headers={"x-murmur-spawn-credential": cred})
            print(f"spawned {s.status_code}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
