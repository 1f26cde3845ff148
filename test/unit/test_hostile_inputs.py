"""Hostile inputs (issue 14): one regression test per class of input that once gave a
traceback, a signal, a hang or a replaced file. Each is named for its class:
`test_sizes_*`, `test_work_*`, `test_outputs_*`, `test_commands_*`. The fuzzer that found
most of them is test/fuzz/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from presk.cli import translate

ROOT = Path(__file__).resolve().parents[2]
TRAIN = str(ROOT / "tutorial" / "07_train.psk")


# --------------------------------------------------------------------------------------
# 1. Sizes beyond the machine
# --------------------------------------------------------------------------------------


def test_sizes_arena_offsets_are_i64_past_2_gib(tmp_path: Path) -> None:
    """At B = 10⁸ the tutorial's arena passes 4 GB: every arena offset is an i64 GEP
    operand (an i32 constant wrapped and the native run segfaulted at B = 33 554 433)."""
    out = tmp_path / "loss.ll"
    assert translate.main([TRAIN, "--to", "llvm", "--entry", "loss", "--dim", "B=100000000",
                           "-o", str(out)]) == 0
    offsets = [int(m) for m in re.findall(r"getelementptr inbounds i8, ptr %\S+, i64 (\d+)",
                                          out.read_text())]
    # The tutorial at B: buffers of B·4 doubles (3.2 GB) laid one after another.
    assert max(offsets) >= 4 * 8 * 100_000_000 > 2**31
    assert all(o % 64 == 0 for o in offsets)
