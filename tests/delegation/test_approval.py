"""The approval on a delegated child's stdin."""

from __future__ import annotations

import os

from murmur.delegation.approval import read_approval


class TestReadApproval:
    def test_reads_to_eof(self) -> None:
        """The text written before the write end closed, stripped."""
        r, w = os.pipe()
        os.write(w, b"msa1.abc.def\n")
        os.close(w)
        try:
            assert read_approval(r) == "msa1.abc.def"
        finally:
            os.close(r)

    def test_empty_is_none(self) -> None:
        """An empty stream means no approval."""
        r, w = os.pipe()
        os.close(w)
        try:
            assert read_approval(r) is None
        finally:
            os.close(r)

    def test_unfinished_stream_is_refused_whole(self) -> None:
        """A stream still open at the bound gives nothing (never a partial approval)."""
        r, w = os.pipe()
        os.write(w, b"msa1.partial")
        try:
            assert read_approval(r, bound=0.05) is None
        finally:
            os.close(r)
            os.close(w)

    def test_oversized_is_refused(self) -> None:
        """More than the size limit is not an approval."""
        r, w = os.pipe()
        os.write(w, b"x" * 40000)  # fits in the pipe's buffer
        os.close(w)
        try:
            assert read_approval(r) is None
        finally:
            os.close(r)

    def test_closed_descriptor(self) -> None:
        """A descriptor that is not open reads as no approval."""
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        assert read_approval(r) is None
