"""Fixture builders for routing tests: manifests, capsules, members."""

from __future__ import annotations

from murmur.manifest.model import (
    ArtifactRef,
    Capabilities,
    Exports,
    FilesystemCaps,
    Inference,
    Manifest,
    NetworkCaps,
    PeerTasks,
    ShellCaps,
    SpawnCaps,
    Transport,
)
from murmur.routing.catalog import Capsule, Member


def manifest(name: str, *, shell: tuple[str, ...] = (), net: tuple[str, ...] = (),
             scope: str | None = None, exec_: bool = False, spawn: tuple[str, ...] = (),
             serves: bool = True, agent: bool = False, budget: int | None = None,
             skills: tuple[str, ...] = (), description: str | None = None,
             model: str | None = None) -> Manifest:
    caps = Capabilities(
        shell=ShellCaps(allow=shell) if shell else None,
        network=NetworkCaps(allow=net) if net else None,
        filesystem=FilesystemCaps(scope=scope, workdir_exec=exec_) if scope is not None or exec_ else None,
        spawn=SpawnCaps(allow=spawn) if spawn else None,
    )
    inference = Inference(transport=Transport.PROCESS, command="agent", model=model,
                          budget_tokens=budget) if agent else None
    return Manifest(
        name=name, version="0.1.0", description=description,
        artifacts=tuple(ArtifactRef(name=s, runtime="skill") for s in skills),
        capabilities=caps, inference=inference, plan=None if agent else "plan.yaml",
        exports=Exports(peer_tasks=PeerTasks(accept=True)) if serves else None,
    )


def capsule(name: str, **kw: object) -> Capsule:
    return Capsule(name, "0.1.0", manifest(name, **kw))  # type: ignore[arg-type]


def member(name: str, cap: Capsule, *callees: str, entry: bool = False) -> Member:
    return Member(name, cap, entry, tuple(callees))
