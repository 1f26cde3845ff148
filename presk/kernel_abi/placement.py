"""The arena placed by the buffers' lives: an offset for every `alloc`, a base for every
`call`, and which layout of its callee a call runs.

A buffer takes a *slot* (presk/kernel_abi/calling.py `slot`, `slot_align`): from 64 bytes
whole cache lines, on a cache line; a smaller one its own size, on the least power of two
≥ it (so it never straddles a line, and its element is aligned: a vector load claims only
the element's alignment).

A *layout* of a host fixes where its allocs lie in its frame and, for each of its calls,
the callee's layout and the base it starts at. Each host has its own layout, placed once,
callees first, into a rigid *shape*: the rectangles (offset, slot bytes, the steps it is
live, relative to the host's first step) of its buffers and of its callees' shapes at
their bases. Every call of a host runs the same steps, so one shape serves every call
that is not in a fold.

A fold is where a rigid shape loses: the buffer an iteration writes is the next one's
input, live through the whole next iteration, so it cannot lie where the body's
temporaries lie when every iteration puts them in the same place, nor (the shape being
rigid) where the same temporaries lie shifted. So a call in a fold's body gets two
layouts of its callee of its own, one for the even iterations and one for the odd (the
parity that picks the fold's destination), and their buffers are placed one by one among
the caller's: the destination an even iteration writes may then lie where that
iteration's temporaries were, outside where the odd iteration puts its own. The callee's
calls stay rigid in those layouts.

A rigid shape can also leave a gap outside folds (the tutorial's final RMSNorm: its
64-byte rectangle must start on a line where only 16 bytes were free). When the rigid
placement is above the frame's lower bound, the host is placed again with every call
*opened* — a layout of the callee per call op (`<callee>.at.<caller>.<n>`, per parity in
a fold), down to the leaves, each buffer among the host's — and the smaller frame kept.
Each opened layout is a function of its own in native code and C.

Within a host the items — its allocs, its calls with their callees' shapes, and the
buffers of its opened calls' layouts — are placed in a few orders (largest first,
earliest first, largest area first), each item at the lowest offset on its alignment (or
in the tightest gap) where none of its rectangles meets a placed one live at the same
step; the smallest frame wins, and the search stops at the frame's lower bound (the most
slot bytes live at one step).

`place(trace)` returns the `Placement`: the `Layout`s by name and `need` by host. The
lives come from presk/kernel_abi/lives.py's trace of the entry; `ArenaPlan`
(presk/kernel_abi/arena.py), which native code and the C program read, is this placement.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from xdsl.ir import Operation

from ..dialects import kernel as K
from .calling import align, slot, slot_align
from .lives import Buffer, Frame, Trace

Intervals = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Rect:
    offset: int
    size: int
    life: Intervals  # steps, inclusive, relative to the host's first step

    def shifted(self, offset: int, steps: int) -> Rect:
        return Rect(self.offset + offset, self.size,
                    tuple((s + steps, e + steps) for s, e in self.life))


@dataclass(frozen=True)
class Target:
    """What a call runs: its callee's layout, at `base` bytes into the caller's frame."""

    layout: str
    base: int


@dataclass
class Layout:
    """One way to run a host: its allocs' offsets in its frame, and each call's target at
    the fold's even and odd iterations (the same two for a call not in a fold)."""

    name: str  # the host's own name, or `<host>.<even|odd>.at.<caller>.<n>`
    host: str
    parity: int | None = None  # a fold's callee's: the iterations it serves,
    caller: str | None = None  # in which caller's layout
    offsets: dict[Operation, int] = field(default_factory=dict)
    calls: dict[Operation, tuple[Target, Target]] = field(default_factory=dict)

    def target(self, call: Operation, parity: int | None) -> Target:
        return self.calls[call][parity or 0]


@dataclass
class Placement:
    layouts: dict[str, Layout] = field(default_factory=dict)
    need: dict[str, int] = field(default_factory=dict)  # a host's frame, its callees' in it
    shapes: dict[str, list[Rect]] = field(default_factory=dict)

    def follow(self, trace: Trace) -> dict[int, tuple[Layout, int]]:
        """Each frame of the trace (by id): the layout it runs and its base in the arena."""
        out: dict[int, tuple[Layout, int]] = {}
        for f in trace.frames:
            if f.parent is None:
                out[id(f)] = (self.layouts[f.host.sym_name.data], 0)
            else:
                layout, base = out[id(f.parent)]
                assert f.call is not None
                t = layout.target(f.call, parity(f))
                out[id(f)] = (self.layouts[t.layout], base + t.base)
        return out


def parity(frame: Frame) -> int | None:
    """For a call in a fold's body, the parity of its iteration counted from the fold's
    first (the parity that picks the fold's destination); None for any other call."""
    fold = frame.call.parent_op() if frame.call is not None else None
    if not isinstance(fold, K.FoldOp):
        return None
    assert frame.iteration is not None
    return fold.step(frame.iteration) % 2


def _merge(life: Iterable[tuple[int, int]]) -> Intervals:
    out: list[tuple[int, int]] = []
    for s, e in sorted(life):
        if out and s <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return tuple(out)


Key = tuple[str, Operation, int | None]  # (layout, op, parity): what an item's base sets


@dataclass
class _Item:
    key: Key
    rects: list[Rect]  # at offset 0

    @property
    def extent(self) -> int:
        return max((r.offset + r.size for r in self.rects), default=0)

    @property
    def start(self) -> int:
        return min((r.life[0][0] for r in self.rects if r.life), default=0)

    @property
    def align(self) -> int:
        """Where the item may start: every rectangle on its own alignment."""
        return max((slot_align(r.size) for r in self.rects), default=1)

    @property
    def area(self) -> int:
        return sum(r.size * sum(e - s + 1 for s, e in r.life) for r in self.rects)


class _Placer:
    def __init__(self, trace: Trace):
        self.plan = Placement()
        self.first: dict[str, Frame] = {}
        self.children: dict[int, list[Frame]] = {}
        self.made: dict[int, list[Buffer]] = {}
        for f in trace.frames:
            self.first.setdefault(f.host.sym_name.data, f)
            if f.parent is not None:
                self.children.setdefault(id(f.parent), []).append(f)
        for b in trace.buffers:
            if b.frame is not None:
                self.made.setdefault(id(b.frame), []).append(b)

    def shape(self, name: str) -> list[Rect]:
        """The host's own layout, placed (once): its shape at offset 0. Its calls' callees
        rigid first; when that leaves the frame above its lower bound, every call opened
        (a layout of the callee per call, its buffers among the host's, down to the
        leaves), kept if its frame is smaller."""
        if name not in self.plan.shapes:
            frame = self.first[name]
            best: tuple[int, list[Rect], dict[Key, int], dict[str, Layout]] | None = None
            for opened in (False, True):
                layouts = {name: Layout(name, name)}
                items = self._allocs(name, frame, [frame])
                for n, (call, frames) in enumerate(_by_op(self._calls(frame)).items()):
                    items += self._call(layouts, name, n, call, frame, frames, opened)
                rects, where = _place_items(items)
                top = max((r.offset + r.size for r in rects), default=0)
                if best is None or top < best[0]:
                    best = (top, rects, where, layouts)
                if _close(best[0], _lower_bound(items)):
                    break
            top, rects, where, layouts = best
            self.plan.layouts.update(layouts)
            for (layout, op, p), base in where.items():
                self._set(self.plan.layouts[layout], op, p, base)
            self.plan.shapes[name] = rects
            self.plan.need[name] = top
        return self.plan.shapes[name]

    def _calls(self, frame: Frame) -> list[Frame]:
        return self.children.get(id(frame), [])

    def _set(self, layout: Layout, op: Operation, p: int | None, base: int) -> None:
        if isinstance(op, K.AllocOp):
            layout.offsets[op] = base
        else:
            assert isinstance(op, K.CallOp)
            _aim(layout, op, p, Target(op.callee_name, base))

    def _allocs(self, layout: str, host: Frame, frames: list[Frame]) -> list[_Item]:
        """The allocs of `frames` (calls of one host), live as in `host`'s steps."""
        lives: dict[Operation, list[tuple[int, int]]] = {}
        sizes: dict[Operation, int] = {}
        for f in frames:
            for b in self.made.get(id(f), []):
                assert b.alloc is not None
                lives.setdefault(b.alloc, []).extend(
                    (s - host.first, e - host.first) for s, e in b.intervals)
                sizes[b.alloc] = slot(b.bytes)
        return [_Item((layout, op, None), [Rect(0, sizes[op], _merge(life))])
                for op, life in lives.items()]

    def _rigid(self, layout: str, call: Operation, host: Frame,
               frames: list[Frame]) -> list[_Item]:
        """One item: the callee's shape at each of the op's calls, one base for all."""
        slots: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for g in frames:
            for r in self.shape(g.host.sym_name.data):
                slots.setdefault((r.offset, r.size), []).extend(
                    (s + g.first - host.first, e + g.first - host.first) for s, e in r.life)
        return [_Item((layout, call, None),
                      [Rect(o, s, _merge(life)) for (o, s), life in slots.items()])]

    def _call(self, layouts: dict[str, Layout], caller: str, n: int, call: Operation,
              host: Frame, frames: list[Frame], opened: bool) -> list[_Item]:
        """The items of the `n`th call op of the `caller` layout, run as `frames`: the
        callee's shape, rigid; or, in a fold or when `opened`, a layout of the callee of
        its own per parity (one when not in a fold), at the caller's base 0, whose allocs
        are the host's items and whose calls are rigid or (`opened`) opened in turn."""
        assert isinstance(call, K.CallOp)
        in_fold = isinstance(call.parent_op(), K.FoldOp)
        if not (in_fold or opened) or not self.shape(call.callee_name):
            return self._rigid(caller, call, host, frames)  # (a callee with no buffers: no copy)
        items: list[_Item] = []
        for p in (0, 1) if in_fold else (None,):
            mine = [g for g in frames if parity(g) == p]
            if not mine:
                continue
            tag = f"{('even', 'odd')[p]}." if p is not None else ""
            name = f"{call.callee_name}.{tag}at.{caller}.{n}"
            layouts[name] = Layout(name, call.callee_name, p, caller)
            _aim(layouts[caller], call, p, Target(name, 0))
            items += self._allocs(name, host, mine)
            inner = [c for g in mine for c in self._calls(g)]
            for m, (sub, subframes) in enumerate(_by_op(inner).items()):
                if opened:
                    items += self._call(layouts, name, m, sub, host, subframes, True)
                else:
                    items += self._rigid(name, sub, host, subframes)
        return items


def _aim(layout: Layout, call: K.CallOp, p: int | None, target: Target) -> None:
    """The call runs `target` at the iterations of parity `p` (at all when None); until
    the other parity is set, there too."""
    if p is None or call not in layout.calls:
        layout.calls[call] = (target, target)
    else:
        even, odd = layout.calls[call]
        layout.calls[call] = (target, odd) if p == 0 else (even, target)


def _by_op(frames: list[Frame]) -> dict[Operation, list[Frame]]:
    out: dict[Operation, list[Frame]] = {}
    for g in frames:
        assert g.call is not None
        out.setdefault(g.call, []).append(g)
    return out


def place(trace: Trace) -> Placement:
    """The layouts of the hosts the entry reaches, each host's own placed by its lives."""
    placer = _Placer(trace)
    for name in placer.first:
        placer.shape(name)
    return placer.plan


ORDERS: dict[str, Callable[[_Item], tuple[int, int]]] = {
    "extent": lambda it: (-it.extent, it.start),
    "start": lambda it: (it.start, -it.extent),
    "area": lambda it: (-it.area, it.start),
}


def _lower_bound(items: list[_Item]) -> int:
    """The most bytes live at one step: no placement's frame is smaller."""
    diff: dict[int, int] = {}
    for it in items:
        for r in it.rects:
            for s, e in r.life:
                diff[s] = diff.get(s, 0) + r.size
                diff[e + 1] = diff.get(e + 1, 0) - r.size
    top = run = 0
    for step in sorted(diff):
        run += diff[step]
        top = max(top, run)
    return top


SHUFFLES = 32  # at most, for a small host; fewer as its items and rectangles grow
SHUFFLE_WORK = 40_000  # items × rectangles a host's shuffles may cost in all
CLOSE = 128  # a frame within 1/CLOSE of its lower bound is not searched further


def _close(top: int, bound: int) -> bool:
    return top <= bound + bound // CLOSE


def _place_items(items: list[_Item]) -> tuple[list[Rect], dict[Key, int]]:
    """The best of a few orders and two fits, then of seeded shuffles while the frame is
    above its lower bound (as many as the host's size allows): the smallest frame."""
    fixed = {it.key: 0 for it in items if not it.rects}  # a call of a callee with no buffers
    items = [it for it in items if it.rects]
    bound = _lower_bound(items)
    rects_n = sum(len(it.rects) for it in items)
    shuffles = min(SHUFFLES, SHUFFLE_WORK // max(1, len(items) * rects_n))
    rng = random.Random(0)  # the same plan on every run: native, C and the count agree
    orders = [sorted(range(len(items)), key=lambda i: key(items[i])) for key in ORDERS.values()]
    pairs = _Pairs(items)
    best: tuple[int, list[int], list[int]] | None = None
    for n in range(len(orders) + shuffles):
        if n < len(orders):
            ordered = orders[n]
        else:
            ordered = list(range(len(items)))
            rng.shuffle(ordered)  # the permutation depends on the length only
        for tightest in (False, True):
            bases = pairs.place(ordered, tightest)
            top = max((b + pairs.extent[i] for i, b in zip(ordered, bases)), default=0)
            if best is None or top < best[0]:
                best = (top, ordered, bases)
            if best[0] <= bound or (n >= len(orders) - 1 and _close(best[0], bound)):
                return _placed(items, best[1], best[2], fixed)
    assert best is not None
    return _placed(items, best[1], best[2], fixed)


def _placed(items: list[_Item], ordered: list[int], bases: list[int],
            fixed: dict[Key, int]) -> tuple[list[Rect], dict[Key, int]]:
    """The rectangles at their bases, in the order placed, and each item's base."""
    where = {items[i].key: b for i, b in zip(ordered, bases)}
    rects = [r.shifted(b, 0) for i, b in zip(ordered, bases) for r in items[i].rects]
    return rects, where | fixed


def _mask(life: Intervals, lo: int) -> int:
    """The steps of `life` as bits (step `lo` the lowest): two lives meet iff their masks
    share a bit."""
    m = 0
    for s, e in life:
        m |= ((1 << (e - s + 1)) - 1) << (s - lo)
    return m


class _Pairs:
    """What placing an item beside another costs to ask, asked once per host rather than
    at every item of every order: for each item `i` and each other `j` whose rectangles
    are live with it, relative to `j`'s base, the bases of `i` where a rectangle of `i`
    meets one of `j` live at the same step (closed intervals), the candidate bases `j`'s
    rectangles' tops offer (a rectangle of `i` just above one of `j`, before alignment),
    and the offsets of `j`'s rectangles live with `i` (for the best fit's slack)."""

    def __init__(self, items: list[_Item]):
        lo = min((s for it in items for r in it.rects for s, _ in r.life), default=0)
        masks = [[_mask(r.life, lo) for r in it.rects] for it in items]
        unions = [_union(m) for m in masks]
        self.align = [it.align for it in items]
        self.extent = [it.extent for it in items]
        self.near: list[dict[int, tuple[list[tuple[int, int]], list[int], list[int]]]] = []
        for i, it in enumerate(items):
            live = [(r, m) for r, m in zip(it.rects, masks[i]) if m]
            self.near.append({j: _beside(live, unions[i], other.rects, masks[j])
                              for j, other in enumerate(items)
                              if j != i and unions[i] & unions[j]})

    def place(self, ordered: list[int], tightest: bool) -> list[int]:
        """The base of each item in `ordered`, placed in turn: the lowest base on its
        alignment where it meets nothing placed live with it, or (`tightest`) the one
        leaving the least room below the next such rectangle above it."""
        base: dict[int, int] = {}
        for i in ordered:
            to, banned = self.align[i], []
            placed = [(near, b) for j, near in self.near[i].items()
                      if (b := base.get(j)) is not None]
            for (ban, _, _), b in placed:
                banned += [(s + b, e + b) for s, e in ban]
            banned.sort()
            base[i] = (self._tightest(i, placed, banned) if tightest
                       else _lowest(banned, to))
        return [base[i] for i in ordered]

    def _tightest(self, i: int, placed: list, banned: list[tuple[int, int]]) -> int:
        """Of the bases the placed rectangles' tops offer (and 0), outside `banned`, the
        one whose top leaves the least room below a placed rectangle live with it."""
        to, candidates, offsets = self.align[i], {0}, []
        for (_, tops, offs), b in placed:
            candidates.update([align(t + b, to) for t in tops if t > -b])
            offsets += [o + b for o in offs]
        offsets.sort()
        top = self.extent[i]
        return min(_free(sorted(candidates), banned),
                   key=lambda c: (_slack(offsets, c + top), c))


def _union(masks: list[int]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _beside(live: list[tuple[Rect, int]], union: int, rects: list[Rect],
            masks: list[int]) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """What `rects` (another item's, some live with `union`) ask of the `live` rectangles
    of an item: see `_Pairs`."""
    meeting = [(q, m) for q, m in zip(rects, masks) if m & union]
    banned = [(q.offset - r.offset - r.size + 1, q.offset + q.size - r.offset - 1)
              for r, rm in live for q, qm in meeting if rm & qm]
    tops = sorted({q.offset + q.size - r.offset for r, _ in live for q, _ in meeting})
    return banned, tops, sorted(q.offset for q, _ in meeting)


def _lowest(banned: list[tuple[int, int]], to: int) -> int:
    """The lowest multiple of `to` outside every one of the sorted banned closed
    intervals: the lowest of the candidates the placed tops offer that fits, since each
    interval ends below such a top, and a multiple just above a banned one is the top
    of that interval on the alignment."""
    at = 0
    for s, e in banned:
        if s > at:
            break
        if e >= at:
            at = align(e + 1, to)
    return at


def _free(candidates: list[int], banned: list[tuple[int, int]]) -> list[int]:
    """The sorted candidates outside every one of the sorted banned closed intervals."""
    out, k, n, reach = [], 0, len(banned), -1  # reach: the furthest end so far
    for c in candidates:
        while k < n and banned[k][0] <= c:
            if banned[k][1] > reach:
                reach = banned[k][1]
            k += 1
        if reach < c:
            out.append(c)
    return out


def _slack(offsets: list[int], top: int) -> int:
    """Free bytes between `top` and the lowest of the sorted `offsets` at or above it
    (unbounded above everything: the last resort)."""
    k = bisect_left(offsets, top)
    return offsets[k] - top if k < len(offsets) else 1 << 62
