"""The PSK-Core listing: what `presk dump --stage core` prints (§3 of the reference).

    fn RMSNorm.apply{D}(θ : params RMSNorm{D}, x : ℝ[..., model: D], eps : f64) -> ℝ[..., model: D] {
      %3 : ℝ[..., model: D] = pow 2 x
      ms : ℝ[...] = mean axis model %3
      ...
      return %10
    }

A value prints as its source name when it has one (an argument, a named let), else as
`%n`, n the number after the slash of its site. Every later stage names values the same
way, which is what lets a reader follow one from here to the C.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from presk.dialects import core
from presk.dialects.core import type_text


def format_float(value: float) -> str:
    """The shortest text that reads back as `value`, exponent without padding: 1e-6."""
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


def format_module(module: ModuleOp, names: Iterable[str] | None = None) -> str:
    """Every function of `module` in order, or those `names` lists, a blank line apart."""
    funcs = [op for op in module.ops if isinstance(op, core.FuncOp)]
    if names is not None:
        wanted = list(names)
        known = {f.sym_name.data for f in funcs}
        if missing := [n for n in wanted if n not in known]:
            raise KeyError(f"no function {', '.join(missing)} in the module")
        funcs = [f for f in funcs if f.sym_name.data in wanted]
    return "\n".join(format_function(f) for f in funcs)


def format_function(func: core.FuncOp) -> str:
    """One function: its header, one line per op, a closing brace; ends with a newline."""
    lines = [_header(func)]
    lines += ["  " + format_op(op) for op in func.body.block.ops]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _header(func: core.FuncOp) -> str:
    dims = "{" + " ".join(func.dim_names) + "}" if func.dim_names else ""
    args = ", ".join(
        f"{n} : {type_text(a.type)}" for n, a in zip(func.arg_name_list, func.args)
    )
    return f"fn {func.sym_name.data}{dims}({args}) -> {type_text(func.result_type)} {{"


def value_name(value: SSAValue) -> str:
    """An argument's or a named let's source name, else `%n` from the defining site."""
    if isinstance(value, BlockArgument):
        func = value.block.parent_op()
        if isinstance(func, core.FuncOp):
            return func.arg_name_list[value.index]
        return f"%arg{value.index}"
    op = value.owner
    assert isinstance(op, core.CoreOp)
    if op.source_name is not None:
        return op.source_name.data
    return op.site.data.rsplit("/", 1)[-1]


def format_op(op: Operation) -> str:
    """One line of the listing: `name : type = rhs`, or `return v`."""
    if isinstance(op, core.ReturnOp):
        return f"return {value_name(op.value)}"
    format_rhs = _RHS.get(type(op))
    if format_rhs is None:
        format_rhs = next(f for cls, f in _RHS_BY_BASE if isinstance(op, cls))
    result = op.results[0]
    return f"{value_name(result)} : {type_text(result.type)} = {format_rhs(op)}"


def _mnemonic(op: Operation) -> str:
    return op.name.split(".", 1)[1]


def _unary(op: core.UnaryOp) -> str:
    return f"{_mnemonic(op)} {value_name(op.operand)}"


def _binary(op: core.BinaryOp) -> str:
    return f"{_mnemonic(op)} {value_name(op.lhs)}, {value_name(op.rhs)}"


def _powi(op: core.PowIOp) -> str:
    return f"pow {op.n.value.data} {value_name(op.operand)}"


def _over_axis(mnemonic: str, axis: str | None, operand: SSAValue) -> str:
    over = f" axis {axis}" if axis is not None else ""
    return f"{mnemonic}{over} {value_name(operand)}"


def _reduce(op: core.ReduceOp) -> str:
    return _over_axis(_mnemonic(op), op.axis_name, op.operand)


def _softmax(op: core.SoftmaxOp) -> str:
    return _over_axis("softmax", op.axis.data, op.operand)


def _broadcast(op: core.BroadcastOp) -> str:
    return f"broadcast {value_name(op.operand)} to {type_text(op.result.type)}"


def _real(op: core.RealOp) -> str:
    return f"real {value_name(op.operand)}"


def _constant(op: core.ConstantOp) -> str:
    return format_float(op.number)


def _tuple(op: core.TupleOp) -> str:
    return "(" + ", ".join(value_name(e) for e in op.elements) + ")"


def _get(op: core.GetOp) -> str:
    return f"{value_name(op.operand)}.{op.index.value.data}"


def _field(op: core.FieldOp) -> str:
    return f"{value_name(op.operand)}.{op.field.data}"


def _dims_text(op) -> str:
    """`{In = 4, Out = 4}` in the callee's order when the callee can be found."""
    env = op.dim_env
    if not env:
        return ""
    try:
        order = core.lookup_function(op, op.callee_name).dim_names
    except VerifyException:
        order = tuple(env)
    ordered = [d for d in order if d in env] + [d for d in env if d not in order]
    return "{" + ", ".join(f"{d} = {env[d]}" for d in ordered) + "}"


def _call(op: core.CallOp) -> str:
    args = ", ".join(value_name(a) for a in op.arguments)
    return f"call {op.callee_name}{_dims_text(op)}({args})"


def _fold(op: core.FoldOp) -> str:
    return (
        f"fold {op.count_value} {op.callee_name}{_dims_text(op)}"
        f"(stacked {value_name(op.stacked)}; acc {value_name(op.acc)})"
    )


def _heaviside(op: core.HeavisideOp) -> str:
    return f"step {value_name(op.operand)}, {format_float(op.at_zero_value)} at 0"


def _sum_to(op: core.SumToOp) -> str:
    return f"sum {value_name(op.operand)} to {type_text(op.result.type)}"


def _spread(op: core.SpreadOp) -> str:
    mean = " / count" if op.mean is not None else ""
    return f"spread {value_name(op.operand)} like {value_name(op.like)}{mean}"


def _contract(op: core.ContractOp) -> str:
    lhs, rhs, prefix = op.axes
    pairs = [f"{i}·{j}" for i, j in zip(lhs, rhs)] + (["...·..."] if prefix else [])
    return f"contract {value_name(op.lhs)}, {value_name(op.rhs)} over {', '.join(pairs) or 'nothing'}"


def _zeros_like(op: core.ZerosLikeOp) -> str:
    return f"zeros like {value_name(op.operand)}"


def _tree(op: core.TreeOp) -> str:
    return "tree(" + ", ".join(value_name(f) for f in op.fields) + ")"


def _fold_sweep(op: core.FoldScanOp | core.FoldVjpOp | core.FoldFwdOp | core.FoldBwdOp) -> str:
    """`fold_vjp Block.apply(stacked %1; carries %5; cotangent %9)`: the word (`scan` for a
    fold_scan), then each operand after its name in the op's definition."""
    word = "scan" if isinstance(op, core.FoldScanOp) else op.name.split(".")[1]
    names = [name for name, _ in type(op).get_irdl_definition().operands]
    parts = "; ".join(f"{name} {value_name(v)}" for name, v in zip(names, op.operands))
    return f"{word} {op.callee_name}{_dims_text(op)}({parts})"


def _grad(op: core.GradOp) -> str:
    kind = "value_and_grad" if op.value is not None else "grad"
    args = ", ".join(value_name(a) for a in op.arguments)
    return f"{kind} {op.callee_name}{_dims_text(op)}({args})"


_RHS: dict[type[Operation], Callable] = {
    core.HeavisideOp: _heaviside,
    core.SumToOp: _sum_to,
    core.SpreadOp: _spread,
    core.ContractOp: _contract,
    core.ZerosLikeOp: _zeros_like,
    core.TreeOp: _tree,
    core.FoldScanOp: _fold_sweep,
    core.FoldVjpOp: _fold_sweep,
    core.FoldFwdOp: _fold_sweep,
    core.FoldBwdOp: _fold_sweep,
    core.GradOp: _grad,
    core.PowIOp: _powi,
    core.SoftmaxOp: _softmax,
    core.BroadcastOp: _broadcast,
    core.RealOp: _real,
    core.ConstantOp: _constant,
    core.TupleOp: _tuple,
    core.GetOp: _get,
    core.FieldOp: _field,
    core.CallOp: _call,
    core.FoldOp: _fold,
}

# Families that share one form; the exact-type table above is consulted first, since
# powi and softmax are unary ops with more to say.
_RHS_BY_BASE: list[tuple[type[Operation], Callable]] = [
    (core.UnaryOp, _unary),
    (core.BinaryOp, _binary),
    (core.ReduceOp, _reduce),
]
