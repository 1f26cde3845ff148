"""Every op class of the three dialects says in its docstring's first sentence how it is
written: a backquoted example that names the op (`%r = psk_core.sum %x {…} : …`)."""

from __future__ import annotations

import pytest

from presk.dialects.core import Core
from presk.dialects.kernel import Kernel
from presk.dialects.realize import Realize

OPS = [op for dialect in (Core, Realize, Kernel) for op in dialect.operations]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_docstring_opens_with_an_example(op: type) -> None:
    first = " ".join((op.__doc__ or "").strip().split("\n\n")[0].split())
    quoted = first.split("`")[1::2]
    assert any(q.split()[:3].count(op.name) for q in quoted), f"{op.__name__}: {first!r}"
