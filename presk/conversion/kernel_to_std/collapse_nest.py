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
until nothing matches, a deeper nest collapses a pair at a time, from the outside in.

Runs after the kernels became functions (kernel arguments are pointer views) and before
the loops become `scf.for`; the kernel interpreter and C keep the nest as written.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, UnrealizedConversionCastOp
from xdsl.ir import Block, Operation, SSAValue
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
    """The loop that is `outer`'s whole body (besides its yield), if it is one."""
    ops = list(outer.body.block.ops)
    if len(ops) == 2 and isinstance(ops[0], K.ForOp) and isinstance(ops[1], K.YieldOp) \
            and not ops[1].values:
        return ops[0]
    return None


def _pair_position(access: Access, i: SSAValue, j: SSAValue, n: int) -> int | None:
    """p when the access indexes `[…, i, j, …]` at p, p + 1, the axis at p + 1 of size n,
    and neither index anywhere else."""
    indices = list(access.indices)
    shape = access.buffer.type.shape  # type: ignore[attr-defined]
    for p in range(len(indices) - 1):
        if indices[p] is i and indices[p + 1] is j:
            rest = indices[:p] + indices[p + 2:]
            return p if shape[p + 1] == n and i not in rest and j not in rest else None
    return None


def _collapsible(outer: K.ForOp, inner: K.ForOp) -> dict[Access, int] | None:
    """Each access of the two indices and where its pair stands, when every use of
    either index is such an access, as an index, of a buffer defined outside the nest."""
    i, j = outer.body.block.args[0], inner.body.block.args[0]
    found: dict[Access, int] = {}
    for index in (i, j):
        for use in index.uses:
            access = use.operation
            if not isinstance(access, (K.LoadOp, K.StoreOp)) or \
                    use.index < _FIRST_INDEX[type(access)]:
                return None  # not an access, or the value stored
            owner = access.buffer.owner
            if isinstance(owner, Operation) and outer.is_ancestor(owner):
                return None
            p = _pair_position(access, i, j, inner.upper.data)
            if p is None:
                return None
            found[access] = p
    return found or None


def _merged(t: K.BufferType, p: int) -> K.BufferType:
    """`t` with axes p and p + 1 as one (unnamed) axis of their product."""
    shape = t.shape
    axes = [*shape[:p], shape[p] * shape[p + 1], *shape[p + 2:]]
    return K.BufferType.get(t.element, *axes)


class CollapseElementwiseNest(RewritePattern):
    """`for i in [a, b) { for j in [0, n) { … x[…, i, j, …] … } }` →
    `for k in [a·n, b·n) { … x'[…, k, …] … }`, x' a view of x with the two axes merged."""

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
        for access, p in accesses.items():
            key = (access.buffer, p)
            if key not in views:
                pointer = _pointer(access.buffer, outer, rewriter)
                view = UnrealizedConversionCastOp.get([pointer], [_merged(access.buffer.type, p)])
                rewriter.insert(view, InsertPoint.before(outer))
                views[key] = view.results[0]
            indices = list(access.indices)
            indices[p:p + 2] = [k]
            if isinstance(access, K.LoadOp):
                rewriter.replace(access, K.LoadOp(views[key], indices))
            else:
                rewriter.replace(access, K.StoreOp(access.value, views[key], indices))
        for op in list(inner.body.block.ops):
            op.detach()
            block.add_op(op)
        rewriter.replace(outer, K.ForOp(outer.lower.data * n, outer.upper.data * n, body=block))


def _pointer(buffer: SSAValue, before: Operation, rewriter: PatternRewriter) -> SSAValue:
    """The pointer a buffer view stands for (the kernel function's argument)."""
    owner = buffer.owner
    if isinstance(owner, UnrealizedConversionCastOp) and owner.inputs[0].type == PTR:
        return owner.inputs[0]
    cast = UnrealizedConversionCastOp.get([buffer], [PTR])
    rewriter.insert(cast, InsertPoint.before(before))
    return cast.results[0]


def collapse_elementwise_nests(module: ModuleOp) -> None:
    PatternRewriteWalker(CollapseElementwiseNest(), apply_recursively=True).rewrite_module(module)
