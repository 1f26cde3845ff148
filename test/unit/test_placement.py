"""The arena placement's search (presk/kernel_abi/placement.py `_place_items`) finds the
plan the straightforward search it replaced found: the same base for every item and the
same order, so the same offsets in native code, C, the goldens and docs/explain.

`reference` below is that search (every placed rectangle scanned for each candidate base
of each item). test/fixtures/placement_cases.json holds what `_place_items` was asked
while placing the tutorial 03–07, the scaled Tower, the residual stack and the deep
residual stack (by presk/kernel_abi/arena.py `ArenaPlan`, value and gradient), with the
reference's answers: `python test/unit/test_placement.py` writes it again.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from presk.kernel_abi import placement as P
from presk.kernel_abi.calling import align

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "placement_cases.json"


def _meet(a: P.Intervals, b: P.Intervals) -> bool:
    return any(s <= f and t <= e for s, e in a for t, f in b)


def _clash(r: P.Rect, base: int, p: P.Rect) -> bool:
    lo = r.offset + base
    return lo < p.offset + p.size and p.offset < lo + r.size and _meet(r.life, p.life)


def _in_order(items: list[P._Item], where: dict, tightest: bool) -> list[P.Rect]:
    placed: list[P.Rect] = []
    for item in items:
        live = [r for r in item.rects if r.life]
        meeting = [p for p in placed if any(_meet(p.life, r.life) for r in live)]
        candidates = {0} | {align(p.offset + p.size - r.offset, item.align)
                            for p in meeting for r in live if p.offset + p.size > r.offset}
        fits = [b for b in sorted(candidates)
                if not any(_clash(r, b, p) for r in live for p in meeting)]

        def slack(b: int) -> int:
            top = b + item.extent
            return min((p.offset - top for p in meeting if p.offset >= top), default=1 << 62)

        base = min(fits, key=lambda b: (slack(b), b)) if tightest else fits[0]
        where[item.key] = base
        placed += [r.shifted(base, 0) for r in item.rects]
    return placed


def reference(items: list[P._Item]) -> tuple[list[P.Rect], dict]:
    """The search `_place_items` replaced, orders, shuffles and stopping rule the same."""
    fixed = {it.key: 0 for it in items if not it.rects}
    items = [it for it in items if it.rects]
    bound = P._lower_bound(items)
    rects_n = sum(len(it.rects) for it in items)
    shuffles = min(P.SHUFFLES, P.SHUFFLE_WORK // max(1, len(items) * rects_n))
    rng = random.Random(0)
    orders = [sorted(items, key=key) for key in P.ORDERS.values()]
    best = None
    for n in range(len(orders) + shuffles):
        if n < len(orders):
            ordered = orders[n]
        else:
            ordered = items[:]
            rng.shuffle(ordered)
        for tightest in (False, True):
            where: dict = {}
            rects = _in_order(ordered, where, tightest)
            top = max((r.offset + r.size for r in rects), default=0)
            if best is None or top < best[0]:
                best = (top, rects, where)
            if best[0] <= bound or (n >= len(orders) - 1 and P._close(best[0], bound)):
                return best[1], best[2] | fixed
    assert best is not None
    return best[1], best[2] | fixed


def _items(case: list) -> list[P._Item]:
    """The items of one recorded call, keyed by their index."""
    return [P._Item(("case", k, None), [P.Rect(o, n, tuple(map(tuple, life)))
                                        for o, n, life in rects])
            for k, rects in enumerate(case)]


def _answer(items: list[P._Item], placed: tuple[list[P.Rect], dict]) -> dict:
    """The base of each item and the order they were placed in (by index; the items with
    no rectangles last), checking that the rectangles are the items' at their bases."""
    rects, where = placed
    index = {it.key: k for k, it in enumerate(items)}
    assert len(index) == len(items) == len(where)
    order = [index[key] for key in where]
    assert rects == [r.shifted(where[items[k].key], 0) for k in order for r in items[k].rects]
    return {"bases": [where[it.key] for it in items], "order": order}


def _recorded() -> list[tuple[str, list, dict]]:
    return [(case["case"], call["items"], {"bases": call["bases"], "order": call["order"]})
            for case in json.loads(CASES.read_text()) for call in case["calls"]]


def test_the_programs_are_placed_as_the_reference_placed_them():
    calls = _recorded()
    assert len(calls) > 100 and any(len(items) > 100 for _, items, _ in calls)
    for name, case, want in calls:
        items = _items(case)
        assert _answer(items, P._place_items(items)) == want, name


def test_the_reference_is_the_recorded_search():
    """The reference answers the recorded calls (the smaller ones: it is slow) as
    recorded, so the recording is its."""
    small = [c for c in _recorded() if len(c[1]) * sum(map(len, c[1])) < 400]
    assert len(small) > 50
    for name, case, want in small:
        items = _items(case)
        assert _answer(items, reference(items)) == want, name


def _random_items(rng: random.Random) -> list[P._Item]:
    """A host's worth of items: buffers of odd and aligned sizes (or of a few bytes only,
    where ends fall off the alignment) and callees' shapes of a few rectangles, over
    lives of one or more runs of steps (some empty)."""
    out = []
    sizes = rng.choice(((1, 2, 3, 4, 6, 8, 12, 16, 48, 64, 128, 192, 1024), (1, 1, 2, 3, 5)))
    for k in range(rng.randint(1, 9)):
        rects = []
        offset = 0
        for _ in range(rng.choice((1, 1, 1, 2, 4))):
            size = rng.choice(sizes)
            offset = align(offset, P.slot_align(size))
            steps = sorted(rng.sample(range(-2, 24), rng.choice((0, 2, 2, 4, 6))))
            life = P._merge(zip(steps[::2], steps[1::2]))
            rects.append(P.Rect(offset, size, life))
            offset += size + rng.choice((0, 0, 1, 16, 64))
        out.append(P._Item(("random", k, None), rects if rng.random() > 0.05 else []))
    return out


def test_random_hosts_are_placed_as_the_reference_places_them():
    rng = random.Random(0)
    for _ in range(80):
        items = _random_items(rng)
        assert _answer(items, P._place_items(items)) == _answer(items, reference(items))


def record() -> None:
    """Place the programs with the reference, writing what it was asked and answered."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from programs import MIXED, ROOT, program

    from presk.kernel_abi.arena import ArenaPlan
    from presk.pipeline import kernel_pipeline
    configs = [("03_activations", 4, None, True), ("04_mlp", 4, None, True),
               ("05_stack", 4, None, True), ("07_train", 4, MIXED, False),
               ("07_train", 4, None, True), ("07_train", 16, None, False),
               ("07_train", 4, MIXED, True), ("bench/scaled_tower.psk", 2, None, False),
               ("bench/scaled_tower.psk", 2, None, True),
               ("test/fixtures/residual_stack.psk", 4, None, True),
               ("test/memory_programs/deep_residual.psk", 3, None, False),
               ("test/memory_programs/deep_residual.psk", 2, None, True)]
    calls: list[dict] = []

    def recording(items: list[P._Item]) -> tuple[list[P.Rect], dict]:
        placed = reference(items)
        calls.append({"items": [[[r.offset, r.size, [list(s) for s in r.life]]
                                 for r in it.rects] for it in items],
                      **_answer(items, placed)})
        return placed

    P._place_items = recording  # type: ignore[assignment]
    cases = []
    for name, b, realization, grad in configs:
        calls = []
        path = str(ROOT / name) if "/" in name else name
        ArenaPlan(kernel_pipeline(program(path), "loss", {"B": b}, realization,
                                  grad=grad).kernel)
        label = f"{Path(name).stem} B={b}{' mixed' if realization else ''}{' grad' * grad}"
        cases.append({"case": label, "calls": calls})
    CASES.write_text(json.dumps(cases, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    record()
