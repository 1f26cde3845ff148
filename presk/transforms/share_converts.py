"""psk-kernel-share-converts: a buffer converted twice into one type is converted once.

The recording converts a value where each reader needs it narrower (or wider): an f64
input that four f32 sites read is four `convert`s of the same buffer into four fresh
buffers, on every call (the scaled Tower's gradient converted its batch four times). In a
host's block, a `convert %x to %b` whose source and destination type an earlier `convert
%x to %a` of the same block already made goes: its readers read %a, and %b's `alloc`
goes with it. The same source elements rounded the same way are the same bits, so every
engine computes what it did; only the host's work and the arena shrink.

It holds only while %a still holds what %b would: so %a and %b must each be a fresh
`alloc` that nothing but its `convert` writes, and nothing between the two converts may
write %x (a launch storing into it or into a view of it, a copy, convert or fill into it,
a call or a fold given it). A `mark` or `release` between them ends the sharing (%a's
life must not end before %b's readers run). Folds' bodies are blocks of their own: a
convert there is shared only with one in the same body.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from presk.dialects import kernel as K
from presk.transforms.host_writes import Writes, root


def written_only_by(value: SSAValue, op: Operation, writes: Writes) -> bool:
    """Whether `value` is a fresh alloc that only `op` writes (through any view)."""
    if not isinstance(value.owner, K.AllocOp):
        return False
    seen, todo = set(), [value]
    while todo:
        v = todo.pop()
        for use in v.uses:
            user = use.operation
            if isinstance(user, K.AtOp):
                todo.append(user.result)
            elif user is not op and user not in seen and value in writes.of(user):
                return False
            seen.add(user)
    return True


def share_block(block: Block, writes: Writes) -> int:
    """Share the converts of one block (folds' bodies first); how many went."""
    gone = 0
    made: dict[tuple[SSAValue, object], SSAValue] = {}  # (source root, dest type) → dest
    for op in list(block.ops):
        for region in op.regions:
            for inner in region.blocks:
                gone += share_block(inner, writes)
        if isinstance(op, (K.MarkOp, K.ReleaseOp)):
            made.clear()
            continue
        shares = isinstance(op, K.ConvertOp) and op.source is root(op.source) and \
            written_only_by(op.dest, op, writes)
        if shares and (op.source, op.dest.type) in made:
            _drop(op, made[(op.source, op.dest.type)])
            gone += 1
            continue
        written = writes.of(op)
        for key in [k for k, dest in made.items() if k[0] in written or dest in written]:
            del made[key]
        if shares:
            made[(op.source, op.dest.type)] = op.dest
    return gone


def _drop(convert: K.ConvertOp, kept: SSAValue) -> None:
    """Erase `convert`; its destination's readers read `kept`, its alloc goes."""
    dest = convert.dest
    alloc = dest.owner
    convert.detach()
    convert.erase()
    dest.replace_all_uses_with(kept)
    assert isinstance(alloc, K.AllocOp)
    alloc.detach()
    alloc.erase()


def share_converts(module: ModuleOp) -> int:
    """Share the converts of every host of `module`; how many went."""
    writes = Writes(module)
    return sum(share_block(host.body.block, writes) for host in K.hosts(module).values())


@dataclass(frozen=True)
class ShareConvertsPass(ModulePass):
    """`psk-kernel-share-converts`: one conversion of a buffer per type (see the module
    docstring)."""

    name = "psk-kernel-share-converts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        share_converts(op)
