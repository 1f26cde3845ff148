"""psk-differentiate, one Core op at a time: every op's vjp against central finite
differences computed exactly (MPFR).

Each case is a small Presk program whose entry `f` returns an ℝ[] that depends on every
element of every argument: typically `sum(OP(x) * w)` with a weighting `w` passed as an
argument (so the cotangent of `w`, OP(x), is checked too). It is elaborated, lowered,
differentiated (`Differentiator(module, remat).run(["f"])`, both --remat modes), and
`f.value_vjp(args, 1)` is evaluated with the MPFR interpreter at 128 bits. Each element of
each cotangent is compared with (f(x+h) - f(x-h)) / 2h, f evaluated in MPFR at 256 bits,
h = 1e-30: the truncation error is O(h²) ≈ 1e-60 and the rounding error about
2⁻²⁵⁶/h ≈ 1e-47, so the difference is the derivative to far better than the bound, 1e-20
relative. An element whose derivative is 0 (relu below 0, the entries a max does not
attain, x⁰; a difference below 1e-40, its rounding noise being about 1e-47) must have a
cotangent whose magnitude is below 1e-20 as well.

Ops the language cannot write (`erf`, `broadcast`) are made by replacing an op of the
lowered program (tanh → erf, a neg → a broadcast to the shape its user has). Inputs stay
away from kinks (relu, abs, minimum/maximum, max/min reductions) and are positive where
the op needs it (log, sqrt, the base of a real power); the subgradient at a kink is
checked separately against PyTorch, which documents the same choices.

Run with `-s` to see the largest relative error per case (the figure reported per op
family).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import gmpy2
import numpy as np
import pytest
import torch
from xdsl.dialects.builtin import ModuleOp

from presk import ops
from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.numbers import F64, MPFR, Numbers
from presk.dialects import core as C
from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program
from presk.transforms.differentiate import REMATS, Differentiator

ROOT = Path(__file__).resolve().parents[2]
LINEAR = (ROOT / "tutorial" / "01_linear.psk").as_posix()

H = "1e-30"
BOUND = 1e-20
# Below this a difference is 0: its rounding noise is about 2⁻²⁵⁶·|f|/h ≈ 1e-47.
ZERO = 1e-40
VJP_BITS, FD_BITS = 128, 256


# --------------------------------------------------------------------------------------
# Arguments: tensors (f64 arrays, converted exactly), f64 hyperparameters (Python floats),
# tuples, and parameter trees (`Params`, tensors by path)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    tensors: dict[str, np.ndarray]


def A(*rows) -> np.ndarray:
    return np.array(rows, dtype=np.float64)


X = A([0.3, -0.7, 1.1], [0.5, -1.3, 0.9])          # mixed signs, no zero, no ties
XP = A([0.3, 0.7, 1.1], [0.5, 1.3, 0.9])           # positive: log, sqrt, a real power's base
Y = A([-0.4, 0.6, 1.7], [0.2, -0.9, 1.25])         # never equal to X
W = A([1.0, 0.5, -0.25], [0.75, -1.5, 2.0])        # the weighting
ROW = np.array([0.1, -0.35, 1.0])                   # ℝ[b: 3], beats X in some places only
COL = np.array([0.45, -1.1])                        # ℝ[a: 2], the same
W_ROW = np.array([0.6, -1.2, 0.9])
W_COL = np.array([1.3, -0.8])
S = np.array(0.6)                                   # ℝ[]
M32 = A([0.2, -0.5], [0.9, 0.4], [-0.3, 0.7])       # ℝ[3, 2]
W22 = A([0.5, -1.0], [1.5, 0.25])


def _convert(value, numbers: Numbers):
    if isinstance(value, np.ndarray):
        return numbers.array(value)
    if isinstance(value, tuple):
        return tuple(_convert(v, numbers) for v in value)
    if isinstance(value, Params):
        return Tree({k: numbers.array(v) for k, v in value.tensors.items()})
    return value  # an f64


def _leaves(value, path=()) -> list[tuple[tuple, np.ndarray]]:
    """The differentiable tensors of one argument, each with its path in the argument."""
    if isinstance(value, np.ndarray):
        return [(path, value)]
    if isinstance(value, tuple):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, path + (i,))]
    if isinstance(value, Params):
        return [(path + (k,), v) for k, v in value.tensors.items()]
    return []


def _at(value, path: tuple):
    """The cotangent's tensor at a leaf's path (a tree's by its key)."""
    for key in path:
        value = dict(value.items())[key] if isinstance(value, Tree) else value[key]
    return value


def _replace(value, path: tuple, new):
    if not path:
        return new
    key, rest = path[0], path[1:]
    if isinstance(value, tuple):
        return tuple(_replace(v, rest, new) if i == key else v for i, v in enumerate(value))
    assert isinstance(value, Tree) and not rest
    data = dict(value.data)
    data[key] = new
    return Tree(data)


def differentiable(value) -> bool:
    return bool(_leaves(value))


# --------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    family: str
    source: str
    args: list[Any]
    surgery: Callable[[ModuleOp], None] | None = None
    marks: list = field(default_factory=list)


def _func(module: ModuleOp, name: str) -> C.FuncOp:
    return next(op for op in module.ops if isinstance(op, C.FuncOp) and op.sym_name.data == name)


def _replace_op(old, new) -> None:
    old.parent_block().insert_op_before(new, old)
    old.results[0].replace_all_uses_with(new.results[0])
    old.detach()
    old.erase()


def tanh_to_erf(module: ModuleOp) -> None:
    """erf is not in the language: the program's tanh becomes an erf."""
    for op in list(_func(module, "f").body.block.ops):
        if isinstance(op, C.TanhOp):
            _replace_op(op, C.ErfOp(op.operand, site=op.site.data))


def neg_to_broadcast(module: ModuleOp) -> None:
    """broadcast is never written by the lowering: the program's `-x` becomes a broadcast of
    x to the type of the op that uses it."""
    for op in list(_func(module, "f").body.block.ops):
        if isinstance(op, C.NegOp):
            user = next(iter(op.results[0].uses)).operation
            _replace_op(op, C.BroadcastOp(op.operand, user.results[0].type, site=op.site.data))


R23 = "ℝ[a: 2, b: 3]"


def _unary(name: str, call: str, x=X, surgery=None) -> Case:
    return Case(name, "unary", f"fn f(x : {R23}, w : {R23}) -> ℝ[] = sum({call} * w)\n",
                [x, W], surgery)


UNARY = [
    _unary("neg", "(-x)"),
    _unary("sqrt", "sqrt(x)", XP),
    _unary("exp", "exp(x)"),
    _unary("log", "log(x)", XP),
    _unary("tanh", "tanh(x)"),
    _unary("sigmoid", "sigmoid(x)"),
    _unary("relu", "relu(x)"),
    _unary("gelu", "gelu(x)"),
    _unary("softplus", "softplus(x)"),
    _unary("abs", "abs(x)"),
    _unary("sin", "sin(x)"),
    _unary("cos", "cos(x)"),
    _unary("sinh", "sinh(x)"),
    _unary("expm1", "expm1(x)"),
    _unary("log1p", "log1p(x)", XP),
    _unary("erf", "tanh(x)", surgery=tanh_to_erf),
    _unary("powi0", "x ^ 0"),
    _unary("powi1", "x ^ 1"),
    _unary("powi2", "x ^ 2"),
    _unary("powi3", "x ^ 3"),
    _unary("affine_constants", "(2 * x - 1)"),
    _unary("mul_self", "(x * x)"),
]

_BINARY_CALLS = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
    "minimum": "min({a}, {b})", "maximum": "max({a}, {b})", "pow": "({a} ^ {b})",
}
# The shapes of y: equal, a row (aligned from the right), a column (aligned by name), ℝ[].
_Y_SHAPES = {"same": ("ℝ[a: 2, b: 3]", Y), "row": ("ℝ[b: 3]", ROW), "col": ("ℝ[a: 2]", COL),
             "scalar": ("ℝ[]", S)}


def _binary(op: str, shape: str, swapped: bool = False) -> Case:
    y_type, y = _Y_SHAPES[shape]
    call = _BINARY_CALLS[op].format(a="x", b="y")
    x = XP if op == "pow" else X
    if swapped:  # the broadcast operand on the left
        call = _BINARY_CALLS[op].format(a="y", b="x")
        if op == "pow":
            x, y = X, np.abs(y) + 0.2
    return Case(f"{op}_{shape}" + ("_lhs" if swapped else ""), "binary",
                f"fn f(x : {R23}, y : {y_type}, w : {R23}) -> ℝ[] = sum({call} * w)\n",
                [x, y, W])


BINARY = [_binary(op, shape) for op in _BINARY_CALLS for shape in _Y_SHAPES] + \
    [_binary(op, "row", swapped=True) for op in ("sub", "div", "pow", "maximum", "minimum")]


def _reduce(op: str, axis: str | None) -> Case:
    if axis is None:
        return Case(f"{op}_all", "reduction",
                    f"fn f(x : {R23}, w : ℝ[]) -> ℝ[] = sum({op}(x) * w)\n", [X, np.array(-1.7)])
    w_type, w = ("ℝ[b: 3]", W_ROW) if axis == "a" else ("ℝ[a: 2]", W_COL)
    return Case(f"{op}_axis_{axis}", "reduction",
                f"fn f(x : {R23}, w : {w_type}) -> ℝ[] = sum({op}(axis {axis}, x) * w)\n",
                [X, w])


REDUCTIONS = [_reduce(op, axis) for op in ("sum", "mean", "max", "min", "logsumexp")
              for axis in ("a", "b", None)]

SOFTMAX = [Case(f"softmax_axis_{axis}", "softmax",
                f"fn f(x : {R23}, w : {R23}) -> ℝ[] = sum(softmax(axis {axis}, x) * w)\n", [X, W])
           for axis in ("a", "b")]

_DOT_PREFIX = "fn g(x : ℝ[..., 3], m : ℝ[3, 2]) -> ℝ[..., 2] = x · m\n"
DOT = [
    Case("dot_matrix_matrix", "dot",
         f"fn f(x : {R23}, m : ℝ[3, 2], w : ℝ[a: 2, 2]) -> ℝ[] = sum((x · m) * w)\n",
         [X, M32, W22]),
    Case("dot_vector_matrix", "dot",
         "fn f(v : ℝ[3], m : ℝ[3, 2], w : ℝ[2]) -> ℝ[] = sum((v · m) * w)\n",
         [ROW, M32, COL]),
    Case("dot_matrix_vector", "dot",
         f"fn f(x : {R23}, v : ℝ[3], w : ℝ[a: 2]) -> ℝ[] = sum((x · v) * w)\n",
         [X, ROW, W_COL]),
    Case("dot_vector_vector", "dot",
         "fn f(v : ℝ[3], u : ℝ[3], w : ℝ[]) -> ℝ[] = (v · u) * w\n",
         [ROW, W_ROW, np.array(1.3)]),
    Case("dot_matrix_rank3", "dot",
         f"fn f(x : {R23}, t : ℝ[3, 2, 2], w : ℝ[a: 2, 2, 2]) -> ℝ[] = sum((x · t) * w)\n",
         [X, np.linspace(-1.1, 1.2, 12).reshape(3, 2, 2), np.linspace(0.7, -0.9, 8).reshape(2, 2, 2)]),
    Case("dot_prefix", "dot",
         _DOT_PREFIX + f"fn f(x : {R23}, m : ℝ[3, 2], w : ℝ[a: 2, 2]) -> ℝ[] = sum(g(x, m) * w)\n",
         [X, M32, W22]),
    Case("dot_prefix_two_axes", "dot",
         _DOT_PREFIX + "fn f(x : ℝ[a: 2, c: 2, b: 3], m : ℝ[3, 2], w : ℝ[a: 2, c: 2, 2]) "
         "-> ℝ[] = sum(g(x, m) * w)\n",
         [np.stack([X, Y]).transpose(1, 0, 2), M32, np.stack([W22, -W22 + 0.1])]),
]

BROADCAST = [
    Case("broadcast_row", "broadcast",
         f"fn f(x : ℝ[b: 3], w : {R23}) -> ℝ[] = sum((-x) * w)\n", [ROW, W], neg_to_broadcast),
    Case("broadcast_col", "broadcast",
         f"fn f(x : ℝ[a: 2], w : {R23}) -> ℝ[] = sum((-x) * w)\n", [COL, W], neg_to_broadcast),
    Case("broadcast_scalar", "broadcast",
         f"fn f(x : ℝ[], w : {R23}) -> ℝ[] = sum((-x) * w)\n", [S, W], neg_to_broadcast),
]

REAL = [
    Case("real", "real",
         f"fn f(x : {R23}, s : f64, w : {R23}) -> ℝ[] = sum(x * real(s) * w)\n", [X, 0.75, W]),
    Case("real_default_through_call", "real",
         f"fn g(x : {R23}, eps : f64 = 0.5) -> {R23} = exp(x) * real(eps)\n"
         f"fn f(x : {R23}, w : {R23}) -> ℝ[] = sum(g(x) * w)\n", [X, W]),
]

TUPLES = [
    Case("tuple_argument", "tuple",
         f"fn f(p : ({R23}, {R23}), w : {R23}) -> ℝ[] =\n"
         "  let (u, v) = p\n  sum(u * exp(v) * w)\n", [(X, Y), W]),
    Case("tuple_argument_part_unread", "tuple",
         f"fn f(p : ({R23}, ℝ[b: 3]), w : {R23}) -> ℝ[] =\n"
         "  let (u, v) = p\n  sum(u * w) + 0 * sum(v)\n", [(X, ROW), W]),
    Case("tuple_nested_argument", "tuple",
         f"fn f(p : (({R23}, ℝ[b: 3]), ℝ[a: 2]), w : {R23}) -> ℝ[] =\n"
         "  let (q, r) = p\n  let (u, v) = q\n  sum((u * v + r) * w)\n", [((X, ROW), COL), W]),
    Case("tuple_built_and_read", "tuple",
         f"fn f(x : {R23}, w : {R23}) -> ℝ[] =\n"
         "  let t = (sin(x), x * w)\n  let (u, v) = t\n  sum(u * v)\n", [X, W]),
    Case("tuple_from_a_call", "tuple",
         f"fn g(x : {R23}, w : {R23}) -> ({R23}, {R23}) = (sin(x) * w, x * x)\n"
         f"fn f(x : {R23}, w : {R23}) -> ℝ[] =\n"
         "  let (u, v) = g(x, w)\n  sum(u * v)\n", [X, W]),
]

_MODULE_M = f"""
module M {{
  param w : ℝ[a: 2, b: 3] init = ones
  param v : ℝ[3]          init = zeros
  param z : ℝ[2]          init = zeros   -- never read: its cotangent is zeros
  fn apply(x : {R23}) -> {R23} = x * w + v
}}
"""
_MODULE_N = _MODULE_M + f"""
module N {{
  use m : M
  param s : ℝ[3] init = ones
  fn apply(x : {R23}) -> {R23} = m.apply(x) * s + sin(θ.m.w)
}}
"""
TREE_M = Params({"w": Y, "v": ROW, "z": COL})
TREE_N = Params({"m.w": Y, "m.v": ROW, "m.z": COL, "s": W_ROW})

FIELDS = [
    Case("field_reads", "field",
         _MODULE_M + f"fn f(θ : params M, x : {R23}, w : {R23}) -> ℝ[] =\n"
         "  sum(M.apply(θ, x) * w) + sum(θ.w * θ.w)\n", [TREE_M, X, W]),
    Case("field_reads_nested_tree", "field",
         _MODULE_N + f"fn f(θ : params N, x : {R23}, w : {R23}) -> ℝ[] =\n"
         "  sum(N.apply(θ, x) * w) + sum(θ.m.v * θ.s)\n", [TREE_N, X, W]),
    Case("field_reads_imported_module_with_dims", "field",
         f'import "{LINEAR}" as lin\n'
         f"fn f(θ : params lin.Linear{{3, 2}}, x : {R23}, w : ℝ[a: 2, 2]) -> ℝ[] =\n"
         "  sum(lin.Linear.apply(θ, x) * w)\n",
         [Params({"w": M32, "b": np.array([0.3, -0.6])}), X, W22]),
]

CALLS = [
    Case("call", "call",
         f"fn g(x : {R23}) -> {R23} = sin(x) * x\n"
         f"fn f(x : {R23}, w : {R23}) -> ℝ[] = sum(g(x) * w)\n", [X, W]),
    Case("call_nested_twice_shared_argument", "call",
         f"fn h(x : {R23}) -> {R23} = exp(x)\n"
         f"fn g(x : {R23}, y : {R23}) -> {R23} = h(x) * y\n"
         f"fn f(x : {R23}, w : {R23}) -> ℝ[] = sum(g(x, w) + g(w, x) * g(x, x))\n", [X, W]),
    Case("call_polymorphic_prefix", "call",
         "fn g(x : ℝ[..., b: 3]) -> ℝ[..., b: 3] = tanh(x) * x\n"
         f"fn f(x : {R23}, w : {R23}) -> ℝ[] = sum(g(x) * w)\n", [X, W]),
]

_STEP = f"""
module Step {{
  param m : ℝ[3, 3] init = zeros
  param c : ℝ[3]    init = zeros
  fn apply(x : ℝ[..., b: 3]) -> ℝ[..., b: 3] = tanh(x · m + c)
}}
module Deep {{
  use blocks : stack{{2}}(Step)
  fn apply(x : ℝ[..., b: 3]) -> ℝ[..., b: 3] = blocks.apply(x)
}}
fn f(θ : params Deep, x : {R23}, w : {R23}) -> ℝ[] = sum(Deep.apply(θ, x) * w)
"""
_NESTED_STEP = f"""import "{LINEAR}" as lin
module Block {{
  use proj : lin.Linear{{3, 3}}
  fn apply(x : ℝ[..., b: 3]) -> ℝ[..., b: 3] = x + sin(proj.apply(x))
}}
module Deep {{
  use blocks : stack{{3}}(Block)
  param g : ℝ[3] init = ones
  fn apply(x : ℝ[..., b: 3]) -> ℝ[..., b: 3] = blocks.apply(x * g)
}}
fn f(θ : params Deep, x : {R23}, w : {R23}) -> ℝ[] = sum(Deep.apply(θ, x) * w)
"""
_M233 = np.linspace(-0.8, 0.9, 18).reshape(2, 3, 3) * np.array([1.0, -0.7, 0.4])
FOLDS = [
    Case("fold", "fold", _STEP,
         [Params({"blocks.m": _M233, "blocks.c": np.array([[0.1, -0.2, 0.3], [0.05, 0.4, -0.1]])}),
          X, W]),
    Case("fold_of_nested_trees", "fold", _NESTED_STEP,
         [Params({"blocks.proj.w": np.linspace(-0.6, 0.7, 27).reshape(3, 3, 3)[:, ::-1],
                  "blocks.proj.b": np.linspace(0.2, -0.3, 9).reshape(3, 3),
                  "g": np.array([1.1, 0.9, -0.8])}), X, W]),
]

CASES = UNARY + BINARY + REDUCTIONS + SOFTMAX + DOT + BROADCAST + REAL + TUPLES + FIELDS + \
    CALLS + FOLDS
BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES)


# --------------------------------------------------------------------------------------
# Building, running, differencing
# --------------------------------------------------------------------------------------

_SOURCES: dict[str, Path] = {}


def source_path(case: Case, tmp_root: Path) -> Path:
    if case.id not in _SOURCES:
        path = tmp_root / f"{case.id}.psk"
        path.write_text(case.source, encoding="utf-8")
        _SOURCES[case.id] = path
    return _SOURCES[case.id]


def build(case: Case, tmp_root: Path, remat: str | None) -> ModuleOp:
    """The case's program in PSK-Core, differentiated under `remat` (None: not at all)."""
    module = lower_program(elaborate(str(source_path(case, tmp_root))))
    if case.surgery is not None:
        case.surgery(module)
    module.verify()
    if remat is not None:
        Differentiator(module, remat).run(["f"])
        module.verify()
    return module


def value_vjp(module: ModuleOp, args: list, numbers: Numbers) -> tuple:
    with numbers.context():
        converted = [_convert(a, numbers) for a in args]
        one = numbers.constant(1.0)
    return Interpreter(module, numbers).run("f.value_vjp", converted + [one], {})


@functools.lru_cache(maxsize=None)
def _finite_differences_cached(case_id: str, tmp_root: str) -> tuple:
    case = BY_ID[case_id]
    module = build(case, Path(tmp_root), None)
    numbers = MPFR(FD_BITS)
    interp = Interpreter(module, numbers)
    with numbers.context():
        base = [_convert(a, numbers) for a in case.args]
        h = gmpy2.mpfr(H)
        out = []
        for i, arg in enumerate(case.args):
            grads = {}
            for path, array in _leaves(arg):
                leaf = _at(base[i], path)
                fd = np.empty(array.shape, dtype=object)
                for index in np.ndindex(array.shape):
                    values = []
                    for step in (h, -h):
                        moved = np.array(leaf, dtype=object)
                        moved[index] = moved[index] + step
                        args = list(base)
                        args[i] = _replace(base[i], path, moved)
                        values.append(interp.run("f", args, {}))
                    fd[index] = (values[0] - values[1]) / (2 * h)
                grads[path] = fd
            out.append(grads)
    return tuple(out)


def finite_differences(case: Case, tmp_root: Path) -> tuple[dict, ...]:
    """Per argument, {leaf path: the central differences of f in each element}."""
    return _finite_differences_cached(case.id, str(tmp_root))


def relative_errors(case: Case, grads: list, fds: tuple) -> dict[str, float]:
    """The largest error per leaf: relative to the difference, absolute where it is 0
    (below ZERO)."""
    errors = {}
    k = 0
    for i, arg in enumerate(case.args):
        if not differentiable(arg):
            continue
        for path, fd in fds[i].items():
            got = np.asarray(_at(grads[k], path), dtype=object)
            assert got.shape == fd.shape, (path, got.shape, fd.shape)
            worst = 0.0
            for index in np.ndindex(fd.shape):
                diff = abs(gmpy2.mpfr(got[index], FD_BITS) - fd[index])
                scale = abs(fd[index])
                worst = max(worst, float(diff / scale) if scale > ZERO else float(diff))
            errors[f"arg{i}" + "".join(f".{p}" for p in path)] = worst
        k += 1
    assert k == len(grads)
    return errors


@pytest.fixture(scope="session")
def cases_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("vjp_ops")


def _params(cases: list[Case]):
    return [pytest.param(c, remat, id=f"{c.id}-{remat}", marks=c.marks)
            for c in cases for remat in REMATS]


@pytest.mark.parametrize("case, remat", _params(CASES))
def test_vjp_matches_finite_differences(case: Case, remat: str, cases_dir: Path) -> None:
    module = build(case, cases_dir, remat)
    result = value_vjp(module, case.args, MPFR(VJP_BITS))
    n_diff = sum(differentiable(a) for a in case.args)
    assert isinstance(result, tuple) and len(result) == 1 + n_diff
    y, *grads = result
    with gmpy2.context(precision=FD_BITS):
        errors = relative_errors(case, grads, finite_differences(case, cases_dir))
    worst = max(errors.values())
    print(f"\n[vjp vs FD] {case.family:10s} {case.id:40s} {remat:9s} max rel err {worst:.3g}")
    bad = {k: v for k, v in errors.items() if not v < BOUND}
    assert not bad, f"relative error above {BOUND}: {bad}"


def test_every_core_op_the_rules_cover_is_exercised(cases_dir: Path) -> None:
    """The cases reach every op of the forward language, and their vjps every reverse op
    (the Core ops psk-differentiate emits)."""
    forward, reverse = set(), set()
    for case in CASES:
        module = build(case, cases_dir, "store")
        for func in module.ops:
            if not isinstance(func, C.FuncOp):
                continue
            names = {op.name for op in func.body.block.ops}
            (reverse if "." in func.sym_name.data and
             func.sym_name.data.rsplit(".", 1)[1] in ("fwd", "bwd") else forward).update(names)
        module = build(case, cases_dir, "recompute")
        for func in module.ops:
            if isinstance(func, C.FuncOp):
                reverse.update(op.name for op in func.body.block.ops)
    # every element-wise function of the table (presk/ops; the slopes appear in reverse)
    elementwise = {f.name for f in ops.rows(core=True)} - {"erf_slope", "gelu_slope"}
    wanted_forward = {
        "psk_core." + n for n in [*elementwise, *(
            "powi sum mean max min logsumexp softmax dot broadcast real "
            "constant tuple get field call fold").split()]}
    assert wanted_forward <= forward, wanted_forward - forward
    wanted_reverse = {"psk_core." + n for n in (
        "heaviside gelu_slope erf_slope sum_to spread contract zeros_like tree fold_fwd fold_bwd fold_scan "
        "fold_vjp").split()}
    assert wanted_reverse <= reverse, wanted_reverse - reverse


def test_a_hyperparameter_has_no_cotangent(cases_dir: Path) -> None:
    module = build(BY_ID["real"], cases_dir, "store")
    vv = _func(module, "f.value_vjp")
    outputs = vv.function_type.outputs.data[0].types.data
    assert [C.type_text(t) for t in outputs] == ["ℝ[]", "ℝ[a: 2, b: 3]", "ℝ[a: 2, b: 3]"]


# --------------------------------------------------------------------------------------
# Subgradients at kinks, against PyTorch
# --------------------------------------------------------------------------------------

_KINK_X = A([0.0, -0.5, 0.7], [-0.0, 1.2, 0.0])
_KINK_Y = A([0.0, -0.5, 0.2], [-0.3, 1.2, 0.0])     # ties with _KINK_X at four places
_TIES = A([1.5, -0.2, 1.5], [0.4, 0.4, 0.4])         # tied maxima, tied minima per row and overall
_TIES_COL = A([1.5, -0.2, 0.4], [1.5, 0.4, 0.4])
_KINK_W = A([1.0, 2.0, -3.0], [0.5, -1.5, 4.0])


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def _torch_grads(fn, *arrays) -> list[np.ndarray]:
    ts = [_t(a) for a in arrays]
    fn(*ts).backward()
    return [t.grad.numpy() for t in ts]


KINKS = {
    # id: (source, args, the same function in torch)
    "relu_at_0": (f"fn f(x : {R23}, w : {R23}) -> ℝ[] = sum(relu(x) * w)\n", [_KINK_X, _KINK_W],
                  lambda x, w: (torch.relu(x) * w).sum()),
    "abs_at_0": (f"fn f(x : {R23}, w : {R23}) -> ℝ[] = sum(abs(x) * w)\n", [_KINK_X, _KINK_W],
                 lambda x, w: (torch.abs(x) * w).sum()),
    "maximum_ties": (f"fn f(x : {R23}, y : {R23}, w : {R23}) -> ℝ[] = sum(max(x, y) * w)\n",
                     [_KINK_X, _KINK_Y, _KINK_W],
                     lambda x, y, w: (torch.maximum(x, y) * w).sum()),
    "minimum_ties": (f"fn f(x : {R23}, y : {R23}, w : {R23}) -> ℝ[] = sum(min(x, y) * w)\n",
                     [_KINK_X, _KINK_Y, _KINK_W],
                     lambda x, y, w: (torch.minimum(x, y) * w).sum()),
    "max_axis_ties": (f"fn f(x : {R23}, w : ℝ[a: 2]) -> ℝ[] = sum(max(axis b, x) * w)\n",
                      [_TIES, np.array([3.0, -0.6])],
                      lambda x, w: (torch.amax(x, dim=1) * w).sum()),
    "max_axis_a_ties": (f"fn f(x : {R23}, w : ℝ[b: 3]) -> ℝ[] = sum(max(axis a, x) * w)\n",
                        [_TIES_COL, np.array([3.0, -0.6, 1.2])],
                        lambda x, w: (torch.amax(x, dim=0) * w).sum()),
    "min_axis_ties": (f"fn f(x : {R23}, w : ℝ[a: 2]) -> ℝ[] = sum(min(axis b, x) * w)\n",
                      [-_TIES, np.array([3.0, -0.6])],
                      lambda x, w: (torch.amin(x, dim=1) * w).sum()),
    "max_all_ties": (f"fn f(x : {R23}, w : ℝ[]) -> ℝ[] = max(x) * w\n", [_TIES, np.array(3.0)],
                     lambda x, w: torch.amax(x) * w),
    "min_all_ties": (f"fn f(x : {R23}, w : ℝ[]) -> ℝ[] = min(x) * w\n",
                     [A([0.4, 0.4, 0.9], [0.4, 1.5, 0.7]), np.array(3.0)],
                     lambda x, w: torch.amin(x) * w),
}


def test_torch_takes_the_documented_subgradients() -> None:
    """What the comparison below relies on, stated on PyTorch itself."""
    zero = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    torch.relu(zero).sum().backward()
    assert zero.grad.item() == 0.0
    zero.grad = None
    torch.abs(zero).sum().backward()
    assert zero.grad.item() == 0.0
    a, b = _t(np.array([1.0])), _t(np.array([1.0]))
    torch.maximum(a, b).sum().backward()
    assert (a.grad.item(), b.grad.item()) == (0.5, 0.5)
    x = _t(np.array([2.0, 2.0, 1.0, 2.0]))
    torch.amax(x).backward()
    assert x.grad.tolist() == [1 / 3, 1 / 3, 0.0, 1 / 3]


@pytest.mark.parametrize("numbers", [F64(), MPFR(VJP_BITS)], ids=["f64", "mpfr128"])
@pytest.mark.parametrize("remat", REMATS)
@pytest.mark.parametrize("kink", list(KINKS))
def test_subgradient_at_a_kink_is_pytorchs(kink: str, remat: str, numbers: Numbers,
                                           cases_dir: Path) -> None:
    source, args, torch_fn = KINKS[kink]
    case = Case(f"kink_{kink}", "kink", source, args)
    module = build(case, cases_dir, remat)
    y, *grads = value_vjp(module, args, numbers)
    expected = _torch_grads(torch_fn, *args)
    got = [numbers.to_f64(np.asarray(g)) for g in grads]
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_array_equal(g, e)


def test_the_comparison_catches_a_wrong_rule(cases_dir: Path, monkeypatch) -> None:
    """With sin's rule replaced by cos's (−dr·sin x), the same check fails by far."""
    wrong = dataclasses.replace(ops.row("sin"), derivative=ops.row("cos").derivative)
    monkeypatch.setitem(ops.BY_NAME, "sin", wrong)
    case = BY_ID["sin"]
    module = build(case, cases_dir, "store")
    _, *grads = value_vjp(module, case.args, MPFR(VJP_BITS))
    with gmpy2.context(precision=FD_BITS):
        errors = relative_errors(case, grads, finite_differences(case, cases_dir))
    assert errors["arg0"] > 0.1 and errors["arg1"] < BOUND
