"""The native backend computes the kernel interpreter's bits (issue 7).

Every entry is recorded once down to PSK-Kernel (`entry_call`), then run twice on the same
input buffers: by the kernel interpreter (presk/analysis/kernel_interpret.py, which
defines the bits) and as machine code (`native_program`, presk/runtime/compile.py). Every
output buffer must be equal byte for byte (`.tobytes()`: f64, f32 and bf16 bits, NaN
payloads included).

* tutorial/07_train.psk `loss`, value and gradient (`--remat store` and `recompute`),
  under all-f64, test/fixtures/realization_mixed.json and realization_f32.json, at
  B = 1, 4, 7;
* the `loss` entries of tutorial 03, 04 and 05, value and gradient, at B = 1, 4;
* the compile cache: a second `native_program` of the same kernel module is a hit with
  the same bits;
* the CLI: `presk run --engine native` prints what `--engine f64` prints under all-f64
  (the kernel interpreter equals f64 there, test_realize_vjp.py; this is the one check
  end to end), `--time`, and the usage errors of `--time` and `--realize` — in this
  process (`presk.cli.main.main`), and the console script once.

Every test runs in one module-wide temporary PRESK_CACHE_DIR, never the user's cache.
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from presk.analysis import entry as E
from presk.analysis.kernel_interpret import KernelInterpreter
from presk.pipeline import entry_call, run_kernel, run_native
from presk.runtime.compile import native_program
from programs import FIXTURES, PRESK, TUTORIAL, presk_in_process, program

pytestmark = pytest.mark.early(0.67)  # CPU minutes (test/conftest.py)

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_tutorial_07_native_is_the_kernel_interpreter[B4-f32-grad-store]",
    "test_tutorial_07_native_is_the_kernel_interpreter[B4-mixed-grad-recompute]",
    "test_tutorial_losses_native_is_the_kernel_interpreter[03_activations-4-grad-store]",
}


REALIZATIONS = {"all-f64": None, "mixed": str(FIXTURES / "realization_mixed.json"),
                "f32": str(FIXTURES / "realization_f32.json")}


def random_inputs(name: str, b: int, seed: int = 3):
    """Weights moved off the initializers' ones and zeros (so that bf16 rounds them),
    inputs from the seed."""
    entry = E.prepare(program(name), "loss", {"B": b})
    params = E.weights(entry, seed, None)
    rng = np.random.default_rng(seed + 1)
    params = {k: v + rng.normal(0.0, 0.3, v.shape) for k, v in params.items()}
    return params, E.inputs(entry, seed, None)


def assert_same_bits(got, want, names, what) -> None:
    assert len(got) == len(want) == len(names), what
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, name, g.dtype, w.dtype)
        assert g.tobytes() == w.tobytes(), (what, name, g, w)


@lru_cache(maxsize=None)
def native_and_interpreter(name: str, b: int, realization: str = "all-f64",
                           grad: bool = False, remat: str = "store"):
    """Record once; run the kernel interpreter and the native code on the same inputs;
    return (call, program, native outputs, interpreter outputs) — once per case and
    module (the cache test reuses the B = 4 mixed gradient's; nothing mutates them)."""
    params, values = random_inputs(name, b)
    call = entry_call(program(name), "loss", {"B": b}, params, values,
                      REALIZATIONS[realization], True, grad, remat)
    want = KernelInterpreter(call.pipeline.kernel).run(call.host, call.inputs)
    native = native_program(call.pipeline.kernel)
    got = native.entry(call.host)(call.inputs)
    return call, native, got, want


MODES = [("value", False, "store"), ("grad-store", True, "store"),
         ("grad-recompute", True, "recompute")]


def _cases_07():
    """Every B × mode under all-f64 and the mixed realization; under all-f32 the value
    and store gradient at every B, recompute at B = 4 (it adds no kernel kind). The fast
    set: B = 4, recompute under the mixed realization only."""
    for b in (1, 4, 7):
        for realization in REALIZATIONS:
            for mode in MODES:
                if realization == "f32" and mode[0] == "grad-recompute" and b != 4:
                    continue
                # make test-fast keeps B = 4, and of its recompute gradients the mixed one
                slow = b != 4 or (mode[0] == "grad-recompute" and realization != "mixed")
                yield pytest.param(b, realization, mode, id=f"B{b}-{realization}-{mode[0]}",
                                   marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("b, realization, mode", list(_cases_07()))
def test_tutorial_07_native_is_the_kernel_interpreter(b, realization, mode) -> None:
    _, grad, remat = mode
    call, _, got, want = native_and_interpreter("07_train", b, realization, grad, remat)
    assert_same_bits(got, want, call.output_names, (b, realization, mode))
    if grad:
        assert call.output_names == ["result", "grad.blocks.norm.γ", "grad.blocks.proj.w",
                                     "grad.blocks.proj.b", "grad.final.γ"]
    if realization != "all-f64":
        # The inputs really are narrowed: some input buffer is f32 or bf16.
        assert any(x.dtype != np.float64 for x in call.inputs)
    assert all(np.isfinite(call.flatten(got)[n]).all() for n in call.output_names)


@pytest.mark.parametrize("mode", MODES[:2], ids=[m[0] for m in MODES[:2]])
@pytest.mark.parametrize("b", [1, 4])
@pytest.mark.parametrize("name", ["03_activations", "04_mlp", "05_stack"])
def test_tutorial_losses_native_is_the_kernel_interpreter(name, b, mode) -> None:
    _, grad, remat = mode
    call, _, got, want = native_and_interpreter(name, b, "all-f64", grad, remat)
    assert_same_bits(got, want, call.output_names, (name, b, mode))
    assert call.output_names[0] == "result"
    assert len(call.output_names) > 1 if grad else len(call.output_names) == 1


def test_a_second_native_program_is_cached_with_the_same_bits(cache_dir: Path) -> None:
    call, first, got, want = native_and_interpreter("07_train", 4, "mixed", True, "store")
    again = native_program(call.pipeline.kernel)
    assert again.cached
    assert again.timings.lower == again.timings.optimize == 0.0
    assert again.entries == first.entries
    assert_same_bits(again.entry(call.host)(call.inputs), want, call.output_names, "cached")
    assert_same_bits(got, want, call.output_names, "first")
    assert any(cache_dir.glob("*.o"))
    # Without the cache: compiled again, the same bits.
    fresh = native_program(call.pipeline.kernel, cache=False)
    assert not fresh.cached
    assert_same_bits(fresh.entry(call.host)(call.inputs), want, call.output_names, "fresh")


def test_run_native_api_equals_run_kernel() -> None:
    params, values = random_inputs("07_train", 4)
    for grad in (False, True):
        native = run_native(program("07_train"), "loss", {"B": 4}, params, values,
                            REALIZATIONS["mixed"], grad=grad)
        kernel = run_kernel(program("07_train"), "loss", {"B": 4}, params, values,
                            REALIZATIONS["mixed"], grad=grad)
        assert list(native.result) == list(kernel.result)
        for path in kernel.result:
            assert native.result[path].tobytes() == kernel.result[path].tobytes(), path
        assert_same_bits(native.outputs, kernel.outputs, native.call.output_names, grad)


# --------------------------------------------------------------------------------------
# The CLI
# --------------------------------------------------------------------------------------


def presk(*args: str, script: bool = False) -> subprocess.CompletedProcess:
    """`presk run` of the tutorial's loss at B = 4: in this process (`main`, its stdout,
    stderr and exit code — a console script's start is about 2 s of CPU, for the same
    output), or with `script` the console script itself."""
    argv = ["run", str(TUTORIAL / "07_train.psk"), "--entry", "loss", "--dim", "B=4", *args]
    if script:
        return subprocess.run([PRESK, *argv], capture_output=True, text=True, timeout=300,
                              env=os.environ.copy())
    return presk_in_process(argv)


@pytest.mark.parametrize("grad", [False, True])
def test_cli_native_prints_what_f64_prints(grad: bool) -> None:
    extra = ["--grad"] if grad else []
    native, f64 = presk(*extra, "--engine", "native"), presk(*extra, "--engine", "f64")
    assert native.returncode == 0 and f64.returncode == 0, native.stderr + f64.stderr
    n, f = native.stdout.splitlines(), f64.stdout.splitlines()
    assert n[0] == "loss at B = 4 in native code under all-f64+sequential:"
    assert f[0] == "loss at B = 4 in f64:"
    assert n[1:] == f[1:]
    outputs = [ln.split(" = ")[0].strip() for ln in n if ln.startswith("  ") and " = " in ln]
    assert outputs == (["result", "grad.blocks.norm.γ", "grad.blocks.proj.w",
                        "grad.blocks.proj.b", "grad.final.γ"] if grad else ["result"])


def test_cli_default_engine_is_native() -> None:
    done = presk("--realize", REALIZATIONS["mixed"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == \
        "loss at B = 4 in native code under f64+sequential+9sites+4params:"
    plain = presk(script=True)  # the console script itself, once
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines()[0] == "loss at B = 4 in native code under all-f64+sequential:"


def test_cli_time() -> None:
    done = presk("--time")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "loss at B = 4 in native code under all-f64+sequential:"
    assert lines[1].startswith("  result = ")
    (timing,) = [ln for ln in lines if ln.startswith("time per call:")]
    m = re.fullmatch(r"time per call: median [0-9.]+ (µs|ms) \(min [0-9.]+ (µs|ms), \d+ "
                     r"repeats of \d+ calls\); compile [0-9.]+ ms \((cold|from the cache)\)",
                     timing)
    assert m, timing
    # The same value as without --time.
    assert lines[1] == presk().stdout.splitlines()[1]


@pytest.mark.parametrize("args, message", [
    (["--time", "--engine", "f64"], "presk run: --time applies to --engine native"),
    (["--time", "--engine", "kernel"], "presk run: --time applies to --engine native"),
    (["--realize", str(FIXTURES / "realization_mixed.json"), "--engine", "mpfr"],
     "presk run: --realize applies to --engine native or kernel, not mpfr"),
    (["--realize", str(FIXTURES / "realization_mixed.json"), "--engine", "f64"],
     "presk run: --realize applies to --engine native or kernel, not f64"),
])
def test_cli_usage_errors(args, message) -> None:
    done = presk(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [message]


@pytest.mark.parametrize("which, engine", [
    ("missing", "native"), ("not-json", "native"), ("other-kind", "native"),
    ("not-json", "kernel"),
    ("unknown-site", "native"), ("unknown-value", "kernel"), ("unknown-param", "native"),
])
def test_cli_wrong_realize_file(tmp_path: Path, engine: str, which: str) -> None:
    path = tmp_path / "r.json"
    if which == "not-json":
        path.write_text("{not json")
    elif which == "other-kind":
        path.write_text('{"format": "presk-plan/1"}')
    elif which == "unknown-site":
        path.write_text('{"format": "presk-realization/1", "sites": {"Nope.apply/%3": "f32"}}')
    elif which == "unknown-value":
        path.write_text('{"format": "presk-realization/1", "sites": {"loss/%99": "f32"}}')
    elif which == "unknown-param":
        path.write_text('{"format": "presk-realization/1", "params": {"nope.w": "f32"}}')
    done = presk("--realize", str(path), "--engine", engine)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("presk: "), lines
    assert "Traceback" not in done.stderr
