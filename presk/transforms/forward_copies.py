"""psk-kernel-forward-copies: a residual that is a copy of a buffer still alive is that
buffer.

The reverse mode keeps what the backward reads as the forward hosts' outputs, so a
`.fwd` host hands back its own arguments — a layer's input x, its weight — as copies:
`copy %x to %out.5`. Each copy is a full pass over the buffer on every call, and each
output a buffer of the arena; the scaled Tower's value and gradient at B = 1024 copied
about 17 MB a call that way (5–6 % of its time, `presk_host_copy` and memmove in a
profile). Yet the caller's buffer behind %x outlives the call and nothing writes it again,
so the backward can read it where it is. Two rewrites, to a fixed point, remove such
copies, host by host up the calls:

* **hoist** — a host (not the entry) whose output %o is written only by `copy %s to %o`
  at the top of its body, %s an argument (or a view of one at a literal index) that
  nothing after the copy writes: the copy goes, and every call of the host copies the
  caller's %s into the caller's %o right after the call. The output is then unwritten by
  the host; once no call site needs it, it leaves the host's signature (`_drop_unused`).
* **coalesce** — in a host's top block, `copy %a to %b` where
  - %b is a fresh `alloc` that only the copy writes, read only after it, and no
    `release` stands between the copy and its last reader, and nothing after the copy
    writes %a: %b's readers read %a, and %b's alloc goes (a residual of the entry's
    parameter is then the parameter itself);
  - or %a is a fresh `alloc`, nothing after the copy writes it, and %b an output of the
    host that only the copy touches: whatever wrote %a writes %b (gelu's result, which
    the Linear layer's `.fwd` kept as its input, is written where the Block returns it).

Which arguments a host writes is computed over the calls (`written_args`): a call writes
only what its callee writes, so the backward's calls, which read the residuals, do not
hold a copy in place. Folds' bodies are left as they are (a copy there is a value of one
iteration). Copies carry every element unchanged, so every engine computes the same bits;
the pass runs in the native lowering only (presk/runtime/compile.py), where it shrinks
the host's work and the arena.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, FunctionType, IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from presk.dialects import kernel as K

from .host_writes import Writes, call_sites, root, written_args


# --------------------------------------------------------------------------------------
# A host's block: who uses a buffer, who writes it after an op
# --------------------------------------------------------------------------------------

def _top(op: Operation, block: Block) -> Operation | None:
    """The op of `block` that is or holds `op`."""
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
    return op


def _users(value: SSAValue) -> list[Operation]:
    """Every op using `value` or a view of it (the views included)."""
    out, todo = [], [value]
    while todo:
        v = todo.pop()
        for use in v.uses:
            if isinstance(use.operation, K.AtOp):
                todo.append(use.operation.result)
            out.append(use.operation)
    return out


def _written_after(value: SSAValue, op: Operation, writes: Writes) -> bool:
    """Whether an op of `op`'s block after it writes `value`'s root."""
    buffer, at = root(value), op.next_op
    while at is not None:
        if buffer in writes.of(at):
            return True
        at = at.next_op
    return False


# --------------------------------------------------------------------------------------
# Hoist: a host's output copied from its argument is copied by its callers
# --------------------------------------------------------------------------------------

def _static_view(value: SSAValue, host: K.HostOp) -> list[int] | None:
    """The literal indices of `value` as a view of one of `host`'s arguments (outermost
    first), or None."""
    indices: list[int] = []
    while isinstance(value.owner, K.AtOp):
        if value.owner.index is None:
            return None
        indices.append(value.owner.index.data)
        value = value.owner.source
    if not (isinstance(value, BlockArgument) and value.owner is host.body.block):
        return None
    return [value.index, *reversed(indices)]


def _hoistable(copy: K.CopyOp, host: K.HostOp, writes: Writes) -> list[int] | None:
    """The view (`_static_view`) of `copy`'s source when the copy can move to the callers."""
    dest = copy.dest
    if not (isinstance(dest, BlockArgument) and dest.owner is host.body.block
            and dest in host.output_args and dest.has_one_use()):
        return None
    view = _static_view(copy.source, host)
    if view is None or _written_after(copy.source, copy, writes):
        return None
    return view


def _hoist(host: K.HostOp, calls: list[K.CallOp], writes: Writes) -> int:
    """Move the host's hoistable copies to its callers; how many moved."""
    moved = 0
    for copy in [op for op in host.body.block.ops if isinstance(op, K.CopyOp)]:
        view = _hoistable(copy, host, writes)
        if view is None:
            continue
        dest = copy.dest
        assert isinstance(dest, BlockArgument)
        for call in calls:
            source = call.arguments[view[0]]
            made: list[Operation] = []
            for index in view[1:]:
                made.append(K.AtOp(source, index))
                source = made[-1].results[0]
            made.append(K.CopyOp(source, call.arguments[dest.index],
                                 copy.site.data if copy.site else None))
            Rewriter.insert_op(made, InsertPoint.after(call))
        _erase_with_views(copy)
        moved += 1
    return moved


def _erase_with_views(copy: K.CopyOp) -> None:
    source = copy.source
    _erase_copy(copy)
    _erase_unused_views(source)


def _erase_unused_views(value: SSAValue) -> None:
    """Erase `value`'s chain of views from its end while nothing reads it."""
    while isinstance(value.owner, K.AtOp) and not value.uses:
        view = value.owner
        value = view.source
        view.detach()
        view.erase()


# --------------------------------------------------------------------------------------
# Coalesce: a copy between two buffers of one host becomes one buffer
# --------------------------------------------------------------------------------------

def _position(block: Block) -> dict[Operation, int]:
    return {op: i for i, op in enumerate(block.ops)}


def _into_source(copy: K.CopyOp, block: Block, where: dict[Operation, int],
                 releases: list[int], writes: Writes) -> bool:
    """%b (a fresh alloc only the copy writes, read after it while %a lives) becomes %a."""
    b = copy.dest
    if not isinstance(b.owner, K.AllocOp) or b.owner.parent_block() is not block:
        return False
    last = where[copy]
    for user in _users(b):
        if user is copy:
            continue
        top = _top(user, block)
        if top is None or where[top] <= where[copy] or b in writes.of(user):
            return False
        last = max(last, where[top])
    if any(where[copy] < r <= last for r in releases):
        return False
    if _written_after(copy.source, copy, writes):
        return False
    _merge(copy, b, copy.source)
    return True


def _into_dest(copy: K.CopyOp, host: K.HostOp, writes: Writes) -> bool:
    """%a (a fresh alloc nothing writes after the copy) becomes %b (an output only the copy
    touches)."""
    a, b = copy.source, copy.dest
    block = host.body.block
    if not (isinstance(a.owner, K.AllocOp) and a.owner.parent_block() is block
            and isinstance(b, BlockArgument) and b.owner is block
            and b in host.output_args and b.has_one_use()):
        return False
    if _written_after(a, copy, writes):
        return False
    _merge(copy, a, b)
    return True


def _merge(copy: K.CopyOp, gone: SSAValue, kept: SSAValue) -> None:
    """Erase `copy` and `gone`'s alloc; `gone`'s readers and writers use `kept`."""
    alloc = gone.owner
    _erase_copy(copy)
    gone.replace_all_uses_with(kept)
    assert isinstance(alloc, K.AllocOp)
    alloc.detach()
    alloc.erase()
    _erase_unused_views(kept)


def _erase_copy(copy: K.CopyOp) -> None:
    copy.detach()
    copy.erase()


def _coalesce(host: K.HostOp, writes: Writes) -> int:
    """Coalesce the copies of the host's top block; how many went. Coalescing only erases
    ops, so the positions taken first keep the order of those left."""
    block, gone = host.body.block, 0
    where = _position(block)
    releases = [i for op, i in where.items() if isinstance(op, K.ReleaseOp)]
    for copy in [op for op in block.ops if isinstance(op, K.CopyOp)]:
        if _into_source(copy, block, where, releases, writes) or \
                _into_dest(copy, host, writes):
            gone += 1
    return gone


# --------------------------------------------------------------------------------------
# Outputs no call needs leave the host's signature
# --------------------------------------------------------------------------------------

def _drop_unused(host: K.HostOp, calls: list[K.CallOp]) -> int:
    """Drop the host's unused outputs (at least one stays) from it and its calls."""
    unused = [a.index for a in host.output_args if not a.uses]
    unused = unused[:max(0, min(len(unused), host.output_count - 1))]
    if not unused:
        return 0
    keep = [i for i in range(len(host.args)) if i not in unused]
    for call in calls:
        args = [call.arguments[i] for i in keep]
        new = K.CallOp.create(operands=args, attributes=dict(call.attributes))
        Rewriter.replace_op(call, new)
    for i in reversed(unused):
        host.body.block.erase_arg(host.args[i])
    types = [host.arg_types[i] for i in keep]
    attrs = host.attributes
    attrs["function_type"] = FunctionType.from_lists(types, [])
    attrs["outputs"] = IntegerAttr(host.output_count - len(unused), i64)
    if host.arg_names is not None:
        attrs["arg_names"] = ArrayAttr([host.arg_names.data[i] for i in keep])
    return len(unused)


# --------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------

def forward_copies(module: ModuleOp) -> int:
    """Hoist and coalesce the module's copies to a fixed point; how many copies the
    coalescing removed (a hoisted copy once per call site it reached). A round's writes are
    computed once: a hoist only takes writes away from a host (its caller's new copy
    writes what the call wrote), so the round's are a superset, and safe."""
    gone = 0
    hosts = K.hosts(module)
    while True:
        writes = Writes(module, written_args(module))
        calls = call_sites(hosts)
        changed = 0
        for name, host in hosts.items():
            if host.entry is None and calls[name]:
                changed += _hoist(host, calls[name], writes)
        for host in hosts.values():
            removed = _coalesce(host, writes)
            changed, gone = changed + removed, gone + removed
        calls = call_sites(hosts)
        for name, host in hosts.items():
            if host.entry is None and calls[name]:
                _drop_unused(host, calls[name])
        if not changed:
            return gone


@dataclass(frozen=True)
class ForwardCopiesPass(ModulePass):
    """`psk-kernel-forward-copies`: residual copies of live buffers removed (see the
    module docstring)."""

    name = "psk-kernel-forward-copies"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        forward_copies(op)
