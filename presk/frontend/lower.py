"""Lower the elaborated program to PSK-Core, in A-normal form.

Site numbering: a function's arguments are %0, %1, … (θ first in a module's function),
then every operation in evaluation order takes the next number, the ones the lowering
introduces included: a parameter or sub-tree read from θ (named for its field, at its
first use), a default argument's constant. A let keeps its number and shows its name.
A call evaluates its arguments, then reads its receiver's tree, then its defaults.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, TupleType, f64, i64
from xdsl.ir import Attribute, Block, SSAValue

from .. import ops
from ..dialects import core as C
from ..shapes import TensorType
from . import ast as A
from .program import (
    BuiltinRef, ConstRef, FieldRef, FnInfo, FnRef, FoldRef, GradRef, LocalRef, ModuleInfo, ParamInfo,
    ParamRef,
    Program, UseRef,
)
from .types import F64, NAT, ParamsT, ScalarT, TupleT, Type


class LoweringError(Exception):
    """A program the frontend accepts but PSK-Core cannot express."""


def core_type(t: Type) -> Attribute:
    if isinstance(t, TensorType):
        return C.TensorAttr.from_shape(t)
    if isinstance(t, ParamsT):
        return C.ParamsAttr.get(t.module.name, t.dims, t.stack)
    if isinstance(t, TupleT):
        return TupleType([core_type(i) for i in t.items])
    if t == F64:
        return f64
    if t == NAT:
        return i64
    raise LoweringError(f"no PSK-Core type for {t}")


# the element-wise functions by their .psk name (the table's rows), and the operators
_UNARY = {name: C.FUNCTION_OPS[f.name] for name, f in ops.builtins(arity=1).items()}
_ELEMENTWISE2 = {name: C.FUNCTION_OPS[f.name] for name, f in ops.builtins(arity=2).items()}
_REDUCE = {"sum": C.SumOp, "mean": C.MeanOp, "max": C.MaxOp, "min": C.MinOp,
           "logsumexp": C.LogSumExpOp}
_BINARY = {f.name: C.FUNCTION_OPS[f.name] for f in ops.rows(arity=2, core=True)
           if f.builtin is None} | {"dot": C.DotOp}


def lower_program(program: Program) -> ModuleOp:
    """Every module's declaration and every function of the program, in program order."""
    _check_unique_modules(program)
    decls = {m.name: _module_decl(m) for m in program.modules()}
    funcs = [_FunctionLowering(fn, decls).run() for fn in program.functions()]
    return ModuleOp([*decls.values(), *funcs])


def _check_unique_modules(program: Program) -> None:
    seen: dict[str, ModuleInfo] = {}
    for m in program.modules():
        if m.name in seen:
            raise LoweringError(f"two modules are named `{m.name}` ({seen[m.name].file.path} and "
                                f"{m.file.path}): PSK-Core names functions by module")
        seen[m.name] = m


def _module_decl(m: ModuleInfo) -> C.ModuleDeclOp:
    entries: list[C.FieldDeclOp] = [
        C.ParamDeclOp(p.name, C.TensorAttr.from_shape(p.type), _init_text(p))
        for p in m.params]
    entries += [C.UseDeclOp(u.name, core_type(u.target)) for u in m.uses]  # type: ignore[misc]
    return C.ModuleDeclOp(m.name, m.dims, entries)


def _init_text(p: ParamInfo) -> str:
    """The initializer with its arguments evaluated: `normal(mean = 0.0, std = 0.02)`."""
    if not p.init_args:
        return p.init.name
    args = ", ".join(f"{k} = {v!r}" for k, v in p.init_args.items())
    return f"{p.init.name}({args})"


class _FunctionLowering:
    def __init__(self, fn: FnInfo, decls: dict[str, C.ModuleDeclOp]):
        self.fn, self.decls = fn, decls
        self.func = C.FuncOp(fn.name, [(p.name, core_type(p.type)) for p in fn.params],
                             core_type(fn.result), fn.dims)  # type: ignore[arg-type]
        self.block: Block = self.func.body.block
        self.env: dict[str, SSAValue] = {p.name: a for p, a in zip(fn.params, self.block.args)}
        self.theta = self.block.args[0] if fn.module is not None else None
        self.fields: dict[str, SSAValue] = {}  # θ's fields read so far
        self.count = len(fn.params)

    def site(self) -> str:
        site = f"{self.fn.name}/%{self.count}"
        self.count += 1
        return site

    def emit(self, op):
        self.block.add_op(op)
        return op.results[0] if op.results else op

    def run(self) -> C.FuncOp:
        for let in self.fn.decl.lets:
            self._let(let)
        result = self.value(self.fn.decl.body)
        self.block.add_op(C.ReturnOp(result, site=f"{self.fn.name}/%{self.count}"))
        return self.func

    def _let(self, let: A.Let) -> None:
        if let.is_tuple:
            tup = self.value(let.expr)
            for i, name in enumerate(let.names):
                self.env[name] = self.emit(C.GetOp(tup, i, site=self.site(), name=name))
            return
        self.env[let.names[0]] = self.value(let.expr, let.names[0])

    # ---- expressions: each returns its SSA value; `name` goes to the op that makes it ----
    def value(self, e: A.Expr, name: str | None = None) -> SSAValue:
        method = getattr(self, "_" + type(e).__name__)
        return method(e, name)

    def _Number(self, e: A.Number, name):
        return self._constant(e.value, e.ty, name)

    def _constant(self, value: float, t, name) -> SSAValue:
        result_type = (i64 if t == NAT else f64) if isinstance(t, ScalarT) \
            else C.TensorAttr.scalar()
        return self.emit(C.ConstantOp(value, site=self.site(), name=name, result_type=result_type))

    def _Neg(self, e: A.Neg, name):
        if isinstance(e.operand, A.Number):
            return self._constant(-e.operand.value, e.ty, name)
        if isinstance(e.ty, ScalarT):
            return self._constant(self._static(e), e.ty, name)
        return self.emit(C.NegOp(self.value(e.operand), site=self.site(), name=name))

    def _Name(self, e: A.Name, name):
        ref = e.ref
        if isinstance(ref, LocalRef):
            return self.env[ref.name]
        if isinstance(ref, ParamRef):
            return self._field(ref.param.name)
        if isinstance(ref, UseRef):
            return self._field(ref.use.name)
        if isinstance(ref, ConstRef):
            return self._constant(float(ref.const.value), e.ty, name)
        if isinstance(ref, FieldRef):
            value = self.env[ref.base]
            for f in ref.fields:
                value = self.emit(self._field_of(value, f))
            return value
        raise LoweringError(f"unresolved name `{e.dotted}`")

    def _field_of(self, tree: SSAValue, field: str) -> C.FieldOp:
        t = tree.type
        assert isinstance(t, C.ParamsAttr)
        return C.FieldOp(tree, field, site=self.site(), name=field, decl=self.decls[t.module_name])

    def _field(self, field: str) -> SSAValue:
        """A field of θ, read once, where it is first needed."""
        if field not in self.fields:
            assert self.theta is not None
            self.fields[field] = self.emit(self._field_of(self.theta, field))
        return self.fields[field]

    def _TupleExpr(self, e: A.TupleExpr, name):
        items = [self.value(i) for i in e.items]
        return self.emit(C.TupleOp(items, site=self.site(), name=name))

    def _Binary(self, e: A.Binary, name):
        if isinstance(e.ty, ScalarT):
            return self._constant(self._static(e), e.ty, name)
        if e.op == "pow" and e.rhs.ty == NAT:
            base = self.value(e.lhs)
            return self.emit(C.PowIOp(base, int(self._static(e.rhs)), site=self.site(), name=name))
        lhs, rhs = self.value(e.lhs), self.value(e.rhs)
        return self.emit(_BINARY[e.op](lhs, rhs, site=self.site(), name=name,
                                        result_type=core_type(e.ty)))

    def _static(self, e: A.Expr) -> float:
        """The value of a hyperparameter expression over literals and consts."""
        if isinstance(e, A.Number):
            return e.value
        if isinstance(e, A.Name) and isinstance(e.ref, ConstRef):
            return float(e.ref.const.value)
        if isinstance(e, A.Neg):
            return -self._static(e.operand)
        if isinstance(e, A.Binary):
            a, b = self._static(e.lhs), self._static(e.rhs)
            return {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b if b else float("nan"),
                    "mod": a % b if b else float("nan"), "pow": a ** b}[e.op]
        raise LoweringError("f64 arithmetic on arguments is not in PSK-Core: compute in ℝ "
                            "with real(…)")

    def _Call(self, e: A.Call, name):
        ref = e.ref
        if isinstance(ref, BuiltinRef):
            return self._builtin(ref, name)
        if isinstance(ref, FoldRef):
            acc = self.value(ref.acc)
            stacked = self._field(ref.use.name)
            return self.emit(C.FoldOp(ref.fn.name, stacked, acc, site=self.site(), name=name,
                                      dims=ref.dims))
        return self._call(e, ref, name)

    def _Apply(self, e: A.Apply, name):
        grad = e.ref
        assert isinstance(grad, GradRef)
        ref = grad.call.ref
        args = self._call_args(ref)
        return self.emit(C.GradOp(ref.fn.name, args, grad.value, core_type(e.ty),
                                  site=self.site(), name=name, dims=ref.dims))

    def _call(self, e: A.Call, ref: FnRef, name) -> SSAValue:
        args = self._call_args(ref)
        return self.emit(C.CallOp(ref.fn.name, args, site=self.site(), name=name,
                                  dims=ref.dims, result_type=core_type(e.ty)))

    def _call_args(self, ref: FnRef) -> list[SSAValue]:
        """The callee's arguments in its order: evaluated, then θ's subtree, then defaults."""
        fn = ref.fn
        explicit = [p for p in fn.params if not (ref.receiver != "explicit" and p.implicit)]
        values = [self.value(a) if isinstance(a, A.Expr) else None for a in ref.args]
        if ref.receiver == "use":
            theta = [self._field(ref.use.name)]  # type: ignore[union-attr]
        elif ref.receiver == "self":
            theta = [self.theta]
        else:
            theta = []
        args = [v if v is not None else self._constant(float(a), p.type, None)
                for v, a, p in zip(values, ref.args, explicit)]
        return theta + args  # type: ignore[operator]

    def _builtin(self, ref: BuiltinRef, name) -> SSAValue:
        args = [self.value(a) for a in ref.args]
        if ref.name == "real":
            return self.emit(C.RealOp(args[0], site=self.site(), name=name))
        if len(args) == 2:
            return self.emit(_ELEMENTWISE2[ref.name](args[0], args[1], site=self.site(),
                                                     name=name))
        if ref.name in _REDUCE:
            return self.emit(_REDUCE[ref.name](args[0], ref.axis, site=self.site(), name=name))
        if ref.name == "softmax":
            return self.emit(C.SoftmaxOp(args[0], ref.axis, site=self.site(), name=name))
        return self.emit(_UNARY[ref.name](args[0], site=self.site(), name=name))
