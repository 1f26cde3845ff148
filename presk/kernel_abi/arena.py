"""The arena of a PSK-Kernel module, planned statically, and what the lowered module
exports: one plan that the native lowering (convert-psk-kernel-to-std), the C program
(presk/emit/c_program.py) and the analyses (memory) all read, so that a buffer lies at the
same offset in each.

Here, above the dialects and below conversion, emit and analysis, rather than in
`analysis/`: the plan is part of the calling convention (an entry's `arena_bytes`, where
each `alloc` lives), and a conversion must not import an analysis.

Every `alloc` lives at an offset that the buffers' lives fix (lives.py, placement.py),
on a cache line when it is 64 bytes or more, else on the least power of two ≥ its size
(`calling.slot_align`); a `call` hands its callee the arena at the base the plan fixes.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from presk.dialects import kernel as K
from presk.kernel_abi.calling import ROUNDED_INPUTS, BufferSig, EntrySig, entry_symbol


class ArenaPlan:
    """The layouts of the module's hosts (presk/kernel_abi/placement.py): where each
    `alloc` lives in its host's arena, and for each `call` which layout of the callee it
    runs at which base, at a fold's even and odd iterations; `peak[host]` the bytes a host
    needs, its callees' included: the buffers placed by their lives, not a stack of frames.
    A host the entry does not reach is placed from a run of its own."""

    def __init__(self, module: ModuleOp):
        from presk.kernel_abi.lives import record_host
        from presk.kernel_abi.placement import Layout, Target, place
        self.hosts = K.hosts(module)
        self.layouts: dict[str, Layout] = {}
        self.peak: dict[str, int] = {}
        kernels = K.kernels(module)
        order = sorted(self.hosts.values(), key=lambda h: h.entry is None)
        for host in order:
            if host.sym_name.data not in self.peak:
                plan = place(record_host(module, host, self.hosts, kernels))
                for name, need in plan.need.items():
                    self.peak.setdefault(name, need)
                for name, layout in plan.layouts.items():
                    self.layouts.setdefault(name, layout)
        for name in self.hosts:
            self.layouts.setdefault(name, Layout(name, name))
        for layout in self.layouts.values():  # an alloc or call no run reaches (a fold of none)
            for op in K.host_ops(self.hosts[layout.host]):
                if isinstance(op, K.AllocOp):
                    layout.offsets.setdefault(op, 0)
                elif isinstance(op, K.CallOp):
                    target = Target(op.callee_name, 0)
                    layout.calls.setdefault(op, (target, target))

    def reached(self, host: str) -> list:
        """The layouts a call of `host` runs, its own and every one its calls reach, each
        after the layouts it calls (for C, which defines a function before its use)."""
        order: list = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            seen.add(name)
            for pair in self.layouts[name].calls.values():
                for t in pair:
                    if t.layout not in seen:
                        visit(t.layout)
            order.append(self.layouts[name])

        visit(host)
        return order

    def variants(self) -> list:
        """The layouts that are not a host's own: a fold's callee at its even or odd
        iterations, or a callee placed among its caller's buffers."""
        return [l for l in self.layouts.values() if l.caller is not None]


def aliased_kernels(module: ModuleOp) -> frozenset[str]:
    """Kernels some launch passes one buffer as an output and as another argument, and
    the parts of such kernels (psk-kernel-split): their pointers may not be `noalias`."""
    out = set()
    for op in module.walk():
        if isinstance(op, K.LaunchOp):
            kernel = op.target()
            n_in = len(kernel.input_args)
            args = list(op.arguments)
            for j in range(n_in, len(args)):
                if any(args[j] is a for i, a in enumerate(args) if i != j):
                    out.add(op.callee_name)
    for kernel in K.kernels(module).values():
        if kernel.sym_name.data in out and kernel.parts is not None:
            out.update(p.root_reference.data for p in kernel.parts)
    return frozenset(out)


def entry_signatures(module: ModuleOp) -> list[EntrySig]:
    """The entries the lowered module exports, for the runtime."""
    plan = ArenaPlan(module)
    sigs = []
    for name, host in plan.hosts.items():
        if host.entry is None:
            continue
        rounded = host.attributes.get(ROUNDED_INPUTS)
        given = {a.data for a in rounded.data} if rounded is not None else set()
        bufs = [BufferSig(n, K.type_name(a.type.element), a.type.shape,  # type: ignore
                          "f64" if n in given else None)
                for n, a in zip(host.arg_name_list, host.args)]
        n_in = len(host.input_args)
        sigs.append(EntrySig(name, entry_symbol(name), tuple(bufs[:n_in]), tuple(bufs[n_in:]),
                             plan.peak[name]))
    return sigs
