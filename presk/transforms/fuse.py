"""psk-fuse{limit=8}: group element-wise ops that can share one loop nest.

Within each instance, from the last op to the first, an element-wise compute op joins
its reader's group when
  - every reader of its value is in that one group,
  - the readers are element-wise over the same shape (same sizes) and read it in its own
    type (a value read through a `convert` does not join), and
  - the group has fewer than `limit` steps.
Otherwise it starts a group of its own. A group of two or more steps becomes a
`psk_realize.group` (its inputs in the order its steps first read them, its site the
site of its root, the value it yields); a group of one stays a plain op.

`fusion_notes` says, for every element-wise value that reaches memory (a group's root —
psk-fuse-reduce's reduce_group too —, or an op alone), why: the function's result, or what reads it — a reduction, a call, a
contraction, a value of another shape, a value in another type, more than one reader, the
size limit. It reads the IR, fused or not: the table of §7.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from presk.dialects import realize as R

DEFAULT_LIMIT = 8


@dataclass
class FuseNote:
    """Why an element-wise value reaches memory."""

    instance: str  # the psk_realize.func it is in
    source: str  # the Core function
    site: str  # the value's site
    op: Operation  # the group or the lone op
    size: int  # steps: 1 for a lone op
    reason: str  # "the function's result", "a reduction", …
    reader: Operation | None  # the op that reads it, looking through converts

    @property
    def status(self) -> str:
        return "alone" if self.size == 1 else f"ends a group of {self.size}"


def _readers(value: SSAValue) -> list[tuple[Operation, bool]]:
    """The ops reading a value, each with whether it reads it through a convert."""
    out: list[tuple[Operation, bool]] = []
    for use in value.uses:
        op = use.operation
        if isinstance(op, R.ConvertOp):
            out += [(u.operation, True) for u in op.result.uses]
        else:
            out.append((op, False))
    # In block order, each reader once.
    seen: set[int] = set()
    unique = []
    for op, conv in out:
        if id(op) not in seen:
            seen.add(id(op))
            unique.append((op, conv))
    return unique


def fuse_func(func: R.FuncOp, limit: int = DEFAULT_LIMIT) -> None:
    block = func.body.block
    ops = list(block.ops)
    group_of: dict[int, int] = {}
    members: dict[int, list[Operation]] = {}
    for op in reversed(ops):
        if not R.is_elementwise(op) or isinstance(op, R.GroupOp):
            continue
        value = op.results[0]
        readers = [u.operation for u in value.uses]
        gids = {group_of.get(id(r)) for r in readers}
        joined = False
        if readers and len(gids) == 1 and None not in gids:
            gid = gids.pop()
            assert gid is not None
            same = all(R.is_elementwise(r) and R._ttype(r.results[0]).sizes ==
                       R._ttype(value).sizes for r in readers)
            if same and len(members[gid]) < limit:
                group_of[id(op)] = gid
                members[gid].append(op)
                joined = True
        if not joined:
            gid = len(members)
            group_of[id(op)] = gid
            members[gid] = [op]
    for gid, group in members.items():
        if len(group) >= 2:
            _materialize(block, sorted(group, key=ops.index))


def outside_inputs(ops: list[Operation]) -> list[SSAValue]:
    """The values `ops` read that none of them makes, in the order first read: a group's
    inputs."""
    inside = {id(op) for op in ops}
    inputs: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            owner = v.owner
            if not (isinstance(owner, Operation) and id(owner) in inside) and v not in inputs:
                inputs.append(v)
    return inputs


def empty_group(kind: type[R.FusedOp], inputs: list[SSAValue], root: Operation):
    """A group of `kind` over `inputs` with `root`'s type, site and name, and its block."""
    site = root.attributes["site"].data  # type: ignore[attr-defined]
    name = root.attributes.get("name")
    return kind.make(inputs, R._ttype(root.results[0]), site=site,
                     name=name.data if name is not None else None)  # type: ignore[attr-defined]


def _materialize(block, steps: list[Operation]) -> R.GroupOp:
    root = steps[-1]
    inputs = outside_inputs(steps)
    group, body = empty_group(R.GroupOp, inputs, root)
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args))
    for s in steps:
        clone = s.clone(value_mapper=mapping)
        body.add_op(clone)
        for old, new in zip(s.results, clone.results):
            mapping[old] = new
    body.add_op(R.YieldOp(mapping[root.results[0]]))
    block.insert_op_before(group, root)
    root.results[0].replace_all_uses_with(group.results[0])
    for s in reversed(steps):
        s.detach()
        s.erase()
    return group


def fuse_module(module: ModuleOp, limit: int = DEFAULT_LIMIT) -> list[FuseNote]:
    """Fuse every instance; the notes of what reaches memory and why."""
    for func in R.funcs(module):
        fuse_func(func, limit)
    return fusion_notes(module, limit)


# --------------------------------------------------------------------------------------
# Why each element-wise value reaches memory
# --------------------------------------------------------------------------------------

_KIND = [
    (R.ReduceOp, "a reduction"),
    (R.ReduceGroupOp, "a reduction fused with its element-wise neighbours"),
    (R.SoftmaxOp, "a softmax: a reduction along an axis"),
    ((R.DotOp, R.ContractOp), "a contraction"),
    ((R.CallOp, R.FoldOp), "a call"),
    (R.SumToOp, "a sum to a smaller shape"),
    (R.SpreadOp, "a spread to another shape"),
    (R.BroadcastOp, "a broadcast"),
]


def reason_of(value: SSAValue, limit: int = DEFAULT_LIMIT) -> tuple[str, Operation | None]:
    """Why a value does not join a group: the reason and the reader it names."""
    readers = _readers(value)
    if not readers:
        return "never read", None
    for op, _ in readers:
        if isinstance(op, R.ReturnOp):
            return "the function's result", None
    if len(readers) > 1:
        return f"read by {len(readers)} values", readers[0][0]
    op, via_convert = readers[0]
    for cls, text in _KIND:
        if isinstance(op, cls):  # type: ignore[arg-type]
            return text, op
    if R.is_elementwise(op) or isinstance(op, R.FusedOp):
        if R._ttype(op.results[0]).sizes != R._ttype(value).sizes:
            return "of another shape: a group is one loop nest over one shape", op
        if via_convert:
            return "in another type: it is converted first", op
        return f"its group holds the limit of {limit} steps", op
    return f"a {op.name.split('.', 1)[1]}", op


def fusion_notes(module: ModuleOp, limit: int = DEFAULT_LIMIT) -> list[FuseNote]:
    """Every element-wise value that reaches memory, instance by instance."""
    notes: list[FuseNote] = []
    for func in R.funcs(module):
        for op in func.body.block.ops:
            if not (R.is_elementwise(op) or isinstance(op, R.FusedOp)):
                continue
            size = len(op.steps) if isinstance(op, R.FusedOp) else 1
            reason, reader = reason_of(op.results[0], limit)
            notes.append(FuseNote(func.func_name, func.source_func,
                                  op.attributes["site"].data,  # type: ignore[attr-defined]
                                  op, size, reason, reader))
    return notes


@dataclass(frozen=True)
class FusePass(ModulePass):
    """`psk-fuse{limit=8}`"""

    name = "psk-fuse"

    limit: int = DEFAULT_LIMIT

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_module(op, self.limit)
