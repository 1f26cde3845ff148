"""What one call of an entry needs in memory: the figures `presk memory` prints.

From the trace of the entry's host (presk/kernel_abi/lives.py: every buffer's life,
counted from the recorded program): the parameters, inputs, outputs, the peak of live
bytes and where it is (operation, site, call, fold iteration), and the calls' shares of
it, the iterations of a fold taken together. The symbolic form is
presk/analysis/memory_symbolic.py; the placed arena presk/kernel_abi/placement.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernel_abi.lives import Buffer, Frame, Step, Trace, live_at, live_bytes

# --------------------------------------------------------------------------------------
# The figures
# --------------------------------------------------------------------------------------


@dataclass
class Box:
    """A call of the network diagram (the iterations of a fold together): its share of the
    peak, its own peak, how many calls it stands for, the calls in it."""

    label: str
    path: tuple[str, ...]
    calls: int
    share: int
    own_peak: int
    inner: list[Box]


@dataclass
class Count:
    trace: Trace
    parameters: int
    parameter_elements: dict[str, int]  # element type → elements
    inputs: int
    outputs: int
    live: list[int]  # live bytes at each step
    peak: int
    peak_step: int
    arena_live: int  # the peak of the arena's own buffers (outputs and inputs apart)
    itself: int  # the entry's own buffers live at the peak
    boxes: list[Box]

    @property
    def needs(self) -> int:
        return self.inputs + self.peak

    @property
    def peak_where(self) -> Step:
        return self.trace.steps[self.peak_step]


def count(trace: Trace, depth: int = 2) -> Count:
    """The figures of one call; the calls `depth` levels below the entry."""
    params: dict[str, int] = {}
    n_params = 0
    for b in trace.buffers:
        if b.kind == "input" and b.name.startswith("θ."):
            params[b.element] = params.get(b.element, 0) + b.elements
            n_params += b.bytes
    live = live_bytes(trace)
    peak = max(live, default=0)
    step = live.index(peak) if live else 0
    at_peak = live_at(trace, step) if live else []
    itself = sum(b.bytes for b in at_peak if b.kind == "made" and len(b.path) == 1
                 and not _calls_at(trace, b.path))
    return Count(
        trace, n_params, params,
        sum(b.bytes for b in trace.buffers if b.kind == "input"),
        sum(b.bytes for b in trace.buffers if b.kind == "output"),
        live, peak, step, max(live_bytes(trace, lambda b: b.kind == "made"), default=0),
        itself, _boxes(trace, (), at_peak, depth))


def _calls_at(trace: Trace, path: tuple[str, ...]) -> list[Frame]:
    return [f for f in trace.frames if f.path == path]


def _boxes(trace: Trace, prefix: tuple[str, ...], at_peak: list[Buffer],
           depth: int) -> list[Box]:
    if depth == 0:
        return []
    sites: dict[str, list[Frame]] = {}
    for f in trace.frames:
        if len(f.path) == len(prefix) + 1 and f.path[:len(prefix)] == prefix:
            sites.setdefault(f.path[-1], []).append(f)
    boxes = []
    for site, frames in sites.items():
        path = prefix + (site,)
        mine = (lambda b, p=path: b.counted and b.path[:len(p)] == p)
        share = sum(b.bytes for b in at_peak if mine(b))
        live = live_bytes(trace, mine)
        steps = [i for i, s in enumerate(trace.steps) if s.path[:len(path)] == path]
        own = max((live[i] for i in steps), default=0)
        boxes.append(Box(frames[0].label, path, len(frames), share, own,
                         _boxes(trace, path, at_peak, depth - 1)))
    return boxes
