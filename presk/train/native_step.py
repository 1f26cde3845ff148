"""A training step in one native call: the batch gathered from the data file's memory map,
the objective's value and gradient, the schedule and the optimizer's update, for up to K
steps a call, with no Python between them.

`StepProgram` builds one function, `presk_entry_step_<form>(argv, arena)`, in the standard
dialects (as presk/train/native_optim.py builds the update alone) and compiles it through
the native backend (LLVM O2, no fused multiply-add, the on-disk cache). Per step s of a
call (`t = t0 + s` updates done before it):

1. batch: the samples `order[first + s·B + b]` (b < B) of the order handed over (an
   epoch's, or the epochs' a call spans side by side: `Stream.places`) copied from
   the file's memory map (`data + index · sample_bytes`, each tensor at its offset in the
   sample) into the objective's batch buffers — the bytes `Stream.read` reads;
2. the objective: a call of its compiled entry (`presk_entry_loss`, loaded already, its
   address given to LLVM under the name `presk_step_objective_<digest>`) on the buffers
   the trainer bound: the parameters read from the optimizer's array, the gradient
   written into it; the loss (widened to f64) stored in `losses[s]`. Where the
   objective cannot read the f64 master copies (an all-f32 realization, or a solved one
   with f32 and bf16 parameters: its parameter buffers and gradient outputs are f32 or
   bf16), it keeps its own buffers, bound once: the step rounds each parameter to nearest
   into its buffer before the call (bf16 through f32 rounded to odd, one correct
   rounding) and widens each gradient into the group's array after it
   (`Geometry.rounded`), the bits of `NativeObjective.__call__` and `Optimizer.step`;
3. the schedule and the optimizer's scalars in f64, the operations of
   presk/train/optim.py in its order (`Schedule.__call__`, `_scalars`): `cos` and `pow`
   are the C library's (`math.cos`, Python's `**`), called by the names
   `presk_libm_cos`/`presk_libm_pow` so that LLVM does not rewrite them (the parameters
   are f64 master copies: no rounding after); the learning rate stored in `lrs[s]`;
4. the element-wise update of native_optim.py (`_adamw_body`, `_sgd_body`), the same
   loop body.

So a call computes the bits of as many `Trainer.one_step` calls (the tests compare both).
The module depends on the geometry only (B, the sample's tensors and their buffers'
types, the group's size, the optimizer's form, the schedule's kind); the hyperparameters and the run's
length come in buffers, so one compiled step serves every run of that shape.

`NativeStep.run` calls it through its argument-free twin `presk_entry_<step>_bound()`,
which reads the argv's address from an internal global of the loaded module (written once
through `presk_entry_<step>_slot()`, which returns the global's address): ctypes converts
every argument of a call, so the argument-free call costs a third of the two-argument one.
`NativeStep.stepper()` is a builtin function over `presk_entry_<step>_py`, one step a call
(presk/train/step_builtin.py).

argv: ctl (i64: steps, t0, first, total, warmup), hyper (f64: lr and the optimizer's
fields), order (i64), data (the first sample's byte), losses (f64), lrs (f64), the
objective's argv and arena, its result buffer, the batch buffers, then g, p and the
optimizer's buffers (`exp_avg`, `exp_avg_sq` / `momentum`), then (rounded) each
parameter's input buffer and gradient output of the objective (`param.j`, `grad.j`).
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith, func, llvm, scf
from xdsl.dialects.builtin import (IndexType, IntegerAttr, ModuleOp,
                                   UnrealizedConversionCastOp, f32, f64, i8, i16, i64)
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from ..conversion.kernel_to_std import PTR, Emitter
from ..dialects import kernel as K
from ..kernel_abi.calling import BufferSig, EntrySig, entry_symbol
from .native_optim import (SPLIT_ELEMENTS, NativeAdamW, NativeSGD, _adamw_body, _ranges,
                           _sgd_body, launch, range_functions, stack_array, update_parts)
from .optim import SGD, AdamW
from .step_builtin import (RELEASE_GIL_AT, STATE, builtin, declarations, python_entry,
                           register_c_api, scf_if)

_SOURCE = hashlib.sha256(b"".join((Path(__file__).parent / n).read_bytes() for n in (
    "native_step.py", "native_optim.py", "step_builtin.py",
    "../runtime/bound_call.py"))).hexdigest()[:16]
"""Part of the cache key: the step's code is this file's, native_optim.py's,
step_builtin.py's and bound_call.py's (its GIL threshold)."""

STEPS_PER_CALL = 256
"""The native step's default most steps a call (`presk train --steps-per-call`): the
checkpoints, the log and Ctrl-C act between calls, so at most this many steps apart (and
about `loop.CALL_SECONDS` apart for a slow step). 256 rather than 64 since a call runs on
across epochs' ends: its Python (about 10 µs) is then 0.04 µs of a tutorial step, not 0.16."""
CTL = ("steps", "t0", "first", "total", "warmup")
HYPER = {"adamw": ("lr", "beta1", "beta2", "eps", "weight_decay", "beta1_spent",
                   "beta2_spent"),
         "sgd": ("lr", "momentum", "dampening", "weight_decay")}
"""The hyper-parameters the step reads, in order: the optimizer's, and (`_spent`) the step
counts from which AdamW's bias corrections are 1 exactly."""

SPENT = 2.0 ** -60
"""β^t at or below it: 1 − β^t rounds to 1 exactly (it does below 2^−54), so AdamW's bias
correction 1 − β^t is 1, √(1 − β₂^t) is 1 and lr / (1 − β₁^t) is lr from the step count
`spent(β)` on, and the step skips their `pow` calls — three a step, ~40 ns of the
tutorial's 1.1 µs, more once β^t underflows and the C library takes its slow path
(β₂ = 0.999 is spent from step 41 569 on, β₁ = 0.9 from 395)."""
LIBM = ("cos", "pow")
_FIXED = ("ctl", "hyper", "order", "data", "losses", "lrs", "obj_argv", "obj_arena",
          "result")


@dataclass(frozen=True)
class Geometry:
    """What the compiled step depends on."""

    batch: int  # B
    tensors: tuple[tuple[int, str, str], ...]  # per tensor of a sample: (elements, the
    # file's element type, the batch buffer's), each f64 or f32
    n: int  # the parameters' elements (one group of f64 master copies)
    optimizer: str  # adamw | sgd
    form: tuple[bool, bool]  # adamw: (decay, small w1); sgd: (decay, momentum)
    schedule: str  # constant | linear | cosine
    result: str  # the loss's element type in the objective's output: f64 | f32
    objective: str  # the symbol the objective's entry is called by
    rounded: tuple[tuple[int, int, str, str], ...] = ()  # per parameter, where the
    # objective cannot read the f64 master copies: (offset in the group, elements, its
    # input buffer's type, its gradient output's type); () when it reads p and writes g
    parts: int = 1  # the ranges the update runs in on the worker pool (update_parts)

    @property
    def sample_bytes(self) -> int:
        return sum(n * _ITEM[t] for n, t, _ in self.tensors)

    @property
    def buffers(self) -> tuple[str, ...]:
        if self.optimizer == "adamw":
            return ("exp_avg", "exp_avg_sq")
        return ("momentum",) if self.form[1] else ()

    @property
    def name(self) -> str:
        shape = "_".join(f"{n}{t}{b}" for n, t, b in self.tensors)
        flags = "".join(str(int(f)) for f in self.form)
        rounded = "_rounded" + hashlib.sha256(repr(self.rounded).encode()).hexdigest()[:8] \
            if self.rounded else ""
        parts = f"_p{self.parts}" if self.parts > 1 else ""
        return (f"step_{self.optimizer}{flags}_{self.schedule}_{self.n}_"
                f"B{self.batch}_{shape}_r{self.result}_{self.objective[-16:]}{rounded}{parts}")


_ITEM = {"f64": 8, "f32": 4}
_TYPE = {"f64": f64, "f32": f32}
STREAM_TYPES = tuple(_ITEM)  # of the objective's batch buffers and its loss
OWN_TYPES = ("f64", "f32", "bf16")  # of an objective's own parameter and gradient buffers


# --------------------------------------------------------------------------------------
# Building the step
# --------------------------------------------------------------------------------------


def _loop(e: Emitter, count: SSAValue, body: Callable[[Emitter, SSAValue], None]) -> None:
    """for i in [0, count) (count an index value known only at run time)."""
    block = Block(arg_types=[IndexType()])
    e(scf.ForOp(e.index(0), count, e.index(1), [], Region(block)))
    block.add_op(scf.YieldOp())
    body(Emitter(e.rewriter, InsertPoint.before(block.last_op)), block.args[0])


def _i64(e: Emitter, i: SSAValue) -> SSAValue:
    return e(arith.IndexCastOp(i, i64))


def _at(e: Emitter, ptr: SSAValue, offset: SSAValue, element) -> SSAValue:
    """The address of element `offset` (an i64) of type `element` from `ptr`."""
    return e(llvm.GEPOp(ptr, [llvm.GEP_USE_SSA_VAL], element, ssa_indices=[offset],
                        inbounds=True))


def _load(e: Emitter, ptr: SSAValue, offset: SSAValue, element) -> SSAValue:
    return e(llvm.LoadOp(_at(e, ptr, offset, element), element))


def _store(e: Emitter, value: SSAValue, ptr: SSAValue, offset: SSAValue) -> None:
    e(llvm.StoreOp(value, _at(e, ptr, offset, value.type)))


def _rounded_to(e: Emitter, x: SSAValue, ty: str) -> SSAValue:
    """An f64 rounded to nearest even into `ty`'s storage (Slot.fill, to_storage): bf16
    through f32 rounded to odd, so that its rounding is one correct rounding, then the
    bits (the kernels' convert, kernel_to_std/emitter.py)."""
    if ty == "bf16":
        return e.f32_to_bf16(e.f64_to_f32_odd(x))
    return x if ty == "f64" else e(arith.TruncFOp(x, _TYPE[ty]))


def _widened(e: Emitter, ptr: SSAValue, offset: SSAValue, ty: str) -> SSAValue:
    """Element `offset` of a `ty` buffer widened exactly to f64 (to_f64)."""
    if ty == "bf16":
        return e(arith.ExtFOp(e.bf16_to_f32(_load(e, ptr, offset, i16)), f64))
    x = _load(e, ptr, offset, _TYPE[ty])
    return x if ty == "f64" else e(arith.ExtFOp(x, f64))


def _libm(e: Emitter, name: str, *args: SSAValue) -> SSAValue:
    return e(llvm.CallOp(f"presk_libm_{name}", *args, return_type=f64))


def spent(beta: float) -> float:
    """The first step count t ≥ 1 with β**t ≤ SPENT (the C library's pow, which Python's
    float ** and the step both call; past it pow keeps below 2^−54, its error a rounding),
    or inf: never (β outside [0, 1))."""
    if not 0.0 <= beta < 1.0:
        return math.inf
    if beta == 0.0:
        return 1.0
    t = max(1, math.ceil(math.log(SPENT) / math.log(beta)))
    while beta ** t > SPENT:
        t += 1
    while t > 1 and beta ** (t - 1) <= SPENT:
        t -= 1
    return float(t)


def hyper_values(optimizer, kind: str) -> np.ndarray:
    """The `hyper` array the step reads (HYPER[kind]): the optimizer's fields, and each
    `<β>_spent` as `spent(<β>)`."""
    return np.array([spent(getattr(optimizer, f.removesuffix("_spent")))
                     if f.endswith("_spent") else getattr(optimizer, f)
                     for f in HYPER[kind]], np.float64)


class _Build:
    """The step function's body, emitted in order (one object per build)."""

    def __init__(self, g: Geometry, e: Emitter, args: dict[str, SSAValue]):
        self.g, self.e, self.a = g, e, args
        self.c = {k: _load(e, args["ctl"], e.int(j, i64), i64) for j, k in enumerate(CTL)}
        self.h = {k: _load(e, args["hyper"], e.int(j, i64), f64)
                  for j, k in enumerate(HYPER[g.optimizer])}
        self.views = {k: e(UnrealizedConversionCastOp.get([args[k]],
                                                          [K.BufferType.get(f64, g.n)]))
                      for k in ("g", "p", *g.buffers)}
        self.functions: list[func.FuncOp] = []  # the ranges run on the pool
        if g.parts > 1:  # in the entry block: the pool's launches, every step
            names = self._scalar_names()
            slots = max(3 + len(g.buffers), 3 + len(g.tensors))
            self.pool = {"fns": stack_array(e, g.parts, PTR),
                         "argv": stack_array(e, slots, PTR),
                         "scalars": stack_array(e, len(names), f64)}

    def step(self, e: Emitter, s: SSAValue) -> None:
        s64 = _i64(e, s)
        self.gather(e, s64)
        self.convert(e, into_objective=True)
        e(llvm.CallOp(self.g.objective, self.a["obj_argv"], self.a["obj_arena"]))
        self.convert(e, into_objective=False)
        loss = _load(e, self.a["result"], e.int(0, i64), _TYPE[self.g.result])
        if self.g.result != "f64":
            loss = e(arith.ExtFOp(loss, f64))
        _store(e, loss, self.a["losses"], s64)
        t = e(arith.AddiOp(self.c["t0"], s64))
        lr = e(arith.MulfOp(self.h["lr"], self.factor(e, t)))
        _store(e, lr, self.a["lrs"], s64)
        scalars = self.scalars(e, lr, e(arith.AddiOp(t, e.int(1, i64))))
        self.update(e, scalars)

    def gather(self, e: Emitter, s: SSAValue) -> None:
        """The batch of step s: B samples of the order, each tensor to its buffer (rows
        in ranges on the pool when the update is there: `_rows`)."""
        g = self.g
        base = e(arith.AddiOp(self.c["first"], e(arith.MuliOp(s, e.int(g.batch, i64)))))
        values = {"order": self.a["order"], "data": self.a["data"], "base": base,
                  **{f"batch.{j}": self.a[f"batch.{j}"] for j in range(len(g.tensors))}}
        work = g.batch * sum(count for count, _, _ in g.tensors)
        self._rows(e, "presk_step_gather", g.batch, work, values, self._sample)

    def _sample(self, b: Emitter, row: SSAValue, v: dict[str, SSAValue]) -> None:
        """Sample `row` of the batch: its order's index, its tensors from the map."""
        g = self.g
        r64 = _i64(b, row)
        index = _load(b, v["order"], b(arith.AddiOp(v["base"], r64)), i64)
        src = _at(b, v["data"], b(arith.MuliOp(index, b.int(g.sample_bytes, i64))), i8)
        offset = 0
        for j, (count, ty, into) in enumerate(g.tensors):
            first = b(arith.MuliOp(r64, b.int(count, i64)))
            part = _at(b, src, b.int(offset, i64), i8)
            dst = v[f"batch.{j}"]

            def copy(c: Emitter, k: SSAValue, part=part, dst=dst, first=first, ty=ty,
                     into=into) -> None:
                k64 = _i64(c, k)
                x = _load(c, part, k64, _TYPE[ty])
                if ty != into:  # Slot.fill: widened exactly, or rounded to nearest
                    x = c((arith.ExtFOp if into == "f64" else arith.TruncFOp)(
                        x, _TYPE[into]))
                _store(c, x, dst, c(arith.AddiOp(first, k64)))
            b.loop(count, copy)
            offset += count * _ITEM[ty]

    def convert(self, e: Emitter, into_objective: bool) -> None:
        """Where the objective has buffers of its own (Geometry.rounded): each parameter
        rounded to nearest from p into its input (Slot.fill), or each gradient widened
        exactly from its output into g (to_f64), element by element (in ranges on the
        pool when the update is there)."""
        for j, (offset, count, p_type, g_type) in enumerate(self.g.rounded):
            own = self.a[f"param.{j}" if into_objective else f"grad.{j}"]
            ty = p_type if into_objective else g_type

            def element(c: Emitter, k: SSAValue, v: dict[str, SSAValue], ty=ty,
                        offset=offset) -> None:
                k64 = _i64(c, k)
                at = c(arith.AddiOp(c.int(offset, i64), k64))
                if into_objective:
                    _store(c, _rounded_to(c, _load(c, v["p"], at, f64), ty), v["own"], k64)
                else:
                    _store(c, _widened(c, v["own"], k64, ty), v["g"], at)
            name = f"presk_step_{'round' if into_objective else 'widen'}_{j}"
            values = {"own": own, ("p" if into_objective else "g"):
                      self.a["p" if into_objective else "g"]}
            self._rows(e, name, count, count, values, element)

    def _rows(self, e: Emitter, name: str, count: int, work: int,
              values: dict[str, SSAValue],
              body: Callable[[Emitter, SSAValue, dict[str, SSAValue]], None]) -> None:
        """for i in [0, count): body(i, values) — here, or, when the update runs on the
        pool (g.parts > 1) and the loop's `work` (elements moved) is SPLIT_ELEMENTS or
        more, in g.parts contiguous ranges there: `values` (pointers and i64s) through
        the entry block's argv, one function a range that reads them back. Independent
        iterations, each writing its own elements: the same bits."""
        parts = self.g.parts if work >= SPLIT_ELEMENTS else 1
        if parts == 1:
            e.loop(count, lambda b, i: body(b, i, values))
            return
        pool = self.pool
        for j, value in enumerate(values.values()):
            e(llvm.StoreOp(value, e(llvm.GEPOp(pool["argv"], [j], PTR, inbounds=True))))
        fns = [_range_part(f"{name}_{k}", values, lo, hi, body)
               for k, (lo, hi) in enumerate(_ranges(count, parts))]
        self.functions += fns
        launch(e, fns, pool["argv"], pool["fns"])

    def factor(self, e: Emitter, t: SSAValue) -> SSAValue:
        """Schedule.__call__(t), in its operations and order."""
        if self.g.schedule == "constant":
            return e.float(1.0, f64)
        total, warmup = self.c["total"], self.c["warmup"]
        fl = lambda v: e(arith.SIToFPOp(v, f64))  # noqa: E731  (float(int), exact here)
        warm = e(arith.DivfOp(fl(t), fl(warmup)))
        rest = e(arith.SubiOp(total, warmup))
        one = e.int(1, i64)
        span = fl(e(arith.SelectOp(e(arith.CmpiOp(rest, one, "slt")), one, rest)))
        if self.g.schedule == "linear":
            decay = e(arith.DivfOp(fl(e(arith.SubiOp(total, t))), span))
        else:
            x = e(arith.MulfOp(e.float(math.pi, f64),
                               e(arith.DivfOp(fl(e(arith.SubiOp(t, warmup))), span))))
            decay = e(arith.MulfOp(e.float(0.5, f64), e(arith.AddfOp(e.float(1.0, f64),
                                                               _libm(e, "cos", x)))))
        late = e(arith.SelectOp(e(arith.CmpiOp(t, total, "sge")), e.float(0.0, f64), decay))
        return e(arith.SelectOp(e(arith.CmpiOp(t, warmup, "slt")), warm, late))

    def scalars(self, e: Emitter, lr: SSAValue, t1: SSAValue) -> dict[str, SSAValue]:
        """The optimizer's `_scalars(lr, t)` (t = t1 counts this update) in f64, the
        group's dtype; AdamW's `one_minus_w1` as NativeAdamW computes it."""
        h, one = self.h, e.float(1.0, f64)
        sub = lambda a, b: e(arith.SubfOp(a, b))  # noqa: E731
        if self.g.optimizer == "adamw":
            step = e(arith.SIToFPOp(t1, f64))
            c2s = self._unless_spent(e, step, "beta2", lambda b: _libm(
                b, "pow", b(arith.SubfOp(one, _libm(b, "pow", h["beta2"], step))),
                b.float(0.5, f64)))
            c1 = self._unless_spent(e, step, "beta1", lambda b: b(arith.SubfOp(
                one, _libm(b, "pow", h["beta1"], step))))
            s = {"decay": sub(one, e(arith.MulfOp(lr, h["weight_decay"]))),
                 "w1": sub(one, h["beta1"]), "beta2": h["beta2"], "w2": sub(one, h["beta2"]),
                 "c2s": c2s, "eps": h["eps"],
                 "neg_step": e(arith.NegfOp(e(arith.DivfOp(lr, c1))))}
        else:
            s = {"wd": h["weight_decay"], "momentum": h["momentum"],
                 "keep": sub(one, h["dampening"]), "neg_lr": e(arith.NegfOp(lr))}
        if self.g.optimizer == "adamw":
            s["one_minus_w1"] = e(arith.SubfOp(one, s["w1"]))
        return s

    def _unless_spent(self, e: Emitter, step: SSAValue, beta: str,
                      correction: Callable[[Emitter], SSAValue]) -> SSAValue:
        """A bias correction (1 − β^t, or √ of it): 1 exactly once the step count reaches
        `<beta>_spent` (SPENT), else computed (its `pow` calls only then)."""
        done = e(arith.CmpfOp(step, self.h[f"{beta}_spent"], "oge"))
        return scf_if(e, done, [f64], lambda b: [b.float(1.0, f64)],
                      lambda b: [correction(b)])[0]

    def _scalar_names(self) -> list[str]:
        """The update's scalars in the order its ranges read them: the native optimizer's
        own (`build_update` takes them so too)."""
        return (NativeAdamW if self.g.optimizer == "adamw" else NativeSGD).SCALARS

    def update(self, e: Emitter, s: dict[str, SSAValue]) -> None:
        g = self.g
        body = _adamw_body(*g.form) if g.optimizer == "adamw" else _sgd_body(*g.form)
        if g.parts > 1:
            self._update_on_pool(e, s, body)
        elif g.optimizer == "adamw":  # √(1 − β₂^t) = 1 (spent): √v is not divided by it
            unit = e(arith.CmpfOp(s["c2s"], e.float(1.0, f64), "oeq"))
            scf_if(e, unit, [], lambda b: self._loop(b, s, _adamw_body(*g.form, True)),
                   lambda b: self._loop(b, s, body))
        else:
            self._loop(e, s, body)

    def _loop(self, e: Emitter, s: dict[str, SSAValue], body) -> list[SSAValue]:
        """The update's serial loop over the group's elements (no values yielded)."""
        def element(b: Emitter, i: SSAValue) -> None:
            x = {k: b.load(v, i) for k, v in self.views.items()}
            for k, value in body(b, x, s).items():
                b.store(value, self.views[k], i)
        e.loop(self.g.n, element)
        return []


    def _update_on_pool(self, e: Emitter, s: dict[str, SSAValue], body) -> None:
        """The update in `g.parts` contiguous ranges on the worker pool (native_optim's
        `range_functions`, as `presk_update_…` makes them): this step's scalars and the
        buffers' pointers in the entry block's arrays, one `presk_pool_run`. Each
        element's operations are the serial loop's, so the bits are too."""
        g, pool = self.g, self.pool
        names = self._scalar_names()
        assert sorted(names) == sorted(s), (names, sorted(s))
        for j, name in enumerate(names):
            _store(e, s[name], pool["scalars"], e.int(j, i64))
        for j, name in enumerate(("g", "scalars", "p", *g.buffers)):
            ptr = pool["scalars"] if name == "scalars" else self.a[name]
            e(llvm.StoreOp(ptr, e(llvm.GEPOp(pool["argv"], [j], PTR, inbounds=True))))
        fns = range_functions("presk_step_update", f64, g.n, names, list(g.buffers), body,
                              g.parts)
        self.functions += fns
        launch(e, fns, pool["argv"], pool["fns"])


def _range_part(symbol: str, values: dict[str, SSAValue], lo: int, hi: int,
                body: Callable[[Emitter, SSAValue, dict[str, SSAValue]], None]) -> func.FuncOp:
    """`void symbol(argv)`: body(i, values) for i in [lo, hi), the values read from argv
    (slot j the j-th, of its own type: a pointer or an i64)."""
    block = Block(arg_types=[PTR])
    e = Emitter(Builder(InsertPoint.at_end(block)), InsertPoint.at_end(block))
    mine = {k: e(llvm.LoadOp(e(llvm.GEPOp(block.args[0], [j], PTR, inbounds=True)), v.type))
            for j, (k, v) in enumerate(values.items())}

    def element(b: Emitter, k: SSAValue) -> None:
        body(b, b(arith.AddiOp(k, b.index(lo))) if lo else k, mine)
    e.loop(hi - lo, element)
    e(func.ReturnOp())
    return func.FuncOp(symbol, ([PTR], []), Region(block), "private")


def argument_names(g: Geometry) -> list[str]:
    """The step's argv, in order."""
    rounded = [f"{k}.{j}" for j in range(len(g.rounded)) for k in ("param", "grad")]
    return [*_FIXED, *(f"batch.{j}" for j in range(len(g.tensors))), "g", "p", *g.buffers,
            *rounded]


def bound_names(g: Geometry) -> tuple[str, str, str]:
    """The host names of the step's argument-free entry, of the entry that tells where
    its argv's address is kept (`presk_entry_<g.name>_bound`, `…_slot`), and of the
    builtin's function (`…_py`, presk/train/step_builtin.py)."""
    return g.name + "_bound", g.name + "_slot", g.name + "_py"


ARGV_GLOBAL = "presk_step_argv"
"""The step module's i64 global (internal: each loaded copy of the module has its own)
holding the address of the argv its argument-free entry calls the step with."""


def _bound_entry(g: Geometry) -> list:
    """`presk_entry_<g.name>_bound()`: the step on the argv whose address `ARGV_GLOBAL`
    holds (the arena unused: null); `presk_entry_<g.name>_slot()`: that global's address,
    for the caller to write once. ctypes converts each argument of a call (about 65 ns
    apiece here): a call without any costs about 80 ns, the two-argument one 210 ns —
    a tenth of a tutorial step made one a call."""
    bound, slot = Block(), Block()
    e = Emitter(Builder(InsertPoint.at_end(bound)), InsertPoint.at_end(bound))
    argv = e(llvm.IntToPtrOp(e(llvm.LoadOp(e(llvm.AddressOfOp(ARGV_GLOBAL, PTR)), i64))))
    e(func.CallOp(entry_symbol(g.name), [argv, e(llvm.IntToPtrOp(e.int(0, i64)))], []))
    e(func.ReturnOp())
    s = Emitter(Builder(InsertPoint.at_end(slot)), InsertPoint.at_end(slot))
    s(func.ReturnOp(s(llvm.AddressOfOp(ARGV_GLOBAL, PTR))))
    names = bound_names(g)
    ctl = {k: CTL.index(k) for k in ("steps", "t0", "first")}
    return [llvm.GlobalOp(i64, ARGV_GLOBAL, "internal", value=IntegerAttr(0, i64)),
            func.FuncOp(entry_symbol(names[0]), ([], []), Region(bound)),
            func.FuncOp(entry_symbol(names[1]), ([], [PTR]), Region(slot)),
            python_entry(entry_symbol(names[2]), entry_symbol(g.name), g.batch, ctl,
                         argument_names(g).index("losses"), g.n >= RELEASE_GIL_AT)]


def build_step(g: Geometry) -> tuple[ModuleOp, list[EntrySig]]:
    """The llvm-dialect module of the step (`presk_entry_<g.name>`): as many steps a call
    as `ctl[0]` says (the caller's losses and lrs hold that many); its argument-free
    twin and the builtin's function (`_bound_entry`)."""
    from ..conversion.std_to_llvm.callees import declare_external_callees
    from ..runtime.compile import llvm_module_from_std
    names = argument_names(g)
    block = Block(arg_types=[PTR, PTR])
    e = Emitter(Builder(InsertPoint.at_end(block)), InsertPoint.at_end(block))
    args = {n: e(llvm.LoadOp(e(llvm.GEPOp(block.args[0], [i], PTR, inbounds=True)), PTR))
            for i, n in enumerate(names)}
    build = _Build(g, e, args)
    _loop(e, e(arith.IndexCastOp(build.c["steps"], IndexType())), build.step)
    e(func.ReturnOp())
    decls = [llvm.FuncOp(g.objective, llvm.LLVMFunctionType([PTR, PTR]),
                         linkage=llvm.LinkageAttr("external")),
             *(llvm.FuncOp(f"presk_libm_{n}", llvm.LLVMFunctionType(
                 [f64] * (2 if n == "pow" else 1), f64), linkage=llvm.LinkageAttr("external"))
               for n in LIBM), *declarations()]
    module = ModuleOp([*decls, *build.functions,
                       func.FuncOp(entry_symbol(g.name), ([PTR, PTR], []), Region(block)),
                       *_bound_entry(g)])
    declare_external_callees(module)  # the pool's launch, when the update runs there
    raw = lambda n, t="f64", shape=(1,): BufferSig(n, t, shape)  # noqa: E731
    inputs = tuple(raw(n) for n in names)  # raw pointers: the step binds them itself
    return llvm_module_from_std(module), [
        EntrySig(g.name, entry_symbol(g.name), inputs, (), 0),
        *(EntrySig(n, entry_symbol(n), (), (), 0) for n in bound_names(g))]


# --------------------------------------------------------------------------------------
# Loading and calling it
# --------------------------------------------------------------------------------------


def step_buffer_bytes(optimizer_kind: str, k: int) -> int:
    """What a NativeStep allocates: ctl (i64), hyper, losses and lrs (f64, k each)."""
    return 8 * (len(CTL) + len(HYPER[optimizer_kind]) + 2 * k)


def _register_libm() -> None:
    """`presk_libm_cos`/`presk_libm_pow`: the C library's functions, which `math.cos` and
    Python's float `**` call (for the finite arguments a schedule and AdamW give them)."""
    import llvmlite.binding as binding
    libm = ctypes.CDLL(None)
    for name in LIBM:
        binding.add_symbol(f"presk_libm_{name}", ctypes.cast(getattr(libm, name),
                                                             ctypes.c_void_p).value)


def objective_symbol(objective) -> str:
    """The name the step calls the objective's entry by: one per compiled objective (a
    digest of its kernel module), so that two objectives in one process never share it."""
    text = str(objective.call.pipeline.kernel) + objective.entry.sig.symbol
    return "presk_step_objective_" + hashlib.sha256(text.encode()).hexdigest()[:16]


class NativeStep:
    """The step program bound to a trainer's arrays: `run(n, t0, first, order)` makes n
    steps (n ≤ k) in one call and returns their losses and learning rates; `step` makes
    one and returns its loss, and `stepper()` is `step` as a builtin function."""

    def __init__(self, geometry: Geometry, k: int, objective, optimizer, group, stream,
                 cache: bool = True) -> None:
        import llvmlite.binding as binding

        from ..runtime import load_native
        from ..runtime.compile import lowering_version
        self.k, self.geometry = k, geometry
        function, obj_argv, obj_arena = objective.bound_call
        _register_libm()
        register_c_api()
        binding.add_symbol(geometry.objective, function)
        self.program = load_native(lambda: build_step(geometry),
                                   f"{geometry} {_SOURCE}", lowering_version(), cache=cache)
        symbol = entry_symbol(geometry.name)
        self._function = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(
            self.program.jit.address(symbol))
        bound, slot, self._py_entry = (self.program.jit.address(entry_symbol(n))
                                       for n in bound_names(geometry))
        self._bound_call = ctypes.CFUNCTYPE(None)(bound)
        self._argv_slot = ctypes.CFUNCTYPE(ctypes.c_void_p)(slot)()  # ARGV_GLOBAL's address
        self.ctl = np.zeros(len(CTL), np.int64)
        self.ctl[3], self.ctl[4] = optimizer.schedule.total, optimizer.schedule.warmup
        self.hyper = hyper_values(optimizer, geometry.optimizer)
        self.losses, self.lrs = np.zeros(k), np.zeros(k)  # step_buffer_bytes counts these
        self._map = stream.memory_map()
        arrays = {"ctl": self.ctl, "hyper": self.hyper, "losses": self.losses,
                  "lrs": self.lrs, "data": self._map, "result": objective.result_buffer,
                  "g": group.g, "p": group.p, **{b: group.bufs[b] for b in geometry.buffers},
                  **{f"batch.{j}": s.buffer for j, s in enumerate(objective.batch_slots)},
                  **(_rounded_arrays(objective, group) if geometry.rounded else {})}
        self._keep = (arrays, objective, group)  # what the pointers point into
        names = argument_names(geometry)
        pointers = [arrays[n].ctypes.data if n in arrays else 0 for n in names]
        pointers[names.index("obj_argv")] = obj_argv
        pointers[names.index("obj_arena")] = obj_arena
        self._order_slot = names.index("order")
        self._out_slot = names.index("losses")  # then lrs
        self._own = (self.losses.ctypes.data, self.lrs.ctypes.data)
        self._argv = (ctypes.c_void_p * len(names))(*pointers)
        self._argv_at = ctypes.addressof(self._argv)
        ctypes.c_int64.from_address(self._argv_slot).value = self._argv_at  # what the
        # argument-free entry reads
        self._out = self._own  # the addresses argv's losses and lrs hold now
        # A call's per-call work is a few stores and the ctypes call: the control words
        # written through a ctypes view of `ctl` (cheaper than numpy's item assignment),
        # the returned slices made once per n.
        self._ctl = (ctypes.c_int64 * len(CTL)).from_buffer(self.ctl)
        self._views: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._first_loss = ctypes.c_double.from_buffer(self.losses)  # `step`'s result
        self._batch = geometry.batch
        self._given: np.ndarray | None = None  # the order last given
        self._bound: np.ndarray | None = None  # and as bound (int64, contiguous)
        # The builtins' state (step_builtin.STATE): armed by `step`, disarmed by `run`.
        self._fallback = self.step  # the bound method whose address the state holds (a
        # cycle through self: the collector frees it)
        self._st = (ctypes.c_int64 * len(STATE))()
        self._st[STATE.index("argv")] = self._argv_at
        self._st[STATE.index("ctl")] = self.ctl.ctypes.data
        self._st[STATE.index("fallback")] = id(self._fallback)

    def run(self, n: int, t0: int, first: int, order: np.ndarray,
            into: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """n steps (1 ≤ n ≤ k) from t0 updates done, the batches from place `first` of
        `order` (int64: an epoch's order, or the places of the epochs the steps span,
        `Stream.places`; kept alive here while bound, rebound only when another array is
        given: the stream hands over the same ones call after call). The losses and learning
        rates go to `into` (the addresses of n f64s each, `History.reserve`'s), else to
        this step's own buffers; returns the buffers' first n (what `into` got, if given,
        is not there)."""
        if not 1 <= n <= self.k or first < 0 or first + n * self._batch > order.size:
            self._refuse(n, first, order)
        self._st[_ARMED] = 0  # the next `step()` has no step of its own to go on from
        if order is not self._given:
            self._bind_order(order)
        out = into or self._own
        if out != self._out:
            self._argv[self._out_slot], self._argv[self._out_slot + 1] = self._out = out
        ctl = self._ctl
        ctl[0] = n
        ctl[1] = t0
        ctl[2] = first
        self._bound_call()  # the step on self._argv (ARGV_GLOBAL)
        views = self._views.get(n)
        if views is None:
            views = self._views[n] = (self.losses[:n], self.lrs[:n])
        return views

    def start(self, t0: int, first: int, order: np.ndarray) -> None:
        """Make `step()`'s next step the one from t0 updates done, its batch from place
        `first` of `order` (as `run`'s)."""
        t0, first = operator.index(t0), operator.index(first)
        if first < 0 or first + self._batch > order.size:
            self._refuse(1, first, order)
        if order is not self._given:
            self._bind_order(order)
        if self._out is not self._own:
            self._argv[self._out_slot], self._argv[self._out_slot + 1] = self._out = self._own
        self._ctl[1], self._ctl[2] = t0, first
        self._st[_ARMED], self._st[_PLACES] = id(order), self._bound.size

    def step(self, *args) -> float:
        """`step(t0, first, order)`: one step, as `run(1, t0, first, order)`, its loss
        returned as a float; `step()`: the next one — t0 + 1, the order's next batch (its
        first after its last whole batch). The Python twin of `stepper()`'s builtin (its
        fallback: what the builtin does not take, it hands over here)."""
        if len(args) == 3:
            self.start(*args)
        elif args:
            raise TypeError(f"step() takes 0 or 3 arguments (t0, first, order), "
                            f"{len(args)} given")
        elif not self._st[_ARMED]:
            raise ValueError("step(): no step to go on from (step(t0, first, order) or "
                             "start first; a `run` since ends the sequence)")
        ctl = self._ctl
        ctl[0] = 1
        self._bound_call()
        ctl[1] += 1
        ctl[2] = ctl[2] + self._batch if ctl[2] + 2 * self._batch <= self._st[_PLACES] \
            else 0
        return self._first_loss.value

    def stepper(self) -> Callable[..., float]:
        """`step` as a builtin function (presk/train/step_builtin.py): the same calls and
        results, about 40 ns of Python a call instead of 400 — for a caller that steps one
        at a time (`presk train` calls `run`: its steps share one call)."""
        return builtin(self._py_entry, ctypes.addressof(self._st), self, "step",
                       "step(t0, first, order) -> loss; step() -> the next step's loss")

    def _refuse(self, n: int, first: int, order: np.ndarray) -> None:
        raise ValueError(f"{n} steps from place {first} of an order of {order.size} "
                         f"(batch {self._batch}, at most {self.k} steps a call)")

    def _bind_order(self, order: np.ndarray) -> None:
        """Point argv's order at `order` (a contiguous int64 copy when it is not one)."""
        self._bound = np.ascontiguousarray(order, np.int64)
        self._given = order
        self._argv[self._order_slot] = self._bound.ctypes.data


_ARMED, _PLACES = STATE.index("armed"), STATE.index("places")


def _rounded_arrays(objective, group) -> dict[str, np.ndarray]:
    """`param.j`/`grad.j`: the objective's own buffers of the group's j-th parameter."""
    params, grads = objective.rounded_buffers()
    out = {}
    for j, path in enumerate(group.paths):
        out[f"param.{j}"], out[f"grad.{j}"] = params[path].buffer, grads[path].buffer
    return out


def _rounded(objective, grp) -> tuple[tuple[int, int, str, str], ...] | None:
    """Geometry.rounded for an objective that has buffers of its own (f64, f32 or bf16
    each, C-contiguous, the parameter's size); None when one is of another type."""
    params, grads = objective.rounded_buffers()
    out = []
    for path in grp.paths:
        seg, p, g = grp.segments[path], params[path], grads[path]
        n = seg.stop - seg.start
        if {p.element, g.element} - set(OWN_TYPES) or p.buffer.size != n or g.buffer.size != n \
                or not (p.buffer.flags.c_contiguous and g.buffer.flags.c_contiguous):
            return None
        out.append((seg.start, n, p.element, g.element))
    return tuple(out)


def native_step(objective, optimizer, groups, stream, k: int, cache: bool = True,
                rounded: bool = False) -> NativeStep | None:
    """The step program for a trainer whose objective reads and writes the optimizer's one
    group of f64 parameters (`Trainer.laid_out`) — or, `rounded`, that has buffers of its
    own, f64, f32 or bf16, which the step rounds the parameters into and widens the gradient
    from, as `Trainer.one_step` does — whose batch buffers are f64 or f32 (the
    file's values widened or rounded into them) and whose loss is f64 or f32; None otherwise (the trainer then steps in Python, `one_step`)."""
    from .native_optim import NativeAdamW, NativeSGD
    if len(groups) != 1 or not isinstance(optimizer, (NativeAdamW, NativeSGD)):
        return None
    grp = groups[0]
    header = stream.header
    slots = objective.batch_slots
    shapes = [(stream.batch_size, *s) for s in header.shapes]
    result = next((b.element for b in objective.entry.sig.outputs if b.name == "result"),
                  None)
    if grp.p.dtype != np.float64 or grp.p.size == 0 or result not in STREAM_TYPES or \
            len(slots) != len(shapes) or any(s.element not in STREAM_TYPES or
                                             s.buffer.shape != tuple(sh)
                                             for s, sh in zip(slots, shapes)):
        return None
    if isinstance(optimizer, NativeAdamW):
        kind, form = "adamw", (optimizer.weight_decay != 0, abs(1 - optimizer.beta1) < 0.5)
    else:
        kind, form = "sgd", (optimizer.weight_decay != 0, optimizer.momentum != 0)
    tensors = tuple((math.prod(s), header.dtype, slot.element)
                    for s, slot in zip(header.shapes, slots))
    conversions = _rounded(objective, grp) if rounded else ()
    if conversions is None:
        return None
    geometry = Geometry(stream.batch_size, tensors, grp.p.size, kind, form,
                        optimizer.schedule.kind, result, objective_symbol(objective),
                        conversions, update_parts(grp.p.size))
    return NativeStep(geometry, k, objective, optimizer, grp, stream, cache)
