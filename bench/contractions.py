"""Each contraction of the scaled Tower's value and gradient in GFLOP/s, beside torch.mm on
the same shapes and the machine's peak measured by a microkernel, all in one run.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/contractions.py [--quick] [--dtype f32|f64] [--batch 1024]
                                           [--fma both|on|off]

- The contractions: the kernels titled `dot…`/`contract…` of `loss.value_vjp` of
  bench/scaled_tower.psk (D = 256, L = 4) at B = --batch, every site and parameter in
  --dtype (bench/native.py `all_f32` for f32): the forward's x·w + b (its `add` the
  product's epilogue), the backward's g·wᵀ and xᵀ·g. Each is timed natively, a launch at a
  time (presk/runtime/kernel_timing.py: minimum of samples, the call's overhead taken out),
  at the layout the program gives it (its default: the register tile, the panels and the
  split of its rows among the workers) and at every point of the plan's layout space on one worker
  (transforms/plan_layout.py `layout_space`), the best of those printed with its tile.
  The packed copy of a transposed operand is made inside the launch, so it is in the time.
- torch.mm (torch.addmm for the product with a bias) on tensors of the same shapes and
  memory layouts (a transposed operand as a transposed view, as the kernel reads it), the
  result a new tensor (torch.mm with `out=` ran far slower on 2 threads here), at 1 thread and at every CPU this process may use.
- Each contraction is timed twice (`--fma both`, the default): as the program computes it
  (a multiply and an add, two roundings) and with the realization fusing every
  contraction (`fma`, docs/artifacts.md: llvm.fma, one rounding, other bits).
- The peak: a loop of 24 independent accumulators (at most the machine's vector registers
  less 4: 12 on AVX2, whose 16 registers 24 would spill) in the machine's vectors (64 bytes
  on AVX-512, 32 on AVX2: nests.py `vector_unit`), `acc·a + b` as
  a multiply and an add (two roundings: what Presk's kernels compute) and as `llvm.fma`
  (one rounding: what oneDNN's sgemm runs), JIT-compiled by llvmlite for this CPU, one
  thread. A product of I×K by K×J makes 2·I·J·K flops.

A benchmark asserts nothing about time; it prints the load average (the machine is
shared: every figure is inflated, the ones in the same run alike).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCALED = ROOT / "bench" / "scaled_tower.psk"
ACCUMULATORS = 24


@dataclass
class Contraction:
    kernel: object  # the K.KernelOp as the program has it
    site: str
    i: int
    j: int
    k: int
    a_transposed: bool  # A read as [k, i]
    b_transposed: bool  # B read as [j, k]
    bias: bool  # a [J] vector added to every row (the epilogue)

    @property
    def flops(self) -> int:
        return 2 * self.i * self.j * self.k

    def text(self) -> str:
        a = "Aᵀ" if self.a_transposed else "A"
        b = "Bᵀ" if self.b_transposed else "B"
        return f"{a}·{b}{' + b' if self.bias else ''} [{self.i}×{self.k}]·[{self.k}×{self.j}]"


# --------------------------------------------------------------------------------------
# The program's contractions
# --------------------------------------------------------------------------------------

def kernel_module(batch: int, dtype: str, fused: bool = False):
    """The kernels of `loss.value_vjp` under every site in `dtype`; `fused`: with every
    contraction's multiply-adds fused (the realization's `fma`, bench/native.py
    `with_fma`)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from native import all_f32, load_entry, with_fma
    from presk.analysis.realization import Realization
    from presk.pipeline import entry_call
    module, prepared, params, values = load_entry(SCALED, {"B": batch})
    real = all_f32(module, prepared, True) if dtype == "f32" else Realization(entry="loss")
    if fused:
        real = with_fma(module, real, True)
    call = entry_call(module, "loss", prepared.dims, params, values, real, True, True)
    return call.pipeline.kernel


def contractions(km) -> list[Contraction]:
    """The module's distinct contraction kernels whose nest is I × J × K with two loads in
    the k loop (one per operand), in the order they first run."""
    from presk.dialects import kernel as K
    from presk.transforms.plan_layout import first_sites, is_contraction
    sites = first_sites(km)
    seen, out = set(), []
    for kernel in km.ops:
        if not (isinstance(kernel, K.KernelOp) and is_contraction(kernel)
                and kernel.sym_name.data in sites):
            continue
        c = _shape(kernel, sites[kernel.sym_name.data][0])
        key = (c.i, c.j, c.k, c.a_transposed, c.b_transposed, c.bias) if c else None
        if c is not None and key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _shape(kernel, site: str) -> Contraction | None:
    from presk.dialects import kernel as K
    from presk.kernel_abi.tiles import innermost_pair
    pair = innermost_pair(kernel.body.block)
    if pair is None:
        return None
    i_loop, j_loop = pair
    i, j = i_loop.induction, j_loop.induction
    k_loops = [op for op in j_loop.body.block.ops if isinstance(op, K.ForOp)]
    if len(k_loops) != 1:
        return None
    k_loop = k_loops[0]
    loads = [op for op in k_loop.body.block.ops if isinstance(op, K.LoadOp)]
    if len(loads) != 2:
        return None
    k = k_loop.induction
    (a,), (b,) = [op for op in loads if i in op.indices], [op for op in loads if j in op.indices]
    bias = any(isinstance(op, K.LoadOp) and list(op.indices) == [j]
               for op in j_loop.body.block.ops)
    return Contraction(kernel, site, i_loop.trip, j_loop.trip, k_loop.trip,
                       list(a.indices) == [k, i], list(b.indices) == [j, k], bias)


# --------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------

def presk_times(c: Contraction, quick: bool) -> tuple[float, float, str]:
    """(the program's layout, the best one-worker point of the space, its text): seconds a
    launch."""
    from presk.dialects import kernel as K
    from presk.runtime.kernel_timing import time_kernels
    from presk.transforms.plan_layout import Point, layout_space
    points = [p for p in layout_space(c.kernel, 1) if p.tiled]
    if quick:
        points = [p for p in points if p.tile in ((8, 16), (8, 32))] or points[:1]
    variants = [c.kernel]
    for p in points:
        copy = c.kernel.clone()
        copy.layout = p.attr()
        variants.append(copy)
    # single launches, many samples (in rounds over the points), as torch's are timed
    times = time_kernels(variants, [1] * len(variants), samples=20 if quick else 200,
                         min_seconds=0.0, rounds=2 if quick else 10)
    best = min(range(len(points)), key=lambda n: times[n + 1].seconds)
    assert isinstance(c.kernel, K.KernelOp)
    return times[0].seconds, times[best + 1].seconds, points[best].text()


def torch_time(c: Contraction, dtype: str, threads: int, quick: bool) -> float:
    """The minimum over single calls of torch.mm (torch.addmm with the bias), seconds."""
    import torch
    dt = {"f32": torch.float32, "f64": torch.float64}[dtype]
    g = torch.Generator().manual_seed(0)
    a = torch.rand((c.k, c.i) if c.a_transposed else (c.i, c.k), generator=g, dtype=dt)
    b = torch.rand((c.j, c.k) if c.b_transposed else (c.k, c.j), generator=g, dtype=dt)
    a, b = (a.t() if c.a_transposed else a), (b.t() if c.b_transposed else b)
    bias = torch.rand(c.j, generator=g, dtype=dt)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        fn = (lambda: torch.addmm(bias, a, b)) if c.bias else (lambda: torch.mm(a, b))
        return min_time(fn, 20 if quick else 200)
    finally:
        torch.set_num_threads(before)


def min_time(fn, samples: int) -> float:
    """The minimum of single calls (after a few to warm): on a shared machine the one
    estimate that others' work only raises."""
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


_PEAK_IR = """
declare <{n} x {t}> @llvm.fma.v{n}{s}(<{n} x {t}>, <{n} x {t}>, <{n} x {t}>)
define void @peak(i64 %iters, ptr %out) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
{phis}
{body}
  %i1 = add i64 %i, 1
  %done = icmp eq i64 %i1, %iters
  br i1 %done, label %exit, label %loop
exit:
{stores}
  ret void
}}
"""


def peak_flops(dtype: str, fused: bool, quick: bool) -> float:
    """GFLOP/s of up to ACCUMULATORS independent chains of vector `acc = acc·a + b` (a, b loop
    invariant; enough chains that the units' throughput, not their latency, bounds it) on
    one thread: the multiply-add peak, as two operations or as llvm.fma."""
    import llvmlite.binding as llvm
    from presk.conversion.realize_to_kernel.nests import vector_unit
    from presk.emit.llvm import host_target
    registers, vector_bytes = vector_unit()
    accumulators = min(ACCUMULATORS, registers - 4)  # the rest: a and b (no spills)
    t, s = ("float", "f32") if dtype == "f32" else ("double", "f64")
    lanes = vector_bytes // (4 if dtype == "f32" else 8)
    vt = f"<{lanes} x {t}>"
    one_up = "0x3FF0000020000000"  # 1 + 2⁻²³, exact in f32 and f64 (LLVM's hex of a double)
    a = f"<{', '.join(f'{t} {one_up}' for _ in range(lanes))}>"
    b = f"<{', '.join(f'{t} 0.5' for _ in range(lanes))}>"
    phis, body, stores = [], [], []
    for r in range(accumulators):
        phis.append(f"  %acc{r} = phi {vt} [zeroinitializer, %entry], [%next{r}, %loop]")
        if fused:
            body.append(f"  %next{r} = call {vt} @llvm.fma.v{lanes}{s}({vt} %acc{r}, {vt} {a}, "
                        f"{vt} {b})")
        else:
            body.append(f"  %m{r} = fmul {vt} %acc{r}, {a}")
            body.append(f"  %next{r} = fadd {vt} %m{r}, {b}")
        stores.append(f"  %p{r} = getelementptr {vt}, ptr %out, i64 {r}\n"
                      f"  store {vt} %next{r}, ptr %p{r}, align 1")
    text = _PEAK_IR.format(n=lanes, t=t, s=s, phis="\n".join(phis), body="\n".join(body),
                           stores="\n".join(stores))
    mod = llvm.parse_assembly(text)
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, host_target().machine())
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(engine.get_function_address("peak"))
    out = np.zeros(accumulators * lanes, dtype=np.float32 if dtype == "f32" else np.float64)
    iters = 100_000  # about 0.5 ms: short samples, so that some fall between the others' work
    best = min_time(lambda: fn(iters, out.ctypes.data), 20 if quick else 200)
    return 2 * lanes * accumulators * iters / best / 1e9


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few samples, the tiles [8, 16] and [8, 32]")
    parser.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--fma", choices=["both", "on", "off"], default="both",
                        help="time the contractions fused (the realization's fma), "
                             "unfused, or both (default)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch
    cpus = len(os.sched_getaffinity(0))
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"bench/contractions.py: scaled Tower (D = 256, L = 4) at B = {args.batch}, "
          f"{args.dtype}, value and gradient; torch {torch.__version__}, {cpus} CPUs; load "
          f"average {load} (the machine is shared: every figure is inflated)")
    peaks = {fused: peak_flops(args.dtype, fused, args.quick) for fused in (False, True)}
    from presk.conversion.realize_to_kernel.nests import vector_unit
    registers, vector_bytes = vector_unit()
    print(f"  peak, one thread, {min(ACCUMULATORS, registers - 4)} vector accumulators of "
          f"{vector_bytes} bytes: multiply + add "
          f"{peaks[False]:.1f} GFLOP/s, fused (llvm.fma) {peaks[True]:.1f} GFLOP/s")
    numerics = [False, True] if args.fma == "both" else [args.fma == "on"]
    modules = {fused: contractions(kernel_module(args.batch, args.dtype, fused))
               for fused in numerics}
    if not all(modules.values()):
        print("bench/contractions.py: no contraction of the I × J × K form found", file=sys.stderr)
        return 1
    print(f"  {'site':<22} {'product':<34} {'fma':<4}{'program layout':>14} "
          f"{'best 1-worker':>14} {'torch 1 thr':>12} {f'torch {cpus} thr':>12}  "
          f"{'best / torch 1':>14} {'program / torch ' + str(cpus):>17}  best point")
    first = modules[numerics[0]]
    for n, c in enumerate(first):
        t1 = torch_time(c, args.dtype, 1, args.quick)
        tn = torch_time(c, args.dtype, cpus, args.quick)
        rate = lambda s: c.flops / s / 1e9  # noqa: E731
        for fused in numerics:
            mine, best, text = presk_times(modules[fused][n], args.quick)
            print(f"  {c.site:<22} {c.text():<34} {'yes' if fused else 'no':<4}"
                  f"{rate(mine):9.1f} GF/s {rate(best):9.1f} GF/s {rate(t1):7.1f} GF/s "
                  f"{rate(tn):7.1f} GF/s  {t1 / best:13.0%} {tn / mine:16.0%}  {text}")
    print(f"  (GFLOP/s = 2·I·J·K / a launch's minimum time; `program layout`: the layout the "
          f"program gives the kernel ({first[0].kernel.layout}), on {cpus} workers where it "
          "splits; best / torch: the rate relative to torch's, the goal ≥ 80%. fma no: Presk "
          "computes a·b + acc as a multiply and an add, bounded by the multiply + add peak "
          f"({peaks[False] / peaks[True]:.0%} of the fused one); fma yes: the realization fuses "
          "every contraction (llvm.fma: other bits, docs/precision.md))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
