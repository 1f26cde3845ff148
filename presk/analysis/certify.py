"""`presk solve --certify`: a realization whose box bound is under the budget.

The sampled solver (solver.py) proposes the cheapest realization its measurement at the
sample accepts; the box analysis (box.py) then bounds it over the whole box. First every
decision whose value leaves a type's range somewhere in the box (overflow, or a value
nonzero everywhere reaching below the type's smallest normal) is widened out of that type;
then, while the box bound exceeds the absolute budget, the decision whose roundings carry
the largest share of the bound (a follower's share counts for its leader) is widened by
one type. Last, each widening is tried undone, the latest first (a decision widened while
the bound was ∞ may not be needed once others are): it is kept undone when the bound
stays under the budget and no value leaves the type's range. The result is certified: its
box bound, a sound bound for every input of the box, is under the budget. It is the
cheapest this search finds from the sampled proposal, not a proven optimum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .realization import Realization
from .solver import WIDER


class CertifyError(Exception):
    """A budget no realization meets over the box: one line for the user."""


@dataclass
class Certified:
    realization: Realization
    bound: float  # the box bound under it
    absolute: float  # the budget's absolute figure
    result: object  # the last box.BoxResult
    widened: list[tuple[str, str, str, str]] = field(default_factory=list)  # key, from, to, why
    analyses: int = 0


def _leaders(solution) -> dict[str, str]:
    """follower site → the decision it follows."""
    out = {}
    for o in solution.others:
        if o.role.startswith("follows "):
            out[o.site] = o.role[len("follows "):]
    return out


def certify(core_module, entry: str, dims: dict[str, int], solution, box_ranges, params,
            values) -> Certified:
    from . import box as B
    absolute = solution.absolute
    decisions = {d.key: d for d in solution.decisions}
    leaders = _leaders(solution)
    types = {d.key: d.type for d in solution.decisions}
    widened: list[tuple[str, str, str, str]] = []
    analyses = 0

    def realization() -> Realization:
        sites = {k: t for k, t in types.items() if decisions[k].kind == "site" and t != "f64"}
        ps = {k: t for k, t in types.items() if decisions[k].kind == "param" and t != "f64"}
        return Realization(entry, sites, ps, solution.realization.fma)

    def widen(key: str, why: str) -> bool:
        t = types.get(key)
        if t is None or t not in WIDER:
            return False
        types[key] = WIDER[t]
        widened.append((key, t, WIDER[t], why))
        return True

    def analyze():
        return B.analyze(core_module, entry, dims, realization(), box_ranges, params, values)

    while True:
        result = analyze()
        analyses += 1
        # the ranges first: no decision keeps a type its values leave over the box
        moved = False
        for site, bad in result.excluded.items():
            key = site if site in decisions else leaders.get(site)
            while key is not None and types.get(key) in bad and widen(
                    key, f"its values leave {types[key]}'s range over the box"):
                moved = True
        if moved:
            continue
        if result.bound <= absolute:
            return _narrow_back(Certified(realization(), result.bound, absolute, result,
                                          widened, analyses), types, realization, analyze)
        shares: dict[str, float] = {}
        for k, v in result.contributions.items():
            key = k if k in decisions else leaders.get(k)
            if key is not None and types.get(key) != "f64":
                shares[key] = shares.get(key, 0.0) + v
        if not shares:
            why = "; ".join(result.problems[:2]) if not math.isfinite(result.bound) else ""
            raise CertifyError(
                f"the box bound is {result.bound:.3e} even where every decision is f64 "
                f"(the budget allows {absolute:.3e})" + (f": {why}" if why else ""))
        key = max(shares, key=lambda k: (shares[k], k))
        widen(key, f"the largest share of the box bound ({shares[key]:.3e})")


def _narrow_back(c: Certified, types: dict, realization, analyze) -> Certified:
    """Undo the widenings one at a time, the latest first, where the box still certifies."""
    kept = []
    for key, frm, to, why in reversed(c.widened):
        if "range" in why or types.get(key) != to:
            kept.append((key, frm, to, why))
            continue
        types[key] = frm
        result = analyze()
        c.analyses += 1
        if result.bound <= c.absolute and not any(
                types.get(s) in bad for s, bad in result.excluded.items()):
            c.bound, c.result = result.bound, result
            continue
        types[key] = to
        kept.append((key, frm, to, why))
    c.widened = list(reversed(kept))
    c.realization = realization()
    if c.result is not None and c.realization.summary() != c.result.name:
        c.result = analyze()  # the realization kept: its own bound
        c.bound = c.result.bound
        c.analyses += 1
    return c
