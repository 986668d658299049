"""``murmur.yaml``: the capsule manifest model, its loader and its lowering.

Specification: ``spec/manifest.md``. Other packages import what is in ``__all__`` from here;
each name's module is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.manifest.load import (
        MANIFEST_FILE,
        MAX_MANIFEST_BYTES,
        load_manifest,
        parse_manifest_bytes,
    )
    from murmur.manifest.model import (
        AfterTask,
        Containment,
        DoorCredential,
        Lifecycle,
        Manifest,
        Retain,
        TaskAcceptance,
        Transport,
    )
    from murmur.manifest.netallow import (
        NetEntry,
        covers,
        entry_covers,
        is_loopback_host,
        parse_net_entry,
        url_target,
    )
    from murmur.manifest.refs import has_reference, resolve_refs
    from murmur.manifest.rules import RESERVED_VERSIONS, VERSION_RE, is_capsule_name
    from murmur.manifest.scaffold import write_capsule_scaffold, write_new_tree
    from murmur.manifest.support import unsupported
    from murmur.manifest.yamltext import (
        MAX_FLOW_DEPTH,
        YMap,
        YStr,
        as_int,
        flow_depth_exceeded,
        parse_located,
        position,
    )

__all__ = [
    "MANIFEST_FILE",
    "MAX_FLOW_DEPTH",
    "MAX_MANIFEST_BYTES",
    "RESERVED_VERSIONS",
    "VERSION_RE",
    "AfterTask",
    "Containment",
    "DoorCredential",
    "Lifecycle",
    "Manifest",
    "NetEntry",
    "Retain",
    "TaskAcceptance",
    "Transport",
    "YMap",
    "YStr",
    "as_int",
    "covers",
    "entry_covers",
    "flow_depth_exceeded",
    "has_reference",
    "is_capsule_name",
    "is_loopback_host",
    "load_manifest",
    "parse_located",
    "parse_manifest_bytes",
    "parse_net_entry",
    "position",
    "resolve_refs",
    "unsupported",
    "url_target",
    "write_capsule_scaffold",
    "write_new_tree",
]

__getattr__ = lazy.face(__name__, {
    "load": ["MANIFEST_FILE", "MAX_MANIFEST_BYTES", "load_manifest", "parse_manifest_bytes"],
    "model": ["AfterTask", "Containment", "DoorCredential", "Lifecycle", "Manifest", "Retain", "TaskAcceptance",
              "Transport"],
    "netallow": ["NetEntry", "covers", "entry_covers", "is_loopback_host", "parse_net_entry", "url_target"],
    "refs": ["has_reference", "resolve_refs"],
    "rules": ["RESERVED_VERSIONS", "VERSION_RE", "is_capsule_name"],
    "scaffold": ["write_capsule_scaffold", "write_new_tree"],
    "support": ["unsupported"],
    "yamltext": ["MAX_FLOW_DEPTH", "YMap", "YStr", "as_int", "flow_depth_exceeded", "parse_located", "position"],
})
