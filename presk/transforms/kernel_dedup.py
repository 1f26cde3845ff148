"""psk-kernel-dedup: kernels with the same nest become one, launched by every site.

Two kernels are the same when their bodies' ops, attributes and types, their arguments'
element types and sizes (axis names aside), their outputs and their layout are (not their
titles): `structure_key`. Of each such set the first in the module stays (its title with
it) and every launch of the others launches it. Then the kernels are named k0, k1, … in
the order of their first launch in one call of the entry (`K.number_kernels`).

convert-psk-realize-to-kernel makes one kernel per launch; this pass follows it in the
kernel pipeline (`realize_to_kernel` runs both).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, SymbolRefAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from presk.dialects import kernel as K


def structure_key(kernel: K.KernelOp) -> tuple:
    """What makes two kernels one: the body's ops, their attributes and types, the
    arguments' element types and sizes, the outputs and the layout (not the title, not
    the axis names)."""
    ids: dict[SSAValue, str] = {}
    for i, a in enumerate(kernel.args):
        ids[a] = f"a{i}"
    parts: list = [tuple((K.type_name(a.type.element), a.type.shape) for a in kernel.args),
                   kernel.output_count, str(kernel.layout)]
    for op in kernel.body.walk():
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    ids.setdefault(arg, f"b{len(ids)}")
        for r in op.results:
            ids[r] = f"v{len(ids)}"
        attrs = tuple(sorted((k, str(v)) for k, v in op.attributes.items()))
        parts.append((op.name, tuple(ids.get(o, "?") for o in op.operands), attrs,
                      tuple(str(r.type) for r in op.results)))
    return tuple(parts)


def dedup_kernels(module: ModuleOp) -> None:
    """Share the kernels of `module` that are the same, then number them by launch."""
    kept: dict[tuple, K.KernelOp] = {}
    same_as: dict[str, str] = {}
    for kernel in [op for op in module.ops if isinstance(op, K.KernelOp)]:
        first = kept.setdefault(structure_key(kernel), kernel)
        if first is not kernel:
            same_as[kernel.sym_name.data] = first.sym_name.data
            kernel.detach()
            kernel.erase()
    for host in K.hosts(module).values():
        for op in K.host_ops(host):
            if isinstance(op, K.LaunchOp) and op.callee_name in same_as:
                op.callee = SymbolRefAttr(same_as[op.callee_name])
    K.number_kernels(module)


@dataclass(frozen=True)
class KernelDedupPass(ModulePass):
    """`psk-kernel-dedup`: one kernel for each distinct nest (see the module docstring)."""

    name = "psk-kernel-dedup"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        dedup_kernels(op)
