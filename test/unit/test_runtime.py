"""presk/runtime: load_native with and without the on-disk cache, calling entries, the
errors of wrong inputs, alignment, timing.

The modules are the hand-built llvm-dialect modules of test_llvm_jit.py (an f32
multiply-add and a bf16 doubling, in the calling convention of presk/kernel_abi/calling.py). The cache
tests run in a temporary PRESK_CACHE_DIR; no test asserts a time.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from presk.kernel_abi.calling import ARENA_ALIGN, EntrySig
from presk.runtime import (NativeCompileError, NativeProgram, RuntimeCallError, load_native,
                           time_call)
from presk.runtime.buffers import aligned_empty, empty, is_aligned, storage_dtype
from presk.runtime.cache import FORMAT, NativeCache, cache_dir, cache_key
from test_llvm_jit import (N, bf16_input, bf16_sig, madd_expected, madd_inputs,
                           test_module)

KEY_TEXT = "kernel module text (a test stand-in)"
LOWERING = "test-lowering/1"


class Factory:
    """The llvm module factory, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return test_module()


@pytest.fixture
def cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("PRESK_CACHE_DIR", str(d))
    monkeypatch.delenv("PRESK_CACHE", raising=False)
    return d


def _check_results(program: NativeProgram) -> None:
    a, b, c = madd_inputs()
    (out,) = program.entry("madd")([a, b, c])
    assert np.array_equal(out.view(np.uint32), madd_expected(a, b, c).view(np.uint32))
    x = bf16_input()
    (twice,) = program.entry("presk_entry_twice")([x])
    assert twice.dtype == np.uint16 and twice.shape == (N,)


def test_cold_miss_then_warm_hit(cache_env: Path) -> None:
    f = Factory()
    cold = load_native(f, KEY_TEXT, LOWERING)
    assert f.calls == 1 and not cold.cached
    assert cold.timings.translate > 0 and cold.timings.optimize > 0
    assert cold.timings.codegen > 0 and cold.timings.load > 0
    assert len(list(cache_env.glob("*.o"))) == 1
    assert len(list(cache_env.glob("*.json"))) == 1
    _check_results(cold)

    warm = load_native(f, KEY_TEXT, LOWERING)
    assert f.calls == 1 and warm.cached  # the factory is never called on a hit
    assert warm.timings.lower == warm.timings.translate == warm.timings.optimize == 0
    assert warm.entries == cold.entries
    assert warm.jit.optimized_ir is None
    _check_results(warm)
    a, b, c = madd_inputs(seed=5)
    assert np.array_equal(cold.entry("madd")([a, b, c])[0].view(np.uint32),
                          warm.entry("madd")([a, b, c])[0].view(np.uint32))


def test_key_parts_change_the_entry(cache_env: Path) -> None:
    f = Factory()
    load_native(f, KEY_TEXT, LOWERING)
    load_native(f, KEY_TEXT + " ", LOWERING)
    load_native(f, KEY_TEXT, LOWERING + "b")
    assert f.calls == 3
    assert len(list(cache_env.glob("*.o"))) == 3


@pytest.mark.parametrize("damage", ["truncate_object", "flip_object", "garbage_manifest",
                                    "empty_manifest", "other_format", "no_object"])
def test_a_damaged_entry_is_recompiled_and_overwritten(cache_env: Path, damage: str) -> None:
    f = Factory()
    load_native(f, KEY_TEXT, LOWERING)
    obj, manifest = next(iter(NativeCache(cache_env).entries()))
    good_obj = obj.read_bytes()
    if damage == "truncate_object":
        obj.write_bytes(good_obj[: len(good_obj) // 2])
    elif damage == "flip_object":
        obj.write_bytes(good_obj[:100] + bytes([good_obj[100] ^ 0xFF]) + good_obj[101:])
    elif damage == "garbage_manifest":
        manifest.write_text("{not json")
    elif damage == "empty_manifest":
        manifest.write_text("")
    elif damage == "other_format":
        m = json.loads(manifest.read_text())
        m["format"] = "presk-native-cache/0"
        manifest.write_text(json.dumps(m))
    else:
        obj.unlink()
    again = load_native(f, KEY_TEXT, LOWERING)
    assert f.calls == 2 and not again.cached
    _check_results(again)
    assert obj.read_bytes() == good_obj  # overwritten with a good entry
    third = load_native(f, KEY_TEXT, LOWERING)
    assert f.calls == 2 and third.cached


def test_manifest_round_trips_entry_sigs(cache_env: Path) -> None:
    program = load_native(Factory(), KEY_TEXT, LOWERING)
    _, manifest_path = next(iter(NativeCache(cache_env).entries()))
    manifest = json.loads(manifest_path.read_text())
    assert manifest["format"] == FORMAT
    assert manifest["key"] == cache_key(KEY_TEXT, LOWERING).to_json()
    assert [EntrySig.from_json(e) for e in manifest["entries"]] == program.entries
    hit = NativeCache(cache_env).load(cache_key(KEY_TEXT, LOWERING))
    assert hit is not None and hit.entries == program.entries


def test_expected_entries(cache_env: Path) -> None:
    f = Factory()
    sigs = test_module(4)[1]  # other shapes than the factory's
    load_native(f, KEY_TEXT, LOWERING)
    with pytest.raises(NativeCompileError, match="other entries"):
        load_native(f, KEY_TEXT, LOWERING, entries=sigs)  # a hit with other sigs: a miss
    assert f.calls == 2


def test_cache_off(cache_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = Factory()
    load_native(f, KEY_TEXT, LOWERING, cache=False)
    monkeypatch.setenv("PRESK_CACHE", "off")
    load_native(f, KEY_TEXT, LOWERING)
    assert f.calls == 2
    assert not cache_env.exists()


def test_cache_dir_and_clear(cache_env: Path, monkeypatch: pytest.MonkeyPatch,
                             tmp_path: Path) -> None:
    assert cache_dir() == cache_env
    monkeypatch.delenv("PRESK_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "presk"
    store = NativeCache(cache_env)
    f = Factory()
    load_native(f, KEY_TEXT, LOWERING, cache=store)
    load_native(f, KEY_TEXT + "2", LOWERING, cache=store)
    assert store.clear() == 2
    assert store.entries() == []


def test_size_bound_evicts_least_recently_used(cache_env: Path) -> None:
    store = NativeCache(cache_env)
    f = Factory()
    load_native(f, "one", LOWERING, cache=store)
    load_native(f, "two", LOWERING, cache=store)
    sizes = [o.stat().st_size + m.stat().st_size for o, m in store.entries()]
    store.evict(max(sizes) + 1)
    assert len(store.entries()) == 1


def test_unwritable_cache_dir_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PRESK_CACHE_DIR", str(blocker / "cache"))
    program = load_native(Factory(), KEY_TEXT, LOWERING)
    _check_results(program)


def test_wrong_inputs_are_named(cache_env: Path) -> None:
    entry = load_native(Factory(), KEY_TEXT, LOWERING).entry("madd")
    a, b, c = madd_inputs()
    with pytest.raises(RuntimeCallError,
                       match=r"input `b` is float64\[1000\], the entry takes f32\[1000\]"):
        entry([a, b.astype(np.float64), c])
    with pytest.raises(RuntimeCallError,
                       match=r"input `c` is float32\[10, 100\], the entry takes f32\[1000\]"):
        entry([a, b, c.reshape(10, 100)])
    with pytest.raises(RuntimeCallError, match="input `a` is not C-contiguous"):
        entry([np.concatenate([a, a])[::2], b, c])
    with pytest.raises(RuntimeCallError, match=r"takes 3 inputs \(a, b, c\), got 2"):
        entry([a, b])
    with pytest.raises(RuntimeCallError, match="output `out` is read-only"):
        ro = np.empty(N, np.float32)
        ro.flags.writeable = False
        entry.bind([a, b, c], [ro])
    twice = load_native(Factory(), KEY_TEXT, LOWERING).entry("twice")
    with pytest.raises(RuntimeCallError, match="bf16 is stored as uint16 bits"):
        twice([np.zeros(N, np.float32)])
    with pytest.raises(RuntimeCallError, match="no entry `nope`"):
        load_native(Factory(), KEY_TEXT, LOWERING).entry("nope")


def test_bind_writes_into_given_outputs(cache_env: Path) -> None:
    entry = load_native(Factory(), KEY_TEXT, LOWERING).entry("madd")
    a, b, c = madd_inputs()
    out = np.zeros(N, np.float32)
    call = entry.bind([a, b, c], [out])
    assert call() is None
    assert np.array_equal(out.view(np.uint32), madd_expected(a, b, c).view(np.uint32))
    auto = entry.bind([a, b, c])
    auto()
    assert np.array_equal(auto.outputs[0], out)  # type: ignore[attr-defined]


def test_a_bound_call_is_a_native_method(cache_env: Path) -> None:
    """The bound call's `__call__` is the native method (presk/runtime/bound_call.py):
    it computes what the entry computes, through the GIL-holding and the GIL-releasing
    path alike, refuses arguments before the native code runs, and keeps what it reads
    alive after the entry and the arrays are dropped."""
    import gc
    from presk.runtime.bound_call import RELEASE_GIL_AT, BoundCall, install
    assert install() and type(BoundCall.__dict__["__call__"]).__name__ == "method_descriptor"
    program = load_native(Factory(), KEY_TEXT, LOWERING)
    a, b, c = madd_inputs(seed=3)
    want = madd_expected(a, b, c).view(np.uint32)
    call = program.entry("madd").bind([a.copy(), b.copy(), c.copy()])
    assert call.release == int(4 * N >= RELEASE_GIL_AT)
    del program
    gc.collect()
    for release in (0, 1):
        call.outputs[0][:] = 0
        call.release = release
        assert call() is None
        assert np.array_equal(call.outputs[0].view(np.uint32), want)
    call.outputs[0][:] = 0
    call.call_by_ctypes()
    assert np.array_equal(call.outputs[0].view(np.uint32), want)
    with pytest.raises(TypeError, match="takes no arguments"):
        call(1)
    with pytest.raises(TypeError):
        BoundCall.__call__(object())


def test_alignment(cache_env: Path) -> None:
    program = load_native(Factory(), KEY_TEXT, LOWERING)
    twice = program.entry("twice")
    assert twice.arena.nbytes == bf16_sig().arena_bytes
    assert is_aligned(twice.arena)
    madd = program.entry("madd")
    assert madd.sig.arena_bytes == 0 and is_aligned(madd.arena)
    a, b, c = madd_inputs()
    (out,) = program.entry("madd")([a, b, c])
    assert is_aligned(out) and out.flags.c_contiguous
    for n in range(1, 130, 7):
        for align in (16, 64, 4096):
            buf = aligned_empty(n, align)
            assert buf.nbytes == n and buf.ctypes.data % align == 0
    e = empty(bf16_sig().inputs[0])
    assert e.dtype == storage_dtype("bf16") == np.uint16 and e.ctypes.data % ARENA_ALIGN == 0


def test_time_call_shape() -> None:
    calls = []
    t = time_call(lambda: calls.append(1), repeats=3, min_seconds=0.001)
    assert t.repeats == 3 and t.number >= 1
    assert 0 <= t.minimum <= t.median
    assert len(calls) >= 1 + 3 * t.number
    with pytest.raises(ValueError):
        time_call(lambda: None, repeats=0)


def test_an_input_read_only_in_f32_is_passed_in_f32(tmp_path: Path) -> None:
    """psk-kernel-hoist-input-converts: under all-f32 (its calls inlined) the tutorial's
    batch is read only in f32, so the native entry takes it in f32 (`given` f64: the caller's data, rounded when
    the call is bound — as the host's convert rounded it: the same bits as the kernel
    interpreter, which keeps the f64 input and its convert). An f64 array of another
    shape is still refused, and so is an f64 parameter (not narrowed by the lowering)."""
    from presk.analysis import entry as E
    from presk.analysis.kernel_interpret import KernelInterpreter
    from presk.analysis.realization import Realization
    from presk.pipeline import compile_call, entry_call, load_core
    core, _ = load_core(str(Path(__file__).resolve().parents[2] / "tutorial" / "07_train.psk"))
    prepared = E.prepare(core, "loss", {"B": 4})
    params, values = E.weights(prepared, 3, None), E.inputs(prepared, 3, None)
    from presk.dialects import core as C
    sites = {op.site.data: "f32" for f in core.ops if isinstance(f, C.FuncOp)
             for op in f.body.block.ops if op.results and "site" in op.attributes
             and isinstance(op.results[0].type, C.TensorAttr)}
    real = Realization("loss", sites, {f.path: "f32" for f in prepared.fields})
    # --fuse-reductions: the calls inlined, the batch's convert in the entry host itself
    call = entry_call(core, "loss", {"B": 4}, params, values, real, True,
                      fuse_reductions=True)
    _, entry = compile_call(call, cache=False)
    by_name = {b.name: b for b in entry.sig.inputs}
    assert (by_name["batch.0"].element, by_name["batch.0"].given) == ("f32", "f64")
    assert by_name["θ.final.γ"].given is None
    recorded = {b.name: a for b, a in zip(entry.sig.inputs, call.inputs)}
    assert recorded["batch.0"].dtype == np.float64  # the recording keeps its f64 input
    want = KernelInterpreter(call.pipeline.kernel).run(call.host, call.inputs)
    got = entry(call.inputs)
    assert [g.tobytes() for g in got] == [np.asarray(w).tobytes() for w in want]
    bound = entry.bind(call.inputs)
    bound()
    assert [o.tobytes() for o in bound.outputs] == [g.tobytes() for g in got]
    wrong = list(call.inputs)
    at = list(by_name).index("batch.0")
    wrong[at] = np.zeros((3, 4))
    with pytest.raises(RuntimeCallError, match="batch.0"):
        entry(wrong)
