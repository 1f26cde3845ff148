"""psk-fuse-reduce: a reduction fused with its element-wise producer and consumers.

Runs after psk-fuse. Within each instance, for every reduction (sum, mean, max, min,
logsumexp) R of a shape F over one axis (or every axis), in block order:
  - its producer joins when it is element-wise (an op or a `group`) and R alone reads it:
    the squares of RMSNorm's `mean(x^2)`, the loss's `(a − y)^2`, are then summed as they
    are computed, never stored. A spread's `like` reads no element, only a shape (the
    reverse sweep spreads the mean's cotangent over x²'s): it does not count, and once
    the square is in the group it takes its shape from the value the square reads (x);
  - then, while the group's value has one reader, that reader joins when it is
    element-wise (an op or a group) and makes the reduced shape K (`sqrt(ms + eps)`) or F
    reading the group's K values on the kept axes (`x / rms * γ`: the normalization).
A group of two or more steps becomes a `psk_realize.reduce_group` at its root's place
(its inputs in the order its steps first read them, its site its root's); the members'
groups are inlined into it. A value read through a `convert` never joins (psk-fuse put
no convert in a group), so every step keeps its type: the kernel computes each value with
the operations, types and sum order of the unfused ops, and the bits do not change.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue, Use
from xdsl.passes import ModulePass

from presk.dialects import realize as R
from presk.dialects.realize.ops import _operand_places

from .fuse import empty_group, outside_inputs

REDUCTIONS = (R.SumOp, R.MeanOp, R.MaxOp, R.MinOp, R.LogSumExpOp)


def _reads_elements(use: Use) -> bool:
    """Whether a use reads the value's elements: a spread's `like` gives it a shape only
    (the reverse sweep's spread of a mean's cotangent takes the mean's operand, RMSNorm's
    x², as its `like`)."""
    return not (isinstance(use.operation, R.SpreadOp) and use.index == 1)


def _sole_reader(value: SSAValue) -> Operation | None:
    """The one op that reads `value`'s elements, if one does; ops that take only its shape
    do not count, as long as a stand-in can give them the shape once it is fused away."""
    uses = [u for u in value.uses if _reads_elements(u)]
    if len(uses) != 1 or (len(uses) < len(list(value.uses)) and _stand_in(value) is None):
        return None
    return uses[0].operation


def _stand_in(value: SSAValue) -> SSAValue | None:
    """A value of `value`'s sizes its element-wise producer reads (x for x²): what a
    shape-only reader takes instead once `value` lives inside a group."""
    op = value.owner
    if not isinstance(op, Operation):
        return None
    sizes = R._ttype(value).sizes
    return next((v for v in op.operands if isinstance(v.type, R.RTensorType)
                 and v.type.sizes == sizes), None)


def _steps(op: Operation) -> list[Operation]:
    return op.steps if isinstance(op, R.GroupOp) else [op]


def _elementwise(op: Operation | None) -> bool:
    return op is not None and (R.is_elementwise(op) or isinstance(op, R.GroupOp))


def _joins_producer(reduction: R.ReduceOp) -> Operation | None:
    producer = reduction.operand.owner
    if isinstance(producer, Operation) and _elementwise(producer) and \
            _sole_reader(reduction.operand) is reduction:
        return producer
    return None


def _reads_rows(consumer: Operation, value: SSAValue, kept: list[int]) -> bool:
    """Whether an F-shaped element-wise consumer reads the group's K value `value` on the
    kept axes (inside a group: every step reading the group's argument for it)."""
    if not isinstance(consumer, R.GroupOp):
        return all(places == kept for v, places in _operand_places(consumer) if v is value)
    args = [a for a, v in zip(consumer.body.block.args, consumer.inputs) if v is value]
    for step in consumer.steps:
        for v, places in _operand_places(step):
            if v in args and places != kept:
                return False
    return True


@dataclass
class _Members:
    reduction: R.ReduceOp
    ops: list[Operation]  # top-level ops of the instance, in block order

    @property
    def full(self) -> tuple[int, ...]:
        return self.reduction.operand.type.sizes

    @property
    def kept_shape(self) -> tuple[int, ...]:
        return self.reduction.result.type.sizes

    @property
    def kept(self) -> list[int]:
        k = self.reduction.axis_index
        return [i for i in range(len(self.full)) if k is not None and i != k]

    def grow(self) -> None:
        """Join readers while the group's value has one that may join."""
        while True:
            root = self.ops[-1].results[0]
            reader = _sole_reader(root)
            if not _elementwise(reader):
                return
            assert reader is not None
            sizes = R._ttype(reader.results[0]).sizes
            if sizes == self.kept_shape and R._ttype(root).sizes == self.kept_shape:
                self.ops.append(reader)
            elif sizes == self.full and (R._ttype(root).sizes == self.full or
                                         _reads_rows(reader, root, self.kept)):
                self.ops.append(reader)
            else:
                return


def fuse_reductions_func(func: R.FuncOp) -> int:
    """Fuse the reductions of one instance; the number of reduce_groups made."""
    made = 0
    for op in list(func.body.block.ops):
        if not isinstance(op, REDUCTIONS) or op.parent is None:
            continue
        producer = _joins_producer(op)
        members = _Members(op, ([producer] if producer is not None else []) + [op])
        members.grow()
        if sum(len(_steps(m)) for m in members.ops) >= 2 and len(members.ops) >= 2:
            _materialize(members.ops)
            made += 1
    return made


def _materialize(members: list[Operation]) -> R.ReduceGroupOp:
    """One reduce_group of `members` (top-level ops, in block order), at the last's place."""
    root = members[-1]
    for m in members[:-1]:  # a member's shape-only readers take its stand-in's shape
        value = m.results[0]
        for use in [u for u in value.uses if not _reads_elements(u)]:
            use.operation.operands[use.index] = _stand_in(value)
    inputs = outside_inputs(members)
    group, body = empty_group(R.ReduceGroupOp, inputs, root)
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args))
    for m in members:
        if isinstance(m, R.GroupOp):  # inline the group's steps
            inner = dict(zip(m.body.block.args, (mapping[v] for v in m.inputs)))
            for step in m.steps:
                clone = step.clone(value_mapper=inner)
                body.add_op(clone)
            mapping[m.results[0]] = inner[m.root.results[0]]
        else:
            clone = m.clone(value_mapper=mapping)
            body.add_op(clone)
            mapping[m.results[0]] = clone.results[0]
    body.add_op(R.YieldOp(mapping[root.results[0]]))
    root.parent_block().insert_op_before(group, root)  # type: ignore[union-attr]
    root.results[0].replace_all_uses_with(group.results[0])
    for m in reversed(members):
        m.detach()
        m.erase()
    return group


def fuse_reductions(module: ModuleOp) -> int:
    """psk-fuse-reduce on every instance; the number of reduce_groups made."""
    return sum(fuse_reductions_func(f) for f in R.funcs(module))


@dataclass(frozen=True)
class FuseReducePass(ModulePass):
    """`psk-fuse-reduce`"""

    name = "psk-fuse-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_reductions(op)
