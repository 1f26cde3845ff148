"""--remat store and --remat recompute: the same gradient, bit for bit, from fewer values
kept across the forward/reverse boundary by recompute.

Both modes perform the same operations on the same values (docs/autodiff.md), so their f64
gradients are identical (np.array_equal), on the tutorial losses 03, 04, 05, 07 and on 06's
Tower.apply (a function with a `...` prefix, called on a batch). What crosses the boundary
is the residual part of `loss.fwd`'s result (everything after its value): its tensor leaves
are counted, through nested tuples, a parameter tree counting as one (and an f64 as none).

Run with `-s` to see the residual counts and the op-count line of `presk dump --stage vjp`.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pytest
from xdsl.dialects.builtin import TupleType
from xdsl.ir import Attribute

from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.numbers import F64, MPFR
from presk.analysis.weights import initial_weights, tree_fields
from presk.dialects import core as C
from presk.transforms.differentiate import REMATS, Differentiator
from programs import LOSSES, TUTORIAL, presk, program


@lru_cache(maxsize=None)
def differentiated(name: str, remat: str, entry: str = "loss"):
    module = program(name)
    Differentiator(module, remat).run([entry])
    module.verify()
    return module


def func(module, name: str) -> C.FuncOp:
    return next(op for op in module.ops if isinstance(op, C.FuncOp) and op.sym_name.data == name)


def random_weights(fields, seed: int) -> dict[str, np.ndarray]:
    """The seeded weights, moved off the initializers' ones and zeros."""
    params = initial_weights(fields, seed)
    rng = np.random.default_rng(seed + 1)
    return {k: v + rng.normal(0.0, 0.3, v.shape) for k, v in params.items()}


def flat(value, path: str = "") -> dict[str, np.ndarray]:
    if isinstance(value, Tree):
        return {f"{path}{k}": np.asarray(v) for k, v in value.items()}
    if isinstance(value, tuple):
        out: dict[str, np.ndarray] = {}
        for i, v in enumerate(value):
            out.update(flat(v, f"{path}{i}."))
        return out
    return {path.rstrip("."): np.asarray(value)}


def loss_value_vjp(name: str, remat: str, b: int, numbers=None) -> dict[str, np.ndarray]:
    module = differentiated(name, remat)
    entry = E.prepare(module, "loss", {"B": b})
    numbers = numbers or F64()
    params, values = random_weights(entry.fields, 3), E.inputs(entry, 3, None)
    args = E.arguments(entry, numbers, params, values)
    with numbers.context():
        one = numbers.constant(1.0)
    result = Interpreter(module, numbers).run("loss.value_vjp", args + [one], entry.dims)
    return {k: numbers.to_f64(v) for k, v in flat(result).items()}


@pytest.mark.parametrize("b", [4, 5])
@pytest.mark.parametrize("name", LOSSES)
def test_store_and_recompute_give_the_same_bits(name: str, b: int) -> None:
    store, recompute = (loss_value_vjp(name, remat, b) for remat in REMATS)
    assert store.keys() == recompute.keys()
    assert len(store) > 3
    for path in store:
        assert np.array_equal(store[path], recompute[path]), path


def test_store_and_recompute_give_the_same_bits_in_mpfr() -> None:
    store, recompute = (loss_value_vjp("07_train", remat, 3, MPFR(128)) for remat in REMATS)
    for path in store:
        assert np.array_equal(store[path], recompute[path]), path


def test_store_and_recompute_give_the_same_bits_on_a_prefix_function() -> None:
    """06_tower.psk's Tower.apply on x : ℝ[5, model: 4] with a cotangent of that shape."""
    results = []
    for remat in REMATS:
        module = differentiated("06_tower", remat, "Tower.apply")
        theta_type = func(module, "Tower.apply").function_type.inputs.data[0]
        params = random_weights(tree_fields(module, theta_type), 5)
        rng = np.random.default_rng(9)
        x, dy = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
        result = Interpreter(module, F64()).run("Tower.apply.value_vjp", [Tree(params), x, dy])
        results.append(flat(result))
    store, recompute = results
    assert store.keys() == recompute.keys()
    assert "1.blocks.proj.w" in store and store["1.blocks.proj.w"].shape == (3, 4, 4)
    for path in store:
        assert np.array_equal(store[path], recompute[path]), path


# --------------------------------------------------------------------------------------
# What crosses the boundary
# --------------------------------------------------------------------------------------

def tensor_leaves(t: Attribute) -> int:
    """Tensors count one, a parameter tree one, a tuple its items', an f64 or nat none."""
    if isinstance(t, TupleType):
        return sum(tensor_leaves(item) for item in t.types.data)
    return 1 if isinstance(t, (C.TensorAttr, C.ParamsAttr)) else 0


def residual_count(name: str, remat: str) -> int:
    result = func(differentiated(name, remat), "loss.fwd").function_type.outputs.data[0]
    assert isinstance(result, TupleType)
    return sum(tensor_leaves(t) for t in result.types.data[1:])


def test_tensor_leaves_counts_what_the_docstring_says() -> None:
    r = C.TensorAttr.scalar()
    assert tensor_leaves(TupleType([r, TupleType([r, r]), r])) == 4
    theta = func(differentiated("07_train", "store"), "loss").function_type.inputs.data[0]
    assert tensor_leaves(TupleType([theta, r])) == 2


@pytest.mark.parametrize("name", LOSSES)
def test_recompute_keeps_fewer_values(name: str) -> None:
    store, recompute = (residual_count(name, remat) for remat in REMATS)
    print(f"\n[remat] {name}: loss.fwd keeps {store} tensor leaves under store, "
          f"{recompute} under recompute")
    # recompute keeps the arguments: θ (one tree) and the batch (two tensors).
    assert recompute == 3
    assert recompute < store


def test_the_vjp_dump_counts_operations_in_both_modes() -> None:
    lines = {}
    for remat in REMATS:
        done = presk("dump", str(TUTORIAL / "07_train.psk"), "--stage", "vjp", "--entry", "loss",
                     "--remat", remat)
        assert done.returncode == 0, done.stderr
        lines[remat] = done.stdout.splitlines()[0]
        print(f"\n[remat] {lines[remat]}")
    for remat, line in lines.items():
        m = re.match(rf"The vjp of loss under --remat {remat}: (\d+) functions, (\d+) operations",
                     line)
        assert m is not None, line
    # recompute adds the .vjp of every callee and runs each forward again.
    count = {r: int(re.search(r"(\d+) functions", line).group(1)) for r, line in lines.items()}
    assert count["recompute"] > count["store"]


# --------------------------------------------------------------------------------------
# What the reverse sweep computes
# --------------------------------------------------------------------------------------

def unread(name: str, remat: str) -> list[str]:
    """The values a .fwd or .bwd computes and never reads (nor returns)."""
    module = differentiated(name, remat)
    out = []
    for f in module.ops:
        if isinstance(f, C.FuncOp) and f.sym_name.data.endswith((".fwd", ".bwd")):
            out += [f"{f.sym_name.data}: {op.site.data} {op.name}" for op in f.body.block.ops
                    if op.results and not op.results[0].uses]
    return out


@pytest.mark.parametrize("remat", ["store", "recompute"])
@pytest.mark.parametrize("name", LOSSES)
def test_no_sweep_computes_a_value_it_never_reads(name: str, remat: str) -> None:
    assert unread(name, remat) == []


# --------------------------------------------------------------------------------------
# Coefficients computed by the forward sweep
# --------------------------------------------------------------------------------------

def test_gelus_slope_is_computed_by_the_forward_sweep() -> None:
    """Under store, gelu's rule dr · gelu_slope(x) has its slope computed in
    `Block.apply.fwd`, right after the gelu, marked as the gelu's coefficient and stored
    in place of x; `Block.apply.bwd` only multiplies (no erf, no exp). recompute keeps the
    slope in the reverse sweep. The bits are the same (the tests above); the solver
    offers the slope's site with the reverse sweep's."""
    from presk.analysis.reverse_sweep import reverse_sites
    store = differentiated("07_train", "store")
    ops = list(func(store, "Block.apply.fwd").body.block.ops)
    [gelu] = [op for op in ops if isinstance(op, C.GeluOp)]
    slope = ops[ops.index(gelu) + 1]
    assert isinstance(slope, C.GeluSlopeOp) and slope.operands[0] is gelu.operands[0]
    assert slope.attributes["coefficient"].data == gelu.site.data
    returned = ops[-1].operands[0].owner  # the fwd's (y, residuals…) tuple
    assert slope.results[0] in returned.operands and gelu.operands[0] not in returned.operands
    bwd = func(store, "Block.apply.bwd").body.block.ops
    assert not any(isinstance(op, (C.GeluSlopeOp, C.ErfOp, C.ExpOp)) for op in bwd)
    recompute = func(differentiated("07_train", "recompute"), "Block.apply.bwd")
    assert any(isinstance(op, C.GeluSlopeOp) for op in recompute.body.block.ops)
    assert slope.site.data in reverse_sites(program("07_train"), "loss", store)
