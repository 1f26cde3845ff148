"""PSK-Realize: the realization artifact, convert-psk-core-to-realize, psk-fuse and the
§7 report, on the tutorial's loss at B = 4 under all f64 and under the reference's mixed
realization (test/fixtures/realization_mixed.json), and the recorded program evaluated
by a small numpy evaluator against the Core interpreter."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from xdsl.utils.exceptions import VerifyException

from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter
from presk.analysis.numbers import number_system
from presk.analysis.realization import (
    Realization, RealizationError, load_realization, parse_realization,
)
from presk.conversion.core_to_realize import RecordError, record, site_types
from presk.dialects import realize as R
from presk.transforms.fuse import fuse_module
from programs import ROOT

TUTORIAL = ROOT / "tutorial" / "07_train.psk"
MIXED = ROOT / "test" / "fixtures" / "realization_mixed.json"


@pytest.fixture(scope="module")
def core(program):
    return program(TUTORIAL)


REALIZATIONS = {"f64": None, "mixed": f"@{MIXED}"}


def recorded(core, which: str, fuse: bool = False):
    module = record(core, "loss", {"B": 4}, load_realization(REALIZATIONS[which]))
    if fuse:
        fuse_module(module)
        module.verify()
    return module


def by_source(module) -> dict[str, list[R.FuncOp]]:
    out: dict[str, list[R.FuncOp]] = {}
    for f in R.funcs(module):
        out.setdefault(f.source_func, []).append(f)
    return out


# ---- the realization artifact ----

def test_fixture_is_the_reference_realization():
    r = load_realization(f"@{MIXED}")
    assert sorted(r.sites) == sorted([
        "loss/%6", "RMSNorm.apply/%10", "RMSNorm.apply/%3", "RMSNorm.apply/%7",
        "Linear.apply/%3", "Linear.apply/%5", "Block.apply/%8", "Block.apply/%5",
        "RMSNorm.apply/%4"])
    assert set(r.sites.values()) == {"f32"}
    assert r.params == {"blocks.proj.w": "f32", "blocks.norm.γ": "bf16",
                        "blocks.proj.b": "bf16", "final.γ": "bf16"}
    assert r.site_type("RMSNorm.apply/%5") == "f64" and r.param_type("x") == "f64"
    assert r.summary() == "f64+sequential+9sites+4params"


def test_realization_from_path_at_path_and_inline(tmp_path):
    text = json.dumps({"format": "presk-realization/1", "sites": {"f/%2": "bf16"}})
    p = tmp_path / "r.json"
    p.write_text(text)
    for spec in (str(p), f"@{p}", text):
        assert load_realization(spec).sites == {"f/%2": "bf16"}
    assert load_realization(None) == Realization()


@pytest.mark.parametrize("data, message", [
    ({"format": "presk-plan/1"}, "is a presk-plan/1 artifact, not a realization"),
    ({"format": "presk-realization/2"}, "format version 2 is not supported"),
    ({"sites": {}}, "no \"format\" field"),
    ({"format": "presk-realization/1", "sites": {"f/%2": "f16"}},
     "sites \"f/%2\" has type \"f16\", not one of f64, f32, bf16"),
    ({"format": "presk-realization/1", "params": {"w": 32}}, "params \"w\" has type 32"),
    ({"format": "presk-realization/1", "sites": {"f2": "f32"}}, "is not of the form"),
    ({"format": "presk-realization/1", "extra": 1}, "unknown field \"extra\""),
    ([], "a realization is a JSON object"),
])
def test_realization_refused_with_one_line(data, message):
    with pytest.raises(RealizationError) as info:
        parse_realization(data, "r.json")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_realization_unreadable(tmp_path):
    with pytest.raises(RealizationError, match="no such file"):
        load_realization(f"@{tmp_path}/missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(RealizationError, match="not JSON"):
        load_realization(str(bad))
    with pytest.raises(RealizationError, match="is a directory"):
        load_realization(str(tmp_path))


def test_realization_site_or_param_the_program_lacks(core):
    for data, message in [
        ({"sites": {"Nope.apply/%3": "f32"}}, "names no function"),
        ({"sites": {"loss/%40": "f32"}}, "computes no value %40"),
        ({"params": {"blocks.nope": "f32"}}, "is not a parameter of `θ`"),
    ]:
        r = parse_realization({"format": "presk-realization/1", **data})
        with pytest.raises(RealizationError, match=message):
            record(core, "loss", {"B": 4}, r)


def test_missing_dim_is_a_record_error(core):
    with pytest.raises(RecordError, match="--dim B=N"):
        record(core, "loss", {}, None)


# ---- recording ----

def test_followers_take_their_readers_type(core):
    r = load_realization(f"@{MIXED}")
    funcs = {op.sym_name.data: op for op in core.ops if hasattr(op, "arg_name_list")}
    loss = site_types(funcs["loss"], r)
    norm = site_types(funcs["RMSNorm.apply"], r)
    assert loss["loss/%5"] == "f32" and loss["loss/%7"] == "f64"
    assert norm["RMSNorm.apply/%8"] == "f32" and norm["RMSNorm.apply/%6"] == "f32"
    assert norm["RMSNorm.apply/%5"] == "f64"  # real eps: a constant, not a follower


@pytest.mark.parametrize("which", ["f64", "mixed"])
def test_launches_and_groups(core, which):
    module = recorded(core, which)
    assert R.launch_count(module) == 39
    fuse_module(module)
    module.verify()
    assert R.launch_count(module) == 30
    roots = {op.site.data for f in R.funcs(module) for op in f.body.block.ops
             if isinstance(op, R.GroupOp)}
    assert roots == {"RMSNorm.apply/%7", "RMSNorm.apply/%10", "loss/%6"}
    for f in R.funcs(module):
        for g in (op for op in f.body.block.ops if isinstance(op, R.GroupOp)):
            assert len(g.steps) == 2


def test_mixed_records_the_reference_instances(core):
    module = recorded(core, "mixed")
    runs = R.instance_runs(module)
    names = by_source(module)
    assert sorted(f.func_name for f in names["RMSNorm.apply"]) == ["RMSNorm.apply",
                                                                  "RMSNorm.apply_2"]
    assert sorted(f.func_name for f in names["Block.apply"]) == ["Block.apply", "Block.apply_2"]
    assert len(names["Linear.apply"]) == 1 and len(names["Tower.apply"]) == 1
    assert runs == {"RMSNorm.apply_2": 1, "Linear.apply": 3, "Block.apply_2": 1,
                    "RMSNorm.apply": 3, "Block.apply": 2, "Tower.apply": 1, "loss": 1}
    funcs = {f.func_name: f for f in R.funcs(module)}
    # The instance called less reads the f64 x of the fold's first iteration.
    assert R.element_name(funcs["RMSNorm.apply_2"].args[1].type) == "f64"
    assert R.element_name(funcs["RMSNorm.apply"].args[1].type) == "f32"
    assert R.element_name(funcs["RMSNorm.apply"].args[0].type) == "bf16"
    assert funcs["RMSNorm.apply"].arg_name_list == ("θ.γ", "x")
    # Iteration 0 apart: a slice of each stacked leaf at 0 and a call, then 1..2 a fold.
    tower = [op for op in funcs["Tower.apply"].body.block.ops]
    slices = [op for op in tower if isinstance(op, R.SliceOp)]
    assert [s.position for s in slices] == [0, 0, 0]
    calls = [op for op in tower if isinstance(op, R.CallOp)]
    assert [c.callee_name for c in calls] == ["Block.apply_2", "RMSNorm.apply"]
    (fold,) = [op for op in tower if isinstance(op, R.FoldOp)]
    assert fold.callee_name == "Block.apply" and fold.bounds == (1, 3)
    assert fold.acc is calls[0].results[0]
    entry = R.entry_func(module)
    assert entry.func_name == "loss" and entry.arg_name_list == (
        "θ.blocks.norm.γ", "θ.blocks.proj.w", "θ.blocks.proj.b", "θ.final.γ", "batch.0",
        "batch.1")
    assert [R.rtype_text(a.type) for a in entry.args][:4] == [
        "bf16[3, 4]", "f32[3, 4, 4]", "bf16[3, 4]", "bf16[4]"]
    assert R.rtype_text(entry.output_types[0]) == "f64[]"


def test_a_recorded_module_clones(core):
    """A Realize function's declared outputs are `output_types`, not a property shadowing
    xDSL's `Operation.result_types` (a function op has no results): with that shadow,
    `clone()` raised "zip() argument 2 is longer than argument 1"."""
    module = recorded(core, "mixed", fuse=True)
    copy = module.clone()
    copy.verify()
    assert str(copy) == str(module)


def test_mixed_conversions_are_explicit(core):
    module = recorded(core, "mixed")
    funcs = {f.func_name: f for f in R.funcs(module)}
    converts = [(op.site.data, R.element_name(op.operand.type), R.element_name(op.result.type))
                for op in funcs["RMSNorm.apply_2"].body.block.ops
                if isinstance(op, R.ConvertOp)]
    # x converted once per reading op (%3 and %8), eps where the f32 add reads it, γ where
    # the f32 mul reads it.
    assert converts == [("RMSNorm.apply/%3", "f64", "f32"), ("RMSNorm.apply/%6", "f64", "f32"),
                        ("RMSNorm.apply/%8", "f64", "f32"), ("RMSNorm.apply/%10", "bf16", "f32")]
    loss = [(op.site.data, R.element_name(op.operand.type), R.element_name(op.result.type))
            for op in funcs["loss"].body.block.ops if isinstance(op, R.ConvertOp)]
    assert loss == [("loss/%5", "f64", "f32"), ("loss/%7", "f32", "f64")]


def test_f64_records_each_function_once(core):
    module = recorded(core, "f64")
    assert {k: len(v) for k, v in by_source(module).items()} == {
        "RMSNorm.apply": 1, "Linear.apply": 1, "Block.apply": 1, "Tower.apply": 1, "loss": 1}
    ops = [op for f in R.funcs(module) for op in f.walk()]
    assert not any(isinstance(op, (R.ConvertOp, R.SliceOp)) for op in ops)
    (fold,) = [op for op in ops if isinstance(op, R.FoldOp)]
    assert fold.bounds == (0, 3)
    assert R.instance_runs(module) == {"RMSNorm.apply": 4, "Linear.apply": 3, "Block.apply": 3,
                                       "Tower.apply": 1, "loss": 1}


def test_binary_maps_come_from_the_symbolic_types(core):
    module = recorded(core, "f64")
    funcs = {f.func_name: f for f in R.funcs(module)}
    maps = {op.site.data: op.maps for op in funcs["RMSNorm.apply"].body.block.ops
            if isinstance(op, R.BinaryOp)}
    assert maps == {"RMSNorm.apply/%6": ([0], []),       # ms ℝ[...] + eps ℝ[]
                    "RMSNorm.apply/%8": ([0, 1], [0]),    # x / ℝ[...]: on the prefix
                    "RMSNorm.apply/%10": ([0, 1], [1])}   # γ ℝ[D] on `model`
    (mean,) = [op for op in funcs["RMSNorm.apply"].body.block.ops if isinstance(op, R.MeanOp)]
    assert mean.axis_index == 1 and mean.axis_name.data == "model"


def test_record_round_trips_through_text(core):
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser
    for which in ("f64", "mixed"):
        module = recorded(core, which, fuse=True)
        text = str(module)
        ctx = Context()
        ctx.load_dialect(Builtin)
        ctx.load_dialect(R.Realize)
        again = Parser(ctx, text).parse_module()
        again.verify()
        assert str(again) == text


# ---- verifiers built from Python ----

def _func(args, results):
    f = R.FuncOp.make("f", "f", args, results, entry=True)
    return f, f.body.block


def test_bf16_arithmetic_is_rejected_naming_the_site():
    t = R.RTensorType.get("bf16", [4])
    f, block = _func([("x", t), ("y", t)], [t])
    add = R.AddOp(block.args[0], block.args[1], [0], [0], t, site="f/%2")
    block.add_op(add)
    block.add_op(R.ReturnOp([add.result], site="f/%3"))
    with pytest.raises(VerifyException, match=r"f/%2: psk_realize.add: an arithmetic op in bf16"):
        f.verify()


def test_group_with_a_reduction_is_rejected():
    t = R.RTensorType.get("f32", [("batch", 4), ("model", 4)])
    s = R.RTensorType.get("f32", [("batch", 4)])
    f, block = _func([("x", t)], [s])
    group, body = R.GroupOp.make([block.args[0]], s, site="f/%2")
    mean = R.MeanOp(body.args[0], 1, s, axis_name="model", site="f/%2")
    body.add_op(mean)
    body.add_op(R.YieldOp(mean.result))
    block.add_op(group)
    block.add_op(R.ReturnOp([group.result], site="f/%3"))
    with pytest.raises(VerifyException, match="f/%2 psk_realize.mean is not element-wise"):
        f.verify()


def test_type_text():
    assert R.rtype_text(R.RTensorType.get("f32", [("batch", 4), ("model", 4)])) == \
        "f32[batch: 4, model: 4]"
    assert R.rtype_text(R.RTensorType.scalar()) == "f64[]"
    assert str(R.RTensorType.get("bf16", [3, ("model", 4)])) == \
        "!psk_realize.tensor<bf16, 3, model: 4>"


# ---- the §7 report ----

def test_group_summary_and_table(core):
    from presk.emit.realize_listing import format_groups, memory_rows
    from presk.pipeline import reached
    for which in ("f64", "mixed"):
        module = recorded(core, which, fuse=True)
        order = reached(core, "loss")
        text = format_groups(module, core, order)
        assert "fn RMSNorm.apply — 8 lets, 2 groups, 2 launches saved\n" \
               "  %7 = add(i0,i1);sqrt(s0) [2 inputs, 2 steps]\n" \
               "  %10 = div(i0,i1);mul(s0,i2) [3 inputs, 2 steps]\n" \
               "fn loss — 6 lets, 1 group, 1 launch saved\n" \
               "  %6 = sub(i0,i1);pow 2(s0) [2 inputs, 2 steps]" in text
        assert "In the functions loss reaches, 3 groups, 3 lets fused away:" in text
        assert "Over one call, fusion takes 39 launches to 27 (3 products launched with " \
            "the `add` that alone reads them as their epilogue)." in text
        rows = memory_rows(module, core, order)
        assert [(site, status) for site, _, status, _ in rows] == [
            ("Linear.apply/%5", "alone"), ("RMSNorm.apply/%3", "alone"),
            ("RMSNorm.apply/%7", "ends a group of 2"), ("RMSNorm.apply/%10", "ends a group of 2"),
            ("Block.apply/%5", "alone"), ("Block.apply/%8", "alone"),
            ("loss/%6", "ends a group of 2")]
        why = {site: reason for site, _, _, reason in rows}
        assert why["Linear.apply/%5"] == "the function's result"
        assert why["RMSNorm.apply/%3"] == \
            "read by ms : ℝ[...] = mean axis model %3: a reduction"
        assert why["RMSNorm.apply/%7"] == ("read by %8 : ℝ[..., model: D] = div x, %7, of "
                                           "another shape: a group is one loop nest over one "
                                           "shape")
        assert why["Block.apply/%5"].endswith("(proj, %5): a call")
        assert why["loss/%6"] == "read by %7 : ℝ[] = mean %6: a reduction"
        lines = dict((site, line) for site, line, _, _ in rows)
        assert lines["RMSNorm.apply/%10"] == "%10 : ℝ[..., model: D] = mul %8, γ"


def test_fuse_limit_one_fuses_nothing(core):
    module = recorded(core, "f64")
    notes = fuse_module(module, limit=1)
    assert R.launch_count(module) == 39
    assert any("limit of 1 steps" in n.reason for n in notes)


def test_dump_realize_cli(core, capsys):
    import argparse
    from presk.cli.realize_cmds import add_to_dump, dump_realize
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--entry")
    add_to_dump(p)
    args = p.parse_args([str(TUTORIAL), "--entry", "loss", "--dim", "B=4", "--realize",
                         f"@{MIXED}"])
    assert dump_realize(args) == 0
    out = capsys.readouterr().out
    assert "fn RMSNorm.apply_2 = RMSNorm.apply{D = 4}(θ.γ : bf16[4], x : f64[batch: 4, " \
           "model: 4]) -> f32[batch: 4, model: 4] {" in out
    assert "  x_f32 : f32[batch: 4, model: 4] = convert x\n" in out
    assert "  %7 : f32[batch: 4] = group(ms, %5_f32) {\n    %6 : f32[batch: 4] = add i0, i1\n" \
           "    %7 : f32[batch: 4] = sqrt %6\n  }\n" in out
    assert "fold 1..2 Block.apply(stacked θ.blocks.norm.γ, θ.blocks.proj.w, θ.blocks.proj.b; " \
           "acc %3)" in out
    assert "Over one call, fusion takes 39 launches to 27 (3 products launched with the " \
        "`add` that alone reads them as their epilogue)." in out


# ---- the recorded program computes what Core computes ----

def _bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16, to nearest even, kept as float32."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


_DTYPE = {"f64": np.float64, "f32": np.float32, "bf16": np.float32}


def _store(x, t) -> np.ndarray:
    name = R.element_name(t)
    x = np.asarray(x, dtype=_DTYPE[name])
    return _bf16(x) if name == "bf16" else x


def _place(a: np.ndarray, places: list[int], rank: int) -> np.ndarray:
    shape = [1] * rank
    for k, p in enumerate(places):
        shape[p] = a.shape[k]
    return a.reshape(shape)


class Evaluator:
    """PSK-Realize on numpy: f64 in float64, f32 in float32 (transcendental functions
    through float64, then rounded), bf16 stored rounded. A test oracle for the recording,
    not the kernel interpreter."""

    def __init__(self, module):
        self.funcs = {f.func_name: f for f in R.funcs(module)}
        self.ns = number_system(None)

    def call(self, f, args):
        env = dict(zip(f.args, args))
        return self.block(f.body.block, env)

    def block(self, block, env):
        for op in block.ops:
            if isinstance(op, (R.ReturnOp, R.YieldOp)):
                return [env[v] for v in op.operands]
            values = self.op(op, [env[v] for v in op.operands])
            for r, v in zip(op.results, values):
                env[r] = _store(v, r.type)
        raise AssertionError("no terminator")

    def op(self, op, xs):
        ns = self.ns
        if isinstance(op, R.ConvertOp) or isinstance(op, R.ConstantOp):
            return [xs[0] if xs else op.number]
        if isinstance(op, R.SliceOp):
            return [xs[0][op.position]]
        if isinstance(op, R.CallOp):
            return self.call(self.funcs[op.callee_name], xs)
        if isinstance(op, R.FoldOp):
            start, stop = op.bounds
            acc = xs[-1]
            for i in range(start, stop):
                (acc,) = self.call(self.funcs[op.callee_name], [s[i] for s in xs[:-1]] + [acc])
            return [acc]
        if isinstance(op, R.GroupOp):
            return self.block(op.body.block, dict(zip(op.body.block.args, xs)))
        if isinstance(op, R.PowIOp):
            return [ns.powi(xs[0], op.exponent)]
        if isinstance(op, R.UnaryOp):
            return [ns.unary(op.name.split(".")[1], xs[0])]
        if isinstance(op, R.BinaryOp):
            lm, rm = op.maps
            rank = op.result.type.rank
            name = {"minimum": "min", "maximum": "max"}.get(op.name.split(".")[1],
                                                            op.name.split(".")[1])
            return [ns.binary(name, _place(xs[0], lm, rank), _place(xs[1], rm, rank))]
        if isinstance(op, R.ReduceOp):
            x = np.asarray(xs[0])
            out = ns.reduce(op.name.split(".")[1], x, op.axis_index)
            return [np.asarray(out, dtype=x.dtype)]
        if isinstance(op, R.DotOp):
            return [ns.dot(xs[0], xs[1])]
        raise AssertionError(f"{op.name} not evaluated")


def _run_both(core, which: str, fuse: bool):
    entry = E.prepare(core, "loss", {"B": 4})
    params = E.weights(entry, 0, None)
    values = E.inputs(entry, 0, None)
    f64 = number_system(None)
    exact = Interpreter(core, f64).run("loss", E.arguments(entry, f64, params, values),
                                       entry.dims)
    module = recorded(core, which, fuse)
    top = R.entry_func(module)
    args = []
    for name, a in zip(top.arg_name_list, top.args):
        raw = params[name[2:]] if name.startswith("θ.") else values[name]
        args.append(_store(raw, a.type))
    with np.errstate(all="ignore"):
        (got,) = Evaluator(module).call(top, args)
    return float(exact), float(got)


@pytest.mark.parametrize("fuse", [False, True])
def test_all_f64_recording_computes_the_core_bits(core, fuse):
    exact, got = _run_both(core, "f64", fuse)
    assert got == exact  # the same operations in the same order


@pytest.mark.parametrize("fuse", [False, True])
def test_mixed_recording_within_the_budget(core, fuse):
    exact, got = _run_both(core, "mixed", fuse)
    assert got != exact  # f32 and bf16 did round something
    assert abs(got - exact) <= 1e-3 * abs(exact)
    assert math.isfinite(got)
