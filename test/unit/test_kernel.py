"""PSK-Kernel: convert-psk-realize-to-kernel, the kernel interpreter and the listing.

For the tutorial's loss at B = 4, under the all-f64 realization and the mixed one of the
reference (test/fixtures/realization_mixed.json): 27 launches, 39 without fusion, 9
distinct kernels; the kernel interpreter under all-f64 against the PSK-Core f64
interpreter (bit for bit against a Core interpreter that sums in the kernels' order, and
where nothing reorders a sum; within 4 ulps of the plain one), under the mixed
realization against MPFR at 128 bits; bf16 rounding against torch.bfloat16.
"""

from __future__ import annotations

import argparse
from functools import lru_cache

import gmpy2
import numpy as np
import pytest

from presk import ops
from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter
from presk.analysis.kernel_interpret import (
    KernelInterpreter,
    bf16_round,
    bf16_to_f32,
    to_storage,
)
from presk.analysis.numbers import F64, MPFR
from presk.cli.kernel_cmds import dump_kernel
from presk.dialects import kernel as K
from presk.emit import mathlib
from presk.emit.kernel_listing import count, format_listing
from presk.pipeline import kernel_pipeline, load_core, run_kernel
from programs import MIXED, ROOT, blocked_last_axis, program

TUTORIAL = str(ROOT / "tutorial" / "07_train.psk")


@lru_cache(maxsize=None)
def core():
    module, _ = load_core(TUTORIAL)
    return module


def pipeline(realization=None, fuse=True, B=4):
    return kernel_pipeline(core(), "loss", {"B": B}, realization, fuse)


def weights_and_inputs(B: int = 4, seed: int = 0, random_params: bool = False):
    entry = E.prepare(core(), "loss", {"B": B})
    params = E.weights(entry, seed, None)
    if random_params:  # γ and b away from 1 and 0, so that bf16 rounds them
        rng = np.random.default_rng(seed + 100)
        params = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in params.items()}
    return entry, params, E.inputs(entry, seed, None)


def ulps(a, b) -> int:
    """The distance between two f64 arrays in units in the last place (largest)."""
    def ordered(x):
        i = np.asarray(x, dtype=np.float64).view(np.int64)
        return np.where(i < 0, np.int64(-(2 ** 63)) - i, i)
    return int(np.max(np.abs(ordered(a) - ordered(b))))


def core_value(numbers, params, values, B: int = 4, trace=None):
    entry = E.prepare(core(), "loss", {"B": B})
    it = Interpreter(core(), numbers, trace=trace)
    return it.run("loss", E.arguments(entry, numbers, params, values), entry.dims)


class KernelOrderF64(F64):
    """Core's f64, but summing as the kernels do: a sum in the blocked order (over all
    axes: the last axis' sums first), a contraction one product after another, k
    ascending (numpy sums 8 or more terms pairwise, and BLAS may use FMA)."""

    def reduce(self, name, x, axis):
        if name not in ("sum", "mean"):
            return super().reduce(name, x, axis)
        x = np.asarray(x, dtype=np.float64)
        acc = x
        if axis is None:
            for _ in range(x.ndim):
                acc = blocked_last_axis(acc)
        else:
            acc = blocked_last_axis(np.moveaxis(x, axis, -1))
        terms = x.size if axis is None else x.shape[axis]
        return acc / float(terms) if name == "mean" else acc

    def dot(self, a, b):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        acc = np.zeros(a.shape[:-1] + b.shape[1:])
        for k in range(a.shape[-1]):
            acc = acc + np.multiply.outer(a[..., k], b[k])
        return acc


# --------------------------------------------------------------------------------------
# bf16 by bits, against torch
# --------------------------------------------------------------------------------------


def _torch_bf16_bits(x: np.ndarray) -> np.ndarray:
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16)
    return t.view(torch.int16).numpy().view(np.uint16)


def test_bf16_round_matches_torch_on_random_bit_patterns():
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2 ** 32, size=200_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    finite = ~np.isnan(x)
    ours, theirs = bf16_round(x), _torch_bf16_bits(x)
    assert np.array_equal(ours[finite], theirs[finite])
    # NaN stays NaN (its payload aside), with its sign.
    assert np.all(np.isnan(bf16_to_f32(ours[~finite])))
    assert np.array_equal(ours[~finite] >> 15, bits[~finite] >> 31)


def test_bf16_round_ties_to_even_subnormals_and_overflow():
    rng = np.random.default_rng(8)
    upper = rng.integers(0, 2 ** 16, size=50_000, dtype=np.uint64).astype(np.uint32)
    ties = ((upper << np.uint32(16)) | np.uint32(0x8000)).view(np.float32)  # exactly halfway
    special = np.array([0.0, -0.0, np.inf, -np.inf, 3.4028235e38, -3.4028235e38,
                        1e-45, -1e-45, 1.1754942e-38, 3.3961776e38, 3.3961775e38,
                        1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -23],
                       dtype=np.float32)
    for x in (ties[~np.isnan(ties)], special):
        assert np.array_equal(bf16_round(x), _torch_bf16_bits(x))
    # Halfway cases go to the even neighbour; just above goes up.
    assert bf16_to_f32(bf16_round(np.float32([1.0 + 2.0 ** -8])))[0] == 1.0
    assert bf16_to_f32(bf16_round(np.float32([1.0 + 3 * 2.0 ** -8])))[0] == 1.0 + 2.0 ** -6
    assert bf16_to_f32(bf16_round(np.float32([1.0 + 2.0 ** -8 + 2.0 ** -23])))[0] \
        == 1.0 + 2.0 ** -7


def test_bf16_widening_is_exact_and_matches_torch():
    torch = pytest.importorskip("torch")
    bits = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16)
    ours = bf16_to_f32(bits)
    theirs = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().numpy()
    same = np.isnan(ours) == np.isnan(theirs)
    assert same.all()
    assert np.array_equal(ours[~np.isnan(ours)], theirs[~np.isnan(theirs)])
    assert np.array_equal(bf16_round(ours[~np.isnan(ours)]), bits[~np.isnan(ours)])


def test_f64_to_bf16_rounds_once():
    """f64 → bf16 is one rounding (through f32 rounded to odd), checked against MPFR at 8
    bits; rounding to f32 first would round twice near a bf16 tie."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(20_000) * np.exp2(rng.integers(-100, 100, 20_000))
    # Values just above a bf16 tie that f32 would round down onto the tie.
    tie = (np.float64(1.0) + 2.0 ** -8) * np.exp2(rng.integers(-20, 20, 200))
    x = np.concatenate([x, tie * (1 + 2.0 ** -30), -tie * (1 + 2.0 ** -30)])
    ours = bf16_to_f32(to_storage(x, "bf16")).astype(np.float64)
    with gmpy2.context(precision=8):
        exact = np.array([float(gmpy2.mpfr(float(v))) for v in x])
    assert np.array_equal(ours, exact)
    twice = bf16_to_f32(bf16_round(x.astype(np.float32))).astype(np.float64)
    assert not np.array_equal(twice, exact)  # the double rounding this avoids


# --------------------------------------------------------------------------------------
# The tutorial: launches, kernels, instances
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("realization", [None, MIXED], ids=["all-f64", "mixed"])
def test_tutorial_27_launches_of_9_kernels(realization):
    pipe = pipeline(realization)
    c = count(pipe.kernel)
    assert (c.kernels, c.launches, c.unfused, c.saved) == (9, 27, 39, 12)
    by_kernel = {k: sum(v.values()) for k, v in c.by_kernel.items()}
    assert by_kernel == {"k0": 4, "k1": 4, "k2": 4, "k3": 4, "k4": 3, "k5": 3, "k6": 3,
                         "k7": 1, "k8": 1}
    titles = [k.title.data for k in K.kernels(pipe.kernel).values()]
    assert titles == ["pow 2", "mean axis model", "fused 2 steps", "fused 2 steps", "gelu",
                      "dot+add", "add", "fused 2 steps", "mean"]
    # The interpreter launches what the listing counts.
    _, params, values = weights_and_inputs()
    run = run_kernel(core(), "loss", {"B": 4}, params, values, realization)
    assert run.stats.launches == 27
    assert run.stats.by_kernel == by_kernel


def test_without_fusion_39_operations_36_launches():
    """psk-fuse's three groups save 3 launches; the dot+add epilogue 3 (30 → 27); with
    neither every operation is a launch (39)."""
    c = count(pipeline(None, fuse=False).kernel)
    assert (c.launches, c.unfused, c.kernels) == (36, 39, 11)


def test_contraction_has_the_dot_add_epilogue_and_a_tiled_layout():
    kernels = K.kernels(pipeline(MIXED).kernel)
    k5 = kernels["k5"]
    assert k5.title.data == "dot+add"
    assert k5.layout == K.LayoutAttr.tiled([4, 4], 4, "IJ")
    assert [a.type.listing() for a in k5.args] == ["f32[batch: 4, 4]", "f32[4, 4]", "bf16[4]",
                                                   "f32[batch: 4, 4]"]
    assert all(k.layout.is_default for name, k in kernels.items() if name != "k5")


def test_mixed_hosts_instances_and_iteration_zero_apart():
    module = pipeline(MIXED).kernel
    hosts = K.hosts(module)
    assert sorted(hosts) == ["Block.apply", "Block.apply_2", "Linear.apply", "RMSNorm.apply",
                             "RMSNorm.apply_2", "Tower.apply", "loss"]
    c = count(module)
    assert c.host_runs == {"RMSNorm.apply_2": 1, "RMSNorm.apply": 3, "Linear.apply": 3,
                           "Block.apply_2": 1, "Block.apply": 2, "Tower.apply": 1, "loss": 1}
    tower = [op for op in hosts["Tower.apply"].body.block.ops
             if isinstance(op, (K.CallOp, K.FoldOp))]
    assert isinstance(tower[0], K.CallOp) and tower[0].callee_name == "Block.apply_2"
    assert isinstance(tower[1], K.FoldOp) and (tower[1].lower.data, tower[1].upper.data) == (1, 3)
    # The f64 x is converted on the host; the bf16 γ is not: k3 loads it.
    rms2 = list(K.host_ops(hosts["RMSNorm.apply_2"]))
    converts = [op for op in rms2 if isinstance(op, K.ConvertOp)]
    assert [(c.source.type.listing(), c.dest.type.listing()) for c in converts] == [
        ("f64[batch: 4, model: 4]", "f32[batch: 4, model: 4]"), ("f64[]", "f32[]"),
        ("f64[batch: 4, model: 4]", "f32[batch: 4, model: 4]")]
    k3 = next(op for op in rms2 if isinstance(op, K.LaunchOp) and op.callee_name == "k3")
    assert k3.arguments[2] is hosts["RMSNorm.apply_2"].args[0]  # θ.γ itself, bf16
    # Both RMSNorm instances share k0..k3.
    for name in ("RMSNorm.apply", "RMSNorm.apply_2"):
        launched = [op.callee_name for op in K.host_ops(hosts[name])
                    if isinstance(op, K.LaunchOp)]
        assert launched == ["k0", "k1", "k2", "k3"]


def test_kernel_module_prints_and_parses_back():
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser
    module = pipeline(MIXED).kernel
    text = str(module)
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(K.Kernel)
    again = Parser(ctx, text).parse_module()
    again.verify()
    assert str(again) == text


# --------------------------------------------------------------------------------------
# Values: all-f64 against Core f64, mixed against MPFR
# --------------------------------------------------------------------------------------


def _traced(fn):
    sites: dict[str, list[np.ndarray]] = {}

    def trace(site, value):
        if isinstance(value, (np.ndarray, float)):
            sites.setdefault(site, []).append(np.array(value, dtype=np.float64))
    fn(trace)
    return sites


@pytest.mark.parametrize("B,seed", [(4, 0), (4, 1), (5, 2), (8, 3)])
def test_all_f64_bit_for_bit_with_sums_in_kernel_order(B, seed):
    """Every stored value of every launch, against a Core f64 interpreter that sums as
    the kernels do: the same bits."""
    _, params, values = weights_and_inputs(B, seed, random_params=True)
    ours = _traced(lambda t: run_kernel(core(), "loss", {"B": B}, params, values, None,
                                        trace=t))
    theirs = _traced(lambda t: core_value(KernelOrderF64(), params, values, B, trace=t))
    assert len(ours) >= 9
    for site, vals in ours.items():
        assert len(vals) == len(theirs[site]), site
        for a, b in zip(vals, theirs[site]):
            assert ulps(a, b) == 0, site


@pytest.mark.parametrize("B,seed", [(4, 0), (4, 1), (5, 2), (8, 3), (4, 4), (6, 5)])
def test_all_f64_within_4_ulps_of_core_f64(B, seed):
    _, params, values = weights_and_inputs(B, seed, random_params=seed > 0)
    ours = run_kernel(core(), "loss", {"B": B}, params, values, None).result["result"]
    theirs = core_value(F64(), params, values, B)
    assert ulps(ours, theirs) <= 4


def test_all_f64_bit_for_bit_where_nothing_reorders():
    """Before the first contraction, and in sums of fewer than 8 terms, Core's numpy
    computes what the kernels compute: the first RMSNorm's values and the first gelu,
    bit for bit against the plain Core f64 interpreter."""
    _, params, values = weights_and_inputs(4, 0, random_params=True)
    ours = _traced(lambda t: run_kernel(core(), "loss", {"B": 4}, params, values, None,
                                        trace=t))
    theirs = _traced(lambda t: core_value(F64(), params, values, 4, trace=t))
    for site in ("RMSNorm.apply/%3", "RMSNorm.apply/%4", "RMSNorm.apply/%5",
                 "RMSNorm.apply/%7", "RMSNorm.apply/%10", "Block.apply/%5"):
        assert ulps(ours[site][0], theirs[site][0]) == 0, site


def test_mixed_within_the_budget_of_mpfr():
    _, params, values = weights_and_inputs(4, 0)
    ours = float(run_kernel(core(), "loss", {"B": 4}, params, values, MIXED).result["result"])
    mp = MPFR(128)
    exact = float(core_value(mp, params, values))
    assert abs(ours - exact) <= 1e-3 * abs(exact)
    assert ours != float(core_value(F64(), params, values))  # it did compute in f32


def test_mixed_f32_arithmetic_is_float32():
    """With random parameters, MPFR on the parameters rounded to their storage types: the
    rest of the error is f32 arithmetic's, far under f32's unit roundoff times the
    condition; and the first launches equal float32 numpy on the same inputs."""
    _, params, values = weights_and_inputs(4, 3, random_params=True)
    traced: dict[str, list[np.ndarray]] = {}
    run = run_kernel(core(), "loss", {"B": 4}, params, values, MIXED,
                     trace=lambda s, v: traced.setdefault(s, []).append(v))
    ours = float(run.result["result"])
    types = {"blocks.proj.w": "f32", "blocks.norm.γ": "bf16", "blocks.proj.b": "bf16",
             "final.γ": "bf16"}
    stored = {k: np.asarray(to_storage(v, types[k])) for k, v in params.items()}
    rounded = {k: (bf16_to_f32(v) if v.dtype == np.uint16 else v).astype(np.float64)
               for k, v in stored.items()}
    exact = float(core_value(MPFR(128), rounded, values))
    assert abs(ours - exact) <= 1e-5 * abs(exact)
    x = values["batch.0"].astype(np.float32)
    square = traced["RMSNorm.apply/%3"][0]
    assert np.array_equal(square, (x * x).astype(np.float64))
    ms = _blocked_sum([(x * x)[:, k] for k in range(4)])  # (x0² + x2²) + (x1² + x3²)
    assert ms.dtype == np.float32
    assert np.array_equal(traced["RMSNorm.apply/%4"][0], (ms / np.float32(4)).astype(np.float64))
    eps = np.float32(1e-6)
    rms = np.sqrt(ms / np.float32(4) + eps)
    gamma = bf16_to_f32(stored["blocks.norm.γ"][0])
    assert np.array_equal(traced["RMSNorm.apply/%10"][0],
                          ((x / rms[:, None]) * gamma[None, :]).astype(np.float64))


# --------------------------------------------------------------------------------------
# The kernel interpreter on a hand-built kernel
# --------------------------------------------------------------------------------------


def test_hand_built_kernel_f32_and_bf16_store():
    """y[i] = bf16(exp(x[i]) + 1/3), computed in float32 and rounded by bits."""
    from xdsl.dialects.builtin import ModuleOp, StringAttr, bf16, f32
    from xdsl.ir import Block

    from presk.conversion.realize_to_kernel import NestBuilder
    x_t, y_t = K.BufferType.get(f32, 5), K.BufferType.get(bf16, 5)
    host_block = Block(arg_types=[x_t, y_t])
    nb = NestBuilder("exp+third")
    xin = nb.input(host_block.args[0])
    out = nb.output(host_block.args[1])
    (i,) = nb.open_loops([5])
    v = nb.value(K.LoadOp(xin, [i]))
    e = nb.value(K.MathOp("exp", v))
    s = nb.value(K.AddOp(e, nb.value(K.DivOp(nb.const(1.0, f32), nb.const(3.0, f32)))))
    nb.store(s, out, [i])
    nb.close(1)
    kernel = nb.finish()
    kernel.sym_name = StringAttr("k0")
    module = ModuleOp([kernel])
    module.verify()
    xs = np.float32([-2.5, 0.0, 0.1, 1.0, 7.25])
    y = np.zeros(5, dtype=np.uint16)
    KernelInterpreter(module).launch(kernel, [xs, y])
    expected = bf16_round(np.exp(xs) + np.float32(1) / np.float32(3))
    assert np.array_equal(y, expected)


# --------------------------------------------------------------------------------------
# The listing
# --------------------------------------------------------------------------------------


def test_listing_of_the_mixed_tutorial(capsys):
    args = argparse.Namespace(file=TUTORIAL, entry="loss", dim=["B=4"], realize="@" + MIXED)
    assert dump_kernel(args) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == "-- 9 kernels, 27 launches, f64+sequential+9sites+4params"
    assert lines[1] == "-- fusion: 39 launches without it, 12 saved (31%)"
    for line in [
        "// k0: 4 launches at RMSNorm.apply/%3",
        "// k1: 4 launches at RMSNorm.apply/%4 (ms)",
        "// k3: 4 launches at RMSNorm.apply/%10 (fused)",
        "// k5: 3 launches at Linear.apply/%3 + Linear.apply/%5",
        "// k7: 1 launch at loss/%6 (fused)",
        "kernel fused 2 steps (%0 : f32[batch: 4, model: 4], %1 : f32[batch: 4], "
        "%2 : bf16[4]) -> %3 : f32[batch: 4, model: 4] {",
        "      %3[i0, i1] = ((%0[i0, i1] / %1[i0]) * %2[i1])",
        "      %1[i0, i1] = (%0[i0, i1] * ((1 + erf((%0[i0, i1] / 1.4142135623730951))) / 2))",
        "kernel mean (%0 : f32[batch: 4, model: 4]) -> %1 : f64[] {",
        "  for i0 in 0..4 in 4 partials, then pairwise {",
        "      s1 = (s1 + f64(%0[i0, i1]))",
        "    s0 = (s0 + s1)",
        "  %1[] = (s0 / 16)",
        "  k3(x_f32_2, t7, θ.γ, out)",
    ]:
        assert line in lines, line


def test_listing_all_f64_names_the_realization():
    pipe = pipeline(None)
    text = format_listing(pipe.kernel, pipe.realization_name)
    assert text.startswith("-- 9 kernels, 27 launches, all-f64+sequential\n"
                           "-- fusion: 39 launches without it, 12 saved (31%)\n")


# --------------------------------------------------------------------------------------
# Every kind of nest, from hand-built PSK-Realize, against numpy
# --------------------------------------------------------------------------------------


def _realize_one(arg_types, result_type, build):
    from xdsl.dialects.builtin import ModuleOp

    from presk.dialects import realize as R
    func = R.FuncOp.make("f", "f", [(f"a{i}", t) for i, t in enumerate(arg_types)],
                         [result_type], entry=True)
    block = func.body.block
    ops = build(*block.args)
    for op in ops:
        block.add_op(op)
    block.add_op(R.ReturnOp([ops[-1].results[0]], site="f/%99"))
    module = ModuleOp([func])
    module.verify()
    return module


def _run_one(module, inputs):
    from presk.analysis.kernel_interpret import element_name, to_f64
    from presk.conversion.realize_to_kernel import realize_to_kernel
    from presk.dialects import realize as R
    kernel = realize_to_kernel(module)
    func = R.entry_func(module)
    args = [to_storage(x, element_name(a.type.element)) for x, a in zip(inputs, func.args)]
    out = KernelInterpreter(kernel).run("f", args)[0]
    return to_f64(out), kernel


def _t(element, *sizes):
    from presk.dialects import realize as R
    return R.RTensorType.get(element, list(sizes))


def _seq_sum(terms):
    acc = np.zeros_like(terms[0])
    for t in terms:
        acc = acc + t
    return acc


def _blocked_sum(terms):
    """The kernels' order of a sum (independently of presk/summation.py): term k into
    partial k mod P from +0 (P = 64, or the power of two ≥ len for fewer), then
    p_j + p_{j+h} for h = P/2 … 1."""
    return blocked_last_axis(np.stack(terms, axis=-1))


def test_every_unary_in_f64_gives_the_core_interpreters_bits():
    from presk.dialects import realize as R
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.standard_normal(29) * 3, [0.0, -0.0, 40.0, -40.0]])
    f64 = F64()
    t = _t("f64", x.size)
    positive = ("sqrt", "log")  # below, on positive operands
    for cls, name in [(R.FUNCTION_OPS[f.name], f.name) for f in ops.rows(arity=1, core=True)
                      if f.name not in positive]:
        module = _realize_one([t], t, lambda a, cls=cls: [cls(a, site="f/%1")])
        got, _ = _run_one(module, [x])
        with np.errstate(all="ignore"):
            want = f64.unary(name, x)
        assert ulps(got, want) == 0, name
    pos = np.abs(x) + 0.5
    for cls, name in [(R.FUNCTION_OPS[n], n) for n in positive]:
        got, _ = _run_one(_realize_one([t], t, lambda a, cls=cls: [cls(a, site="f/%1")]), [pos])
        assert ulps(got, f64.unary(name, pos)) == 0, name
    got, _ = _run_one(_realize_one([t], t, lambda a: [R.HeavisideOp(a, 0.5, site="f/%1")]), [x])
    assert np.array_equal(got, np.heaviside(x, 0.5))
    got, _ = _run_one(_realize_one([t], t, lambda a: [R.PowIOp(a, 3, site="f/%1")]), [x])
    assert np.array_equal(got, x * x * x)


def test_binary_with_broadcast_maps_and_pow():
    from presk.dialects import realize as R
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(3)
    ta, tb, tr = _t("f32", 3, 4), _t("f32", 3), _t("f32", 3, 4)
    for cls, fn in [(R.SubOp, np.subtract), (R.DivOp, np.divide), (R.MinimumOp, np.minimum),
                    (R.MaximumOp, np.maximum)]:
        module = _realize_one([ta, tb], tr, lambda x, y, cls=cls: [
            cls(x, y, [0, 1], [0], tr, site="f/%1")])
        got, _ = _run_one(module, [a, b])
        want = fn(a.astype(np.float32), b.astype(np.float32)[:, None])
        assert np.array_equal(got, want.astype(np.float64)), cls.name
    module = _realize_one([ta, tb], tr, lambda x, y: [R.PowOp(x, y, [0, 1], [0], tr, site="f/%1")])
    got, _ = _run_one(module, [np.abs(a), b])
    # pow is the math library's (presk/emit/mathlib.py), in f32
    want = mathlib.evaluate("pow", "f32", np.abs(a).astype(np.float32),
                            b.astype(np.float32)[:, None])
    assert np.array_equal(got, want.astype(np.float64))


@pytest.mark.parametrize("axis", [0, 1, 2, None])
def test_reductions_over_an_axis_or_all(axis):
    from presk.dialects import realize as R
    rng = np.random.default_rng(13)
    x = rng.standard_normal((3, 4, 5))
    t = _t("f64", 3, 4, 5)
    sizes = [3, 4, 5]
    rsizes = [] if axis is None else [s for i, s in enumerate(sizes) if i != axis]
    rt = _t("f64", *rsizes)
    moved = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
    terms = [moved[..., k] for k in range(moved.shape[-1])]

    def blocked(v):  # over all axes, the last one's sums first; or over `axis`
        if axis is not None:
            return blocked_last_axis(np.moveaxis(v, axis, -1))
        for _ in range(v.ndim):
            v = blocked_last_axis(v)
        return v

    total = blocked(x)
    top = terms[0]
    low = terms[0]
    for term in terms[1:]:
        top, low = np.maximum(top, term), np.minimum(low, term)
    exp, log = (lambda v: mathlib.evaluate("exp", "f64", v)), (
        lambda v: mathlib.evaluate("log", "f64", v))  # the kernels' exp and log
    lse = top + log(blocked(exp(x - (top if axis is None else np.expand_dims(top, axis)))))
    for cls, want in [(R.SumOp, total), (R.MeanOp, total / len(terms)), (R.MaxOp, top),
                      (R.MinOp, low), (R.LogSumExpOp, lse)]:
        module = _realize_one([t], rt, lambda a, cls=cls: [cls(a, axis, rt, site="f/%1")])
        got, _ = _run_one(module, [x])
        assert ulps(got, want) == 0, cls.name


def test_softmax_along_the_middle_axis():
    from presk.dialects import realize as R
    rng = np.random.default_rng(14)
    x = rng.standard_normal((3, 5, 2)) * 4
    t = _t("f64", 3, 5, 2)
    got, kernel = _run_one(_realize_one([t], t, lambda a: [R.SoftmaxOp(a, 1, site="f/%1")]), [x])
    terms = [x[:, k, :] for k in range(5)]
    top = terms[0]
    for term in terms[1:]:
        top = np.maximum(top, term)
    exp = lambda v: mathlib.evaluate("exp", "f64", v)  # noqa: E731 (the kernels' exp)
    total = _blocked_sum([exp(term - top) for term in terms])
    want = exp(x - top[:, None, :]) / total[:, None, :]
    assert ulps(got, want) == 0
    assert count(kernel).launches == 1


def test_contract_sum_to_spread_broadcast():
    from presk.dialects import realize as R
    rng = np.random.default_rng(15)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3, 5))
    ta, tb = _t("f64", 2, 3, 4), _t("f64", 4, 3, 5)
    tr = _t("f64", 5, 2)  # a's rest (2) then b's rest (5), permuted
    module = _realize_one([ta, tb], tr, lambda x, y: [
        R.ContractOp(x, y, [2, 1], [0, 1], tr, perm=[1, 0], site="f/%1")])
    got, kernel = _run_one(module, [a, b])
    want = _seq_sum([np.multiply.outer(b[k, j, :], a[:, j, k])
                     for k in range(4) for j in range(3)])
    assert ulps(got, want) == 0
    assert not next(iter(K.kernels(kernel).values())).layout.is_default
    module = _realize_one([ta], _t("f64", 3), lambda x: [
        R.SumToOp(x, [1], _t("f64", 3), site="f/%1")])
    got, _ = _run_one(module, [a])
    # over axes 0 and 2: the inner axis' sums first, each a term of the outer's
    assert ulps(got, _blocked_sum([_blocked_sum([a[i, :, k] for k in range(4)])
                                   for i in range(2)])) == 0
    v = rng.standard_normal(3)
    like = _t("f64", 2, 3, 4)
    module = _realize_one([_t("f64", 3), like], like, lambda x, y: [
        R.SpreadOp(x, y, [1], like, mean=True, site="f/%1")])
    got, _ = _run_one(module, [v, a])
    assert np.array_equal(got, np.broadcast_to((v / 8.0)[None, :, None], (2, 3, 4)))
    module = _realize_one([_t("f32", 3)], _t("f32", 3, 2), lambda x: [
        R.BroadcastOp(x, [0], _t("f32", 3, 2), site="f/%1")])
    got, _ = _run_one(module, [v])
    assert np.array_equal(got, np.broadcast_to(v.astype(np.float32)[:, None], (3, 2)))


def test_widening_reads_fold_into_the_kernel_and_narrowing_converts_are_host_ops():
    """An f32 value read by an f64 op is widened in the kernel (no host convert, no
    buffer); an f64 value read by an f32 op is converted on the host; a bf16 result is
    rounded by the store."""
    from presk.dialects import realize as R
    rng = np.random.default_rng(16)
    x32, y64 = rng.standard_normal(6), rng.standard_normal(6)
    t32, t64, tb = _t("f32", 6), _t("f64", 6), _t("bf16", 6)

    def build(x, y):
        wide = R.ConvertOp(x, "f64", site="f/%2")
        total = R.AddOp(wide, y, [0], [0], t64, site="f/%2")
        narrow = R.ConvertOp(total, "f32", site="f/%3")
        square = R.MulOp(narrow, narrow, [0], [0], t32, site="f/%3")
        store = R.ConvertOp(square, "bf16", site="f/%3")
        return [wide, total, narrow, square, store]

    got, kernel = _run_one(_realize_one([t32, t64], tb, build), [x32, y64])
    host = K.hosts(kernel)["f"]
    converts = [op for op in K.host_ops(host) if isinstance(op, K.ConvertOp)]
    assert [(c.source.type.listing(), c.dest.type.listing()) for c in converts] == [
        ("f64[6]", "f32[6]"), ("f32[6]", "bf16[6]")]
    total = x32.astype(np.float32).astype(np.float64) + y64
    square = total.astype(np.float32) * total.astype(np.float32)
    assert np.array_equal(got, bf16_to_f32(bf16_round(square)).astype(np.float64))


@pytest.mark.parametrize("B", [4, 5, 8])
@pytest.mark.parametrize("name", ["03_activations", "04_mlp", "05_stack", "07_train"])
def test_kernel_interpreter_equals_core_f64_bit_for_bit(name: str, B: int) -> None:
    """Under all-f64 every kernel computes what PSK-Core's f64 interpreter does, in the same
    order (sums in index order, k ascending): the same bits, fused or not."""
    from presk.pipeline import run_kernel
    module = program(name)
    entry = E.prepare(module, "loss", {"B": B})
    params, values = E.weights(entry, 0, None), E.inputs(entry, 0, None)
    numbers = F64()
    core_loss = Interpreter(module, numbers).run(
        "loss", E.arguments(entry, numbers, params, values), entry.dims)
    kernel_loss = run_kernel(module, "loss", {"B": B}, params, values, None).result["result"]
    assert np.float64(kernel_loss).tobytes() == np.float64(core_loss).tobytes()


@pytest.mark.parametrize("grad", [False, True])
def test_real_pow_end_to_end_bit_for_bit(grad: bool) -> None:
    """`softplus(x) ^ power` (tutorial 03, a real exponent) is a Core `pow`, a Realize
    `pow` and a kernel `math "pow"`; with powers drawn from [0.3, 2.7] (not the init's
    ones) the kernel interpreter under all-f64 computes the Core f64 interpreter's bits —
    both call mathlib's f64 pow — and so does the gradient (`pow` with b − 1, and log)."""
    from presk.transforms.differentiate import Differentiator
    module = program("03_activations")
    entry = E.prepare(module, "loss", {"B": 5})
    params, values = E.weights(entry, 0, None), E.inputs(entry, 0, None)
    rng = np.random.default_rng(3)
    params["power"] = rng.uniform(0.3, 2.7, np.shape(params["power"]))
    run = run_kernel(module, "loss", {"B": 5}, params, values, None, grad=grad)
    assert any(isinstance(op, K.MathOp) and op.fn.data == "pow"
               for op in run.pipeline.kernel.walk())
    numbers = F64()
    args = E.arguments(entry, numbers, params, values)
    if grad:
        Differentiator(module, "store").run(["loss"])
        core, d_theta, _ = Interpreter(module, numbers).run(
            "loss.value_vjp", args + [numbers.constant(1.0)], entry.dims)
        want = np.asarray(dict(d_theta.items())["power"], dtype=np.float64)
        assert run.result["grad.power"].tobytes() == want.tobytes()
    else:
        core = Interpreter(module, numbers).run("loss", args, entry.dims)
    assert np.float64(run.result["result"]).tobytes() == np.float64(core).tobytes()
    # the library's pow is not numpy's on such values: the test does not pass by accident
    assert not np.array_equal(
        mathlib.evaluate("pow", "f64", np.linspace(0.1, 9, 999), 1.7),
        np.power(np.linspace(0.1, 9, 999), 1.7))
