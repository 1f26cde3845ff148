"""Run the pinned cases on every engine and write or read test/golden/bits/bits.json.

The cases: tutorial/07_train.psk `loss` under all-f64 and test/fixtures/realization_mixed.json,
and the `loss` of tutorials 03, 04 and 05 under all-f64; each at B = 1 and 4, value and
gradient (`--grad`, `--remat store`). Each case's weights (the initializers' moved by a
normal draw, so that bf16 rounds them) and inputs are stored in the file as well, so that
the comparison does not depend on how `presk init` or the seeds draw.

Engines, each through its command line (the interface the refactors keep):
native and kernel (`presk run --engine … --out`), C (`presk export --target c`, then
`make -C DIR check`, which also compares with native, and the program's outputs/*.bin)
and PyTorch (`presk export --target pytorch`, run under torch in one fresh process per
program, value and torch-autograd gradient; all-f64 cases only, the export has no
realizations).

Every array is stored as the hex of its bytes (little endian) with its dtype and shape.

Regenerate (only when a change of bits is intended and said so in its commit):
`make golden-bits`, i.e. `.venv/bin/python test/e2e/golden_bits.py`. When only PyTorch's
platform changed (its version, or the CPU its pinned kernels run on): `golden_bits.py
--torch-only` runs PyTorch again and keeps every other engine's outputs as recorded.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from presk.cli.main import main as presk_main

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "tutorial"
MIXED = ROOT / "test" / "fixtures" / "realization_mixed.json"
GOLDEN = ROOT / "test" / "golden" / "bits" / "bits.json"
FORMAT = "presk-golden-bits/1"
BATCHES = (1, 4)
# The entry's parameter class in the PyTorch export: (generated module, class).
TORCH_CLASS = {"03_activations": ("_03_activations", "Act"), "04_mlp": ("_04_mlp", "MLP"),
               "05_stack": ("_05_stack", "Deep"), "07_train": ("_06_tower", "Tower")}


def _cases() -> dict[str, tuple[str, str, int, bool]]:
    """id → (tutorial, realization, B, grad) for every pinned case."""
    out = {}
    for name in ("07_train", "03_activations", "04_mlp", "05_stack"):
        for realization in ("all-f64", "mixed") if name == "07_train" else ("all-f64",):
            for b in BATCHES:
                for grad in (False, True):
                    kind = "grad" if grad else "value"
                    out[f"{name}-{realization}-B{b}-{kind}"] = (name, realization, b, grad)
    return out


CASES = _cases()


def encode(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape), "hex": a.tobytes().hex()}


def decode(d: dict) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(d["hex"]), dtype=np.dtype(d["dtype"])).reshape(d["shape"])


def presk(*argv: str) -> str:
    """Run a `presk` command in this process; its stdout; raise on a non-zero exit."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = presk_main(list(argv))
    if code != 0:
        raise RuntimeError(f"presk {' '.join(argv)}: exit {code}\n{err.getvalue()}")
    return out.getvalue()


def draw_arguments(name: str, b: int, tmp: Path) -> tuple[dict, dict]:
    """Weights (initializers + N(0, 0.3)) and inputs (N(0, 1)) of a case, drawn once."""
    w = tmp / "init.safetensors"
    presk("init", str(TUTORIAL / f"{name}.psk"), "--entry", "loss", "--dim", f"B={b}",
          "-o", str(w))
    rng = np.random.default_rng(1000 * b + len(name))
    weights = {k: np.asarray(v, np.float64) + rng.normal(0.0, 0.3, v.shape)
               for k, v in sorted(load_file(str(w)).items())}
    # Every pinned entry takes batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4]).
    inputs = {f"batch.{i}": rng.normal(0.0, 1.0, (b, 4)) for i in range(2)}
    return weights, inputs


def command_args(name: str, realization: str, b: int, grad: bool, tmp: Path,
                 weights: dict, inputs: dict) -> list[str]:
    save_file(weights, str(tmp / "w.safetensors"))
    save_file(inputs, str(tmp / "x.safetensors"))
    args = [str(TUTORIAL / f"{name}.psk"), "--entry", "loss", "--dim", f"B={b}",
            "--weights", str(tmp / "w.safetensors"), "--inputs", str(tmp / "x.safetensors")]
    if realization == "mixed":
        args += ["--realize", f"@{MIXED}"]
    return args + (["--grad", "--remat", "store"] if grad else [])


def run_engine(engine: str, args: list[str], tmp: Path) -> dict[str, np.ndarray]:
    out = tmp / f"{engine}.safetensors"
    presk("run", *args, "--engine", engine, "--out", str(out))
    return dict(sorted(load_file(str(out)).items()))


def run_c(args: list[str], d: Path) -> dict[str, np.ndarray]:
    """The exported C program's outputs (raw bytes of outputs/*.bin, as uint8), exported
    into the new directory `d`."""
    presk("export", *args, "--target", "c", "-o", str(d))
    run = subprocess.run(["make", "-s", "-C", str(d), "check"], capture_output=True,
                         text=True, timeout=300)
    if run.returncode != 0:
        raise RuntimeError(f"make check in {d}: {run.stdout}{run.stderr}")
    return {f.stem: np.fromfile(f, dtype=np.uint8) for f in sorted((d / "outputs").iterdir())}


# Run in a fresh interpreter: the export's directory first on sys.path, one thread (so
# that no reduction is split), the jobs from argv; results written as safetensors.
# torch's bits depend on the CPU as well as on its version: ATen, MKL and oneDNN each pick
# their kernels by the instruction set (an Intel AVX-512 machine and an AMD EPYC with AVX2
# gave different last bits of 03_activations' gradient). The runner pins all three to their
# AVX2 paths (every x86-64 machine we run on has AVX2) and prints what it ran on, so that
# a pin is compared only where it was recorded: torch's version, its capability, the CPU.
TORCH_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT",
             "ONEDNN_MAX_CPU_ISA": "AVX2"}
TORCH_RUNNER = r"""
import importlib, json, platform, sys
jobs = json.loads(sys.argv[1])
sys.path.insert(0, jobs["dir"])
import torch
from safetensors.torch import load_file, save_file
torch.set_num_threads(1)
cls = getattr(importlib.import_module(jobs["module"]), jobs["class"])
fn = getattr(importlib.import_module(jobs["entry"]), "loss")
for job in jobs["jobs"]:
    theta = cls(dtype=torch.float64)
    theta.load_state_dict(load_file(job["weights"]), strict=True)
    x = load_file(job["inputs"])
    batch = tuple(x[f"batch.{i}"].to(torch.float64).requires_grad_(job["grad"]) for i in range(2))
    value = fn(theta, batch)
    out = {"value": value.detach()}
    if job["grad"]:
        value.backward()
        out.update({f"grad.{k}": p.grad for k, p in theta.named_parameters()})
        out.update({f"grad.batch.{i}": t.grad for i, t in enumerate(batch)})
    save_file({k: v.contiguous() for k, v in out.items()}, job["out"])
def vendor():
    for line in open("/proc/cpuinfo"):
        if line.startswith("vendor_id"):
            return line.split(":", 1)[1].strip()
    return platform.machine()
print(torch.__version__, torch.backends.cpu.get_cpu_capability(), vendor())
"""


def run_torch(name: str, jobs: list[tuple[str, bool, dict, dict]], tmp: Path
              ) -> tuple[str, dict[str, dict[str, np.ndarray]]]:
    """The PyTorch export of `name` on each (id, grad, weights, inputs); torch's platform
    (its version, the ATen capability it ran, the CPU's vendor)."""
    d = tmp / f"pt-{name}"
    presk("export", str(TUTORIAL / f"{name}.psk"), "--target", "pytorch", "-o", str(d))
    spec = []
    for cid, grad, weights, inputs in jobs:
        save_file(weights, str(tmp / f"{cid}.w.safetensors"))
        save_file(inputs, str(tmp / f"{cid}.x.safetensors"))
        spec.append({"weights": str(tmp / f"{cid}.w.safetensors"), "grad": grad,
                     "inputs": str(tmp / f"{cid}.x.safetensors"),
                     "out": str(tmp / f"{cid}.pt.safetensors")})
    module, cls = TORCH_CLASS[name]
    job = {"dir": str(d), "module": module, "class": cls, "entry": "_" + name, "jobs": spec}
    proc = subprocess.run([sys.executable, "-I", "-c", TORCH_RUNNER, json.dumps(job)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **TORCH_ENV})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    results = {cid: dict(sorted(load_file(s["out"]).items())) for (cid, *_), s in zip(jobs, spec)}
    return proc.stdout.strip(), results


def arguments(cid: str, stored: dict | None, tmp: Path) -> tuple[dict, dict]:
    """A case's weights and inputs: the stored ones, or drawn anew."""
    if stored is not None:
        case = stored["cases"][cid]
        return ({k: decode(v) for k, v in case["weights"].items()},
                {k: decode(v) for k, v in case["inputs"].items()})
    name, b = CASES[cid][0], CASES[cid][2]
    return draw_arguments(name, b, tmp)


def run_case(cid: str, weights: dict, inputs: dict, tmp: Path) -> dict[str, dict]:
    """Native, kernel interpreter and C outputs of one case."""
    name, realization, b, grad = CASES[cid]
    args = command_args(name, realization, b, grad, tmp, weights, inputs)
    return {"native": run_engine("native", args, tmp), "kernel": run_engine("kernel", args, tmp),
            "c": run_c(args, tmp / f"c-{cid}")}


def compute(stored: dict | None = None, torch_only: bool = False) -> dict:
    """Every case on every engine. With `stored` (a golden file's contents), its weights
    and inputs are used instead of drawing new ones; with `torch_only` too, its native,
    kernel and C outputs are kept and only PyTorch runs."""
    result: dict = {"format": FORMAT, "cases": {}}
    torch_jobs: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="presk-golden-") as t:
        tmp = Path(t)
        for cid, (name, realization, _, grad) in CASES.items():
            weights, inputs = arguments(cid, stored, tmp)
            if torch_only:
                result["cases"][cid] = stored["cases"][cid]
            else:
                outputs = run_case(cid, weights, inputs, tmp)
                result["cases"][cid] = {
                    "weights": {k: encode(v) for k, v in weights.items()},
                    "inputs": {k: encode(v) for k, v in inputs.items()},
                    "outputs": {e: {k: encode(v) for k, v in o.items()}
                                for e, o in outputs.items()}}
            if realization == "all-f64":
                torch_jobs.setdefault(name, []).append((cid, grad, weights, inputs))
        for name, jobs in torch_jobs.items():
            version, got = run_torch(name, jobs, tmp)
            result["torch"] = version
            for cid, outs in got.items():
                result["cases"][cid]["outputs"]["pytorch"] = {k: encode(v) for k, v in outs.items()}
    return result


def dumps(value: object, indent: str = "") -> str:
    """JSON with one array (a dict with "hex") per line, keys sorted."""
    if not isinstance(value, dict) or "hex" in value:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    inner = indent + " "
    items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {dumps(v, inner)}"
             for k, v in sorted(value.items())]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


def main() -> int:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    stored = json.loads(GOLDEN.read_text()) if GOLDEN.exists() and "--redraw" not in sys.argv else None
    if "--torch-only" in sys.argv:
        # Only PyTorch's pins again (its platform changed): the other engines' outputs and
        # the commit they were recorded at stay.
        if stored is None:
            sys.exit("golden_bits.py: --torch-only needs the recorded file (and no --redraw)")
        result = compute(stored, torch_only=True)
        result["recorded_at"] = stored["recorded_at"]
        result["torch_recorded_at"] = commit
    else:
        result = compute(stored)
        result["recorded_at"] = commit
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    tmp = GOLDEN.with_suffix(".json.tmp")
    tmp.write_text(dumps(result) + "\n")
    tmp.replace(GOLDEN)
    print(f"{GOLDEN.relative_to(ROOT)}: {len(result['cases'])} cases at {commit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
