"""The optimizers' update as native code: one call a step per group of parameters.

`NativeAdamW` and `NativeSGD` are `AdamW` and `SGD` of presk/train/optim.py whose per-group
update — the element-wise part, over the parameters laid end to end — is a loop compiled
through the native backend (the std → llvm passes, LLVM O2, MCJIT, the on-disk cache)
instead of a dozen numpy calls. The loop performs, per element, exactly the operations
in exactly the order their docstrings specify, one IEEE rounding each (no fused
multiply-add: no fast-math flag reaches LLVM), so the bits are numpy's: the tests compare
both over many steps. The per-step scalars (learning rate, bias corrections) are still
computed in Python, rounded to the group's dtype, and handed over in a small buffer.

The module of a group is built directly in the standard dialects (not through
PSK-Kernel, whose kernels never write what they read): `presk_entry_<name>(argv, arena)`
with argv = (g, scalars, p, m, v) — the parameters and the moments are updated in place.
Its size is the group's, fixed: a group that changes size compiles again (cached). A
group of 2¹⁵ elements or more is cut into contiguous ranges run on the worker pool, one
per core (`update_parts`): an update reads and writes four arrays, so at the scaled
Tower's 264 448 parameters it is a memory-bound loop worth two cores.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, UnrealizedConversionCastOp, i32, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from ..conversion.kernel_to_std import PTR, Emitter
from ..kernel_abi.calling import BufferSig, EntrySig, entry_symbol
from ..dialects import kernel as K
from .optim import SGD, AdamW, _Group

_TYPES = {np.dtype(np.float64): "f64", np.dtype(np.float32): "f32"}
Update = Callable[["Emitter", dict[str, SSAValue], dict[str, SSAValue]], dict[str, SSAValue]]


def _element_type(name: str):
    from xdsl.dialects.builtin import f32, f64
    return f64 if name == "f64" else f32


SPLIT_ELEMENTS = 1 << 15
"""Elements from which a group's update runs split over the worker pool (as a nest of
that many iterations is, presk/conversion/realize_to_kernel/nests.py NEST_SPLIT_WORK)."""

ALIGN = 16
"""A part's first element is a multiple of this (64 bytes of f32): no two parts write
one cache line."""


def update_parts(n: int) -> int:
    """The parts a group of n elements updates in: the pool's workers (the machine's
    cores, or PRESK_THREADS) when n ≥ SPLIT_ELEMENTS and the pool can be had, else 1."""
    from ..conversion.realize_to_kernel import workers
    from ..runtime import pool
    if n < SPLIT_ELEMENTS or workers() < 2 or not pool.available():
        return 1
    return workers()


def _ranges(n: int, parts: int) -> list[tuple[int, int]]:
    """`parts` contiguous ranges covering [0, n), each start a multiple of ALIGN."""
    units = -(-n // ALIGN)
    bounds = [min(n, units * j // parts * ALIGN) for j in range(parts + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _range_function(symbol: str, t, names: list[str], n: int, scalars: list[str],
                    buffers: list[str], body: Update, lo: int, hi: int) -> func.FuncOp:
    """`void symbol(argv)`: the update of elements [lo, hi), argv = (g, scalars, p, …)."""
    block = Block(arg_types=[PTR])
    e = Emitter(Builder(InsertPoint.at_end(block)), InsertPoint.at_end(block))
    sizes = {"scalars": len(scalars)}
    views = {}
    for i, arg in enumerate(names):
        ptr = e(llvm.LoadOp(e(llvm.GEPOp(block.args[0], [i], PTR, inbounds=True)), PTR))
        buffer_type = K.BufferType.get(t, sizes.get(arg, n))
        views[arg] = e(UnrealizedConversionCastOp.get([ptr], [buffer_type]))
    s = {k: e.load(views["scalars"], e.index(j)) for j, k in enumerate(scalars)}

    def element(b: Emitter, k: SSAValue) -> None:
        i = b(arith.AddiOp(k, b.index(lo))) if lo else k
        x = {arg: b.load(views[arg], i) for arg in ("g", "p", *buffers)}
        for arg, value in body(b, x, s).items():
            b.store(value, views[arg], i)

    e.loop(hi - lo, element)
    e(func.ReturnOp())
    return func.FuncOp(symbol, ([PTR], []), Region(block), "private")


def range_functions(prefix: str, t, n: int, scalars: list[str], buffers: list[str],
                    body: Update, parts: int = 1) -> list[func.FuncOp]:
    """`void <prefix>_<j>(argv)`, argv = (g, scalars, p, *buffers): the update of the j-th
    of `parts` contiguous ranges of the n elements (`_ranges`; one range when parts = 1)."""
    names = ["g", "scalars", "p", *buffers]
    ranges = _ranges(n, parts) if parts > 1 else [(0, n)]
    return [_range_function(f"{prefix}_{j}", t, names, n, scalars, buffers, body, lo, hi)
            for j, (lo, hi) in enumerate(ranges)]


def launch(e: Emitter, fns: list[func.FuncOp], argv: SSAValue,
           array: SSAValue | None = None) -> None:
    """Call fns[0](argv), or, for several, `presk_pool_run(len(fns), [fns…], argv)`: the
    first on the caller's thread, the others on the pool's workers, back when all are
    done (as a split kernel's parts: presk/conversion/kernel_to_std/threads.py). `array`:
    room for the functions' addresses (`stack_array`), else made here."""
    from ..conversion.kernel_to_std.threads import POOL_RUN
    if len(fns) == 1:
        e(func.CallOp(fns[0].sym_name.data, [argv], []))
        return
    array = array or stack_array(e, len(fns), PTR)
    for j, f in enumerate(fns):
        e(llvm.StoreOp(e(llvm.AddressOfOp(f.sym_name.data, PTR)),
                       e(llvm.GEPOp(array, [j], PTR, inbounds=True))))
    e(llvm.CallOp(POOL_RUN, e(arith.ConstantOp(IntegerAttr(len(fns), i32))), array, argv))


def stack_array(e: Emitter, count: int, element) -> SSAValue:
    """An `alloca` of `count` elements (emit it in a function's entry block: one inside a
    loop would take more stack every iteration)."""
    return e(llvm.AllocaOp(e(arith.ConstantOp(IntegerAttr(count, i64))), element, alignment=8))


def build_update(name: str, ty: str, n: int, scalars: list[str], buffers: list[str],
                 body: Update, parts: int = 1) -> tuple[ModuleOp, list[EntrySig]]:
    """The llvm-dialect module of one in-place update over n elements of type `ty`:
    `presk_entry_<name>(argv, arena)`, argv = (g, scalars, p, *buffers). With `parts` > 1
    the elements are cut into that many contiguous ranges, run on the worker pool
    (`presk_pool_run`, as a split kernel's parts: presk/conversion/kernel_to_std/
    threads.py) — each element's operations the same, so the same bits."""
    from ..conversion.std_to_llvm.callees import declare_external_callees
    from ..runtime.compile import llvm_module_from_std
    t = _element_type(ty)
    fns = range_functions(f"presk_update_{name}", t, n, scalars, buffers, body, parts)
    block = Block(arg_types=[PTR, PTR])
    e = Emitter(Builder(InsertPoint.at_end(block)), InsertPoint.at_end(block))
    launch(e, fns, block.args[0])
    e(func.ReturnOp())
    module = ModuleOp([*fns, func.FuncOp(entry_symbol(name), ([PTR, PTR], []), Region(block))])
    declare_external_callees(module)
    sig = EntrySig(name, entry_symbol(name),
                   (BufferSig("g", ty, (n,)), BufferSig("scalars", ty, (len(scalars),))),
                   tuple(BufferSig(a, ty, (n,)) for a in ("p", *buffers)), 0)
    return llvm_module_from_std(module), [sig]


# ---- the element-wise steps, as the docstrings of optim.py order them ----

def _adamw_body(decay: bool, small_w1: bool, unit_c2s: bool = False) -> Update:
    """AdamW's element update (torch's order of operations). `unit_c2s`: for a caller that
    knows √(1 − β₂^t) is 1 (presk/train/native_step.py, once β₂ is spent), √v is not
    divided by it — x / 1 is x, the same bits, a division a vector fewer."""
    def body(e: Emitter, x: dict[str, SSAValue], s: dict[str, SSAValue]) -> dict[str, SSAValue]:
        p, g, m, v = x["p"], x["g"], x["exp_avg"], x["exp_avg_sq"]
        if decay:
            p = e(arith.MulfOp(p, s["decay"]))
        t = e(arith.SubfOp(g, m))
        if small_w1:  # lerp: m + w1·(g − m)
            m = e(arith.AddfOp(m, e(arith.MulfOp(t, s["w1"]))))
        else:  # lerp's other form: g − (g − m)·(1 − w1)
            m = e(arith.SubfOp(g, e(arith.MulfOp(t, s["one_minus_w1"]))))
        v = e(arith.MulfOp(v, s["beta2"]))
        v = e(arith.AddfOp(v, e(arith.MulfOp(e(arith.MulfOp(g, s["w2"])), g))))
        d = e(llvm.CallIntrinsicOp(f"llvm.sqrt.{K.type_name(v.type)}", [v], [v.type]))
        d = e(arith.AddfOp(d if unit_c2s else e(arith.DivfOp(d, s["c2s"])), s["eps"]))
        p = e(arith.AddfOp(p, e(arith.DivfOp(e(arith.MulfOp(m, s["neg_step"])), d))))
        return {"p": p, "exp_avg": m, "exp_avg_sq": v}
    return body


def _sgd_body(decay: bool, momentum: bool) -> Update:
    def body(e: Emitter, x: dict[str, SSAValue], s: dict[str, SSAValue]) -> dict[str, SSAValue]:
        p, d = x["p"], x["g"]
        out: dict[str, SSAValue] = {}
        if decay:
            d = e(arith.AddfOp(d, e(arith.MulfOp(p, s["wd"]))))
        if momentum:
            b = e(arith.MulfOp(x["momentum"], s["momentum"]))
            d = out["momentum"] = e(arith.AddfOp(b, e(arith.MulfOp(d, s["keep"]))))
        out["p"] = e(arith.AddfOp(p, e(arith.MulfOp(d, s["neg_lr"]))))
        return out
    return body


_SOURCE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
"""Part of the cache key: the update's code is this file's."""


class _NativeUpdate:
    """A group's update compiled once (per size, dtype and form) and bound to its arrays
    (the groups of the optimizer's current layout; a new layout binds again)."""

    def __init__(self) -> None:
        self._bound: dict[int, tuple[_Group, Callable[[], None], np.ndarray, list[str]]] = {}

    def run(self, opt, grp: _Group, s: dict[str, np.floating], form: str,
            scalars: list[str], body: Update) -> None:
        _, call, buf, order = self.bound(opt, grp, form, scalars, body)
        buf[...] = [s[k] for k in order]
        call()

    def bound(self, opt, grp: _Group, form: str, scalars: list[str], body: Update):
        """(group, call, scalar buffer, scalar order), compiled and bound on first use."""
        bound = self._bound.get(id(grp))
        if bound is None or bound[0] is not grp:
            live = {id(g) for g in opt._groups}
            self._bound = {k: b for k, b in self._bound.items() if k in live}
            bound = self._bound[id(grp)] = (grp, *self._bind(opt, grp, form, scalars, body))
        return bound

    @staticmethod
    def _bind(opt, grp: _Group, form: str, scalars: list[str], body: Update):
        from ..runtime import load_native
        from ..runtime.compile import lowering_version
        ty, n = _TYPES[grp.p.dtype], grp.p.size
        parts = update_parts(n)
        name = f"{type(opt).__name__.lower()}_{form}_{ty}_{n}_x{parts}"
        buffers = list(opt.BUFFERS)
        program = load_native(lambda: build_update(name, ty, n, scalars, buffers, body, parts),
                              f"{name} {scalars} {buffers} {_SOURCE}", lowering_version())
        scalar_buf = np.zeros(len(scalars), grp.p.dtype)
        entry = program.entry(name)
        call = entry.bind([grp.g, scalar_buf], [grp.p, *(grp.bufs[b] for b in buffers)])
        return call, scalar_buf, scalars


def _native_ok(grp: _Group) -> bool:
    return grp.p.dtype in _TYPES and grp.p.size > 0


class _Native(ABC):
    """What both native optimizers share: the update bound per group, `prepare` to
    compile before the first step (so that a timed loop times steps only)."""

    _native: _NativeUpdate

    def prepare(self, params) -> list[_Group]:
        """Lay out the parameters (`lay_out`) and compile the update for them, without
        stepping; the groups."""
        groups = self.lay_out(params)
        for grp in groups:
            if _native_ok(grp):
                self._native.bound(self, grp, *self._form())
        return groups

    @abstractmethod
    def _form(self) -> tuple[str, list[str], Update]:
        """(the form's name, the scalars in order, the element-wise update)."""


class NativeAdamW(_Native, AdamW):
    """AdamW whose update runs as native code (the same bits as AdamW's numpy one)."""

    SCALARS = ["decay", "w1", "one_minus_w1", "beta2", "w2", "c2s", "eps", "neg_step"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._native = _NativeUpdate()

    def _form(self) -> tuple[str, list[str], Update]:
        decay, small = self.weight_decay != 0, abs(1 - self.beta1) < 0.5
        return f"d{int(decay)}s{int(small)}", self.SCALARS, _adamw_body(decay, small)

    def _update(self, grp: _Group, s: dict[str, np.floating]) -> None:
        if not _native_ok(grp):
            return super()._update(grp, s)
        for name in self.BUFFERS:  # a fresh buffer is zeros, as allocated
            self._made(grp, name)
        s = dict(s, one_minus_w1=type(s["w1"])(1) - s["w1"])
        self._native.run(self, grp, s, *self._form())


class NativeSGD(_Native, SGD):
    """SGD whose update runs as native code (the same bits as SGD's numpy one). A first
    step of a momentum buffer (it copies the gradient) runs in numpy."""

    SCALARS = ["wd", "momentum", "keep", "neg_lr"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._native = _NativeUpdate()

    def _form(self) -> tuple[str, list[str], Update]:
        decay, momentum = self.weight_decay != 0, self.momentum != 0
        return f"d{int(decay)}m{int(momentum)}", self.SCALARS, _sgd_body(decay, momentum)

    def _update(self, grp: _Group, s: dict[str, np.floating]) -> None:
        if not _native_ok(grp) or (self.momentum != 0 and grp.fresh["momentum"]):
            return super()._update(grp, s)
        self._native.run(self, grp, s, *self._form())


def native_from_info(info, total_steps: int):
    """`optim.from_info`, its update native: the optimizer a `presk train` run steps."""
    from .optim import from_info
    opt = from_info(info, total_steps)
    cls = {AdamW: NativeAdamW, SGD: NativeSGD}[type(opt)]
    native = cls.__new__(cls)
    native.__dict__.update(opt.__dict__)
    native._native = _NativeUpdate()
    return native
