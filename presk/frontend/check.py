"""Type-check a function's body: shapes, names, calls, and its regularity in each argument.

Each expression yields its type and its dependencies: for every argument of the function
it depends on, the regularity class of the path from that argument (C∞ unless a C⁰
builtin such as relu lies on it). Names and calls are resolved in place (`ref`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .. import ops, shapes
from ..limits import MAX_EXPONENT
from ..shapes import SCALAR, ShapeError, TensorType
from . import ast as A
from .diagnostics import Diagnostic, did_you_mean, error
from .program import (
    C0, C_INF, DISCONTINUOUS, BuiltinRef, GradRef, ConstRef, FieldRef, FnInfo, FnRef, FoldRef, LocalRef, ParamRef,
    UseInfo, UseRef,
)
from .types import F64, NAT, ParamsT, ScalarT, TupleT, Type, substitute

if TYPE_CHECKING:
    from .elaborate import Elaborator

Deps = dict[str, int]

UNARY = set(ops.builtins(arity=1))  # the element-wise functions a program calls by name
REDUCTIONS = {"sum", "mean", "max", "min", "logsumexp"}
BUILTINS = UNARY | REDUCTIONS | {"softmax", "real"}
GRADIENTS = ("grad", "value_and_grad")
# continuous, not differentiable everywhere: C⁰ (`max`/`min` name the element-wise
# functions and the reductions, both kinked)
KINKED = {name for name, f in ops.builtins().items() if f.regularity == ops.C0}


class _Literal:
    """The type of a numeric literal until its context says what it is."""

    def __str__(self) -> str:
        return "a number"


LITERAL = _Literal()


@dataclass
class _Local:
    type: Type
    deps: Deps
    span: A.Span
    is_let: bool
    used: bool = False


def _cap(deps: Deps, level: int) -> Deps:
    return {k: min(v, level) for k, v in deps.items()}


def _join(*all_deps: Deps) -> Deps:
    out: Deps = {}
    for deps in all_deps:
        for k, v in deps.items():
            out[k] = min(out.get(k, v), v)
    return out


def _kind(t: Type | _Literal) -> str:
    if isinstance(t, TensorType):
        return "a tensor " + str(t)
    if isinstance(t, _Literal):
        return "a number"
    return f"{t}"


class FnChecker:
    def __init__(self, el: "Elaborator", fn: FnInfo):
        self.el, self.fn = el, fn
        self.module = fn.module
        self.scope: dict[str, _Local] = {}
        self.warnings: list[Diagnostic] = []

    # ---- the function ----
    def run(self) -> None:
        fn = self.fn
        for p in fn.params:
            self.scope[p.name] = _Local(p.type, {p.name: C_INF}, p.span, False, True)
        for let in fn.decl.lets:
            self._let(let)
        t, deps = self.value(fn.decl.body, fn.result)
        self._check_result(t)
        fn.regularity = [deps.get(p.name, C_INF) for p in fn.params]
        for name, local in self.scope.items():
            if local.is_let and not local.used:
                self.warnings.append(Diagnostic("W0001", f"`{name}` is never used", local.span,
                                                "remove the let, or use it"))

    def _let(self, let: A.Let) -> None:
        t, deps = self.value(let.expr)
        if let.is_tuple:
            if not isinstance(t, TupleT) or len(t.items) != len(let.names):
                have = f"a tuple of {len(t.items)}" if isinstance(t, TupleT) else _kind(t)
                raise error("E0406", f"{len(let.names)} names bound to {have}", let.span)
            types = list(t.items)
        else:
            types = [t]
        let.types = types
        for name, span, ty in zip(let.names, let.name_spans, types):
            old = self.scope.get(name)
            if old is not None and old.is_let and not old.used:
                self.warnings.append(Diagnostic("W0001", f"`{name}` is never used", old.span,
                                                "remove the let, or use it"))
            self.scope[name] = _Local(ty, deps, span, True)

    def _check_result(self, t: Type) -> None:
        declared = self.fn.result
        body = self.fn.decl.body
        if not _fits(t, declared):
            raise error("E0403", f"`{self.fn.name}` computes {t} but is declared to return "
                        f"{declared}", body.span)

    # ---- expressions ----
    def value(self, e: A.Expr, hint: Type | None = None) -> tuple[Type, Deps]:
        """An expression's type; a literal takes the kind of `hint` (else ℝ[])."""
        t, deps = self.expr(e)
        if isinstance(t, _Literal):
            t = _literal_type(e, hint)
        return t, deps

    def expr(self, e: A.Expr) -> tuple[Type | _Literal, Deps]:
        method: Callable = getattr(self, "_" + type(e).__name__)
        t, deps = method(e)
        if isinstance(t, TensorType):
            names = t.names()
            twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
            if twice is not None:  # an unnamed axis took the name of the axis it met
                raise error("E0401", f"the result, {t}, would have the axis `{twice}` twice",
                            e.span, "name the axes apart")
        e.ty = t
        return t, deps

    def _Number(self, e: A.Number):
        if not math.isfinite(e.value):
            raise error("E0605", "the number is out of the range of an f64", e.span)
        return LITERAL, {}

    def _TupleExpr(self, e: A.TupleExpr):
        items = [self.value(i) for i in e.items]
        return TupleT(tuple(t for t, _ in items)), _join(*(d for _, d in items))

    def _Neg(self, e: A.Neg):
        t, deps = self.expr(e.operand)
        if isinstance(t, (TensorType, _Literal)) or t == F64:
            return t, deps
        raise error("E0402", f"cannot negate {_kind(t)}", e.span)

    def _Name(self, e: A.Name):
        head, rest = e.path[0], e.path[1:]
        local = self.scope.get(head)
        if local is not None:
            local.used = True
            if rest:
                return self._fields(e, local.type, head, rest), local.deps
            e.ref = LocalRef(head)
            return local.type, local.deps
        member = self.module.member(head) if self.module else None
        if rest and isinstance(member, UseInfo):
            raise error("E0204", f"unknown name `{e.dotted}`", e.span,
                        f"a sub-module's fields are read through θ: `θ.{e.dotted}`")
        if rest and member is not None:
            raise error("E0206", f"`{head}` is {_kind(member.type)}, which has no field "
                        f"`{rest[0]}`", e.span)
        if rest:
            raise error("E0204", f"unknown name `{e.dotted}`", e.span,
                        did_you_mean(head, self.scope))
        theta = {"θ": C_INF} if self.module else {}
        if member is not None and hasattr(member, "init"):
            e.ref = ParamRef(member)  # type: ignore[arg-type]
            return member.type, theta  # type: ignore[union-attr]
        if member is not None:
            e.ref = UseRef(member)  # type: ignore[arg-type]
            return member.target, theta  # type: ignore[union-attr]
        const = self.el.lookup_const(self.fn.file, head)
        if const is not None:
            e.ref = ConstRef(const)
            return (NAT if const.type_name == "nat" else F64), {}
        raise error("E0204", f"unknown name `{head}`", e.span,
                    did_you_mean(head, list(self.scope) + self._member_names()))

    def _member_names(self) -> list[str]:
        return [m.name for m in (*self.module.params, *self.module.uses)] if self.module else []

    def _fields(self, e: A.Name, t: Type, base: str, fields: list[str]) -> Type:
        for f in fields:
            if not isinstance(t, ParamsT):
                raise error("E0206", f"`{base}` is {_kind(t)}, which has no field `{f}`", e.span)
            t = self.el.field_type(t, f, e.span)
        e.ref = FieldRef(base, fields)
        return t

    def _Binary(self, e: A.Binary):
        if e.op == "pow":
            return self._pow(e)
        lt, ld = self.expr(e.lhs)
        rt, rd = self.expr(e.rhs)
        lt, rt = self._settle(e.lhs, lt, rt), self._settle(e.rhs, rt, lt)
        deps = _join(ld, rd)
        if isinstance(lt, TensorType) and isinstance(rt, TensorType):
            if e.op == "mod":
                raise error("E0402", "`%` applies to naturals, not tensors", e.span)
            try:
                t = shapes.contract(lt, rt) if e.op == "dot" else shapes.broadcast(lt, rt)
            except ShapeError as exc:
                raise error("E0401", str(exc), e.span) from None
            return t, deps
        if isinstance(lt, ScalarT) and lt == rt and e.op != "dot":
            if e.op == "mod" and lt != NAT:
                raise error("E0402", "`%` applies to naturals", e.span)
            if deps:
                # Hyperparameters are fixed per call; PSK-Core computes only in ℝ.
                operand = next((x.dotted for x in (e.lhs, e.rhs) if isinstance(x, A.Name)),
                               "…")
                raise error("E0402", f"`{_OPS[e.op]}` on a hyperparameter argument: "
                            "arithmetic on f64 and nat is static only", e.span,
                            None if e.op == "mod" else
                            f"compute in ℝ: real({operand}) {_OPS[e.op]} …")
            return (F64 if e.op == "div" else lt), deps
        hint = "convert a hyperparameter with real(…)" if F64 in (lt, rt) or NAT in (lt, rt) else None
        raise error("E0402", f"`{_OPS[e.op]}` cannot combine {_kind(lt)} and {_kind(rt)}",
                    e.span, hint)

    def _settle(self, e: A.Expr, t, other) -> Type:
        """A literal operand takes the kind of the other operand."""
        if not isinstance(t, _Literal):
            return t
        t = _literal_type(e, other if not isinstance(other, _Literal) else None)
        e.ty = t
        return t

    def _pow(self, e: A.Binary):
        bt, bd = self.expr(e.lhs)
        exponent = self._natural(e.rhs)
        if exponent is not None:
            bt = self._settle(e.lhs, bt, None)
            if not isinstance(bt, TensorType) and bt != F64:
                raise error("E0408", f"cannot raise {_kind(bt)} to a power", e.span)
            e.rhs.ty = NAT
            return bt, bd
        et, ed = self.expr(e.rhs)
        bt, et = self._settle(e.lhs, bt, et), self._settle(e.rhs, et, bt)
        if isinstance(bt, TensorType) and isinstance(et, TensorType):
            try:
                return shapes.broadcast(bt, et), _join(bd, ed)
            except ShapeError as exc:
                raise error("E0401", str(exc), e.span) from None
        if bt == F64 and et == F64:
            return F64, _join(bd, ed)
        raise error("E0408", f"cannot raise {_kind(bt)} to the power {_kind(et)}", e.span,
                    "a tensor's exponent is a natural literal, a nat const or a tensor")

    def _natural(self, e: A.Expr) -> int | None:
        if isinstance(e, A.Number) and e.is_natural:
            if len(e.text) > 9:
                raise error("E0408", "the exponent is too large", e.span)
            return int(e.text)
        if isinstance(e, A.Name) and len(e.path) == 1 and e.path[0] not in self.scope:
            const = self.el.lookup_const(self.fn.file, e.path[0])
            if const is not None and const.type_name == "nat":
                if int(const.value) > MAX_EXPONENT:
                    raise error("E0408", f"the exponent `{e.path[0]}` is too large (at most "
                                f"{MAX_EXPONENT})", e.span)
                e.ref = ConstRef(const)
                return int(const.value)
        return None

    # ---- calls ----
    def _Call(self, e: A.Call):
        path = e.callee.path
        if len(path) == 1 and path[0] in GRADIENTS and path[0] not in self.scope:
            raise error("E0410", f"`{path[0]}(f)` is a function: apply it to arguments, "
                        f"`{path[0]}(f)(θ, batch)`", e.span)
        if len(path) == 1 and path[0] in BUILTINS and path[0] not in self.scope:
            return self._builtin(e, path[0])
        target = self.el.resolve_callee(self, e)
        if isinstance(target, FoldRef):
            return self._fold(e, target)
        return self._call(e, target)

    def _builtin(self, e: A.Call, name: str):
        axes = [a for a in e.args if a.axis is not None]
        kws = [a for a in e.args if a.keyword is not None]
        pos = [a for a in e.args if a.expr is not None and a.keyword is None]
        if kws:
            raise error("E0405", f"`{name}` takes no keyword argument", kws[0].span)
        if len(axes) > 1 or (axes and name not in REDUCTIONS | {"softmax"}):
            bad = axes[1] if len(axes) > 1 else axes[0]
            raise error("E0405", f"`{name}` takes no `axis` here", bad.span)
        if e.args and e.args[0].axis is None and axes:
            raise error("E0405", "`axis NAME` comes first", axes[0].span)
        axis = axes[0].axis if axes else None
        if name == "softmax" and axis is None:
            raise error("E0405", "`softmax` normalizes over one axis: `softmax(axis NAME, x)`",
                        e.span)
        if name in ("max", "min") and len(pos) == 2 and not axes:
            return self._elementwise2(e, name, pos)
        if len(pos) != 1:
            raise error("E0405", f"`{name}` takes 1 argument, given {len(pos)}", e.span)
        arg = pos[0].expr
        assert arg is not None
        if name == "real":
            t, deps = self.value(arg, F64)
            if t not in (F64, NAT):
                raise error("E0407", f"`real` converts an f64 or a nat, not {_kind(t)}", arg.span)
            e.ref = BuiltinRef(name, None, [arg])
            return SCALAR, deps
        t, deps = self.value(arg, SCALAR)
        if not isinstance(t, TensorType):
            raise error("E0407", f"`{name}` applies to a tensor, not {_kind(t)}", arg.span,
                        "convert a hyperparameter with real(…)" if t in (F64, NAT) else None)
        e.ref = BuiltinRef(name, axis, [arg])
        if name in KINKED:
            deps = _cap(deps, C0)
            self.fn.kinks.append((name, e.callee.span))
        if name in REDUCTIONS:
            try:
                return shapes.reduce(t, axis), deps
            except ShapeError as exc:
                raise error("E0404", str(exc), axes[0].span,
                            f"its axes are named: {', '.join(t.names()) or 'none'}") from None
        if axis is not None and t.index_of(axis) is None:
            raise error("E0404", f"{t} has no axis `{axis}`", axes[0].span,
                        f"its axes are named: {', '.join(t.names()) or 'none'}")
        return t, deps

    def _elementwise2(self, e: A.Call, name: str, pos: list[A.Arg]):
        (lt, ld), (rt, rd) = self.expr(pos[0].expr), self.expr(pos[1].expr)  # type: ignore[arg-type]
        lt, rt = self._settle(pos[0].expr, lt, rt), self._settle(pos[1].expr, rt, lt)  # type: ignore[arg-type]
        if not (isinstance(lt, TensorType) and isinstance(rt, TensorType)):
            raise error("E0407", f"`{name}` of two values takes tensors, not {_kind(lt)} and "
                        f"{_kind(rt)}", e.span)
        try:
            t = shapes.broadcast(lt, rt)
        except ShapeError as exc:
            raise error("E0401", str(exc), e.span) from None
        e.ref = BuiltinRef(name, None, [pos[0].expr, pos[1].expr])  # type: ignore[list-item]
        self.fn.kinks.append((name, e.callee.span))
        return t, _cap(_join(ld, rd), C0)

    def _Apply(self, e: A.Apply):
        """`grad(f)(args)`: f's gradient in its first argument; with its value, a pair."""
        head = e.func.callee.path
        kind = head[0] if len(head) == 1 and head[0] not in self.scope else None
        if kind not in GRADIENTS:
            raise error("E0410", "only `grad(f)` and `value_and_grad(f)` are applied to "
                        "arguments", e.func.span)
        only = e.func.args[0] if len(e.func.args) == 1 else None
        target = only.expr if only is not None and only.keyword is None else None
        if not isinstance(target, A.Name):
            raise error("E0410", f"`{kind}` takes one function by name: `{kind}(loss)`",
                        e.func.span)
        name = target.dotted
        if name in BUILTINS and name not in self.scope:
            raise error("E0410", f"`{kind}` takes a function of the program, not the builtin "
                        f"`{name}`", target.span)
        call = A.Call(e.span, callee=target, args=e.args)
        ref = self.el.resolve_callee(self, call)
        if isinstance(ref, FoldRef):
            raise error("E0410", f"`{kind}` of a stack's fold: take the gradient of the function "
                        "that applies it", target.span)
        t, deps = self._call(call, ref)
        if t != SCALAR:
            raise error("E0410", f"`{ref.fn.name}` returns {t}; a gradient is taken of a "
                        "function returning ℝ[]", target.span)
        first = ref.args[0] if ref.args else None
        wrt = first.ty if isinstance(first, A.Expr) else None
        if not isinstance(wrt, (TensorType, ParamsT)):
            raise error("E0410", f"`{ref.fn.name}`'s first argument is "
                        f"{wrt if wrt is not None else 'absent'}: a gradient is taken with "
                        "respect to a tensor or a parameter tree", e.span)
        grad = GradRef(call, kind == "value_and_grad", e.span)
        e.ref = grad
        self.fn.grads.append(grad)
        # A derivative is one order less regular: past a kink it jumps.
        deps = {k: (C_INF if v == C_INF else DISCONTINUOUS) for k, v in deps.items()}
        return (TupleT((SCALAR, wrt)) if grad.value else wrt), deps

    def _arguments(self, e: A.Call, fn: FnInfo, skip_theta: bool) -> list:
        """Match positional and keyword arguments to the callee's parameters."""
        # An explicit call passes θ as its first argument; a sibling's or a sub-module's
        # call supplies it.
        params = [p for p in fn.params if not (skip_theta and p.implicit)]
        slots: list = [None] * len(params)
        names = [p.name for p in params]
        positional = [x for x in e.args if x.keyword is None and x.axis is None]
        for i, a in enumerate(positional):
            if i >= len(params):
                raise error("E0405", f"`{fn.name}` takes {_count(params)}, given "
                            f"{len(positional)}", a.span)
            slots[i] = a.expr
        for a in e.args:
            if a.axis is not None:
                raise error("E0405", f"`{fn.name}` takes no `axis`", a.span)
            if a.keyword is not None:
                if a.keyword not in names:
                    raise error("E0405", f"`{fn.name}` has no parameter `{a.keyword}`", a.span,
                                did_you_mean(a.keyword, names))
                i = names.index(a.keyword)
                if slots[i] is not None:
                    raise error("E0405", f"`{a.keyword}` is given twice", a.span)
                slots[i] = a.expr
        for i, p in enumerate(params):
            if slots[i] is None:
                if p.default is None:
                    given = sum(s is not None for s in slots)
                    raise error("E0405", f"`{fn.name}` takes {_count(params)}, given {given}",
                                e.span, f"`{p.name}` has no default")
                slots[i] = p.default
        return list(zip(params, slots))

    def _call(self, e: A.Call, ref: FnRef):
        fn = ref.fn
        self.el.ensure_checked(fn, e.span)
        self.fn.callees.append(fn)
        env = dict(ref.dims)
        symbols = frozenset(fn.dims)
        pairs = self._arguments(e, fn, skip_theta=ref.receiver != "explicit")
        binding: TensorType | None = None
        deps: Deps = {"θ": C_INF} if ref.receiver != "explicit" and self.module else {}
        theta_level = fn.regularity[0] if fn.params and fn.params[0].implicit else C_INF
        deps = _cap(deps, theta_level)
        for param, arg in pairs:
            if not isinstance(arg, A.Expr):
                continue
            level = fn.regularity[fn.params.index(param)]
            declared = substitute(param.type, env)
            t, d = self.value(arg, declared)
            deps = _join(deps, _cap(d, level))
            binding = self._fit(fn, param.name, declared, t, arg, symbols, env, binding)
        ref.args = [a for _, a in pairs]
        ref.dims = env
        e.ref = ref
        result = substitute(fn.result, env)  # type: ignore[arg-type]
        if isinstance(result, TensorType) and result.prefix:
            result = result.with_prefix(binding or TensorType((), True))
        return result, deps

    def _fit(self, fn, pname, declared, t, arg, symbols, env, binding):
        """Check one argument; return the binding of `...` (all arguments must agree)."""
        if isinstance(declared, TensorType) and isinstance(t, TensorType):
            try:
                b = shapes.bind(declared, t, symbols, env)
            except ShapeError as exc:
                raise error("E0407", f"argument `{pname}` of `{fn.name}`: {exc}", arg.span) from None
            if b is not None and binding is not None and b != binding:
                raise error("E0407", f"`...` stands for {b} here but for {binding} in an "
                            "earlier argument", arg.span)
            return b if b is not None else binding
        if isinstance(declared, TupleT) and isinstance(t, TupleT) and \
                len(declared.items) == len(t.items):
            for d, item in zip(declared.items, t.items):
                binding = self._fit(fn, pname, substitute(d, env), item, arg, symbols, env,
                                    binding)
            return binding
        if isinstance(declared, ParamsT) and isinstance(t, ParamsT):
            if declared.module is t.module and not t.stack:
                for d, actual in zip(declared.dims, t.dims):
                    if isinstance(d, str) and d in symbols:
                        env.setdefault(d, actual)
                if substitute(declared, env) == t:
                    return binding
        elif _fits(t, declared):
            return binding
        literal = arg.operand if isinstance(arg, A.Neg) else arg
        given = _kind(t)
        if declared == NAT and isinstance(literal, A.Number):  # typed ℝ[] for not being one
            given = ("-" if literal is not arg else "") + literal.text + ", not a natural"
        raise error("E0407", f"argument `{pname}` of `{fn.name}` is {declared}, given {given}",
                    arg.span)

    def _fold(self, e: A.Call, ref: FoldRef):
        fn = ref.fn
        self.el.ensure_checked(fn, e.span)
        self.fn.callees.append(fn)
        params = fn.explicit_params
        if len(params) != 1 or not isinstance(params[0].type, TensorType):
            raise error("E0409", f"a stack applies a function of one tensor; `{fn.name}` takes "
                        f"{_count(params)}", e.span)
        pos = [a for a in e.args if a.keyword is None and a.axis is None]
        extra = next((a for a in e.args if a.keyword is not None or a.axis is not None), None)
        if extra is not None:
            raise error("E0405", f"`{e.callee.dotted}` takes its one argument by position, "
                        "with no `axis`", extra.span)
        if len(pos) != 1:
            raise error("E0405", f"`{e.callee.dotted}` takes 1 argument, given {len(pos)}",
                        e.span)
        t, d = self.value(pos[0].expr, params[0].type)  # type: ignore[arg-type]
        env = dict(ref.dims)
        declared = substitute(params[0].type, env)
        binding = self._fit(fn, params[0].name, declared, t, pos[0].expr, frozenset(), env, None)
        result = substitute(fn.result, env)  # type: ignore[arg-type]
        if isinstance(result, TensorType) and result.prefix:
            result = result.with_prefix(binding or TensorType((), True))
        if not _fits(result, t):
            raise error("E0409", f"a stack's step must return its argument's type: `{fn.name}` "
                        f"maps {t} to {result}", e.span)
        ref.acc = pos[0].expr  # type: ignore[assignment]
        e.ref = ref
        deps = _join(_cap({"θ": C_INF}, fn.regularity[0]), _cap(d, fn.regularity[1]))
        return t, deps


_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "dot": "·", "mod": "%", "pow": "^"}


def _count(params) -> str:
    n = len(params)
    names = ", ".join(p.name for p in params)
    return f"{n} argument{'s' if n != 1 else ''} ({names})" if n else "no argument"


def _literal_type(e: A.Expr, hint) -> Type:
    if hint == F64:
        t: Type = F64
    elif hint == NAT and isinstance(e, A.Number) and e.is_natural:
        t = NAT
    else:
        t = SCALAR
    _retype(e, t)
    return t


def _retype(e: A.Expr, t: Type) -> None:
    e.ty = t
    if isinstance(e, A.Neg):
        _retype(e.operand, t)


def _fits(actual: Type, declared: Type | None) -> bool:
    if isinstance(actual, TensorType) and isinstance(declared, TensorType):
        return shapes.conforms(actual, declared)
    if isinstance(actual, TupleT) and isinstance(declared, TupleT):
        return len(actual.items) == len(declared.items) and all(
            _fits(a, d) for a, d in zip(actual.items, declared.items))
    return actual == declared
