"""The buffers' lives in one run of a PSK-Kernel host, counted from the program.

The host is walked as it runs (folds unrolled, calls entered) without computing anything:
a *step* is each op that touches memory — a launch, convert, copy or fill — with the
buffers it reads and writes (a launch: the kernel arguments its nest loads from and
stores into). A *buffer* is an input of the host run (its caller's), an output, or one
`alloc` of one call of a host. A buffer is live from its first write to its last read: a
backward sweep over the steps keeps a buffer live across a step unless the step writes
it whole (a write into an `at` view writes part of its root), and a step's live set is
what it reads, what it writes and what stays live after it. A fold's scratch buffer,
written whole each second iteration, is so live in pieces.

`record_trace(module)` walks the entry host (`record_host` any host) and returns the
`Trace`. The arena's placement (presk/kernel_abi/placement.py) and `presk memory`
(presk/analysis/memory.py) read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from ..dialects import kernel as K


class MemoryCountError(Exception):
    """A module `presk memory` cannot count (no entry host, a recursive call)."""


# --------------------------------------------------------------------------------------
# The trace
# --------------------------------------------------------------------------------------


@dataclass
class Frame:
    """One call of a host: `path` the sites of the calls that lead to it from the entry,
    `label` how the network diagram names the call (the parameter field it applies, or the
    function), `iteration` the innermost fold iteration it runs in."""

    host: K.HostOp
    parent: Frame | None
    call: K.CallOp | None
    path: tuple[str, ...]
    label: str
    iteration: int | None
    first: int = 0  # its first step
    last: int = -1  # its last step


@dataclass
class Buffer:
    kind: str  # "input", "output" or "made"
    bytes: int
    element: str
    elements: int
    name: str  # the entry's argument name, or the alloc's site
    frame: Frame | None = None  # the call that allocated it
    alloc: K.AllocOp | None = None
    path: tuple[str, ...] = ()  # its frame's path and the alloc's site
    intervals: list[tuple[int, int]] = field(default_factory=list)  # live, steps inclusive

    @property
    def counted(self) -> bool:
        """Made by the call (an arena buffer or an output it writes)."""
        return self.kind != "input"


@dataclass
class Step:
    op: Operation
    frame: Frame
    iteration: int | None
    reads: frozenset[int]
    writes: frozenset[int]
    whole: frozenset[int]  # written whole (not through an `at` view)
    path: tuple[str, ...]  # its frame's path and its site

    @property
    def site(self) -> str:
        return K.site_of(self.op)


@dataclass
class Trace:
    module: ModuleOp
    entry: K.HostOp
    buffers: list[Buffer]
    steps: list[Step]
    frames: list[Frame]

    @property
    def launches(self) -> int:
        return sum(isinstance(s.op, K.LaunchOp) for s in self.steps)


def entry_host(module: ModuleOp) -> K.HostOp:
    for host in K.hosts(module).values():
        if host.entry is not None:
            return host
    raise MemoryCountError("the module has no entry host")


def _buffer_of(t: K.BufferType, kind: str, name: str) -> Buffer:
    return Buffer(kind, t.bytes, K.type_name(t.element), t.size, name)


class _Recorder:
    """Walks the entry host as it runs, making the buffers, frames and steps."""

    def __init__(self, module: ModuleOp, hosts: dict[str, K.HostOp] | None = None,
                 kernels: dict[str, K.KernelOp] | None = None):
        self.module = module
        self.hosts = K.hosts(module) if hosts is None else hosts
        self.kernels = K.kernels(module) if kernels is None else kernels
        self.buffers: list[Buffer] = []
        self.steps: list[Step] = []
        self.frames: list[Frame] = []
        self._access: dict[str, tuple[frozenset[int], frozenset[int]]] = {}

    def run(self, host: K.HostOp) -> Trace:
        env: dict[SSAValue, tuple[int, bool]] = {}
        n_in = len(host.input_args)
        for i, (name, arg) in enumerate(zip(host.arg_name_list, host.args)):
            env[arg] = (self._new(_buffer_of(arg.type, "input" if i < n_in else "output",
                                             name)), True)
        frame = Frame(host, None, None, (), host.function.data, None)
        self._enter(frame, env)
        return Trace(self.module, host, self.buffers, self.steps, self.frames)

    def _new(self, buffer: Buffer) -> int:
        self.buffers.append(buffer)
        return len(self.buffers) - 1

    def _enter(self, frame: Frame, env: dict[SSAValue, tuple[int, bool]]) -> None:
        if any(f.host is frame.host for f in _ancestors(frame.parent)):
            raise MemoryCountError(f"@{frame.host.sym_name.data} calls itself")
        self.frames.append(frame)
        frame.first = len(self.steps)
        self._block(frame, frame.host.body.block, env, frame.iteration)
        frame.last = len(self.steps) - 1

    def _block(self, frame: Frame, block: Block, env: dict[SSAValue, tuple[int, bool]],
               iteration: int | None) -> None:
        for op in block.ops:
            if isinstance(op, K.AllocOp):
                t = op.result.type
                site = K.site_of(op)
                b = _buffer_of(t, "made", site)  # type: ignore[arg-type]
                b.frame, b.alloc, b.path = frame, op, frame.path + (site,)
                env[op.result] = (self._new(b), True)
            elif isinstance(op, K.AtOp):
                env[op.result] = (env[op.source][0], False)
            elif isinstance(op, (K.ConvertOp, K.CopyOp)):
                self._step(op, frame, iteration, [env[op.source]], [env[op.dest]])
            elif isinstance(op, K.FillOp):
                self._step(op, frame, iteration, [], [env[op.dest]])
            elif isinstance(op, K.LaunchOp):
                loads, stores = self._kernel_access(op.callee_name)
                args = [env[a] for a in op.arguments]
                self._step(op, frame, iteration, [args[i] for i in loads],
                           [args[i] for i in stores])
            elif isinstance(op, K.CallOp):
                self._call(op, frame, env, iteration)
            elif isinstance(op, K.FoldOp):
                scratch = (env[op.scratch0], env[op.scratch1])
                acc = env[op.init]
                for n, l in enumerate(op.iterations()):
                    env[op.acc], env[op.dest] = acc, scratch[n % 2]
                    self._block(frame, op.body.block, env, l)
                    acc = env[op.dest]
                env[op.result] = acc
            elif not isinstance(op, (K.MarkOp, K.ReleaseOp)):
                raise MemoryCountError(f"{op.name} is not a host op")

    def _call(self, op: K.CallOp, frame: Frame, env: dict[SSAValue, tuple[int, bool]],
              iteration: int | None) -> None:
        callee = self.hosts[op.callee_name]
        peeled = _peeled(op)
        if peeled is not None:
            iteration = peeled
        inner = {a: env[v] for a, v in zip(callee.args, op.arguments)}
        self._enter(Frame(callee, frame, op, frame.path + (K.site_of(op),),
                          _label(op, frame.host, callee), iteration), inner)

    def _step(self, op: Operation, frame: Frame, iteration: int | None,
              reads: list[tuple[int, bool]], writes: list[tuple[int, bool]]) -> None:
        self.steps.append(Step(op, frame, iteration, frozenset(b for b, _ in reads),
                               frozenset(b for b, _ in writes),
                               frozenset(b for b, whole in writes if whole),
                               frame.path + (K.site_of(op),)))

    def _kernel_access(self, name: str) -> tuple[frozenset[int], frozenset[int]]:
        """Which of a kernel's arguments it loads from and which it stores into."""
        if name not in self._access:
            kernel = self.kernels[name]
            index = {a: i for i, a in enumerate(kernel.args)}
            loads, stores = set(), set()
            for op in kernel.body.walk():
                if isinstance(op, K.LoadOp):
                    loads.add(index[op.buffer])
                elif isinstance(op, K.StoreOp):
                    stores.add(index[op.buffer])
            self._access[name] = (frozenset(loads), frozenset(stores))
        return self._access[name]


def _ancestors(frame: Frame | None):
    while frame is not None:
        yield frame
        frame = frame.parent


def _peeled(call: K.CallOp) -> int | None:
    """A call standing before a fold of its own site is the fold's first iteration, peeled
    (the recorder does so when its input's type differs): the iteration before `lower`."""
    block = call.parent_block()
    site = K.site_of(call)
    if block is None or isinstance(block.parent_op(), K.FoldOp):
        return None
    for op in block.ops:
        if isinstance(op, K.FoldOp) and K.site_of(op) == site:
            return op.lower.data - 1
    return None


def _label(call: K.CallOp, caller: K.HostOp, callee: K.HostOp) -> str:
    """The parameter field a call applies (`blocks` for Tower's `blocks.apply(x)`): the
    caller's name of a parameter it passes, less the callee's name of it; the callee's
    function when it passes its own parameters whole or none."""
    for value, name in zip(call.arguments, callee.arg_name_list):
        while isinstance(value.owner, K.AtOp):
            value = value.owner.source
        if not (isinstance(value, BlockArgument) and name.startswith("θ.")):
            continue
        outer = caller.arg_name_list[value.index]
        if outer.startswith("θ.") and outer.endswith("." + name[2:]):
            field = outer[2:len(outer) - len(name) + 1].rstrip(".")
            if field:
                return field
            break
    return f"`{callee.function.data}`"


def record_trace(module: ModuleOp) -> Trace:
    """The entry host of a PSK-Kernel module walked as it runs, its buffers' lives set."""
    return record_host(module, entry_host(module))


def record_host(module: ModuleOp, host: K.HostOp, hosts: dict[str, K.HostOp] | None = None,
                kernels: dict[str, K.KernelOp] | None = None) -> Trace:
    """One run of `host`, its buffers' lives set; `hosts` and `kernels`, when given, the
    module's (K.hosts, K.kernels: a caller recording every host walks the module once, not
    once per host — a timing harness of n kernels has n hosts)."""
    trace = _Recorder(module, hosts, kernels).run(host)
    set_lives(trace)
    return trace


def set_lives(trace: Trace) -> None:
    """Each buffer's live intervals (steps, inclusive), by the backward sweep."""
    open_end: dict[int, int] = {}
    live: set[int] = set()
    for i in range(len(trace.steps) - 1, -1, -1):
        s = trace.steps[i]
        here = s.reads | s.writes | live
        for b in here:
            open_end.setdefault(b, i)
        live_in = set(s.reads) | (live - s.whole)
        for b in here - live_in:
            trace.buffers[b].intervals.append((i, open_end.pop(b)))
        live = live_in
    first_write: dict[int, int] = {}
    for i, s in enumerate(trace.steps):
        for b in s.writes:
            first_write.setdefault(b, i)
    for b, end in open_end.items():  # live before the first step: inputs, partial writes
        buf = trace.buffers[b]
        start = 0 if buf.kind == "input" else first_write.get(b, end)
        buf.intervals.append((start, end))
    last = len(trace.steps) - 1
    for buf in trace.buffers:
        buf.intervals.reverse()
        if buf.kind == "output" and buf.intervals:  # the caller reads it after the call
            buf.intervals = [(buf.intervals[0][0], last)]


def live_bytes(trace: Trace, which=lambda b: b.counted, size=lambda b: b.bytes) -> list[int]:
    """The bytes (`size`) of the buffers `which` picks live at each step."""
    diff = [0] * (len(trace.steps) + 1)
    for b in trace.buffers:
        if which(b):
            n = size(b)
            for s, e in b.intervals:
                diff[s] += n
                diff[e + 1] -= n
    out, run = [], 0
    for d in diff[:-1]:
        run += d
        out.append(run)
    return out


def live_at(trace: Trace, step: int) -> list[Buffer]:
    return [b for b in trace.buffers if any(s <= step <= e for s, e in b.intervals)]


