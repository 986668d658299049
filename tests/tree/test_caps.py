"""The tree caps' pure parts and the per-tree count (issue 30 item 3; spec/tree.md "Caps")."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest

from murmur.errors import DiagnosticError
from murmur.tree.caps import (
    CAPS_ENV,
    TreeCaps,
    chain_refusal,
    parse_caps,
    take_one,
    tighten,
    total_refusal,
)


def test_unset_is_unbounded_and_off() -> None:
    assert parse_caps({}) == TreeCaps(None, None, 0)


@pytest.mark.parametrize("raw", ["{", "[]", '{"total": -1}', '{"total": true}', '{"wider": 1}', '{"chain": "2"}'])
def test_an_unreadable_value_is_e_tre_004(raw: str) -> None:
    with pytest.raises(DiagnosticError) as got:
        parse_caps({CAPS_ENV: raw})
    assert got.value.diagnostics[0].code == "E-TRE-004"


def test_a_flag_only_tightens_and_the_child_inherits() -> None:
    caps = parse_caps({CAPS_ENV: '{"total": 5, "same_chain": null, "chain": 1}'})
    assert tighten(caps, total=9, same_chain=2) == TreeCaps(5, 2, 1)  # 9 does not widen 5
    child = parse_caps({CAPS_ENV: TreeCaps(5, 2, 1).hand_down(True)})
    assert child == TreeCaps(5, 2, 2)
    assert parse_caps({CAPS_ENV: TreeCaps(5, 2, 1).hand_down(False)}).chain == 0


def test_chain_refusal_names_the_chain_and_what_to_do() -> None:
    assert chain_refusal(TreeCaps(None, 2, 1), "kid", True) is None  # the 2nd step is allowed
    text = chain_refusal(TreeCaps(None, 2, 2), "kid", True)
    assert text is not None and "kid → kid → kid → kid" in text and "--max-same-capsule-chain 2" in text
    assert "delegate to a different capsule" in text
    # negative controls: another identity, or the cap off
    assert chain_refusal(TreeCaps(None, 2, 2), "kid", False) is None
    assert chain_refusal(TreeCaps(None, None, 9), "kid", True) is None
    assert "--max-tree-total 3" in total_refusal(3, 4)


def test_take_one_counts_per_root(tmp_path: Path) -> None:
    with mock.patch.dict(os.environ, {"MURMUR_HOME": str(tmp_path)}):
        root = "ses_" + "a" * 32
        assert [take_one(root) for _ in range(3)] == [1, 2, 3]
        assert take_one("frm_" + "b" * 32) == 1
        assert (os.stat(tmp_path / "tree" / "totals" / root).st_mode & 0o777) == 0o600
        with pytest.raises(OSError):
            take_one("../escape")
