"""Which buffers the ops of a PSK-Kernel host may write — the analysis the native
lowering's host passes share (psk-kernel-forward-copies, psk-kernel-share-converts,
psk-kernel-hoist-input-converts).

A `convert`, `copy` or `fill` writes its destination, a launch its kernel's outputs (the
kernel's verifier holds it to them), a fold its scratch buffers and what its body writes.
A call writes what its callee writes: without the callees' facts (`Writes(module)`) any
buffer it is given; with them (`Writes(module, written_args(module))`) the arguments its
callee's body writes, over the calls — so a backward's call, which only reads the
residuals it is given, writes none of them. Buffers are named by their roots (`root`: the
buffer a view is part of).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from presk.dialects import kernel as K


def root(value: SSAValue) -> SSAValue:
    """The buffer a view (`at`) is part of."""
    while isinstance(value.owner, K.AtOp):
        value = value.owner.source
    return value


class Writes:
    """Which buffers (their roots) an op of a host may write; `written`: for each host,
    the indices of the arguments it writes (`written_args`), else a call writes every
    buffer it is given."""

    def __init__(self, module: Operation, written: dict[str, set[int]] | None = None):
        self.kernels = K.kernels(module)
        self.written = written

    def of(self, op: Operation) -> set[SSAValue]:
        if isinstance(op, (K.ConvertOp, K.CopyOp, K.FillOp)):
            return {root(op.dest)}
        if isinstance(op, K.LaunchOp):  # a kernel stores into its outputs only (its verifier)
            outputs = self.kernels[op.callee_name].output_count
            return {root(v) for v in op.arguments[len(op.arguments) - outputs:]}
        if isinstance(op, K.CallOp):
            if self.written is None:  # a callee may write any buffer it is given
                return {root(v) for v in op.arguments}
            wrote = self.written[op.callee_name]
            return {root(v) for i, v in enumerate(op.arguments) if i in wrote}
        if isinstance(op, K.FoldOp):  # so may a body, and what its ops write
            out = {root(v) for v in op.operands}
            for inner in op.body.walk():
                if inner is not op:
                    out |= self.of(inner)
            return out
        return set()


def written_args(module: Operation) -> dict[str, set[int]]:
    """For each host, the indices of the arguments its body may write (through any view,
    its calls included): a fixed point over the calls, from nothing written."""
    hosts = K.hosts(module)
    written: dict[str, set[int]] = {name: set() for name in hosts}
    changed = True
    while changed:
        changed = False
        writes = Writes(module, written)
        for name, host in hosts.items():
            roots = set().union(*(writes.of(op) for op in K.host_ops(host)))
            now = {i for i, a in enumerate(host.args) if a in roots}
            if now != written[name]:
                written[name], changed = now, True
    return written


def call_sites(hosts: dict[str, K.HostOp]) -> dict[str, list[K.CallOp]]:
    """Each host's calls (folds' bodies included), by the callee's name; every host is
    named, one nobody calls with none."""
    out: dict[str, list[K.CallOp]] = {name: [] for name in hosts}
    for host in hosts.values():
        for op in K.host_ops(host):
            if isinstance(op, K.CallOp):
                out[op.callee_name].append(op)
    return out
