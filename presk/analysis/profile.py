"""The machine profile, `presk-profile/2`: the machine as the layout cost model sees it
(its workers, caches, vector registers — read from what the operating system reports,
never guessed) and the model's constants fitted on a calibration (`presk profile
calibrate`, presk/pipeline/profile.py), with the fit's error on points it did not see.

`read_machine()` reads this machine: the workers from `os.sched_getaffinity`, the caches
from `/sys/devices/system/cpu/cpu<n>/cache/index*/` (level, type, size,
shared_cpu_list, coherency_line_size), the vector registers from the instruction-set
flags of `/proc/cpuinfo` (avx512f: 32 × 64 bytes; avx or avx2: 16 × 32; sse2: 16 × 16;
asimd/neon: 32 × 16). A size the system does not report is refused with one line
(`ProfileError`), not filled in.

`load_profile(spec)` reads an artifact (`@path`, a path, or inline JSON) and refuses a
wrong kind or version, an unknown or missing field, with one line naming it.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .artifact import check_format, expect, read_json

FORMAT = "presk-profile/2"
TYPES = ("f64", "f32", "bf16")
"""The storage types the model prices loads for; work is priced per compute type (f64,
f32: a bf16 value is computed in f32)."""


class ProfileError(Exception):
    """A profile that cannot be read, or a machine whose facts cannot be: one line."""


@dataclass(frozen=True)
class Machine:
    """What the operating system says about the machine (every size in bytes)."""

    cpu: str  # the model name, as /proc/cpuinfo writes it
    workers: int  # the CPUs this process may run on
    workers_from: str  # where `workers` was read
    l1: int  # L1 data, private to a worker
    l2: int
    l3: int
    l3_shared_by: int  # how many CPUs share one L3
    vector_registers: int
    vector_bytes: int
    cache_line: int

    def key(self) -> str:
        """A file name for this CPU's cached profile."""
        words = re.sub(r"[^A-Za-z0-9]+", "-", self.cpu).strip("-").lower() or "cpu"
        return f"{words}-{self.workers}w-{self.l2 >> 10}k-{self.l3 >> 10}k"


@dataclass(frozen=True)
class Model:
    """The cost model's constants (seconds, bytes per second) and its error on the
    calibration's held-out points. `work[t]` is the time of one arithmetic op computed
    in t (`work["tile"]` of a register tile's vector instruction), `math[t]` of one math-library call, `loads[t]` of one load of a t element
    (`loads["tile"]` a register tile's, `loads["line"]` one that needs a cache line of
    its own from past L1)."""

    launch: float
    spawn: float
    work: dict[str, float]
    math: dict[str, float]
    step: float  # one dependent step of a sum (an add's latency)
    scalar_output: float  # a contraction's output computed alone (not in a tile)
    loads: dict[str, float]
    bandwidth: dict[str, float]  # l2, l3, mem
    efficiency: float  # what each further worker of a split adds (1: a whole worker)
    tile_width: int  # the vector bytes a register tile's instructions run at full rate
    p: float  # how the terms combine: (Σ tᵢᵖ)^(1/p)
    u: float  # median relative error on the held-out points
    u90: float  # their 90th percentile
    rho: float  # Spearman's rank correlation on them
    points: int  # points measured
    held_out: int  # of which held out of the fit
    fit: str  # how the constants were fitted
    # a split's efficiency as a function of its work (presk/analysis/cost_model.py
    # `Split`): `efficiency` is had at split_work seconds a part and more (0: at any
    # size); split_bandwidth is the share of it the traffic past L2 gets. Optional in
    # the artifact (a profile without them: efficiency at any size, for all terms)
    split_work: float = 0.0
    split_bandwidth: float = 1.0
    # a step of a sum in order (a contraction as written: its k loop, not blocked), and a
    # blocked sum's start and pairwise tree, a partial (presk/analysis/cost_model.py
    # `chain`, `blocked`). Optional in the artifact: without them a step in order costs
    # `step`, as a blocked sum's, and the tree nothing (the frozen profile's prices)
    chain: float | None = None
    blocked: float = 0.0
    spill: float | None = None  # a spilled accumulator's load or store (else loads.tile)
    math_op_f64: float = 0.0  # an operation of a math function's program, f64 and f32,
    math_op_f32: float = 0.0  # beside its call's `math` (without them: the call alone)
    panel_spill: float = 0.0  # what a spilled accumulator adds when its tile reads panels
    # the share of a cache a contraction's re-read operand, with the strips a row of
    # tiles streams beside it, may fill (presk/analysis/cost_model.py `reread_level`);
    # 0, or absent from the artifact: the operand alone by the level's size, and a k
    # block priced as its whole-k point (the frozen profile's prices)
    reuse: float = 0.0
    copy: float = 0.0  # a byte a tiled launch copies into memory it allocates (0: free)
    # a byte an unpanelled tile sweeps from its copy of an operand read transposed (0: free)
    swept_copy: float = 0.0


@dataclass(frozen=True)
class Profile:
    machine: Machine
    model: Model
    made: dict = field(default_factory=dict)  # how the calibration ran (informational)

    def to_json(self) -> dict:
        return {"format": FORMAT, "machine": asdict(self.machine),
                "model": asdict(self.model), "made": self.made}


# --------------------------------------------------------------------------------------
# Reading the machine
# --------------------------------------------------------------------------------------

_SYS = Path("/sys/devices/system/cpu")


def _cpu_list(text: str) -> list[int]:
    """`0-3,8` → [0, 1, 2, 3, 8]."""
    out: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        elif part:
            out.append(int(part))
    return out


def _size(text: str) -> int:
    """sysfs's `48K`, `2048K`, `32M` in bytes."""
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if m is None:
        raise ProfileError(f"presk: a cache size `{text.strip()}` this presk cannot read")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def _caches(cpu: int, root: Path) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(level, type) → (size, CPUs sharing it, line) for one CPU's caches."""
    found = {}
    for index in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _size((index / "size").read_text())
            shared = len(_cpu_list((index / "shared_cpu_list").read_text()))
            line = int((index / "coherency_line_size").read_text())
        except (OSError, ValueError):
            continue
        found[(level, kind)] = (size, shared, line)
    return found


def _flags(cpuinfo: str) -> tuple[str, set[str]]:
    name, flags = "", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "cpu model") and not name:
            name = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return name, flags


def vector_registers(flags: set[str]) -> tuple[int, int]:
    """(registers, bytes each) of the widest vector unit the flags name."""
    if "avx512f" in flags:
        return 32, 64
    if "avx2" in flags or "avx" in flags:
        return 16, 32
    if "sse2" in flags:
        return 16, 16
    if "asimd" in flags or "neon" in flags:
        return 32, 16
    raise ProfileError("presk: /proc/cpuinfo names no vector unit this presk knows "
                       "(avx512f, avx2, avx, sse2, asimd)")


def host_vector_unit(cpuinfo: str | None = None) -> tuple[int, int] | None:
    """(registers, bytes each) of this machine's widest vector unit from /proc/cpuinfo's
    flags (`vector_registers`), or None when they cannot be read or name no known unit."""
    try:
        text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
        return vector_registers(_flags(text)[1])
    except (OSError, ProfileError):
        return None


def read_machine(sys_root: Path = _SYS, cpuinfo: str | None = None) -> Machine:
    """This machine, from sysfs, /proc/cpuinfo and the process's CPU affinity."""
    workers = sorted(os.sched_getaffinity(0))
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError as exc:
            raise ProfileError(f"presk: cannot read /proc/cpuinfo ({exc.strerror})") from None
    name, flags = _flags(cpuinfo)
    caches = _caches(workers[0], sys_root)
    l1 = caches.get((1, "Data")) or caches.get((1, "Unified"))
    l2 = caches.get((2, "Unified")) or caches.get((2, "Data"))
    l3 = caches.get((3, "Unified"))
    if l1 is None or l2 is None:
        raise ProfileError(f"presk: {sys_root}/cpu{workers[0]}/cache reports no L1 data "
                           "or L2 cache: the model needs their sizes")
    l3 = l3 or l2  # no L3: the last level is L2, shared as sysfs says
    registers, width = vector_registers(flags)
    return Machine(name or "unknown", len(workers), f"os.sched_getaffinity: CPUs "
                   f"{','.join(map(str, workers))}", l1[0], l2[0], l3[0], l3[1],
                   registers, width, l1[2])


# --------------------------------------------------------------------------------------
# The artifact
# --------------------------------------------------------------------------------------

_MACHINE = {"cpu": "string", "workers": "natural", "workers_from": "string",
            "l1": "natural", "l2": "natural", "l3": "natural", "l3_shared_by": "natural",
            "vector_registers": "natural", "vector_bytes": "natural",
            "cache_line": "natural"}
_MODEL_NUMBERS = ("launch", "spawn", "step", "scalar_output", "efficiency", "p", "u", "u90", "rho")
_MODEL_OPTIONAL = ("split_work", "split_bandwidth", "chain", "blocked", "spill",
                   "math_op_f64", "math_op_f32", "panel_spill", "reuse", "copy", "swept_copy")
_MODEL_TABLES = {"work": ("f64", "f32", "tile"), "math": ("f64", "f32"), "loads": (*TYPES, "tile", "line"),
                 "bandwidth": ("l2", "l3", "mem")}


def _fields(data: dict, names: dict[str, str], where: str) -> dict:
    if unknown := sorted(set(data) - set(names)):
        raise ProfileError(f"{where}: unknown field \"{unknown[0]}\"")
    return {n: expect(data, n, kind, where, ProfileError) for n, kind in names.items()}


def _positive(value: float, name: str, where: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise ProfileError(f"{where}: \"{name}\" is {value}, not a finite number ≥ 0")
    return float(value)


def profile_from_json(data: object, where: str) -> Profile:
    """A Profile from its parsed JSON; `where` names it in errors."""
    top = check_format(data, where, FORMAT, "profile", {"format", "machine", "model",
                                                        "made"}, ProfileError)
    machine = Machine(**_fields(expect(top, "machine", "object", where, ProfileError),
                                _MACHINE, f"{where}: machine"))
    if machine.workers < 1:
        raise ProfileError(f"{where}: machine: \"workers\" is 0")
    raw = dict(expect(top, "model", "object", where, ProfileError))
    names = {n: "number" for n in _MODEL_NUMBERS} | {n: "object" for n in _MODEL_TABLES}
    names |= {"points": "natural", "held_out": "natural", "fit": "string",
              "tile_width": "natural"}
    optional = {n: raw.pop(n) for n in _MODEL_OPTIONAL if n in raw}
    model = _fields(raw, names, f"{where}: model")
    for n in _MODEL_NUMBERS:
        model[n] = _positive(model[n], n, f"{where}: model")
    for n, v in optional.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ProfileError(f"{where}: model: \"{n}\" is not a number")
        model[n] = _positive(v, n, f"{where}: model")
    if model["p"] < 1:
        raise ProfileError(f"{where}: model: \"p\" is {model['p']}, not ≥ 1")
    for n, keys in _MODEL_TABLES.items():
        table = _fields(model[n], {k: "number" for k in keys}, f"{where}: model.{n}")
        model[n] = {k: _positive(v, k, f"{where}: model.{n}") for k, v in table.items()}
    for k, v in model["bandwidth"].items():
        if v <= 0:
            raise ProfileError(f"{where}: model.bandwidth: \"{k}\" is {v}, not > 0")
    made = top.get("made", {})
    if not isinstance(made, dict):
        raise ProfileError(f"{where}: \"made\" is not an object")
    return Profile(machine, Model(**model), made)


def load_profile(spec: str) -> Profile:
    """The profile in `spec` (`@path`, a path, or inline JSON); ProfileError, one line."""
    data, where = read_json(spec, "profile", ProfileError)
    return profile_from_json(data, where)


# --------------------------------------------------------------------------------------
# As the reference prints it
# --------------------------------------------------------------------------------------


def _kib(n: int) -> str:
    return f"{n >> 10} KiB" if n % 1024 == 0 else f"{n} bytes"


def _seconds(s: float) -> str:
    return f"{s * 1e9:.3g} ns" if s < 1e-6 else f"{s * 1e6:.4g} µs"


def _split_words(k: Model) -> str:
    words = f"{k.efficiency:.2f} of a worker"
    if k.split_work > 0:
        words += f", half of it at {_seconds(k.split_work)} of work a part"
    if k.split_bandwidth != 1:
        words += f"; past L2, {k.split_bandwidth:.2f} of that"
    return words


def _newer_rows(k: Model) -> list[tuple[str, str]]:
    """The rows of the terms a profile of presk-profile/2 may leave out (a profile
    without them, as the frozen one, prints as before)."""
    if k.chain is None:
        return []
    return [
        ("A step of a sum in order", _seconds(k.chain)),
        ("A blocked sum's start and tree, a partial", _seconds(k.blocked)),
        ("A math function's operation, f64 / f32",
         f"{_seconds(k.math_op_f64)} / {_seconds(k.math_op_f32)}"),
        ("A spilled accumulator's load or store",
         f"{_seconds(k.loads['tile'] if k.spill is None else k.spill)}"
         f" (+ {_seconds(k.panel_spill)} when its tile reads panels)"),
    ] + ([("A re-read operand and its strips fill", f"{k.reuse:.2f} of a cache"),
          ("A byte a tile copies into memory it allocates", _seconds(k.copy)),
          ("A byte a tile sweeps from a transposed copy", _seconds(k.swept_copy))]
         if k.reuse > 0 or k.copy > 0 or k.swept_copy > 0 else [])


def profile_tables(profile: Profile) -> list[tuple[str, list[tuple[str, str]]]]:
    """The "Machine" and "Layout model" tables: (title, rows of (what, value))."""
    m, k = profile.machine, profile.model
    machine = [
        ("CPU", m.cpu),
        ("Workers", f"{m.workers} ({m.workers_from})"),
        ("L1, private", _kib(m.l1)),
        ("L2, private", _kib(m.l2)),
        ("L3", f"{_kib(m.l3)}, shared by {m.l3_shared_by} workers"),
        ("Vector registers", f"{m.vector_registers} × {m.vector_bytes} bytes"),
        ("Cache line", f"{m.cache_line} bytes"),
    ]
    bw = k.bandwidth
    model = [
        ("Launching a kernel (λ)", _seconds(k.launch)),
        ("Starting a split launch (spawn)", _seconds(k.spawn)),
        ("A split's further worker adds", _split_words(k)),
        ("Bandwidth from L2, L3, memory",
         ", ".join(f"{bw[n] / 1e9:.3g}" for n in ("l2", "l3", "mem")) + " GB/s"),
        ("An arithmetic op, f64 / f32", f"{_seconds(k.work['f64'])} / {_seconds(k.work['f32'])}"),
        ("A register tile's vector instruction",
         f"{_seconds(k.work['tile'])} ({k.tile_width}-byte vectors at full rate)"),
        ("A math-library call, f64 / f32",
         f"{_seconds(k.math['f64'])} / {_seconds(k.math['f32'])}"),
        ("A dependent step of a sum", _seconds(k.step)),
        ("A load, f64 / f32 / bf16", " / ".join(_seconds(k.loads[t]) for t in TYPES)),
        ("A register tile's load", _seconds(k.loads["tile"])),
        ("A load a cache line apart, past L1", _seconds(k.loads["line"])),
        ("A contraction's output computed alone", _seconds(k.scalar_output)),
        *_newer_rows(k),
        ("Terms combined by", f"a p-norm, p = {k.p:.3g}"),
        ("Its error on the calibration (u)",
         f"{k.u:.3f} (median), {k.u90:.3f} (90th percentile), on {k.held_out} held-out "
         f"of {k.points} points"),
        ("Rank correlation on the calibration", f"{k.rho:.3f} (Spearman)"),
        ("Fitted by", k.fit),
    ]
    return [("Machine", machine), ("Layout model", model)]


def render_profile(profile: Profile) -> str:
    out = []
    for title, rows in profile_tables(profile):
        out.append(title)
        width = max(len(r[0]) for r in rows)
        out += [f"  {what:<{width}}  {value}" for what, value in rows]
    return "\n".join(out) + "\n"
