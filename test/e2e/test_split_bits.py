"""A split never changes bits, for every nest kind and in every engine (issue 16, item 1).

Every kernel of a program whose body is one loop carrying no value — element-wise,
reductions over independent outputs (a row's mean), contractions (tiled: whole tiles of
rows), the backward's sum-to kernels — is given `split = [0, n]` at once, n = 2 and 3
(uneven ranges); a sum to one value (the loss's mean) cannot be split and stays whole.
The split program runs as native code with its parts on the worker pool (and, at the
first n, on a thread per launch), as the kernel interpreter, and as the exported C program (its parts on the C
worker pool, `make check`), and every output equals the unsplit native program's bit for
bit. Programs: tutorial/07_train.psk's loss at B = 4 (all-f64 and the mixed realization,
value and gradient) and, slow, the scaled Tower's at B = 8 in f32. The tutorial's split
program is also built under ThreadSanitizer and AddressSanitizer + UBSan; and `presk
export --target c --threads N` is run at 2, 1 and 0.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ArrayAttr, IntAttr

from presk.analysis.kernel_interpret import KernelInterpreter, to_storage
from presk.dialects import kernel as K
from presk.emit.c_program import c_sources, entry_c
from presk.kernel_abi.arena import entry_signatures
from presk.pipeline import kernel_pipeline, load_core
from presk.pipeline.export import _little_endian, write_into
from presk.runtime import pool
from presk.runtime.compile import native_program
from presk.transforms.kernel_split import split_kernels, split_of
from presk.transforms.plan_layout import _split_trip

pytestmark = pytest.mark.early(0.71)  # CPU minutes (test/conftest.py)

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_host_copies_on_the_pool[mixed]",
    "test_exported_split_program_under_sanitizers[address,undefined]",
    "test_exported_split_program_under_sanitizers[thread]",
}


ROOT = Path(__file__).resolve().parents[2]
MIXED = "@" + str(ROOT / "test" / "fixtures" / "realization_mixed.json")
CAN_C = shutil.which("cc") is not None and shutil.which("make") is not None


def split_everywhere(module, n: int) -> tuple[object, set[str]]:
    """A copy of the module with every kernel that can be split split among n (its
    layout's lanes and order kept, a tile's rows fewer when its loop has fewer than n
    tiles of them), and the titles of the kernels split."""
    out = module.clone()
    titles = set()
    for k in out.ops:
        if not isinstance(k, K.KernelOp):
            continue
        trip = _split_trip(k)
        if trip < n:
            continue
        layout, tile = k.layout, k.layout.tile
        if layout.kind.data == "tiled" and -(-trip // tile.data[0].data) < n:
            tile = ArrayAttr([IntAttr(trip // n), tile.data[1]])
        k.layout = K.LayoutAttr(layout.kind, tile, layout.lanes, layout.order,
                                ArrayAttr([IntAttr(0), IntAttr(n)]), layout.pack,
                                layout.kblock)
        assert split_of(k) == n, k.sym_name.data
        titles.add(k.title.data)
    return out, titles


def _c_outputs_match(module, inputs: list[np.ndarray], want: list[bytes], tmp: Path,
                     cflags: str | None = None) -> None:
    """The exported C of `module` (split kernels' parts on the pool), built with the
    Makefile's flags or `cflags`, reproduces `want`."""
    split = module.clone()
    split_kernels(split)
    files = c_sources(split, None, pool.source_files())
    assert "presk_pool.c" in files
    names = entry_c(split)
    for relative, content in files.items():
        write_into(str(tmp), relative, content)
    for (f, _), a in zip(names.inputs, inputs):
        write_into(str(tmp), f"inputs/{f}.bin", _little_endian(a))
    for (f, b), w in zip(names.outputs, want):
        write_into(str(tmp), f"expected/{f}.bin", w)
    make = ["make", "-s", "-C", str(tmp), "check", *([f"CFLAGS={cflags}"] if cflags else [])]
    done = subprocess.run(make, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    assert done.stdout.count("bit for bit") == len(want), done.stdout


def same_bits_split(pipe_module, tmp: Path, ns=(2, 3)) -> set[str]:
    (sig,) = entry_signatures(pipe_module)
    rng = np.random.default_rng(11)
    inputs = [to_storage(rng.uniform(0.5, 1.5, b.shape), b.element) for b in sig.inputs]
    want = [o.tobytes() for o in native_program(pipe_module).entry(sig.host)(inputs)]
    titles: set[str] = set()
    for n in ns:
        split, kinds = split_everywhere(pipe_module, n)
        titles |= kinds
        for way in ("pool", "threads") if n == ns[0] else ("pool",):
            got = native_program(split, threads=way).entry(sig.host)(inputs)
            assert [o.tobytes() for o in got] == want, (n, way)
        interp = KernelInterpreter(split).run(sig.host, inputs)
        assert [np.asarray(o).tobytes() for o in interp] == want, (n, "interpreter")
        if CAN_C:
            _c_outputs_match(split, inputs, want, tmp / f"c{n}")
    return titles


@pytest.mark.parametrize("realization", [pytest.param(None, marks=pytest.mark.slow),
                                         pytest.param(MIXED, marks=pytest.mark.slow)],
                         ids=["f64", "mixed"])  # make test-fast: test_default_splits_large_nests
def test_tutorial_value_and_gradient(tmp_path: Path, realization) -> None:
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    pipe = kernel_pipeline(core, "loss", {"B": 4}, realization, grad=True)
    titles = same_bits_split(pipe.kernel, tmp_path)
    assert "sum_to" in titles and any(t.startswith(("dot", "contract")) for t in titles)
    whole = [k for k in pipe.kernel.ops if isinstance(k, K.KernelOp) and _split_trip(k) == 0]
    assert all(k.body.block.ops.first.inits for k in whole if isinstance(
        k.body.block.ops.first, K.ForOp))  # only sums to one value stay whole


@pytest.mark.skipif(not CAN_C, reason="needs cc and make")
@pytest.mark.parametrize("sanitizer", ["thread", "address,undefined"])
def test_exported_split_program_under_sanitizers(tmp_path: Path, sanitizer: str) -> None:
    """The tutorial's value and gradient with every nest split in 2, exported and built
    with -fsanitize=thread (no race between the parts, the pool's workers and their
    joining at exit) or address,undefined (no leak, no overflow), checks bit for bit."""
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    flag = f"-fsanitize={sanitizer}"
    if subprocess.run(["cc", flag, str(probe), "-o", str(tmp_path / "probe")],
                      capture_output=True).returncode != 0:
        pytest.skip(f"cc {flag} does not build here")
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    pipe = kernel_pipeline(core, "loss", {"B": 4}, None, grad=True)
    (sig,) = entry_signatures(pipe.kernel)
    rng = np.random.default_rng(3)
    inputs = [to_storage(rng.uniform(0.5, 1.5, b.shape), b.element) for b in sig.inputs]
    want = [o.tobytes() for o in native_program(pipe.kernel).entry(sig.host)(inputs)]
    split, _ = split_everywhere(pipe.kernel, 2)
    _c_outputs_match(split, inputs, want, tmp_path / "c",
                     f"-O1 -g -std=c99 -Wall -Wextra -Werror {flag}")


@pytest.mark.slow
def test_scaled_tower_value_and_gradient(tmp_path: Path) -> None:
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    from native import all_f32, load_entry
    module, prepared, _, _ = load_entry(ROOT / "bench" / "scaled_tower.psk", {"B": 8})
    pipe = kernel_pipeline(module, "loss", {"B": 8}, all_f32(module, prepared, True),
                           grad=True)
    titles = same_bits_split(pipe.kernel, tmp_path, ns=(2,))
    assert {"sum_to", "mean axis model", "gelu + gelu_slope"} <= titles


def test_default_splits_large_nests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default layout splits every nest of 2¹⁵ innermost iterations or more that can be
    split (realize_to_kernel's `default_nest_layout`), not only contractions: the scaled
    Tower's forward at B = 128 in f32 (rows of 256: 2¹⁵ elements a nest) on 2 workers has
    its gelu and RMSNorm's row means split, its loss's mean (a sum to one value) whole;
    its outputs equal, bit for bit, the same program recorded on 1 worker (nothing split)."""
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    from native import all_f32, load_entry
    module, prepared, _, _ = load_entry(ROOT / "bench" / "scaled_tower.psk", {"B": 128})
    realization = all_f32(module, prepared, False)
    programs = {}
    for n in ("1", "2"):
        monkeypatch.setenv("PRESK_THREADS", n)
        programs[n] = kernel_pipeline(module, "loss", {"B": 128}, realization).kernel
    kernels = [k for k in programs["2"].ops if isinstance(k, K.KernelOp)]
    split = {k.title.data for k in kernels if split_of(k) == 2}
    assert {"gelu", "mean axis model"} <= split, split
    assert not any(split_of(k) > 1 for k in programs["1"].ops if isinstance(k, K.KernelOp))
    for k in kernels:
        loops = [op for op in k.body.block.ops if isinstance(op, K.ForOp)]
        if len(loops) == 1 and loops[0].inits:
            assert split_of(k) == 1, k.title.data
    (sig,) = entry_signatures(programs["1"])
    rng = np.random.default_rng(5)
    inputs = [to_storage(rng.uniform(0.5, 1.5, b.shape), b.element) for b in sig.inputs]
    want = [o.tobytes() for o in native_program(programs["1"]).entry(sig.host)(inputs)]
    got = native_program(programs["2"]).entry(sig.host)(inputs)
    assert [o.tobytes() for o in got] == want


@pytest.mark.skipif(not CAN_C, reason="needs cc and make")
def test_export_c_threads(tmp_path: Path) -> None:
    """`presk export --target c --threads N`: with 2, the scaled Tower's contractions at
    B = 32 (one kernel of 2²¹ multiply-adds, launched per block) are split and the program carries the pool and passes
    `make check`; with 1, nothing splits and no pool is written; 0 is one line, exit 2."""
    import os
    import sys
    presk = str(Path(sys.executable).with_name("presk"))
    env = {**os.environ, "PRESK_THREADS": ""}
    base = [presk, "export", str(ROOT / "bench" / "scaled_tower.psk"), "--target", "c",
            "--entry", "loss", "--dim", "B=32"]
    two = subprocess.run([*base, "--threads", "2", "-o", str(tmp_path / "two")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert two.returncode == 0, two.stderr
    assert "of 9 kernels (1 split among up to 2 threads on the worker pool)" in two.stdout, two.stdout
    assert (tmp_path / "two" / "presk_pool.c").exists()
    check = subprocess.run(["make", "-s", "-C", str(tmp_path / "two"), "check"],
                           capture_output=True, text=True, timeout=600)
    assert check.returncode == 0 and check.stdout.count("bit for bit") == 1, check.stdout
    one = subprocess.run([*base, "--threads", "1", "-o", str(tmp_path / "one")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert one.returncode == 0 and "split among" not in one.stdout, one.stdout
    assert not (tmp_path / "one" / "presk_pool.c").exists()
    zero = subprocess.run([*base, "--threads", "0", "-o", str(tmp_path / "zero")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert zero.returncode == 2
    assert zero.stderr == "presk export: --threads is 1 or more, not 0\n", zero.stderr


@pytest.mark.parametrize("realization", [None, MIXED], ids=["f64", "mixed"])
def test_host_copies_on_the_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 realization) -> None:
    """A host's copies and f64 → f32 conversions run on the worker pool
    (`presk_host_copy`, divided among as many parts as the kernels split in) when the
    module's kernels split and the runtime is there — here every one of them
    (HOST_SPLIT_BYTES lowered to 1): the tutorial's value and gradient at B = 4, split
    among 2 and 3, gives the unsplit program's bits, natively and in the interpreter."""
    from presk.conversion.kernel_to_std import convert
    if not pool.available():
        pytest.skip("no worker pool (no C compiler)")
    monkeypatch.setenv("PRESK_CACHE", "off")  # the threshold is not in the cache's key
    monkeypatch.setattr(convert, "HOST_SPLIT_BYTES", 1)
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    pipe = kernel_pipeline(core, "loss", {"B": 4}, realization, grad=True)
    ops = [op for op in pipe.kernel.walk() if isinstance(op, (K.CopyOp, K.ConvertOp))]
    assert any(isinstance(op, K.CopyOp) for op in ops)
    if realization is not None:  # the batch's f64 → f32 conversions
        assert any(isinstance(op, K.ConvertOp) and K.type_name(op.source.type.element)
                   == "f64" and K.type_name(op.dest.type.element) == "f32" for op in ops)
    (sig,) = entry_signatures(pipe.kernel)
    rng = np.random.default_rng(13)
    inputs = [to_storage(rng.uniform(0.5, 1.5, b.shape), b.element) for b in sig.inputs]
    whole = native_program(pipe.kernel)
    assert b"presk_host_copy" not in whole.jit.object_code  # nothing split: loops
    want = [o.tobytes() for o in whole.entry(sig.host)(inputs)]
    for n in (2, 3):
        split, _ = split_everywhere(pipe.kernel, n)
        program = native_program(split)
        assert b"presk_host_copy" in program.jit.object_code
        got = program.entry(sig.host)(inputs)
        assert [o.tobytes() for o in got] == want, n
        interp = KernelInterpreter(split).run(sig.host, inputs)
        assert [np.asarray(o).tobytes() for o in interp] == want, (n, "interpreter")
