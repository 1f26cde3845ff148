"""psk-kernel-fuse-siblings: two launches that call one math function on the same elements
become one launch of one kernel, which calls it once.

gelu's slope (a coefficient the forward sweep computes, docs/autodiff.md) reads what gelu
reads, and both compute erf(x/√2): two kernels, each a 22-step Horner rule an element.
psk-fuse cannot join them (neither reads the other; a group yields one value). Here, two
launches L1 then L2 of a host block are siblings when
  - only allocations stand between them, and neither reads or writes an output of the
    other;
  - their kernels are element-wise nests of the same loops: the default layout, each level
    one `for` with no carried value, the same bounds; and
  - run in one nest, their bodies share a math call: the same function of the same
    values in the same type (`psk_kernel.math`, after the shared loads and operations
    below).
One kernel then runs L1's body and L2's in one nest — its inputs L1's, then those of L2
that L1 lacks; its outputs L1's, then L2's — and computes each common subexpression once
(xDSL's CSE): a load of the same element (a kernel never writes its inputs), a constant,
an operation of the same operands, attributes and types. Each output is computed by the operations and
types it had: the bits stay. The launch stands where L2 stood (L1's inputs are unchanged
up to there); its `sites` are L1's then L2's, its `site` L1's, and `stores` names the site
each output holds.

Runs after psk-kernel-dedup (presk/conversion/realize_to_kernel's `realize_to_kernel`
runs the conversion, dedup and, when the recording fuses, this pass), then names the
kernels again.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse

from presk.dialects import kernel as K

from .kernel_dedup import dedup_kernels


def _loops(kernel: K.KernelOp) -> list[K.ForOp] | None:
    """The loops of a perfect nest of independent iterations, outermost first (each level
    one `for` with no carried value, alone in its block but for the yield); None for a
    kernel of another shape."""
    if kernel.layout != K.LayoutAttr.default() or kernel.parts is not None:
        return None
    loops: list[K.ForOp] = []
    block = kernel.body.block
    while True:
        ops = [op for op in block.ops if not isinstance(op, K.YieldOp)]
        fors = [op for op in ops if isinstance(op, K.ForOp)]
        if not fors:
            return loops or None
        if len(ops) != 1 or fors[0].inits or fors[0].partials is not None:
            return None
        loops.append(fors[0])
        block = fors[0].body.block


def _bounds(loops: list[K.ForOp]) -> tuple[tuple[int, int], ...]:
    return tuple((f.lower.data, f.upper.data) for f in loops)  # type: ignore[attr-defined]


def share_common(block: Block) -> int:
    """Compute each common subexpression of a loop body once (xDSL's CSE: the kernel's
    loads, constants and scalar operations are Pure — a kernel never writes its inputs);
    returns how many math calls that saved."""
    def calls() -> int:
        return sum(isinstance(op, K.MathOp) for op in block.ops)
    before = calls()
    cse(block)
    return before - calls()


def _merged(first: K.LaunchOp, second: K.LaunchOp, name: str
            ) -> tuple[K.KernelOp, list[SSAValue]] | None:
    """The one kernel of two sibling launches, and its launch's arguments; None when they
    are not siblings."""
    k1, k2 = first.target(), second.target()
    loops1, loops2 = _loops(k1), _loops(k2)
    if loops1 is None or loops2 is None or _bounds(loops1) != _bounds(loops2):
        return None
    n1, n2 = len(k1.input_args), len(k2.input_args)
    in1, out1 = list(first.arguments[:n1]), list(first.arguments[n1:])
    in2, out2 = list(second.arguments[:n2]), list(second.arguments[n2:])
    if set(in2) & set(out1) or set(in1) & set(out2) or set(out1) & set(out2):
        return None  # one nest may not read what it writes
    inputs: list[tuple[SSAValue, SSAValue]] = list(zip(in1, k1.input_args))
    for value, arg in zip(in2, k2.input_args):
        if all(value is not v for v, _ in inputs):
            inputs.append((value, arg))
    outputs = list(zip(out1, k1.output_args)) + list(zip(out2, k2.output_args))
    types = [arg.type for _, arg in inputs + outputs]
    body = Block(arg_types=types)
    kernel = K.KernelOp(name, types, len(outputs), f"{k1.title.data} + {k2.title.data}",
                        body=body)
    host_values = [v for v, _ in inputs + outputs]

    def arg_of(value: SSAValue) -> SSAValue:
        return body.args[next(i for i, v in enumerate(host_values) if v is value)]

    m1 = {a: arg_of(v) for v, a in zip(first.arguments, k1.args)}
    body.add_op(loops1[0].clone(value_mapper=m1))
    new_loops = _loops(kernel)
    assert new_loops is not None
    m2 = {a: arg_of(v) for v, a in zip(second.arguments, k2.args)}
    m2.update({old.induction: new.induction for old, new in zip(loops2, new_loops)})
    inner = new_loops[-1].body.block
    end = inner.last_op
    for op in list(loops2[-1].body.block.ops):
        if not isinstance(op, K.YieldOp):
            inner.insert_op_before(op.clone(value_mapper=m2), end)
    if not share_common(inner):
        return None
    return kernel, host_values


def _between(first: Operation, second: Operation) -> list[Operation]:
    out, op = [], first.next_op
    while op is not None and op is not second:
        out.append(op)
        op = op.next_op
    return out


def fuse_siblings(module: ModuleOp) -> int:
    """Fuse every pair of sibling launches of `module` (the module docstring); returns how
    many pairs."""
    fused = 0
    replaced: set[str] = set()
    for host in K.hosts(module).values():
        for block in (b for op in host.walk() for r in op.regions for b in r.blocks):
            launches = [op for op in block.ops if isinstance(op, K.LaunchOp)]
            for first, second in zip(launches, launches[1:]):
                if first.parent is None or not all(isinstance(op, K.AllocOp)
                                                   for op in _between(first, second)):
                    continue  # (first was fused with the launch before it)
                made = _merged(first, second, f"siblings{fused}")
                if made is None:
                    continue
                kernel, args = made
                module.body.block.add_op(kernel)
                launch = K.LaunchOp(kernel.sym_name.data, args, first.site.data,
                                    first.site_list + second.site_list,
                                    fused=first.fused is not None or second.fused is not None,
                                    name=_name(first))
                launch.stores = ArrayAttr([StringAttr(s) for s in
                                           first.store_sites + second.store_sites])
                block.insert_op_before(launch, second)
                for op in (first, second):
                    replaced.add(op.callee_name)
                    op.detach()
                    op.erase()
                fused += 1
    if fused:
        launched = {op.callee_name for op in module.walk() if isinstance(op, K.LaunchOp)}
        for name in replaced - launched:
            K.kernels(module)[name].detach()
        dedup_kernels(module)  # shares equal new kernels, and names them all again
    return fused


def _name(op: K.LaunchOp) -> str | None:
    return op.source_name.data if op.source_name is not None else None


@dataclass(frozen=True)
class FuseSiblingsPass(ModulePass):
    """`psk-kernel-fuse-siblings`: one launch for two that share a math call (the module
    docstring)."""

    name = "psk-kernel-fuse-siblings"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_siblings(op)
