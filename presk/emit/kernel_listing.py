"""The listing of PSK-Kernel (`presk dump --stage kernel`), the form of the reference's §9:

    -- 9 kernels, 27 launches, f64+9sites+4params
    -- fusion: 39 launches without it, 12 saved (31%)

    // k3: 4 launches at RMSNorm.apply/%10 (fused)
    kernel fused 2 steps (%0 : f32[batch: 4, model: 4], …) -> %3 : f32[batch: 4, model: 4] {
      for i0 in 0..4 {
        for i1 in 0..4 {
          %3[i0, i1] = ((%0[i0, i1] / %1[i0]) * %2[i1])
        }
      }
    }

then the host, a function per recorded instance (callees first), each launch under its
site. Counts are per call of the entry: a host runs as often as its callers call it, a
fold's body once per iteration. "Without fusion" counts one launch per operation a
launch computes (its `sites`): a group's steps, a contraction and its epilogue.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

from xdsl.ir import Block, Operation, SSAValue

from presk.dialects import kernel as K


# --------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------


def entry_host(module: Operation) -> K.HostOp:
    hosts = list(K.hosts(module).values())
    for h in hosts:
        if "entry" in h.attributes:
            return h
    if not hosts:
        raise ValueError("no psk_kernel.host in the module")
    return hosts[-1]


def _walk_runs(host: K.HostOp, times: int, hosts: dict[str, K.HostOp], visit) -> None:
    def block(b: Block, t: int) -> None:
        for op in b.ops:
            visit(host, op, t)
            if isinstance(op, K.CallOp):
                _walk_runs(hosts[op.callee_name], t, hosts, visit)
            elif isinstance(op, K.FoldOp):
                block(op.body.block, t * max(op.upper.data - op.lower.data, 0))

    block(host.body.block, times)


def host_runs(module: Operation) -> dict[str, int]:
    """How many times each host runs in one call of the entry."""
    hosts = K.hosts(module)
    runs = {name: 0 for name in hosts}
    entry = entry_host(module)
    runs[entry.sym_name.data] += 1

    def visit(host: K.HostOp, op: Operation, times: int) -> None:
        if isinstance(op, K.CallOp):
            runs[op.callee_name] += times

    _walk_runs(entry, 1, hosts, visit)
    return runs


def fresh_name(taken: set[str], base: str) -> str:
    """`base`, or `base_2`, `base_3`, ... : the first not in `taken`, which it joins."""
    name, i = base, 2
    while name in taken:
        name = f"{base}_{i}"
        i += 1
    taken.add(name)
    return name


@dataclass
class Counts:
    """One call of the entry: launches, launches without fusion, and per kernel its
    launches by label (the sites it is launched at, in order of first launch)."""

    kernels: int = 0
    launches: int = 0
    unfused: int = 0
    by_kernel: dict[str, dict[str, int]] = field(default_factory=dict)
    host_runs: dict[str, int] = field(default_factory=dict)

    @property
    def saved(self) -> int:
        return self.unfused - self.launches


def launch_label(op: K.LaunchOp) -> str:
    """`RMSNorm.apply/%10 (fused)`, `Linear.apply/%3 + Linear.apply/%5`, `… (ms)`."""
    sites = op.site_list
    if op.fused is not None:
        text = f"{op.site.data} (fused)"  # type: ignore[union-attr]
    else:
        text = " + ".join(sites)
    if op.source_name is not None:
        text += f" ({op.source_name.data})"
    return text


def count(module: Operation) -> Counts:
    hosts = K.hosts(module)
    out = Counts(kernels=len(K.kernels(module)))
    for name in K.kernels(module):
        out.by_kernel[name] = {}
    entry = entry_host(module)

    def visit(host: K.HostOp, op: Operation, times: int) -> None:
        if isinstance(op, K.LaunchOp) and times:
            out.launches += times
            out.unfused += times * len(op.site_list)
            labels = out.by_kernel.setdefault(op.callee_name, {})
            label = launch_label(op)
            labels[label] = labels.get(label, 0) + times

    _walk_runs(entry, 1, hosts, visit)
    out.host_runs = host_runs(module)
    return out


# --------------------------------------------------------------------------------------
# A kernel as pseudo-code
# --------------------------------------------------------------------------------------

def _number(x: float) -> str:
    """A constant as the listing writes it: `2`, `0.5`, `-inf` (a max's start), `nan`."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


class _KernelText:
    def __init__(self, kernel: K.KernelOp):
        self.kernel = kernel
        self.lines: list[str] = []
        self.expr: dict[SSAValue, str] = {}
        self.names: dict[SSAValue, str] = {}
        self.uses: dict[SSAValue, int] = {}
        self.accs = 0
        self.temps = 0
        for i, a in enumerate(kernel.args):
            self.names[a] = f"%{i}"
        for op in kernel.body.walk():
            for o in op.operands:
                self.uses[o] = self.uses.get(o, 0) + 1

    def text(self) -> str:
        k = self.kernel
        ins = ", ".join(f"{self.names[a]} : {a.type.listing()}" for a in k.input_args)
        outs = [f"{self.names[a]} : {a.type.listing()}" for a in k.output_args]
        out = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
        head = f"kernel {k.title.data} ({ins}) -> {out} {{"
        if not k.layout.is_default:
            self.lines.append(f"  // layout: {k.layout.text()}")
        self.block(k.body.block, 1, 0)
        return "\n".join([head, *self.lines, "}"])

    def value(self, v: SSAValue) -> str:
        if v in self.names:
            return self.names[v]
        return self.expr[v]

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def bind(self, v: SSAValue, text: str, depth: int) -> None:
        """Inline an expression where it is read, unless it is long and read again."""
        if self.uses.get(v, 0) > 1 and len(text) > 40:
            name = f"t{self.temps}"
            self.temps += 1
            self.emit(depth, f"{name} = {text}")
            self.names[v] = name
        else:
            self.expr[v] = text

    def block(self, block: Block, depth: int, level: int) -> None:
        for op in block.ops:
            if isinstance(op, K.YieldOp):
                loop = op.parent_op()
                assert isinstance(loop, K.ForOp)
                changed = [(self.names[arg], self.value(v))
                           for arg, v in zip(loop.carried, op.values)
                           if self.names.get(v) != self.names[arg]]
                if len(changed) == 1:
                    self.emit(depth, f"{changed[0][0]} = {changed[0][1]}")
                elif changed:  # one simultaneous assignment: each reads the old values
                    names, values = zip(*changed)
                    self.emit(depth, f"{', '.join(names)} = {', '.join(values)}")
            elif isinstance(op, K.ForOp):
                self.loop(op, depth, level)
            elif isinstance(op, K.StoreOp):
                index = ", ".join(self.value(i) for i in op.indices)
                self.emit(depth, f"{self.names[op.buffer]}[{index}] = {self.value(op.value)}")
            elif isinstance(op, K.LoadOp):
                index = ", ".join(self.value(i) for i in op.indices)
                self.expr[op.result] = f"{self.names[op.buffer]}[{index}]"
            elif isinstance(op, K.ConstantOp):
                self.expr[op.result] = _number(op.number)
            elif isinstance(op, K.BinaryOp) and op.SYMBOL:
                a, b = (self.value(x) for x in op.operands)
                self.bind(op.results[0], f"({a} {op.SYMBOL} {b})", depth)
            elif isinstance(op, (K.MinOp, K.MaxOp)):
                a, b = (self.value(x) for x in op.operands)
                self.bind(op.results[0], f"{op.name.split('.')[1]}({a}, {b})", depth)
            elif isinstance(op, K.NegOp):
                self.bind(op.result, f"(-{self.value(op.operand)})", depth)
            elif isinstance(op, K.FmaOp):
                a, b, c = (self.value(x) for x in op.operands)
                self.bind(op.result, f"fma({a}, {b}, {c})", depth)
            elif isinstance(op, K.MathOp):
                args = ", ".join(self.value(a) for a in op.args)
                self.bind(op.result, f"{op.fn.data}({args})", depth)
            elif isinstance(op, K.CastOp):
                self.bind(op.result, f"{K.type_name(op.result.type)}({self.value(op.operand)})",
                          depth)
            else:
                self.emit(depth, f"// {op.name}")

    def loop(self, op: K.ForOp, depth: int, level: int) -> None:
        index = f"i{level}"
        self.names[op.induction] = index
        for arg, init, res in zip(op.carried, op.inits, op.res):
            if init in self.names and self.names[init].startswith("s"):
                name = self.names[init]
            else:
                name = f"s{self.accs}"
                self.accs += 1
                self.emit(depth, f"{name} = {self.value(init)}")
            self.names[arg] = name
            self.names[res] = name
        order = f" in {op.width} partials, then pairwise" if op.width is not None else ""
        self.emit(depth, f"for {index} in {op.lower.data}..{op.upper.data}{order} {{")
        self.block(op.body.block, depth + 1, level + 1)
        self.emit(depth, "}")


def format_kernel(kernel: K.KernelOp) -> str:
    return _KernelText(kernel).text()


# --------------------------------------------------------------------------------------
# The host
# --------------------------------------------------------------------------------------


class _HostText:
    def __init__(self, host: K.HostOp, runs: int):
        self.host = host
        self.runs = runs
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}
        self.taken: set[str] = set()
        for a, n in zip(host.args, host.arg_name_list):
            self.names[a] = self.fresh(n)
        self.site: str | None = None

    def fresh(self, base: str) -> str:
        return fresh_name(self.taken, base)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def text(self) -> str:
        h = self.host
        ins = ", ".join(f"{self.names[a]} : {a.type.listing()}" for a in h.input_args)
        outs = ", ".join(f"{self.names[a]} : {a.type.listing()}" for a in h.output_args)
        calls = f"{self.runs} call{'s' * (self.runs != 1)}"
        head = f"host {h.sym_name.data} ({ins}) -> {outs} {{   // {h.function.data}, {calls}"
        self.block(h.body.block, 1)
        return "\n".join([head, *self.lines, "}"])

    def comment(self, op: Operation, depth: int) -> None:
        """`// <site>` where a new site's ops begin, under the label of its launch."""
        site = op.attributes.get("site")
        if site is None or site.data == self.site:  # type: ignore[attr-defined]
            return
        self.site = site.data  # type: ignore[attr-defined]
        text = self.site
        for later in (op, *_following(op)):
            if later.attributes.get("site") != site:
                break
            if isinstance(later, K.LaunchOp):
                text = launch_label(later)
                break
        self.emit(depth, f"// {text}")

    def block(self, block: Block, depth: int) -> None:
        n = lambda v: self.names[v]  # noqa: E731
        for op in block.ops:
            if isinstance(op, (K.MarkOp, K.ReleaseOp)):
                self.emit(depth, op.name.split(".")[1])
                continue
            self.comment(op, depth)
            if isinstance(op, K.AllocOp):
                base = op.source_name.data if op.source_name is not None else None
                site = op.site.data if op.site is not None else ""
                convert = next((u.operation for u in op.result.uses
                                if isinstance(u.operation, K.ConvertOp)
                                and u.operation.dest is op.result), None)
                if convert is not None:
                    base = f"{self.names[convert.source]}_{K.type_name(op.result.type.element)}"
                elif base is None:
                    base = "t" + site.rsplit("%", 1)[-1] if "%" in site else "t"
                    fold = next((u.operation for u in op.result.uses
                                 if isinstance(u.operation, K.FoldOp)
                                 and u.operation.init is not op.result), None)
                    if fold is not None:
                        base += "_buf"
                self.names[op.result] = self.fresh(base)
                self.emit(depth, f"{n(op.result)} = alloc {op.result.type.listing()}")
            elif isinstance(op, K.ConvertOp):
                self.emit(depth, f"convert {n(op.source)} -> {n(op.dest)}")
            elif isinstance(op, K.CopyOp):
                self.emit(depth, f"copy {n(op.source)} -> {n(op.dest)}")
            elif isinstance(op, K.FillOp):
                self.emit(depth, f"fill {n(op.dest)} = {op.number!r}")
            elif isinstance(op, K.AtOp):
                index = n(op.dynamic[0]) if op.dynamic else str(op.index.data)  # type: ignore[union-attr]
                self.names[op.result] = self.fresh(f"{n(op.source)}[{index}]")
            elif isinstance(op, K.LaunchOp):
                self.emit(depth, f"{op.callee_name}(" + ", ".join(n(a) for a in op.arguments)
                          + ")")
            elif isinstance(op, K.CallOp):
                self.emit(depth, f"{op.callee_name}(" + ", ".join(n(a) for a in op.arguments)
                          + ")")
            elif isinstance(op, K.FoldOp):
                self.names[op.index] = self.fresh("l")
                self.names[op.acc] = self.fresh("acc")
                self.names[op.dest] = self.fresh("next")
                span = f"{op.upper.data - 1} down to {op.lower.data}" if op.reverse is not None \
                    else f"{op.lower.data}..{op.upper.data}"
                self.emit(depth, f"for {n(op.index)} in {span} "
                          f"({n(op.acc)} = {n(op.init)}, then the {n(op.dest)} before; "
                          f"{n(op.dest)} = {n(op.scratch0)}, {n(op.scratch1)} by turns) {{")
                saved = self.site
                self.block(op.body.block, depth + 1)
                self.site = saved
                self.emit(depth, "}")
                self.names[op.result] = self.fresh(f"{n(op.init)}_last")
                self.emit(depth, f"{n(op.result)} = the last {n(op.dest)}")
            else:
                self.emit(depth, f"// {op.name}")


def _following(op: Operation):
    nxt = op.next_op
    while nxt is not None:
        yield nxt
        nxt = nxt.next_op


def host_order(module: Operation) -> list[K.HostOp]:
    """Callees before callers, in the order of first call from the entry (then the rest)."""
    hosts = K.hosts(module)
    seen: set[str] = set()
    done: list[str] = []

    def visit(h: K.HostOp) -> None:
        seen.add(h.sym_name.data)
        for op in K.host_ops(h):
            if isinstance(op, K.CallOp) and op.callee_name not in seen:
                visit(hosts[op.callee_name])
        done.append(h.sym_name.data)

    visit(entry_host(module))
    for name, h in hosts.items():
        if name not in seen:
            visit(h)
    return [hosts[n] for n in done]


def format_host(host: K.HostOp, runs: int = 1) -> str:
    return _HostText(host, runs).text()


# --------------------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def format_listing(module: Operation, realization: str = "all-f64") -> str:
    c = count(module)
    launches = "1 launch" if c.launches == 1 else f"{c.launches} launches"
    lines = [f"-- {_plural(c.kernels, 'kernel')}, {launches}, {realization}"]
    if c.unfused:
        pct = round(100 * c.saved / c.unfused)
        lines.append(f"-- fusion: {c.unfused} launches without it, {c.saved} saved ({pct}%)")
    lines.append("")
    for name, kernel in K.kernels(module).items():
        labels = c.by_kernel.get(name, {})
        total = sum(labels.values())
        where = ", ".join(labels) if len(labels) == 1 else \
            ", ".join(f"{label} ×{times}" for label, times in labels.items())
        launches = "1 launch" if total == 1 else f"{total} launches"
        lines.append(f"// {name}: {launches}" + (f" at {where}" if where else ""))
        lines.append(format_kernel(kernel))
    lines.append("")
    lines.append("-- the host: a function per recorded instance, callees first")
    for host in host_order(module):
        lines.append("")
        lines.append(format_host(host, c.host_runs.get(host.sym_name.data, 0)))
    return "\n".join(lines) + "\n"
