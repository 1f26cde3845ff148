"""The PSK-Core dialect (presk/dialects/core/) and its listing (presk/emit/core_listing.py).

The tutorial's program is built from Python the way the lowering builds it, and read
from test/filecheck/core/tutorial.mlir; both must print §3 of the reference line for line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp, TupleType, f64
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from presk.dialects import core
from presk.dialects.core import ParamsAttr, TensorAttr
from presk.emit.core_listing import format_float, format_function, format_module
from presk.shapes import Axis, TensorType

TUTORIAL_MLIR = Path(__file__).parents[1] / "filecheck" / "core" / "tutorial.mlir"
OPS_MLIR = TUTORIAL_MLIR.with_name("ops.mlir")

# §3 of seed/000_0134723cc403c739.txt, the functions `loss` reaches, as the reference prints them.
REFERENCE_LISTING = """\
fn Linear.apply{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In]) -> ℝ[..., Out] {
  w : ℝ[In, Out] = θ.w
  %3 : ℝ[..., Out] = dot x, w
  b : ℝ[Out] = θ.b
  %5 : ℝ[..., Out] = add %3, b
  return %5
}

fn RMSNorm.apply{D}(θ : params RMSNorm{D}, x : ℝ[..., model: D], eps : f64) -> ℝ[..., model: D] {
  %3 : ℝ[..., model: D] = pow 2 x
  ms : ℝ[...] = mean axis model %3
  %5 : ℝ[] = real eps
  %6 : ℝ[...] = add ms, %5
  %7 : ℝ[...] = sqrt %6
  %8 : ℝ[..., model: D] = div x, %7
  γ : ℝ[D] = θ.γ
  %10 : ℝ[..., model: D] = mul %8, γ
  return %10
}

fn Block.apply(θ : params Block, x : ℝ[..., model: 4]) -> ℝ[..., model: 4] {
  norm : params RMSNorm{4} = θ.norm
  %3 : f64 = 1e-6
  %4 : ℝ[..., model: 4] = call RMSNorm.apply{D = 4}(norm, x, %3)
  %5 : ℝ[..., model: 4] = gelu %4
  proj : params Linear{4, 4} = θ.proj
  %7 : ℝ[..., 4] = call Linear.apply{In = 4, Out = 4}(proj, %5)
  %8 : ℝ[..., model: 4] = add x, %7
  return %8
}

fn Tower.apply(θ : params Tower, x : ℝ[..., model: 4]) -> ℝ[..., model: 4] {
  blocks : params stack{3}(Block) = θ.blocks
  %3 : ℝ[..., model: 4] = fold 3 Block.apply(stacked blocks; acc x)
  final : params RMSNorm{4} = θ.final
  %5 : f64 = 1e-6
  %6 : ℝ[..., model: 4] = call RMSNorm.apply{D = 4}(final, %3, %5)
  return %6
}

fn loss{B}(θ : params Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] {
  x : ℝ[batch: B, model: 4] = batch.0
  y : ℝ[batch: B, model: 4] = batch.1
  %4 : ℝ[batch: B, model: 4] = call Tower.apply(θ, x)
  %5 : ℝ[batch: B, model: 4] = sub %4, y
  %6 : ℝ[batch: B, model: 4] = pow 2 %5
  %7 : ℝ[] = mean %6
  return %7
}
"""

T = TensorAttr.get


def _context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(core.Core)
    return ctx


def parse(text: str) -> ModuleOp:
    return Parser(_context(), text).parse_module()


def emit(func: core.FuncOp, op: Operation) -> SSAValue:
    """Append `op` to the body of `func`; its result, if it has one."""
    func.body.block.add_op(op)
    return op.results[0] if op.results else op  # type: ignore[return-value]


# --- the tutorial, built the way the lowering builds it ---------------------------------


def _declarations() -> dict[str, core.ModuleDeclOp]:
    return {
        "Linear": core.ModuleDeclOp("Linear", ["In", "Out"], [
            core.ParamDeclOp("w", T("In", "Out"), init="xavier_uniform"),
            core.ParamDeclOp("b", T("Out"), init="zeros"),
        ]),
        "RMSNorm": core.ModuleDeclOp("RMSNorm", ["D"], [
            core.ParamDeclOp("γ", T("D"), init="ones"),
        ]),
        "Block": core.ModuleDeclOp("Block", [], [
            core.UseDeclOp("norm", ParamsAttr.get("RMSNorm", [4])),
            core.UseDeclOp("proj", ParamsAttr.get("Linear", [4, 4])),
        ]),
        "Tower": core.ModuleDeclOp("Tower", [], [
            core.UseDeclOp("blocks", ParamsAttr.get("Block", [], stack=[3])),
            core.UseDeclOp("final", ParamsAttr.get("RMSNorm", [4])),
        ]),
    }


def _signatures() -> dict[str, core.FuncOp]:
    model4 = T(("model", 4), prefix=True)
    pair = TupleType([T(("batch", "B"), ("model", 4))] * 2)
    return {
        "Linear.apply": core.FuncOp(
            "Linear.apply",
            [("θ", ParamsAttr.get("Linear", ["In", "Out"])), ("x", T("In", prefix=True))],
            T("Out", prefix=True), dims=["In", "Out"],
        ),
        "RMSNorm.apply": core.FuncOp(
            "RMSNorm.apply",
            [("θ", ParamsAttr.get("RMSNorm", ["D"])), ("x", T(("model", "D"), prefix=True)),
             ("eps", f64)],
            T(("model", "D"), prefix=True), dims=["D"],
        ),
        "Block.apply": core.FuncOp(
            "Block.apply", [("θ", ParamsAttr.get("Block")), ("x", model4)], model4
        ),
        "Tower.apply": core.FuncOp(
            "Tower.apply", [("θ", ParamsAttr.get("Tower")), ("x", model4)], model4
        ),
        "loss": core.FuncOp(
            "loss", [("θ", ParamsAttr.get("Tower")), ("batch", pair)], T(), dims=["B"]
        ),
    }


def _linear(f: core.FuncOp, decl: core.ModuleDeclOp) -> None:
    θ, x = f.args
    w = emit(f, core.FieldOp(θ, "w", site="Linear.apply/%2", name="w", decl=decl))
    y = emit(f, core.DotOp(x, w, site="Linear.apply/%3"))
    b = emit(f, core.FieldOp(θ, "b", site="Linear.apply/%4", name="b", decl=decl))
    z = emit(f, core.AddOp(y, b, site="Linear.apply/%5"))
    emit(f, core.ReturnOp(z, site="Linear.apply/return"))


def _rmsnorm(f: core.FuncOp, decl: core.ModuleDeclOp) -> None:
    θ, x, eps = f.args
    sq = emit(f, core.PowIOp(x, 2, site="RMSNorm.apply/%3"))
    ms = emit(f, core.MeanOp(sq, "model", site="RMSNorm.apply/%4", name="ms"))
    e = emit(f, core.RealOp(eps, site="RMSNorm.apply/%5"))
    s = emit(f, core.AddOp(ms, e, site="RMSNorm.apply/%6"))
    r = emit(f, core.SqrtOp(s, site="RMSNorm.apply/%7"))
    n = emit(f, core.DivOp(x, r, site="RMSNorm.apply/%8"))
    γ = emit(f, core.FieldOp(θ, "γ", site="RMSNorm.apply/%9", name="γ", decl=decl))
    out = emit(f, core.MulOp(n, γ, site="RMSNorm.apply/%10"))
    emit(f, core.ReturnOp(out, site="RMSNorm.apply/return"))


def _block(f: core.FuncOp, decl: core.ModuleDeclOp, fns: dict[str, core.FuncOp]) -> None:
    θ, x = f.args
    norm = emit(f, core.FieldOp(θ, "norm", site="Block.apply/%2", name="norm", decl=decl))
    eps = emit(f, core.ConstantOp(1e-6, site="Block.apply/%3"))
    h = emit(f, core.CallOp(fns["RMSNorm.apply"], [norm, x, eps], dims={"D": 4},
                            site="Block.apply/%4"))
    g = emit(f, core.GeluOp(h, site="Block.apply/%5"))
    proj = emit(f, core.FieldOp(θ, "proj", site="Block.apply/%6", name="proj", decl=decl))
    p = emit(f, core.CallOp(fns["Linear.apply"], [proj, g], dims={"Out": 4, "In": 4},
                            site="Block.apply/%7"))
    out = emit(f, core.AddOp(x, p, site="Block.apply/%8"))
    emit(f, core.ReturnOp(out, site="Block.apply/return"))


def _tower(f: core.FuncOp, decl: core.ModuleDeclOp, fns: dict[str, core.FuncOp]) -> None:
    θ, x = f.args
    blocks = emit(f, core.FieldOp(θ, "blocks", site="Tower.apply/%2", name="blocks", decl=decl))
    h = emit(f, core.FoldOp(fns["Block.apply"], blocks, x, site="Tower.apply/%3"))
    final = emit(f, core.FieldOp(θ, "final", site="Tower.apply/%4", name="final", decl=decl))
    eps = emit(f, core.ConstantOp(1e-6, site="Tower.apply/%5"))
    out = emit(f, core.CallOp(fns["RMSNorm.apply"], [final, h, eps], dims={"D": 4},
                              site="Tower.apply/%6"))
    emit(f, core.ReturnOp(out, site="Tower.apply/return"))


def _loss(f: core.FuncOp, fns: dict[str, core.FuncOp]) -> None:
    θ, batch = f.args
    x = emit(f, core.GetOp(batch, 0, site="loss/%2", name="x"))
    y = emit(f, core.GetOp(batch, 1, site="loss/%3", name="y"))
    p = emit(f, core.CallOp(fns["Tower.apply"], [θ, x], site="loss/%4"))
    d = emit(f, core.SubOp(p, y, site="loss/%5"))
    sq = emit(f, core.PowIOp(d, 2, site="loss/%6"))
    m = emit(f, core.MeanOp(sq, site="loss/%7"))
    emit(f, core.ReturnOp(m, site="loss/return"))


def build_tutorial() -> ModuleOp:
    decls, fns = _declarations(), _signatures()
    module = ModuleOp([*decls.values(), *fns.values()])
    _linear(fns["Linear.apply"], decls["Linear"])
    _rmsnorm(fns["RMSNorm.apply"], decls["RMSNorm"])
    _block(fns["Block.apply"], decls["Block"], fns)
    _tower(fns["Tower.apply"], decls["Tower"], fns)
    _loss(fns["loss"], fns)
    return module


def test_the_tutorial_built_from_python_verifies_and_lists_as_the_reference():
    module = build_tutorial()
    module.verify()
    assert format_module(module).splitlines() == REFERENCE_LISTING.splitlines()
    assert format_module(module) == REFERENCE_LISTING


def test_the_tutorial_mlir_lists_as_the_reference():
    module = parse(TUTORIAL_MLIR.read_text())
    module.verify()
    assert format_module(module).splitlines() == REFERENCE_LISTING.splitlines()


def test_the_python_built_tutorial_prints_the_mlir_file_prints():
    from_file = parse(TUTORIAL_MLIR.read_text())
    built = build_tutorial()
    # SSA names differ (the file names its values); the text without them must agree.
    assert _anonymous(str(built)) == _anonymous(str(from_file))
    # And what Python built reads back as the same module.
    assert str(parse(str(built))) == str(built)


def _anonymous(text: str) -> str:
    return re.sub(r"%[A-Za-z_][\w$.]*|%\d+", "%_", text)


def test_inferred_types_follow_the_shape_algebra():
    module = build_tutorial()
    ops = {op.site.data: op for op in module.walk() if isinstance(op, core.CoreOp)}
    assert ops["Linear.apply/%3"].results[0].type == T("Out", prefix=True)
    assert ops["RMSNorm.apply/%4"].results[0].type == T(prefix=True)
    assert ops["Block.apply/%7"].results[0].type == T(4, prefix=True)
    assert ops["Block.apply/%8"].results[0].type == T(("model", 4), prefix=True)
    assert ops["loss/%4"].results[0].type == T(("batch", "B"), ("model", 4))
    assert ops["loss/%7"].results[0].type == TensorAttr.scalar()
    assert ops["Tower.apply/%2"].results[0].type == ParamsAttr.get("Block", [], [3])


def test_call_dims_take_the_callee_order():
    module = build_tutorial()
    call = next(op for op in module.walk()
                if isinstance(op, core.CallOp) and op.callee_name == "Linear.apply")
    assert list(call.dim_env) == ["In", "Out"]


def test_format_module_selects_functions_by_name():
    module = build_tutorial()
    text = format_module(module, names=["loss", "Linear.apply"])
    assert [line for line in text.splitlines() if line.startswith("fn ")] == [
        "fn Linear.apply{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In]) -> ℝ[..., Out] {",
        "fn loss{B}(θ : params Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] {",
    ]
    with pytest.raises(KeyError, match="Missing.apply"):
        format_module(module, names=["Missing.apply"])


# --- the other ops, from Python and in the listing --------------------------------------


def _scratch(args: list[tuple[str, object]], result, dims=()) -> tuple[ModuleOp, core.FuncOp]:
    f = core.FuncOp("f", args, result, dims=dims)  # type: ignore[arg-type]
    return ModuleOp([f]), f


def test_listing_forms_of_the_ops_the_reference_does_not_show():
    x_t = T(("batch", "B"), ("model", "D"))
    module, f = _scratch([("x", x_t), ("y", T("D"))], TupleType([x_t, T()]), dims=["B", "D"])
    x, y = f.args
    sm = emit(f, core.SoftmaxOp(x, "model", site="f/%2"))
    lse = emit(f, core.LogSumExpOp(sm, site="f/%3"))
    mx = emit(f, core.MaxOp(sm, "batch", site="f/%4", name="m"))
    mn = emit(f, core.MinimumOp(mx, y, site="f/%5"))
    pw = emit(f, core.PowOp(mn, y, site="f/%6"))
    ng = emit(f, core.NegOp(pw, site="f/%7"))
    bc = emit(f, core.BroadcastOp(ng, x_t, site="f/%8"))
    c = emit(f, core.ConstantOp(0.1, site="f/%9", result_type=TensorAttr.scalar()))
    s = emit(f, core.AddOp(lse, c, site="f/%10"))
    t = emit(f, core.TupleOp([bc, s], site="f/%11", name="pair"))
    emit(f, core.ReturnOp(t, site="f/return"))
    module.verify()
    assert format_function(f) == (
        "fn f{B D}(x : ℝ[batch: B, model: D], y : ℝ[D]) -> (ℝ[batch: B, model: D], ℝ[]) {\n"
        "  %2 : ℝ[batch: B, model: D] = softmax axis model x\n"
        "  %3 : ℝ[] = logsumexp %2\n"
        "  m : ℝ[model: D] = max axis batch %2\n"
        "  %5 : ℝ[model: D] = minimum m, y\n"
        "  %6 : ℝ[model: D] = pow %5, y\n"
        "  %7 : ℝ[model: D] = neg %6\n"
        "  %8 : ℝ[batch: B, model: D] = broadcast %7 to ℝ[batch: B, model: D]\n"
        "  %9 : ℝ[] = 0.1\n"
        "  %10 : ℝ[] = add %3, %9\n"
        "  pair : (ℝ[batch: B, model: D], ℝ[]) = (%8, %10)\n"
        "  return pair\n"
        "}\n"
    )


def test_a_fold_over_a_polymorphic_module_names_its_dims():
    module = parse(OPS_MLIR.read_text())
    module.verify()
    net = next(f for f in module.ops if isinstance(f, core.FuncOp) and f.sym_name.data == "Net.apply")
    assert "  %3 : ℝ[..., γ: 4] = fold 2 Lin.apply{I = 4, O = 4}(stacked layers; acc x)" in (
        format_function(net).splitlines()
    )


@pytest.mark.parametrize("value, text", [
    (1e-6, "1e-6"), (0.01, "0.01"), (1.0, "1.0"), (2.5e-07, "2.5e-7"), (1e16, "1e16"),
    (-3.0, "-3.0"), (1 / 3, "0.3333333333333333"), (1e300, "1e300"),
])
def test_floats_print_shortest_and_read_back(value, text):
    assert format_float(value) == text
    assert float(text) == value


# --- verifier failures name the site ----------------------------------------------------


def test_a_wrong_result_type_fails_verification_naming_the_site():
    module, f = _scratch([("x", T(("model", 4), prefix=True)), ("γ", T(4))], T(("model", 4), prefix=True))
    x, γ = f.args
    bad = emit(f, core.MulOp(x, γ, site="f/%2", result_type=T(4)))
    emit(f, core.ReturnOp(bad, site="f/return"))
    with pytest.raises(VerifyException, match=r"^f/%2: psk_core.mul: the operands make ℝ\[\.\.\., model: 4\], not ℝ\[4\]"):
        module.verify()


def test_an_inference_that_fails_names_the_site_at_construction():
    _, f = _scratch([("x", T(("model", "D"))), ("w", T("E", "F"))], T(), dims=["D", "E", "F"])
    x, w = f.args
    with pytest.raises(VerifyException, match=r"^Net.apply/%7: axis sizes D and E differ"):
        core.DotOp(x, w, site="Net.apply/%7")
    with pytest.raises(VerifyException, match=r"^f/%3: .* has no axis `batch`"):
        core.MeanOp(x, "batch", site="f/%3")


def test_a_call_whose_argument_does_not_fit_names_the_site():
    module = build_tutorial()
    block = next(f for f in module.ops if isinstance(f, core.FuncOp) and f.sym_name.data == "Block.apply")
    call = next(op for op in block.body.block.ops if isinstance(op, core.CallOp))
    call.attributes["dims"] = core._dims_attr({"D": 8})
    with pytest.raises(VerifyException, match=(
        r"^Block.apply/%4: psk_core.call: argument `θ` of @RMSNorm.apply: "
        r"params RMSNorm\{4\} does not fit params RMSNorm\{D\} with D = 8"
    )):
        module.verify()


def test_a_field_read_outside_a_module_cannot_be_checked():
    decl = _declarations()["Linear"]
    f = core.FuncOp("f", [("θ", ParamsAttr.get("Linear", [2, 3]))], T(2, 3))
    w = emit(f, core.FieldOp(f.args[0], "w", site="f/%1", decl=decl))
    assert w.type == T(2, 3)
    emit(f, core.ReturnOp(w, site="f/return"))
    with pytest.raises(VerifyException, match=r"^f/%1: psk_core.field: @Linear cannot be looked up"):
        f.verify()


def test_a_stacked_tree_adds_its_counts_to_tensors_and_keeps_sub_trees_stacked():
    decls = _declarations()
    stacked = ParamsAttr.get("Block", [], [3])
    assert core.field_type(stacked, "proj", decls["Block"]) == ParamsAttr.get("Linear", [4, 4], [3])
    proj = ParamsAttr.get("Linear", [4, 4], [3])
    assert core.field_type(proj, "w", decls["Linear"]) == T(3, 4, 4)
    assert core.field_type(proj, "b", decls["Linear"]) == T(3, 4)


# --- the types --------------------------------------------------------------------------

NAMES = st.sampled_from(["model", "batch", "γ", "θ", "in.x", "a_b", "Блок", "x1", "stack"])
SIZES = st.one_of(st.integers(0, 64), st.sampled_from(["D", "B", "In", "δ", "L"]))
AXES = st.builds(Axis, st.one_of(st.none(), NAMES), SIZES)


@st.composite
def tensor_types(draw) -> TensorType:
    axes = draw(st.lists(AXES, max_size=4, unique_by=lambda a: a.name or object()))
    return TensorType(tuple(axes), draw(st.booleans()))


@given(tensor_types())
def test_tensor_types_convert_both_ways_and_read_back_as_printed(shape: TensorType):
    attr = TensorAttr.from_shape(shape)
    assert attr.shape == shape
    assert Parser(_context(), str(attr)).parse_type() == attr


@given(NAMES, st.lists(SIZES, max_size=3), st.lists(SIZES, max_size=2))
def test_params_types_read_back_as_printed(module, dims, stack):
    attr = ParamsAttr.get(module, dims, stack)
    assert Parser(_context(), str(attr)).parse_type() == attr


def test_type_texts_are_the_listings():
    assert str(T(("model", "D"), 4, prefix=True)) == "!psk_core.tensor<..., model: D, 4>"
    assert str(TensorAttr.scalar()) == "!psk_core.tensor<>"
    assert str(T(("γ", "D"))) == '!psk_core.tensor<"γ": D>'
    assert core.type_text(ParamsAttr.get("Block", [], [3])) == "params stack{3}(Block)"
    assert core.type_text(ParamsAttr.get("Linear", ["In", "Out"])) == "params Linear{In, Out}"
    assert core.type_text(TupleType([T(4), f64])) == "(ℝ[4], f64)"


def test_unicode_names_survive_a_round_trip_through_text():
    module = build_tutorial()
    again = parse(str(module))
    rms = next(f for f in again.ops if isinstance(f, core.FuncOp) and f.sym_name.data == "RMSNorm.apply")
    assert rms.arg_name_list == ("θ", "x", "eps")
    field = next(op for op in rms.body.block.ops if isinstance(op, core.FieldOp))
    assert field.field.data == "γ" and field.source_name is not None
