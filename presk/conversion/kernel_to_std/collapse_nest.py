"""An element-wise nest in native code as one loop over its elements.

A kernel over `f64[batch: 8, model: 4]` is the nest `for i < 8 { for j < 4 { … } }`; LLVM
unrolls the 4-iteration inner loop and vectorizes it in 4 lanes, however wide the
machine's vectors are (8 f64 on AVX-512), and pays the loop's setup 8 times. When every
access of the two loops' indices is `[…, i, j, …]` on a buffer whose axes there are
(8, 4) — the row-major offset is then (i·4 + j)·stride, the same for one index
k = i·4 + j over the two axes as one — the pair is one loop over k in [8·lower, 8·upper)
reading and writing views of the same buffers with the two axes merged (a cast of the
same pointer: a buffer in the native lowering is a pointer and a shape). The outer loop
may be a split part's range of rows; the inner one must span its axis. The iterations
are independent (no loop-carried value, no blocked sum), each computes what it did, so
the bits stay: only the order of independent element-wise iterations changes. Applied
until nothing matches, a deeper nest collapses a pair at a time, from the inside out.

A short inner loop (less than a 512-bit vector of its elements) whose body calls a math
function (gelu's erf after a norm) also collapses with its broadcasts: a row's value read
at [i] (RMSNorm's x / rms[i]) is read at k / n, a column's at [j] (its gain γ[j]) at
k mod n, so that the one loop runs the function's vector variant over many rows at once
(presk/emit/wide_loops.py). Without a call the nest stays: its short inner loop runs as
one vector (presk/emit/short_loops.py: a row's value broadcast, a column's read whole),
where LLVM makes scalar code of the collapsed loop's k / n and k mod n (sixteen `vdivsd`
where four `vdivpd` do, Zen 4). A longer inner loop keeps its broadcasts as they are
(contiguous reads, vectors filled).

Runs after the kernels became functions (kernel arguments are pointer views) and before
the loops become `scf.for`; the kernel interpreter and C keep the nest as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, UnrealizedConversionCastOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import (PatternRewriter, PatternRewriteWalker, RewritePattern,
                                   op_type_rewrite_pattern)
from xdsl.rewriter import InsertPoint

from presk.dialects import kernel as K

from .emitter import PTR

Access = K.LoadOp | K.StoreOp
_FIRST_INDEX = {K.LoadOp: 1, K.StoreOp: 2}  # the operands before are the value and buffer


def _simple(loop: K.ForOp) -> bool:
    """A loop of independent iterations: nothing carried, not a blocked sum."""
    return not loop.inits and loop.partials is None


def _only_child_loop(outer: K.ForOp) -> K.ForOp | None:
    """The loop that is `outer`'s whole body (besides its yield), if it is one and holds
    no loop itself: element-wise work (a contraction's sum stays in its nest)."""
    ops = list(outer.body.block.ops)
    if len(ops) == 2 and isinstance(ops[0], K.ForOp) and isinstance(ops[1], K.YieldOp) \
            and not ops[1].values and \
            not any(isinstance(op, K.ForOp) for op in ops[0].body.block.ops):
        return ops[0]
    return None


@dataclass(frozen=True)
class Rewrite:
    """How one access takes the collapsed index k: the pair at `position` becomes k
    (`kind` "pair", on the view with the two axes merged), or the one index there is
    k / n ("row": the outer index alone, a value broadcast along the inner axis) or
    k mod n ("column": the inner index alone, broadcast along the outer)."""

    kind: str
    position: int


def _rewrite_of(access: Access, i: SSAValue, j: SSAValue, n: int,
                broadcasts: bool) -> Rewrite | None:
    """How the access takes k, if it can: each of i and j once at most, the pair
    adjacent over an inner axis of size n, either alone only when `broadcasts`."""
    indices = list(access.indices)
    if indices.count(i) > 1 or indices.count(j) > 1:
        return None
    shape = access.buffer.type.shape  # type: ignore[attr-defined]
    if i in indices and j in indices:
        p = indices.index(i)
        ok = p + 1 < len(indices) and indices[p + 1] is j and shape[p + 1] == n
        return Rewrite("pair", p) if ok else None
    if not broadcasts:
        return None
    return Rewrite("row", indices.index(i)) if i in indices else \
        Rewrite("column", indices.index(j))


def _collapsible(outer: K.ForOp, inner: K.ForOp) -> dict[Access, Rewrite] | None:
    """Each access of the two indices and how it takes k, when every use of either
    index is an access, as an index, of a buffer defined outside the nest."""
    i, j = outer.body.block.args[0], inner.body.block.args[0]
    n = inner.upper.data
    found: dict[Access, Rewrite] = {}
    for index in (i, j):
        for use in index.uses:
            access = use.operation
            if not isinstance(access, (K.LoadOp, K.StoreOp)) or \
                    use.index < _FIRST_INDEX[type(access)]:
                return None  # not an access, or the value stored
            owner = access.buffer.owner
            if isinstance(owner, Operation) and outer.is_ancestor(owner):
                return None
            rewrite = _rewrite_of(access, i, j, n, _short(inner, access.buffer.type))
            if rewrite is None:
                return None
            found[access] = rewrite
    return found or None


def _short(inner: K.ForOp, t: K.BufferType) -> bool:
    """Whether the inner loop spans less than one 512-bit vector of the buffer's elements
    and calls a math function other than sqrt (an instruction): then a broadcast read
    (k / n, k mod n: a gather in the vectorized loop) costs less than running the
    function's vector variant a row at a time. A longer inner loop keeps its contiguous
    reads; a short one without a call is one vector already."""
    return inner.upper.data * K.element_bytes(t.element) < VECTOR_BYTES and any(
        isinstance(op, K.MathOp) and op.fn.data != "sqrt" for op in inner.body.walk())


VECTOR_BYTES = 64


def _merged(t: K.BufferType, p: int) -> K.BufferType:
    """`t` with axes p and p + 1 as one (unnamed) axis of their product."""
    shape = t.shape
    axes = [*shape[:p], shape[p] * shape[p + 1], *shape[p + 2:]]
    return K.BufferType.get(t.element, *axes)


class CollapseElementwiseNest(RewritePattern):
    """`for i in [a, b) { for j in [0, n) { … x[…, i, j, …] … } }` →
    `for k in [a·n, b·n) { … x'[…, k, …] … }`, x' a view of x with the two axes merged;
    a short inner loop's broadcasts `r[…, i, …]`, `g[…, j, …]` read at k / n, k mod n."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, outer: K.ForOp, rewriter: PatternRewriter, /):
        inner = _only_child_loop(outer)
        if inner is None or not _simple(outer) or not _simple(inner) or inner.lower.data != 0:
            return
        accesses = _collapsible(outer, inner)
        if accesses is None:
            return
        n = inner.upper.data
        block = Block(arg_types=[outer.body.block.args[0].type])
        k = block.args[0]
        views: dict[tuple[SSAValue, int], SSAValue] = {}
        parts: dict[str, Operation] = {}
        for access, rewrite in accesses.items():
            buffer, indices, p = access.buffer, list(access.indices), rewrite.position
            if rewrite.kind == "pair":
                if (buffer, p) not in views:
                    pointer = _pointer(buffer, outer, rewriter)
                    view = UnrealizedConversionCastOp.get([pointer], [_merged(buffer.type, p)])
                    rewriter.insert(view, _just_after(pointer))  # outside every loop
                    views[buffer, p] = view.results[0]
                buffer = views[buffer, p]
                indices[p:p + 2] = [k]
            else:
                indices[p] = _part(rewrite.kind, k, n, parts)
            if isinstance(access, K.LoadOp):
                rewriter.replace(access, K.LoadOp(buffer, indices))
            else:
                rewriter.replace(access, K.StoreOp(access.value, buffer, indices))
        block.add_ops(parts.values())  # sizes before their divisions (insertion order)
        for op in list(inner.body.block.ops):
            op.detach()
            block.add_op(op)
        rewriter.replace(outer, K.ForOp(outer.lower.data * n, outer.upper.data * n, body=block))


def _part(kind: str, k: SSAValue, n: int, parts: dict[str, Operation]) -> SSAValue:
    """k / n (the row) or k mod n (the column), made once a loop (the ops are put first
    in the loop's body once it is built)."""
    if kind not in parts:
        size = arith.ConstantOp(IntegerAttr(n, IndexType()))
        parts[kind + " size"] = size
        parts[kind] = (arith.DivUIOp if kind == "row" else arith.RemUIOp)(k, size)
    return parts[kind].results[0]


def _just_after(value: SSAValue) -> InsertPoint:
    """Right after the value is defined (a block's start for an argument)."""
    if isinstance(value, BlockArgument):
        return InsertPoint.at_start(value.block)
    return InsertPoint.after(value.owner)


def _pointer(buffer: SSAValue, before: Operation, rewriter: PatternRewriter) -> SSAValue:
    """The pointer a buffer view stands for (the kernel function's argument)."""
    owner = buffer.owner
    if isinstance(owner, UnrealizedConversionCastOp) and owner.inputs[0].type == PTR:
        return owner.inputs[0]
    cast = UnrealizedConversionCastOp.get([buffer], [PTR])
    rewriter.insert(cast, InsertPoint.before(before))
    return cast.results[0]


def collapse_elementwise_nests(module: ModuleOp) -> None:
    # innermost pairs first: a deeper nest's inner pair becomes one loop, then the next
    PatternRewriteWalker(CollapseElementwiseNest(), apply_recursively=True,
                         walk_regions_first=True).rewrite_module(module)
