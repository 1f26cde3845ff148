"""psk-kernel-fuse-siblings on the tutorial's value and gradient: gelu and its slope (the
coefficient the forward sweep computes) are one launch of one kernel that calls erf once,
and every value it stores — each under its own site — has the bits the two kernels give
apart. The lit test (test/filecheck/fuse_siblings) holds the rewrite on a small module;
native code (pool and threads) and C are held to the kernel interpreter's bits on this
program, merged kernel included, by test/e2e/test_split_bits.py
(`test_tutorial_value_and_gradient`)."""

from __future__ import annotations

import numpy as np

from presk.analysis import entry as E
from presk.analysis.kernel_interpret import KernelInterpreter
from presk.conversion.realize_to_kernel import realize_to_kernel
from presk.dialects import kernel as K
from presk.pipeline import entry_call
from programs import program

DIMS = {"B": 4}


def _call():
    entry = E.prepare(program("07_train"), "loss", DIMS)
    params, values = E.weights(entry, 3, None), E.inputs(entry, 3, None)
    return entry_call(program("07_train"), "loss", DIMS, params, values, grad=True)


def _math_calls(kernel: K.KernelOp) -> list[str]:
    return [op.fn.data for op in kernel.walk() if isinstance(op, K.MathOp)]


def _traced(module, call) -> dict[str, list[np.ndarray]]:
    out: dict[str, list[np.ndarray]] = {}
    KernelInterpreter(module, trace=lambda s, a: out.setdefault(s, []).append(a.copy())) \
        .run(call.host, call.inputs)
    return out


def test_gelu_and_its_slope_are_one_launch_calling_erf_once() -> None:
    call = _call()
    kernels = K.kernels(call.pipeline.kernel)
    [name] = [n for n, k in kernels.items() if k.title.data == "gelu + gelu_slope"]
    assert kernels[name].output_count == 2
    assert sorted(_math_calls(kernels[name])) == ["erf", "exp"]
    [launch] = [op for op in call.pipeline.kernel.walk()
                if isinstance(op, K.LaunchOp) and op.callee_name == name]
    assert launch.store_sites == ["Block.apply/%5", "Block.apply.fwd/%12"]
    apart = realize_to_kernel(call.pipeline.realize, siblings=False)
    assert not any(k.output_count > 1 for k in K.kernels(apart).values())
    assert sum(_math_calls(k).count("erf") for k in K.kernels(apart).values()) == 2


def test_each_output_is_traced_under_its_site_with_the_bits_apart() -> None:
    call = _call()
    together = _traced(call.pipeline.kernel, call)
    apart = _traced(realize_to_kernel(call.pipeline.realize, siblings=False), call)
    assert together.keys() == apart.keys()
    for site in ("Block.apply/%5", "Block.apply.fwd/%12"):
        assert len(together[site]) == 3  # a block each
        for a, b in zip(together[site], apart[site]):
            assert a.tobytes() == b.tobytes(), site
    gelu, slope = together["Block.apply/%5"][0], together["Block.apply.fwd/%12"][0]
    assert not np.array_equal(gelu, slope)
