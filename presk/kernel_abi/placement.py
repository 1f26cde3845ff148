"""The arena placed by the buffers' lives: an offset for every `alloc` and every `call`.

Each host is placed once, callees first, as a rigid shape: the rectangles (offset, bytes
rounded to 64, the steps it is live, relative to the host's first step) of its own
buffers and of its callees' shapes at their bases. Every call of a host runs the same
steps, so one shape serves every call; a `call` in a fold is placed once for all its
iterations. Within a host the items — its allocations, and its calls with their callees'
shapes — are placed largest first, each at the lowest offset where none of its rectangles
meets a placed one that is live at the same step (best fit by size and life on the
interval graph). A caller's buffer that a callee writes only at its end (its result) may
so take the place of the callee's buffers dead by then: no stack of frames.

`place(trace)` returns the `Placement`: `offsets` by op (an `alloc`'s place in its host's
frame, a `call`'s base for its callee) and `need` by host (its frame's bytes, its callees'
included). The lives come from presk/kernel_abi/lives.py's trace of the entry; `ArenaPlan`
(presk/kernel_abi/arena.py), which native code and the C program read, is this
placement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation

from .calling import align
from .lives import Frame, Trace

Intervals = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Rect:
    offset: int
    size: int
    life: Intervals  # steps, inclusive, relative to the host's first step

    def shifted(self, offset: int, steps: int) -> Rect:
        return Rect(self.offset + offset, self.size,
                    tuple((s + steps, e + steps) for s, e in self.life))


@dataclass
class Placement:
    offsets: dict[Operation, int] = field(default_factory=dict)
    need: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, list[Rect]] = field(default_factory=dict)


def _merge(life: list[tuple[int, int]]) -> Intervals:
    out: list[tuple[int, int]] = []
    for s, e in sorted(life):
        if out and s <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return tuple(out)


def _meet(a: Intervals, b: Intervals) -> bool:
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][0] <= b[j][1] and b[j][0] <= a[i][1]:
            return True
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return False


@dataclass
class _Item:
    op: Operation
    rects: list[Rect]  # at offset 0

    @property
    def extent(self) -> int:
        return max((r.offset + r.size for r in self.rects), default=0)

    @property
    def start(self) -> int:
        return min((r.life[0][0] for r in self.rects if r.life), default=0)

    @property
    def area(self) -> int:
        return sum(r.size * sum(e - s + 1 for s, e in r.life) for r in self.rects)


def place(trace: Trace) -> Placement:
    """Offsets for every alloc and call of the hosts the entry reaches."""
    plan = Placement()
    first: dict[str, Frame] = {}
    for f in trace.frames:
        first.setdefault(f.host.sym_name.data, f)
    children: dict[int, list[Frame]] = {}
    for f in trace.frames:
        if f.parent is not None:
            children.setdefault(id(f.parent), []).append(f)
    made: dict[int, list] = {}
    for b in trace.buffers:
        if b.frame is not None:
            made.setdefault(id(b.frame), []).append(b)

    def shape(name: str) -> list[Rect]:
        if name not in plan.shapes:
            frame = first[name]
            items = _own_items(frame, made.get(id(frame), []))
            items += _call_items(frame, children.get(id(frame), []), shape)
            plan.shapes[name] = _place_items(items, plan.offsets)
            plan.need[name] = align(max((r.offset + r.size for r in plan.shapes[name]),
                                        default=0))
        return plan.shapes[name]

    for name in first:
        shape(name)
    return plan


def _own_items(frame: Frame, buffers) -> list[_Item]:
    lives: dict[Operation, list[tuple[int, int]]] = {}
    sizes: dict[Operation, int] = {}
    for b in buffers:
        lives.setdefault(b.alloc, []).extend(
            (s - frame.first, e - frame.first) for s, e in b.intervals)
        sizes[b.alloc] = align(b.bytes)
    return [_Item(op, [Rect(0, sizes[op], _merge(life))]) for op, life in lives.items()]


def _call_items(frame: Frame, calls: list[Frame], shape) -> list[_Item]:
    by_op: dict[Operation, list[Rect]] = {}
    for g in calls:
        rects = by_op.setdefault(g.call, [])
        rects += [r.shifted(0, g.first - frame.first) for r in shape(g.host.sym_name.data)]
    items = []
    for op, rects in by_op.items():
        slots: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for r in rects:
            slots.setdefault((r.offset, r.size), []).extend(r.life)
        items.append(_Item(op, [Rect(o, s, _merge(life)) for (o, s), life in slots.items()]))
    return items


ORDERS = {
    "extent": lambda it: (-it.extent, it.start),
    "start": lambda it: (it.start, -it.extent),
    "area": lambda it: (-it.area, it.start),
}


def _place_items(items: list[_Item], offsets: dict[Operation, int]) -> list[Rect]:
    """The best of a few orders: the one whose frame is smallest."""
    best: tuple[int, list[Rect], dict[Operation, int]] | None = None
    for key in ORDERS.values():
        trial: dict[Operation, int] = {}
        rects = _place_in_order(sorted(items, key=key), trial)
        top = max((r.offset + r.size for r in rects), default=0)
        if best is None or top < best[0]:
            best = (top, rects, trial)
    assert best is not None
    offsets.update(best[2])
    return best[1]


def _place_in_order(items: list[_Item], offsets: dict[Operation, int]) -> list[Rect]:
    """Each item at the lowest 64-aligned offset where it meets nothing live."""
    placed: list[Rect] = []
    for item in items:
        live = [r for r in item.rects if r.life]
        candidates = {0}
        for p in placed:
            for r in live:
                if p.offset + p.size > r.offset and _meet(p.life, r.life):
                    candidates.add(align(p.offset + p.size - r.offset))
        for base in sorted(candidates):
            if not any(_clash(r, base, p) for r in live for p in placed):
                break
        else:  # above everything placed
            base = align(max(p.offset + p.size for p in placed))
        offsets[item.op] = base
        placed += [r.shifted(base, 0) for r in item.rects]
    return placed


def _clash(r: Rect, base: int, p: Rect) -> bool:
    lo = r.offset + base
    return lo < p.offset + p.size and p.offset < lo + r.size and _meet(r.life, p.life)

