"""psk-differentiate: reverse-mode differentiation of PSK-Core.

For each function f a gradient reaches it makes, in PSK-Core:

    f.fwd(args…)               -> (y, r₁, …, rₖ)      the forward sweep and its residuals
    f.bwd((y, r₁, …, rₖ), dy)  -> (dargs…)            the reverse sweep
    f.vjp(args…, dy)           -> (dargs…)            fwd, then bwd
    f.value_vjp(args…, dy)     -> (y, dargs…)

`dargs` holds a cotangent for every differentiable argument (tensors, tuples of them,
parameter trees, in order); f64 and nat arguments have none. The residuals are what
crosses from the forward sweep to the reverse one:

- `--remat store`: every primal value the reverse sweep reads, a callee's residuals (its
  `g.fwd`'s result) and a fold's step results (`fold_fwd`) among them — and, for a unary
  rule dr · E whose E calls a math-library function (gelu's slope), E itself, which the
  forward sweep computes right after the op (`_ahead`);
- `--remat recompute`: f's arguments only; the reverse sweep first computes the forward
  again from them (a fold as a `fold_scan`, keeping its accumulators), and a callee's
  cotangents come from `g.vjp`, which does the same one level down.

Both compute the same operations on the same values, so their gradients have the same bits.
Cloned forward operations keep their sites; the operation that completes the cotangent of
a site carries `adjoint = [site]` and the name `d<name>`, which is how the sensitivities of
the precision analysis find ∂L/∂v. `psk_core.grad` is replaced by a call of `f.value_vjp`
with dy = 1. The rules, and the subgradients at kinks, are documented in docs/autodiff.md.

`all_values=True` (used only by the sensitivity analysis, presk.analysis.sensitivity) also
propagates cotangents to the values that depend on no differentiable argument (a `real` of
an f64, a constant, what only they feed), and keeps every marked cotangent even where
nothing reads it, so that ∂L/∂v exists as a marked op for every value of a differentiable
type that reaches the result. A cotangent that is the `.bwd`'s own argument dy (the
result's, and what passes it on unchanged: `add`'s operands) has no operation to mark: with
`all_values` the `.bwd` function carries those sites as `adjoint_dy = [...]`
(`adjoint_dy_negated` for −dy). The default output is unchanged by it.

One file, though long: it is one pass, and the sweeps (`_Sweep`, `_Reverse`) and the per-
op adjoint rules (`_d_row` walks a table row's derivatives, presk/ops/table.py) share the
builder, the residual plan and the cotangent accumulators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TupleType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from .. import ops, shapes
from ..dialects import core as C

REMATS = ("store", "recompute")


class DifferentiationError(Exception):
    """A function this pass cannot differentiate (one that takes a gradient itself)."""


def differentiable(t: Attribute) -> bool:
    if isinstance(t, (C.TensorAttr, C.ParamsAttr)):
        return True
    if isinstance(t, TupleType):
        return all(differentiable(e) for e in t.types.data)
    return False


def _site_number(site: str) -> int:
    tail = site.rsplit("/%", 1)[-1]
    return int(tail) if tail.isdigit() else -1


class _Builder:
    """Appends operations to a block, numbering new sites `<fn>/%n` after the source's."""

    def __init__(self, name: str, start: int, block: Block | None = None):
        self.name, self.n = name, start
        self.block = block if block is not None else Block()
        self.constants: dict[float, SSAValue] = {}

    def site(self) -> str:
        site = f"{self.name}/%{self.n}"
        self.n += 1
        return site

    def emit(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def const(self, value: float) -> SSAValue:
        """An ℝ[] constant, made once per function."""
        if value not in self.constants:
            self.constants[value] = self.emit(C.ConstantOp(value, site=self.site(),
                                                           result_type=C.TensorAttr.scalar()))
        return self.constants[value]

    def get(self, value: SSAValue, index: int, site: str | None = None,
            name: str | None = None) -> SSAValue:
        return self.emit(C.GetOp(value, index, site=site or self.site(), name=name))


def _first_free(func: C.FuncOp) -> int:
    numbers = [len(func.args)] + [_site_number(op.site.data) + 1 for op in func.body.block.ops
                                  if isinstance(op, C.CoreOp)]
    return max(numbers)


Signed = tuple[SSAValue, bool]
"""A cotangent contribution and whether it is negated: negations are carried, not computed,
until a constant absorbs them, a subtraction does, or the true value is needed. Negation is
exact in IEEE arithmetic, so this changes no bit of the result."""


@dataclass
class _Acc:
    """A cotangent being accumulated: whole contributions, and per field or tuple item."""

    parts: list[Signed] = field(default_factory=list)
    sub: dict[object, list[Signed]] = field(default_factory=dict)


class Differentiator:
    def __init__(self, module: ModuleOp, remat: str, all_values: bool = False):
        if remat not in REMATS:
            raise DifferentiationError(f"--remat is store or recompute, not {remat}")
        self.module, self.remat = module, remat
        # Cotangents of inactive values too, and marked ones kept though unread: for the
        # sensitivity analysis only.
        self.all_values = all_values
        self.funcs: dict[str, C.FuncOp] = {
            op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
        self.decls = {op.sym_name.data: op for op in module.ops
                      if isinstance(op, C.ModuleDeclOp)}
        # For each function, what its store-mode fwd hands its bwd, in order.
        self.residual_keys: dict[str, list[tuple[str, object]]] = {}

    # ---- what to make ----
    def run(self, entries: list[str]) -> None:
        for name in entries:
            if name not in self.funcs:
                raise DifferentiationError(f"no function `{name}` to differentiate")
            self.value_vjp(name)
            self.vjp(name)
        for func in list(self.funcs.values()):
            for op in list(func.body.block.ops):
                if isinstance(op, C.GradOp):
                    self._replace_grad(func, op)

    def _made(self, name: str) -> C.FuncOp | None:
        return self.funcs.get(name)

    def _add(self, func: C.FuncOp) -> C.FuncOp:
        self.module.body.block.add_op(func)
        self.funcs[func.sym_name.data] = func
        return func

    def fwd(self, name: str) -> C.FuncOp:
        if (made := self._made(name + ".fwd")) is not None:
            return made
        self._callees_first(name)
        return self._add(_Sweep(self, self.funcs[name]).make_fwd())

    def bwd(self, name: str) -> C.FuncOp:
        if (made := self._made(name + ".bwd")) is not None:
            return made
        fwd = self.fwd(name)
        return self._add(_Sweep(self, self.funcs[name]).make_bwd(fwd))

    def vjp(self, name: str) -> C.FuncOp:
        if (made := self._made(name + ".vjp")) is not None:
            return made
        return self._add(self._wrapper(name, with_value=False))

    def value_vjp(self, name: str) -> C.FuncOp:
        if (made := self._made(name + ".value_vjp")) is not None:
            return made
        return self._add(self._wrapper(name, with_value=True))

    def _callees_first(self, name: str) -> None:
        """A call's rules need the callee's functions: make them before the caller's."""
        for op in self.funcs[name].body.block.ops:
            if isinstance(op, C.GradOp):
                raise DifferentiationError(f"`{name}` takes a gradient itself: a second "
                                           "derivative is not supported")
            if isinstance(op, C.FoldOp) or (isinstance(op, C.CallOp) and
                                             differentiable(op.result.type)):
                (self.bwd if self.remat == "store" else self.vjp)(op.callee_name)

    def _wrapper(self, name: str, with_value: bool) -> C.FuncOp:
        src = self.funcs[name]
        fwd, bwd = self.fwd(name), self.bwd(name)
        cts = list(bwd.function_type.outputs.data[0].types.data)
        result = TupleType([src.result_type, *cts]) if with_value else TupleType(cts)
        suffix = ".value_vjp" if with_value else ".vjp"
        args = list(zip(src.arg_name_list, src.function_type.inputs.data))
        func = C.FuncOp(name + suffix, args + [(_cotangent_name(src), src.result_type)], result,
                        src.dim_names)
        b = _Builder(name + suffix, len(args) + 1, func.body.block)
        block_args = list(func.body.block.args)
        t = b.emit(C.CallOp(fwd, block_args[:-1], site=b.site(), dims=_own_dims(src)))
        grads = b.emit(C.CallOp(bwd, [t, block_args[-1]], site=b.site(), dims=_own_dims(src)))
        if with_value:
            y = b.get(t, 0)
            items = [y] + [b.get(grads, i) for i in range(len(cts))]
            out = b.emit(C.TupleOp(items, site=b.site()))
        else:
            out = grads
        b.block.add_op(C.ReturnOp(out, site=f"{name}{suffix}/%{b.n}"))
        return func

    def _replace_grad(self, func: C.FuncOp, op: C.GradOp) -> None:
        """grad f(args) → call f.value_vjp(args, 1), then its value and first cotangent."""
        name = op.callee_name
        vv = self.value_vjp(name)
        b = _Builder(func.sym_name.data, _first_free(func))
        one = b.const(1.0)
        t = b.emit(C.CallOp(vv, [*op.arguments, one], site=b.site(), dims=op.dim_env))
        grad = b.get(t, 1)
        result = b.emit(C.TupleOp([b.get(t, 0), grad], site=b.site())) if op.value else grad
        ops = list(b.block.ops)
        for new in ops:
            new.detach()
            func.body.block.insert_op_before(new, op)
        if op.source_name is not None:
            result.owner.attributes["name"] = op.source_name
        op.results[0].replace_all_uses_with(result)
        op.detach()
        op.erase()


def _cotangent_name(func: C.FuncOp) -> str:
    """The name of the result's cotangent: `d` and the result's name, `d%7` for loss."""
    ret = func.body.block.last_op
    assert isinstance(ret, C.ReturnOp)
    value = ret.value
    if isinstance(value.owner, C.CoreOp):
        return "d" + (_name(value.owner) or value.owner.site.data.rsplit("/", 1)[-1])
    return "d" + func.arg_name_list[value.index]


def _own_dims(func: C.FuncOp) -> dict:
    """A function's dims passed on to its own derivatives: each to itself."""
    return {d: d for d in func.dim_names}


class _Sweep:
    """The forward and reverse sweeps of one function."""

    def __init__(self, diff: Differentiator, src: C.FuncOp):
        self.diff, self.src = diff, src
        self.name = src.sym_name.data
        self.store = diff.remat == "store"
        self.ops = [op for op in src.body.block.ops if not isinstance(op, C.ReturnOp)]
        ret = src.body.block.last_op
        assert isinstance(ret, C.ReturnOp)
        self.result = ret.value

    # ---- the forward sweep ----
    def _forward(self, b: _Builder, args: list[SSAValue], how: str):
        """Clone the forward ops; returns (primal map, residual of each call/fold, y).

        `how` is "store" (calls and a fold's steps through the callee's fwd, keeping their
        residuals), "scan" (a fold as a scan, whose accumulators a recomputing reverse sweep
        reads) or "plain" (a clone)."""
        m: dict[SSAValue, SSAValue] = dict(zip(self.src.args, args))
        resid: dict[Operation, SSAValue] = {}
        for op in self.ops:
            if isinstance(op, C.CallOp) and how == "store" and differentiable(op.result.type):
                fwd = self.diff.fwd(op.callee_name)
                t = b.emit(C.CallOp(fwd, [m[a] for a in op.arguments], site=b.site(),
                                    dims=op.dim_env))
                m[op.result] = b.get(t, 0, site=op.site.data, name=_name(op))
                resid[op] = t
            elif isinstance(op, C.FoldOp) and how == "store":
                # Each step runs its fwd; their residuals are the fold's.
                fwd = self.diff.fwd(op.callee_name)
                steps = b.emit(C.FoldFwdOp(fwd, m[op.stacked], m[op.acc], site=b.site(),
                                           dims=op.dim_env))
                last = b.get(steps, len(steps.type.types.data) - 1)
                m[op.result] = b.get(last, 0, site=op.site.data, name=_name(op))
                resid[op] = steps
            elif isinstance(op, C.FoldOp) and how == "scan":
                scan = b.emit(C.FoldScanOp(op.callee_name, m[op.stacked], m[op.acc],
                                           site=b.site(), dims=op.dim_env))
                count = len(scan.type.types.data) - 1
                m[op.result] = b.get(scan, count, site=op.site.data, name=_name(op))
                resid[op] = scan
            else:
                b.block.add_op(op.clone(value_mapper=m))
        return m, resid, m[self.result]

    def make_fwd(self) -> C.FuncOp:
        src = self.src
        b = _Builder(self.name + ".fwd", _first_free(src))
        args = [b.block.insert_arg(a.type, i) for i, a in enumerate(src.args)]
        if self.store:
            m, resid, y = self._forward(b, args, "store")
            residuals = self._store_residuals(b, m, resid)
        else:
            _, _, y = self._forward(b, args, "plain")
            residuals = args
        if y.type != src.result_type:
            # The declaration may name an axis the body leaves unnamed: the caller reads
            # the value by the declared type, so the fwd hands it over as declared.
            y = b.emit(C.BroadcastOp(y, src.result_type, site=b.site()))
        out = b.emit(C.TupleOp([y, *residuals], site=b.site()))
        b.block.add_op(C.ReturnOp(out, site=f"{b.name}/%{b.n}"))
        return _func(b.name, src, list(src.arg_name_list), b.block, out.type)

    def _store_residuals(self, b: _Builder, m, resid) -> list[SSAValue]:
        """Run the reverse sweep once, on paper, to learn what it reads; a coefficient it
        reads is computed in the forward sweep (`b`) then."""
        needed: list[tuple[str, object]] = []
        ahead: dict[Operation, SSAValue] = {}
        probe = _Builder(self.name + ".probe", 0)
        dy = probe.block.insert_arg(self.result.type, 0)

        def coefficient(op: Operation) -> SSAValue:
            if op not in ahead:
                ahead[op] = _coefficient(b, m, op)
            return _need(needed, probe, ("coefficient", op), ahead[op].type)

        _Reverse(self, probe, lambda v: _need(needed, probe, ("value", v), v.type),
                 lambda op: _need(needed, probe, ("resid", op), resid[op].type),
                 coefficient).run(dy)
        self.diff.residual_keys[self.name] = needed
        made = {"value": m, "resid": resid, "coefficient": ahead}
        return [made[kind][key] for kind, key in needed]

    # ---- the reverse sweep ----
    def make_bwd(self, fwd: C.FuncOp) -> C.FuncOp:
        src = self.src
        res_type = fwd.function_type.outputs.data[0]
        b = _Builder(self.name + ".bwd", _first_free(fwd))
        res = b.block.insert_arg(res_type, 0)
        dy = b.block.insert_arg(src.result_type, 1)
        if self.store:
            needed = self.diff.residual_keys[self.name]
            unpacked = {(kind, key): b.get(res, i + 1, site=_residual_site(kind, key, b),
                                           name=_res_name(kind, key))
                        for i, (kind, key) in enumerate(needed)}
            primal = lambda v: unpacked[("value", v)]  # noqa: E731
            residual = lambda op: unpacked[("resid", op)]  # noqa: E731
            coefficient = lambda op: unpacked[("coefficient", op)]  # noqa: E731
        else:
            args = [b.get(res, i + 1, site=f"{self.name}/%{i}", name=n)
                    for i, n in enumerate(src.arg_name_list)]
            m, resid, _ = self._forward(b, args, "scan")
            primal = lambda v: m[v]  # noqa: E731
            residual = lambda op: resid[op]  # noqa: E731
            coefficient = None
        reverse = _Reverse(self, b, primal, residual, coefficient)
        grads = reverse.run(dy)
        out = b.emit(C.TupleOp(grads, site=b.site()))
        b.block.add_op(C.ReturnOp(out, site=f"{b.name}/%{b.n}"))
        _drop_unread(b.block, keep_marked=self.diff.all_values)
        func = _func(b.name, src, ["res", _cotangent_name(src)], b.block, out.type)
        if self.diff.all_values:
            for key, sites in reverse.dy_marks.items():
                func.attributes[key] = ArrayAttr([StringAttr(s) for s in sites])
        return func


def _drop_unread(block: Block, keep_marked: bool = False) -> None:
    """Erase what nothing reads: a recomputing reverse sweep clones the whole forward, and
    needs only part of it. (Every op here is pure; a call's callee is too.) With
    `keep_marked`, a cotangent marked as a site's adjoint stays, and what it reads."""
    for op in reversed(list(block.ops)):
        if keep_marked and ("adjoint" in op.attributes or "adjoint_negated" in op.attributes):
            continue
        if op.results and not any(r.uses for r in op.results):
            block.erase_op(op)


def _need(needed: list, b: _Builder, key: tuple, t: Attribute) -> SSAValue:
    """On the probe: a stand-in for a residual (a block argument), made when first read."""
    if key not in needed:
        needed.append(key)
        b.block.insert_arg(t, len(b.block.args))
    return b.block.args[1 + needed.index(key)]


def _name(op: Operation) -> str | None:
    return op.source_name.data if isinstance(op, C.CoreOp) and op.source_name else None


def _residual_site(kind: str, key, b: _Builder) -> str:
    if kind == "value" and isinstance(key, SSAValue):
        owner = key.owner
        if isinstance(owner, C.CoreOp):
            return owner.site.data
        func = key.block.parent_op()  # an argument keeps its number
        return f"{func.sym_name.data}/%{key.index}"
    return b.site()


def _res_name(kind: str, key) -> str | None:
    if kind != "value":
        return None
    if isinstance(key.owner, C.CoreOp):
        return _name(key.owner)
    return key.block.parent_op().arg_name_list[key.index]


def _func(name: str, src: C.FuncOp, arg_names: list[str], block: Block,
          result: Attribute) -> C.FuncOp:
    func = C.FuncOp(name, list(zip(arg_names, [a.type for a in block.args])), result,
                    src.dim_names)
    func.body.detach_block(0)
    func.body.add_block(block)
    return func


class _Reverse:
    """The reverse sweep: cotangents from the result back to the arguments."""

    def __init__(self, sweep: _Sweep, b: _Builder, primal: Callable[[SSAValue], SSAValue],
                 residual: Callable[[Operation], SSAValue],
                 coefficient: Callable[[Operation], SSAValue] | None = None):
        self.sweep, self.b, self.primal, self.residual = sweep, b, primal, residual
        # A store-mode sweep reads a rule dr · E's E from the forward (`_ahead`), when given.
        self.coefficient = coefficient
        self.acc: dict[SSAValue, _Acc] = {}
        self.active = _active_values(sweep.src, sweep.ops, sweep.diff.all_values)
        self.sign = False  # whether the cotangent the current rule reads is negated
        # The sites whose whole cotangent is dy itself (or −dy): `adjoint_dy[_negated]`.
        self.dy_marks: dict[str, list[str]] = {}

    def run(self, dy: SSAValue) -> list[SSAValue]:
        self.acc[self.sweep.result] = _Acc([(dy, False)])
        for op in reversed(self.sweep.ops):
            if not op.results or op.results[0] not in self.acc:
                continue
            r = op.results[0]
            dr, self.sign = self.total(r, _site_of(op),
                                       _name(op) or op.site.data.rsplit("/", 1)[-1])
            self.rule(op, dr)
        grads = []
        for i, arg in enumerate(self.sweep.src.args):
            if differentiable(arg.type):
                name = self.sweep.src.arg_name_list[i]
                value, neg = self.total(arg, f"{self.sweep.name}/%{i}", name)
                grads.append(self._negate(value) if neg else value)
        return grads

    # ---- accumulation ----
    def add(self, v: SSAValue, contribution: SSAValue, flip: bool = False) -> None:
        """Add to v's cotangent: the current cotangent's sign, flipped by `flip`."""
        if v in self.active:
            self.acc.setdefault(v, _Acc()).parts.append((contribution, self.sign != flip))

    def add_sub(self, v: SSAValue, key, contribution: SSAValue) -> None:
        if v in self.active:
            self.acc.setdefault(v, _Acc()).sub.setdefault(key, []).append(
                (contribution, self.sign))

    def true(self, dr: SSAValue) -> SSAValue:
        """The current cotangent with its sign applied (a callee needs the true value)."""
        if self.sign:
            dr, self.sign = self._negate(dr), False
        return dr

    def _negate(self, v: SSAValue) -> SSAValue:
        return self.b.emit(C.NegOp(v, site=self.b.site()))

    def total(self, v: SSAValue, site: str, name: str) -> Signed:
        """The whole cotangent of v, and its sign; its op is marked as the adjoint of v's
        site (`adjoint_negated` when it holds −∂L/∂v)."""
        acc = self.acc.pop(v, _Acc())
        value, neg = self._materialize(acc, v)
        owner = value.owner
        if isinstance(owner, C.CoreOp) and owner.parent_block() is self.b.block:
            key = "adjoint_negated" if neg else "adjoint"
            marks = [s.data for s in owner.attributes[key].data] \
                if key in owner.attributes else []
            owner.attributes[key] = ArrayAttr([StringAttr(s) for s in marks + [site]])
            if owner.source_name is None:
                owner.attributes["name"] = StringAttr(("-d" if neg else "d") + name)
        elif value in self.b.block.args:
            key = "adjoint_dy_negated" if neg else "adjoint_dy"
            self.dy_marks.setdefault(key, []).append(site)
        return value, neg

    def _materialize(self, acc: _Acc, v: SSAValue) -> Signed:
        parts = list(acc.parts)
        if acc.sub:
            parts.append((self._from_sub(acc.sub, v), False))
        if not parts:
            return self.b.emit(C.ZerosLikeOp(self.primal(v), site=self.b.site())), False
        return self.combine(parts, v.type)

    def _from_sub(self, sub: dict, v: SSAValue) -> SSAValue:
        t, b = v.type, self.b
        if isinstance(t, TupleType):
            items = []
            for i, et in enumerate(t.types.data):
                vals = sub.get(i)
                items.append(self.combine_true(vals, et) if vals else
                             b.emit(C.ZerosLikeOp(b.get(self.primal(v), i), site=b.site())))
            return b.emit(C.TupleOp(items, site=b.site()))
        assert isinstance(t, C.ParamsAttr)
        decl = self.sweep.diff.decls[t.module_name]
        fields = []
        for entry in decl.entries:
            f = entry.field.data
            vals = sub.get(f)
            if vals:
                fields.append(self.combine_true(vals, C.field_type(t, f, decl)))
            else:
                read = b.emit(C.FieldOp(self.primal(v), f, site=b.site(), decl=decl))
                fields.append(b.emit(C.ZerosLikeOp(read, site=b.site())))
        return b.emit(C.TreeOp(fields, t, site=b.site()))

    def combine_true(self, values: list[Signed], t: Attribute) -> SSAValue:
        value, neg = self.combine(values, t)
        return self._negate(value) if neg else value

    def combine(self, values: list[Signed], t: Attribute) -> Signed:
        """The sum of cotangents of one value: tensors add (a negated one subtracts), trees
        and tuples field-wise, from their true values."""
        b = self.b
        if isinstance(t, C.TensorAttr):
            plus = [v for v, neg in values if not neg]
            minus = [v for v, neg in values if neg]
            if not plus:
                return self._sum(minus, t), True
            total = self._sum(plus, t)
            for v in minus:
                total = b.emit(C.SubOp(total, v, site=b.site(), result_type=t))
            return total, False
        true = [self._negate(v) if neg else v for v, neg in values]
        if len(true) == 1:
            return true[0], False
        if isinstance(t, TupleType):
            items = [self.combine_true([(b.get(v, i), False) for v in true], et)
                     for i, et in enumerate(t.types.data)]
            return b.emit(C.TupleOp(items, site=b.site())), False
        assert isinstance(t, C.ParamsAttr)
        decl = self.sweep.diff.decls[t.module_name]
        fields = []
        for entry in decl.entries:
            f = entry.field.data
            reads = [(b.emit(C.FieldOp(v, f, site=b.site(), decl=decl)), False) for v in true]
            fields.append(self.combine_true(reads, C.field_type(t, f, decl)))
        return b.emit(C.TreeOp(fields, t, site=b.site())), False

    def _sum(self, values: list[SSAValue], t: Attribute) -> SSAValue:
        total = values[0]
        for v in values[1:]:
            total = self.b.emit(C.AddOp(total, v, site=self.b.site(), result_type=t))
        return total

    # ---- the rules ----
    def rule(self, op: Operation, dr: SSAValue) -> None:
        for cls, method in _RULES:
            if isinstance(op, cls):
                method(self, op, dr)
                return
        raise DifferentiationError(f"{op.site.data}: no derivative rule for {op.name}")

    def e(self, cls, *args, **kw) -> SSAValue:
        return self.b.emit(cls(*args, site=self.b.site(), **kw))

    def x(self, op, i: int = 0) -> SSAValue:
        return self.primal(op.operands[i])

    def y(self, op) -> SSAValue:
        return self.primal(op.results[0])

    def _unary(self, op: C.UnaryOp, dr: SSAValue) -> None:
        if isinstance(op, C.PowIOp):
            d = _d_powi(self, op, dr)
        else:
            f = ops.BY_NAME.get(getattr(op, "FUNCTION", ""))
            if f is None or f.derivative is None:  # constant in its operand: heaviside
                return
            if self.coefficient is not None and _ahead(f.derivative) is not None:
                # dr · E as the rule's walk multiplies it, E computed by the forward sweep
                d = _mul(self, dr, self.coefficient(op), op.results[0].type), \
                    f.derivative.flip
            else:
                d = _d_row(self, op, dr, f.derivative)
        if d is not None:
            value, flip = d
            self.add(op.operands[0], value, flip)

    def _back_to(self, operand: SSAValue, places: list[int], d: SSAValue,
                 result: shapes.TensorType) -> SSAValue:
        """A cotangent of an element-wise result, summed to one operand's shape."""
        t = operand.type
        assert isinstance(t, C.TensorAttr)
        full = len(places) == len(result.axes) and t.shape.prefix == result.prefix
        if full:
            return d
        return self.e(C.SumToOp, d, places, t.shape.prefix, t)

    def _binary(self, op: C.BinaryOp, dr: SSAValue) -> None:
        if isinstance(op, C.DotOp):
            return self._dot(op, dr)
        lhs, rhs = op.operands
        result, pa, pb = shapes.alignment(lhs.type.shape, rhs.type.shape)
        partials = ops.row(op.FUNCTION).partials  # type: ignore[attr-defined]
        assert partials is not None
        for operand, places, d in ((lhs, pa, partials[0]), (rhs, pb, partials[1])):
            if operand in self.active:  # only what a cotangent can reach is computed
                value, flip = _d_row(self, op, dr, d)
                self.add(operand, self._back_to(operand, places, value, result), flip)

    def _dot(self, op: C.DotOp, dr: SSAValue) -> None:
        a_t, b_t = op.lhs.type.shape, op.rhs.type.shape
        keep_a = len(a_t.axes) - 1
        if op.lhs in self.active:
            self.add(op.lhs, self.e(C.ContractOp, dr, self.x(op, 1),
                                    [keep_a + i for i in range(len(b_t.axes) - 1)],
                                    list(range(1, len(b_t.axes))), False,
                                    result_type=op.lhs.type))
        if op.rhs in self.active:
            self.add(op.rhs, self.e(C.ContractOp, self.x(op, 0), dr, list(range(keep_a)),
                                    list(range(keep_a)), a_t.prefix, result_type=op.rhs.type))

    def _reduce(self, op: C.ReduceOp, dr: SSAValue) -> None:
        xt = op.operand.type
        places = _kept_places(xt.shape, op.axis_name)
        kind = type(op)
        if kind in (C.SumOp, C.MeanOp):
            self.add(op.operand, self.e(C.SpreadOp, dr, self.x(op), places, mean=kind is C.MeanOp))
            return
        x, y = self.x(op), self.y(op)
        ys = self.e(C.SpreadOp, y, x, places)
        if kind is C.LogSumExpOp:
            soft = self.e(C.ExpOp, self.e(C.SubOp, x, ys, result_type=xt))
            self.add(op.operand, self.e(C.MulOp, self.e(C.SpreadOp, dr, x, places), soft,
                                        result_type=xt))
            return
        # max and min: the cotangent is split evenly among the values that attain it.
        gap = self.e(C.SubOp, ys, x, result_type=xt) if kind is C.MaxOp else \
            self.e(C.SubOp, x, ys, result_type=xt)
        below = self.e(C.HeavisideOp, gap, 0.0)
        attains = self.e(C.SubOp, self.b.const(1.0), below, result_type=xt)
        count = self.e(C.SumOp, attains, op.axis_name)
        share = self.e(C.DivOp, dr, count, result_type=dr.type)
        self.add(op.operand, self.e(C.MulOp, self.e(C.SpreadOp, share, x, places), attains,
                                    result_type=xt))

    def _softmax(self, op: C.SoftmaxOp, dr: SSAValue) -> None:
        xt, y = op.operand.type, self.y(op)
        axis = op.axis.data
        p = self.e(C.MulOp, dr, y, result_type=xt)
        s = self.e(C.SumOp, p, axis)
        back = self.e(C.SpreadOp, s, y, _kept_places(xt.shape, axis))
        self.add(op.operand, self.e(C.MulOp, y, self.e(C.SubOp, dr, back, result_type=xt),
                                    result_type=xt))

    def _broadcast(self, op: C.BroadcastOp, dr: SSAValue) -> None:
        source, target = op.operand.type.shape, op.result.type.shape
        _, places, _ = shapes.alignment(source, target)
        self.add(op.operand, self._back_to(op.operand, places, dr, target))

    def _tuple(self, op: C.TupleOp, dr: SSAValue) -> None:
        dr = self.true(dr)
        for i, element in enumerate(op.elements):
            if differentiable(element.type):
                self.add(element, self.b.get(dr, i))

    def _get(self, op: C.GetOp, dr: SSAValue) -> None:
        self.add_sub(op.operand, op.index.value.data, dr)

    def _field(self, op: C.FieldOp, dr: SSAValue) -> None:
        self.add_sub(op.operand, op.field.data, dr)

    def _call(self, op: C.CallOp, dr: SSAValue) -> None:
        dr = self.true(dr)
        diff = self.sweep.diff
        if self.sweep.store:
            bwd = diff.bwd(op.callee_name)
            grads = self.e(C.CallOp, bwd, [self.residual(op), dr], dims=op.dim_env)
        else:
            vjp = diff.vjp(op.callee_name)
            args = [self.primal(a) for a in op.arguments]
            grads = self.e(C.CallOp, vjp, [*args, dr], dims=op.dim_env)
        i = 0
        for a in op.arguments:
            if differentiable(a.type):
                self.add(a, self.b.get(grads, i))
                i += 1

    def _fold(self, op: C.FoldOp, dr: SSAValue) -> None:
        dr = self.true(dr)
        diff = self.sweep.diff
        if self.sweep.store:
            grads = self.e(C.FoldBwdOp, diff.bwd(op.callee_name).sym_name.data,
                           self.primal(op.stacked), self.residual(op), dr, dims=op.dim_env)
        else:
            grads = self.e(C.FoldVjpOp, diff.vjp(op.callee_name).sym_name.data,
                           self.primal(op.stacked), self.residual(op), dr, dims=op.dim_env)
        self.add(op.stacked, self.b.get(grads, 0))
        self.add(op.acc, self.b.get(grads, 1))

    def _nothing(self, op: Operation, dr: SSAValue) -> None:
        """Constants, real (of an f64), zeros: no differentiable operand."""


def _active_values(src: C.FuncOp, ops: list[Operation],
                   all_values: bool = False) -> set[SSAValue]:
    """The values a cotangent can reach: those that depend on a differentiable argument.
    A constant, an f64's `real`, and what only they feed get none, unless `all_values`:
    then every value of a differentiable type does."""
    active = {a for a in src.args if differentiable(a.type)}
    for op in ops:
        if op.results and differentiable(op.results[0].type) and \
                (all_values or any(o in active for o in op.operands)):
            active.add(op.results[0])
    return active


def _site_of(op: Operation) -> str:
    return op.site.data


def _kept_places(t: shapes.TensorType, axis: str | None) -> list[int]:
    """Where the axes a reduction keeps stand in its operand."""
    if axis is None:
        return []
    k = t.index_of(axis)
    return [i for i in range(len(t.axes)) if i != k]


# ---- element-wise derivatives: each returns the operand's cotangent (dr times f') and
# whether it flips the cotangent's sign; a constant factor takes the current sign instead,
# which leaves the contribution unsigned (flip = r.sign) ----

def _mul(r: _Reverse, a: SSAValue, b: SSAValue, t: Attribute) -> SSAValue:
    return r.e(C.MulOp, a, b, result_type=t)


def _signed(r: _Reverse, c: float) -> SSAValue:
    """A constant factor that absorbs the current cotangent's sign."""
    return r.b.const(-c if r.sign else c)


_OPERAND = {"x": 0, "a": 0, "b": 1}  # the variables of a rule that name an operand


def _d_row(r: _Reverse, op: Operation, dr: SSAValue, d: ops.Derivative):
    """A table row's derivative rule (presk/ops), as Core ops in the rule's order of
    operations (an op's computed operands before its constants), at the result's type;
    an op of one operand of `op` and constants keeps that operand's type (pow's b − 1)."""
    t = op.results[0].type
    operands: set[SSAValue] = set()
    constants: set[SSAValue] = set()

    def var(name: str) -> SSAValue:
        if name == "y":
            return r.y(op)
        value = r.x(op, _OPERAND[name])
        operands.add(value)
        return value

    def const(k: ops.Const) -> SSAValue:
        value = _signed(r, k.value) if k.signed else r.b.const(k.value)
        constants.add(value)
        return value

    def apply(fn: str, args: list[SSAValue]) -> SSAValue:
        cls = C.FUNCTION_OPS[fn]
        if len(args) == 1:
            return r.e(cls, *args)
        computed = [a for a in args if a not in constants]
        alone = len(computed) == 1 and computed[0] in operands
        return r.e(cls, *args, result_type=computed[0].type if alone else t)

    walker = ops.Walker[SSAValue](
        var=var, const=const, apply=apply, powi=lambda v, n: r.e(C.PowIOp, v, n),
        heaviside=lambda v, h: r.e(C.HeavisideOp, v, h), constants_last=True)
    env = {"dr": dr} | {name: var(name) for name in d.reads}
    value = walker.walk(d.expr, env)
    # a signed constant took the cotangent's sign: relative to it, the value flips with it
    return value, d.flip != (r.sign and ops.has_signed(d.expr))


def _ahead(d: ops.Derivative) -> ops.Expr | None:
    """E of a unary rule dr · E that the forward sweep computes (store mode): E calls a
    math-library function (erf, exp, cos: a long chain of dependent operations) and reads
    only the operand and the result. Computed in the reverse sweep, E lies on its chain
    behind the cotangent it multiplies; computed where the forward has its operand, it
    runs beside the forward's own chain, and is stored instead of the operand (which the
    sweep then needs no more, unless another rule reads it). The same operations on the
    same values: the same bits."""
    e = d.expr
    if not (isinstance(e, ops.Apply) and e.fn == "mul" and e.args[0] is ops.DR) or d.reads:
        return None
    factor = e.args[1]
    if "dr" in ops.variables_of(factor) or ops.has_signed(factor):
        return None
    return factor if any(ops.calls_library(fn) for fn in ops.functions_of(factor)) else None


class _Ahead:
    """What `_d_row` reads of a `_Reverse`, over the forward sweep: the primal values are
    the forward's own, and there is no cotangent (so no pending sign)."""

    sign = False

    def __init__(self, b: _Builder, m: dict[SSAValue, SSAValue]):
        self.b, self.m = b, m

    def e(self, cls, *args, **kw) -> SSAValue:
        return self.b.emit(cls(*args, site=self.b.site(), **kw))

    def x(self, op, i: int = 0) -> SSAValue:
        return self.m[op.operands[i]]

    def y(self, op) -> SSAValue:
        return self.m[op.results[0]]


def _coefficient(b: _Builder, m: dict[SSAValue, SSAValue], op: Operation) -> SSAValue:
    """`op`'s coefficient E (`_ahead`), computed in the forward sweep `b` right after op's
    clone, in the rule's order of operations; each of its ops names `op`'s site as
    `coefficient` (reverse_sweep.reverse_sites offers them to the solver as the reverse
    sweep's)."""
    here = _Builder(b.name, b.n)  # its own constants: each coefficient has its own place
    rule = ops.row(op.FUNCTION).derivative  # type: ignore[attr-defined]
    value, _ = _d_row(_Ahead(here, m), op, None, ops.Derivative(_ahead(rule)))
    b.n = here.n
    anchor = m[op.results[0]].owner
    for new in list(here.block.ops):
        new.detach()
        new.attributes["coefficient"] = op.site  # type: ignore[attr-defined]
        anchor.parent_block().insert_op_after(new, anchor)
        anchor = new
    return value


def _d_powi(r, op, dr):
    n, t = op.n.value.data, op.result.type
    if n == 0:
        return None
    if n == 1:
        return dr, False
    base = r.x(op) if n == 2 else r.e(C.PowIOp, r.x(op), n - 1)
    return _mul(r, dr, _mul(r, base, _signed(r, float(n)), t), t), r.sign


_RULES: list[tuple[type | tuple[type, ...], Callable]] = [
    (C.SoftmaxOp, _Reverse._softmax),
    (C.UnaryOp, _Reverse._unary),
    (C.BinaryOp, _Reverse._binary),
    (C.ReduceOp, _Reverse._reduce),
    (C.BroadcastOp, _Reverse._broadcast),
    (C.TupleOp, _Reverse._tuple),
    (C.GetOp, _Reverse._get),
    (C.FieldOp, _Reverse._field),
    (C.CallOp, _Reverse._call),
    (C.FoldOp, _Reverse._fold),
    ((C.ConstantOp, C.RealOp, C.ZerosLikeOp), _Reverse._nothing),
]


@dataclass(frozen=True)
class DifferentiatePass(ModulePass):
    """psk-differentiate{remat=store entries=loss}: replace every grad, and differentiate
    the `entries` (comma-separated) too. `all_values=true`: cotangents for the values that
    depend on no differentiable argument as well, every marked one kept (the sensitivity
    analysis's sweep; never part of a compiled program)."""

    name = "psk-differentiate"

    remat: str = "store"
    entries: str = ""
    all_values: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        names = [n for n in self.entries.split(",") if n]
        Differentiator(op, self.remat, self.all_values).run(names)


