"""The plan artifact (`presk-plan/1`) and psk-plan-layout: a plan written is read back as
the same layouts; a plan for another recording, of another kind or version, or with a bad
field is one line; applied to the tutorial's kernels it sets exactly the planned layouts,
and the native run computes the default layouts' bits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from presk.dialects import kernel as K
from presk.pipeline import InvalidInput, kernel_pipeline, load_core
from presk.transforms.plan_layout import (Plan, PlanError, PlannedNest, Point, first_sites,
    layout_space, load_plan, operand_sizes)
from programs import AT_MIXED, TRAIN


def _plan_of(pipe, choose) -> Plan:
    """A plan of every kernel of `pipe`, each at `choose(space)`."""
    sites = first_sites(pipe.kernel)
    nests = []
    for k in pipe.kernel.ops:
        if isinstance(k, K.KernelOp):
            site, n = sites[k.sym_name.data]
            nests.append(PlannedNest(k.sym_name.data, site, k.title.data, operand_sizes(k),
                                     choose(layout_space(k, 2)), n))
    return Plan("loss", {"B": 4}, False, pipe.realization_name, 2, nests)


@pytest.fixture(scope="module")
def core():
    return load_core(TRAIN)[0]


def test_round_trip(core, tmp_path):
    pipe = kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED)
    plan = _plan_of(pipe, lambda space: space[-1])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.to_json()))
    again = load_plan(f"@{path}")
    assert again.to_json() == plan.to_json()
    assert {k: v.text() for k, v in again.layouts().items()} == \
        {k: v.text() for k, v in plan.layouts().items()}


def test_applied_layouts_and_bits(core, tmp_path):
    """Every kernel gets its planned layout (the last point of each space: split, and the
    contraction's widest tile); the native run's bits are the default's."""
    from presk.pipeline import run_native
    default = kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED)
    plan = _plan_of(default, lambda space: space[-1])
    planned = kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED, plan=plan)
    got = {k.sym_name.data: Point.of(k.layout) for k in planned.kernel.ops
           if isinstance(k, K.KernelOp)}
    assert got == {n.kernel: n.point for n in plan.nests}
    assert any(p.tiled for p in got.values()) and any(p.split > 1 for p in got.values())
    # the name carries the threading of the kernels as they run: the plan's splits
    assert default.realization_name == "f64+sequential+9sites+4params"
    assert planned.realization_name == "f64+2threads+9sites+4params"
    rng = np.random.default_rng(0)
    from presk.analysis.entry import prepare
    prep = prepare(core, "loss", {"B": 4})
    params = {f.path: rng.standard_normal(f.shape) for f in prep.fields}
    values = {n: rng.standard_normal(s) for n, s in prep.inputs.items()}
    a = run_native(core, "loss", {"B": 4}, params, values, AT_MIXED)
    b = run_native(core, "loss", {"B": 4}, params, values, AT_MIXED, plan=plan)
    assert [o.tobytes() for o in a.outputs] == [o.tobytes() for o in b.outputs]


def test_plan_for_another_recording(core):
    plan = _plan_of(kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED), lambda s: s[0])
    with pytest.raises(InvalidInput, match=r"made for `loss` at B=4 under f64\+sequential\+9sites"):
        kernel_pipeline(core, "loss", {"B": 5}, AT_MIXED, plan=plan)
    plan.dims = {"B": 4}
    plan.nests[0] = PlannedNest("k0", "nowhere/%1", plan.nests[0].title,
                                plan.nests[0].operands, Point())
    with pytest.raises(InvalidInput, match="nest nowhere/%1 .* is not a kernel of this"):
        kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED, plan=plan)


def test_the_name_carries_the_threading(core):
    """One name for every command: a plan without a split is `sequential`, one whose
    launches divide over two workers `2threads` — in the plan, the pipeline under it, its
    memory report; a plan written before names carried it (`f64+9sites+4params`) still
    applies (the types are what it is checked against)."""
    from presk.analysis.realization import Realization, threading, types_of_name
    from presk.pipeline.memory import memory_report
    assert (threading(1), threading(2), threading(8)) == ("sequential", "2threads", "8threads")
    assert Realization().summary() == "all-f64+sequential"
    assert Realization(fma=("f/%2",)).summary(4) == "all-f64+4threads+1fma"
    assert types_of_name("f64+12threads+9sites+4params") == "f64+9sites+4params"
    assert types_of_name("f64+9sites+4params") == "f64+9sites+4params"
    pipe = kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED)
    split = _plan_of(pipe, lambda space: space[-1])
    as_written = _plan_of(pipe, lambda space: space[0])
    as_written.realization = "f64+9sites+4params"
    assert kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED, plan=as_written
                           ).realization_name == "f64+sequential+9sites+4params"
    rep = memory_report(core, "loss", {"B": 4}, AT_MIXED, plan=split)
    assert rep.realization_name == "f64+2threads+9sites+4params"


GOOD = {"format": "presk-plan/1", "entry": "f", "dims": {}, "grad": False,
        "realization": "all-f64", "workers": 2, "nests": [
            {"kernel": "k0", "site": "f/%2", "title": "neg", "operands": [[8], [8]],
             "launches": 1, "layout": {"tile": [], "split": 2}}]}


@pytest.mark.parametrize("change, message", [
    ({"format": "presk-plan/2"}, "plan format version 2 is not supported"),
    ({"format": "presk-profile/2"}, "is a presk-profile/2 artifact, not a plan"),
    ({"extra": 1}, 'unknown field "extra"'),
    ({"dims": {"B": 0}}, '"dims" maps each dimension to a size ≥ 1'),
    ({"nests": [{"kernel": "k0"}]}, 'nest 0: no "site" field'),
    ({"nests": [dict(GOOD["nests"][0], layout={"tile": [4], "split": 1})]},
     '"tile" is \\[\\] or two positive sizes'),
    ({"nests": [dict(GOOD["nests"][0], layout={"tile": [], "split": 0})]},
     '"split" is 1 \\(none\\) or more workers'),
])
def test_bad_plans(change, message):
    with pytest.raises(PlanError, match=message):
        load_plan(json.dumps(GOOD | change))


def test_spaces(core):
    """An element-wise nest: as written or split; the contraction also every tile that
    fits its 4 × 4 outputs: R in 1, 2, 4 and C in 2, 4."""
    pipe = kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED)
    spaces = {k.title.data: layout_space(k, 2) for k in pipe.kernel.ops
              if isinstance(k, K.KernelOp)}
    assert spaces["dot+add"][:1] == [Point()]
    assert {p.tile for p in spaces["dot+add"]} == \
        {(), *((r, c) for r in (1, 2, 4) for c in (2, 4))}
    assert all(len(space) <= 2 for t, space in spaces.items() if t != "dot+add")


def test_a_k_blocked_point_round_trips() -> None:
    """`kblock` in a plan's layout: written when set, read back, the layout's word; a
    negative one or one without a tile is refused in one line."""
    from presk.transforms.plan_layout import _point
    p = Point((8, 32), 2, True, 256)
    assert p.to_json() == {"tile": [8, 32], "split": 2, "pack": "panels", "kblock": 256}
    assert _point(p.to_json(), "nest 0") == p and Point.of(p.attr()) == p
    assert p.attr().text() == "tiled, tile [8, 32], lanes 32, order IJ, pack panels, " \
                              "kblock 256, split (0, 2)"
    assert "kblock" not in Point((8, 32)).to_json()
    for bad in ({"tile": [8, 32], "split": 1, "kblock": -1}, {"tile": [], "split": 1, "kblock": 4}):
        with pytest.raises(PlanError, match="kblock"):
            _point(bad, "nest 0")
