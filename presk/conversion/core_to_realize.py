"""convert-psk-core-to-realize: record one entry of a PSK-Core module at concrete dims,
under a realization, as PSK-Realize.

`record(core_module, entry, dims, realization)` returns a new builtin module holding one
`psk_realize.func` per INSTANCE: a Core function at one set of dims, argument types and
hyperparameter values (f64 and nat arguments are not arguments of an instance: their
values are part of it, `real eps` becomes a constant). Arguments are tensors only: a
parameter tree is flattened to its leaves in declaration order (named by path,
`θ.norm.γ`), a tuple to its elements (`batch.0`).

Shapes are evaluated, not values: every Core value gets its concrete shape (dims bound,
`...` replaced by the axes the arguments bind it to) and a type from the realization
(docs/artifacts.md states the rule: a listed site's type; a follower takes its readers'
type; a carried value the type of what it carries; anything else f64). An op reading an
operand of another type reads it through an explicit `convert` under the op's site; a
bf16 site computes in f32 and is converted to bf16.

Binary ops carry their broadcast placements, computed from the Core op's SYMBOLIC types
(presk.shapes.alignment) plus the prefix length, never from the concrete shapes: at
concrete sizes ℝ[4] against ℝ[..., model: 4] would be ambiguous.

Instances: the one that runs most often per call of the entry keeps the Core function's
name, the others take `_2`, `_3` in that order (ties: the first recorded first). A fold
whose iteration i's instance does not return its accumulator's type has iteration i
recorded apart (`slice` of each stacked leaf at i, a `call`), until the instance repeats;
the rest is one `fold` over i..n-1.

The functions psk-differentiate makes are recorded too (`record_value_and_gradient` gives
`presk run --grad` its entry): residual tuples and trees are flattened like arguments (an
f64 in a result is a value of the instance, rebuilt by its caller), `tree` and tuples cost
nothing, `zeros_like` is a constant broadcast, and `fold_fwd`, `fold_scan`, `fold_bwd`,
`fold_vjp` are one call per iteration (each iteration's residuals are values of their own
types; the reverse folds' parameter cotangents are stacked, `psk_realize.stack`). A value
cloned from f keeps the type it has in f (`_site_types`): docs/artifacts.md.

The file is a little over the house's ~800 lines: the recorder is one walk over Core's
ops sharing one state (instances, the realization's types, sites); its per-op rules
would move to a table of recorders like realize_to_kernel's builders, not done yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from xdsl.context import Context
from xdsl.dialects.builtin import Float64Type, IntegerType, ModuleOp, TupleType, UnitAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from presk import ops, shapes
from presk.analysis.realization import Realization, RealizationError, load_realization
from presk.dialects import core as C
from presk.dialects import realize as R
from presk.dialects.common import replace_module_body, verify_built
from presk.shapes import Axis, TensorType
from presk.limits import parse_size


class RecordError(Exception):
    """An entry that cannot be recorded (a missing dim, an op not supported yet)."""


# --------------------------------------------------------------------------------------
# Core op classification
# --------------------------------------------------------------------------------------

# each element-wise function's Core op → its Realize op (the table's rows, presk/ops)
UNARY: dict[type, type] = {C.FUNCTION_OPS[f.name]: R.FUNCTION_OPS[f.name]
                           for f in ops.rows(arity=1, core=True)}
BINARY: dict[type, type] = {C.FUNCTION_OPS[f.name]: R.FUNCTION_OPS[f.name]
                            for f in ops.rows(arity=2, core=True)}
REDUCE: dict[type, type] = {
    C.SumOp: R.SumOp, C.MeanOp: R.MeanOp, C.MaxOp: R.MaxOp, C.MinOp: R.MinOp,
    C.LogSumExpOp: R.LogSumExpOp,
}
_COMPUTE = (C.SoftmaxOp, C.DotOp, C.ContractOp, C.SumToOp, C.SpreadOp, C.BroadcastOp)


def core_elementwise(op: Operation) -> bool:
    """A Core op that computes element-wise on reals (softmax and dot are not)."""
    return type(op) in UNARY or type(op) in BINARY or isinstance(op, (C.PowIOp, C.HeavisideOp))


def core_compute(op: Operation) -> bool:
    """A Core op that computes on reals: one launch once realized."""
    return core_elementwise(op) or type(op) in REDUCE or isinstance(op, _COMPUTE)


def _same_shape(a: Attribute, b: Attribute) -> bool:
    if not isinstance(a, C.TensorAttr) or not isinstance(b, C.TensorAttr):
        return False
    x, y = a.shape, b.shape
    return x.prefix == y.prefix and [s.size for s in x.axes] == [s.size for s in y.axes]


def _compute_type(t: str) -> str:
    return "f32" if t == "bf16" else t


def site_types(func: C.FuncOp, realization: Realization) -> dict[str, str]:
    """The type of every computed value of a Core function: a listed site's own; a
    follower's (an element-wise value, not listed, every reader element-wise of its shape
    and all of one type) its readers' compute type; anything else f64."""
    types: dict[str, str] = {}
    for op in reversed(list(func.body.block.ops)):
        if not core_compute(op) and not isinstance(op, (C.RealOp, C.ConstantOp)):
            continue
        site = op.site.data  # type: ignore[attr-defined]
        if site in realization.sites:
            types[site] = realization.sites[site]
            continue
        if core_elementwise(op):
            readers = [u.operation for u in op.results[0].uses]
            if readers and all(core_elementwise(r) and _same_shape(r.results[0].type,
                                                                    op.results[0].type)
                               for r in readers):
                kinds = {_compute_type(types.get(r.site.data, "f64")) for r in readers}  # type: ignore[attr-defined]
                if len(kinds) == 1:
                    types[site] = kinds.pop()
                    continue
        types[site] = "f64"
    return types


# --------------------------------------------------------------------------------------
# Values at record time
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hyper:
    """An f64 or nat hyperparameter: a value of the instance, not an argument."""

    value: float | int


@dataclass(frozen=True)
class PTree:
    """A parameter tree: its leaves in declaration order, by path below it."""

    items: tuple[tuple[str, Any], ...]

    def field(self, name: str) -> Any:
        for path, leaf in self.items:
            if path == name:
                return leaf
        sub = tuple((p[len(name) + 1:], v) for p, v in self.items if p.startswith(name + "."))
        if not sub:
            raise RecordError(f"a parameter tree has no field `{name}`")
        return PTree(sub)


@dataclass(frozen=True)
class Steps:
    """A fold's iterations' results recorded as one loop (`fold_fwd`): the form of one
    iteration's result (a spec: types, trees, tuples, Hyper values) and, per tensor leaf
    of it in order, the stacked value (iteration l at element l; in a spec its type).
    `last`: the last iteration's accumulator (leaf 0) where the loop was recorded, which
    the fold's own result reads without the stack."""

    form: Any
    stacks: tuple
    last: Any = None

    @property
    def count(self) -> int:
        return R._ttype(self.stacks[0]).sizes[0] if isinstance(self.stacks[0], SSAValue) \
            else self.stacks[0].sizes[0]


Value = Union[SSAValue, tuple, PTree, Hyper, Steps]


def _leaves(value: Any, name: str) -> list[tuple[str, Any]]:
    """The tensor leaves of a value (SSA values or types), with their argument names."""
    if isinstance(value, PTree):
        return [(f"{name}.{p}", v) for p, v in value.items]
    if isinstance(value, tuple):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{name}.{i}")]
    if isinstance(value, Hyper):
        return []
    if isinstance(value, Steps):
        return [(n, v) for (n, _), v in zip(_leaves(value.form, name), value.stacks)]
    return [(name, value)]


def _hypers(value: Any) -> list[Any]:
    if isinstance(value, Steps):
        return _hypers(value.form)
    if isinstance(value, tuple):
        return [h for v in value for h in _hypers(v)]
    return [value.value] if isinstance(value, Hyper) else []


def _spec(value: Any) -> Any:
    """The value with each tensor replaced by its type: what an instance is keyed by."""
    if isinstance(value, PTree):
        return PTree(tuple((p, _spec(v)) for p, v in value.items))
    if isinstance(value, tuple):
        return tuple(_spec(v) for v in value)
    if isinstance(value, Steps):
        return Steps(value.form, tuple(v.type for v in value.stacks))
    if isinstance(value, SSAValue):
        return value.type
    return value


def _type_key(t: Attribute) -> tuple:
    assert isinstance(t, R.RTensorType)
    return (R.element_name(t), t.sizes)


def _sliced(t: R.RTensorType) -> R.RTensorType:
    from xdsl.dialects.builtin import ArrayAttr
    return R.RTensorType(t.element, ArrayAttr(t.axes.data[1:]))


@dataclass
class Instance:
    func: R.FuncOp
    source: str
    results: list[R.RTensorType]
    result_form: Any  # the result's spec (types, trees, tuples, Hyper values): _bind rebuilds it
    order: int
    temp: str = ""
    runs: int = 0
    callers: list[Operation] = field(default_factory=list)  # call and fold ops naming it
    callees: list[tuple["Instance", int]] = field(default_factory=list)


# --------------------------------------------------------------------------------------
# The recorder
# --------------------------------------------------------------------------------------


class Recorder:
    def __init__(self, core: ModuleOp, realization: Realization):
        self.core = core
        self.realization = realization
        self.funcs = {op.sym_name.data: op for op in core.ops if isinstance(op, C.FuncOp)}
        self.decls = {op.sym_name.data: op for op in core.ops if isinstance(op, C.ModuleDeclOp)}
        self.instances: dict[tuple, Instance] = {}
        self.ordered: list[Instance] = []
        self._types: dict[str, dict[str, str]] = {}

    # ---- the entry ----
    def record(self, entry: str, dims: dict[str, int]) -> ModuleOp:
        if entry not in self.funcs:
            raise RecordError(f"no function `{entry}` (the functions: {', '.join(self.funcs)})")
        func = self.funcs[entry]
        self._check_realization()
        missing = [d for d in func.dim_names if d not in dims]
        if missing:
            raise RecordError(f"`{entry}` needs " + " ".join(f"--dim {d}=N" for d in missing))
        env = {d: dims[d] for d in func.dim_names}
        args = [self._entry_arg(n, t, env) for n, t in zip(func.arg_name_list,
                                                           func.function_type.inputs.data)]
        top = self.instance(entry, env, args, entry=True)
        if _hypers(top.result_form):
            raise RecordError(f"`{entry}` returns an f64 or nat: an entry returns tensors")
        self._count_runs(top)
        self._name_instances(top)
        return ModuleOp([inst.func for inst in self.ordered])

    def _check_realization(self) -> None:
        for site in self.realization.sites:
            fn, _, number = site.rpartition("/%")
            if fn not in self.funcs and _forward_of(fn) in self.funcs:
                continue  # the reverse sweep's: typed when the gradient is recorded
            if fn not in self.funcs:
                raise RealizationError(f"the realization's site `{site}` names no function of "
                                       "the program")
            known = {op.site.data for op in self.funcs[fn].body.block.ops  # type: ignore[attr-defined]
                     if op.results}
            if site not in known:
                raise RealizationError(f"the realization's site `{site}`: {fn} computes no "
                                       f"value %{number}")
        for site in self.realization.fma:
            fn = site.rpartition("/%")[0]
            if fn not in self.funcs and _forward_of(fn) in self.funcs:
                continue  # a reverse-sweep contraction: fused when the gradient is recorded
            computed = {op.site.data: op for op in self.funcs[fn].body.block.ops  # type: ignore[attr-defined]
                        if op.results} if fn in self.funcs else {}
            if not isinstance(computed.get(site), (C.DotOp, C.ContractOp)):
                raise RealizationError(f"the realization's fma site `{site}` is not a "
                                       "contraction (a dot or contract) of the program")

    def _entry_arg(self, name: str, t: Attribute, env: dict[str, int]) -> Any:
        if isinstance(t, C.ParamsAttr):
            from presk.analysis.weights import WeightsError, tree_fields
            try:
                fields = tree_fields(self.core, t, env)
            except WeightsError as exc:
                raise RecordError(str(exc)) from None
            known = {f.path for f in fields}
            for path in self.realization.params:
                if path not in known:
                    raise RealizationError(f"the realization's parameter `{path}` is not a "
                                           f"parameter of `{name}` (its parameters: "
                                           f"{', '.join(sorted(known))})")
            return PTree(tuple(
                (f.path, R.RTensorType.get(self.realization.param_type(f.path), f.shape))
                for f in fields))
        if isinstance(t, TupleType):
            return tuple(self._entry_arg(f"{name}.{i}", e, env)
                         for i, e in enumerate(t.types.data))
        if isinstance(t, C.TensorAttr):
            shape = t.shape
            if shape.prefix:
                raise RecordError(f"the entry's argument `{name}` is {shape}: its `...` has no "
                                  "value; record a function with fixed axes")
            return R.RTensorType.from_shape("f64", shape.substitute(env))
        raise RecordError(f"the entry's argument `{name}` is {C.type_text(t)}: an entry takes "
                          "tensors, tuples and parameter trees")

    # ---- instances ----
    def instance(self, name: str, dims: dict[str, int], specs: list[Any],
                 entry: bool = False) -> Instance:
        """The instance of Core function `name` at `dims` for arguments of these specs
        (types in place of tensors, Hyper values), recorded on first use."""
        func = self.funcs[name]
        leaves = [(n, t) for a, spec in zip(func.arg_name_list, specs) for n, t in _leaves(spec, a)]
        key = (name, tuple(sorted(dims.items())), tuple(_type_key(t) for _, t in leaves),
               tuple(h for s in specs for h in _hypers(s)))
        if key in self.instances:
            return self.instances[key]
        prefix = _bound_prefix(func, specs)
        arg_types = [self._arg_type(func, a, spec, dims, prefix) for a, spec in
                     zip(func.function_type.inputs.data, specs)]
        flat = [(n, t) for a, spec in zip(func.arg_name_list, arg_types)
                for n, t in _leaves(spec, a)]
        self._serial = getattr(self, "_serial", 0) + 1
        temp = f"{name}#{self._serial}"
        rfunc = R.FuncOp.make(temp, name, flat, [], dims, entry=entry)
        block = rfunc.body.block
        it = iter(block.args)
        values = [_bind(spec, it) for spec in arg_types]
        body = _Body(self, func, block, dims, prefix, self._site_types(name))
        results, form = body.run(values)
        from xdsl.dialects.builtin import FunctionType
        rfunc.attributes["function_type"] = FunctionType.from_lists(
            [a.type for a in block.args], [r.type for r in results])
        inst = Instance(rfunc, name, [r.type for r in results], form, len(self.ordered), temp)
        inst.callees = body.callees
        self.instances[key] = inst
        self.ordered.append(inst)
        return inst

    def _arg_type(self, func: C.FuncOp, declared: Attribute, spec: Any, dims: dict[str, int],
                  prefix: tuple[Axis, ...] | None) -> Any:
        """An argument's spec with its tensors named as the callee declares them."""
        if isinstance(declared, C.TensorAttr) and isinstance(spec, R.RTensorType):
            try:
                shape = _concrete(declared.shape, dims, prefix)
            except RecordError:
                return spec
            if tuple(int(a.size) for a in shape.axes) != spec.sizes:
                return spec
            return R.RTensorType.from_shape(spec.element, shape)
        if isinstance(declared, TupleType) and isinstance(spec, tuple):
            return tuple(self._arg_type(func, d, s, dims, prefix)
                         for d, s in zip(declared.types.data, spec))
        return spec

    def _site_types(self, name: str) -> dict[str, str]:
        """The function's site types; in a function psk-differentiate made (`f.fwd`,
        `f.bwd`, `f.vjp`, `f.value_vjp`) a value cloned from f keeps the type it has in f
        (its site is f's), so residuals and recomputed values are what the forward stores."""
        if name not in self._types:
            types = site_types(self.funcs[name], self.realization)
            base = _forward_of(name)
            if base is not None and base in self.funcs:
                forward = self._site_types(base)
                types.update({s: t for s, t in forward.items() if s in types})
            self._types[name] = types
        return self._types[name]

    # ---- after recording ----
    def _count_runs(self, top: Instance) -> None:
        def visit(inst: Instance, times: int) -> None:
            inst.runs += times
            for callee, n in inst.callees:
                visit(callee, times * n)
        visit(top, 1)

    def _name_instances(self, top: Instance) -> None:
        by_source: dict[str, list[Instance]] = {}
        for inst in self.ordered:
            by_source.setdefault(inst.source, []).append(inst)
        from xdsl.dialects.builtin import StringAttr, SymbolRefAttr
        for source, insts in by_source.items():
            insts.sort(key=lambda i: (-i.runs, i.order))
            for k, inst in enumerate(insts):
                inst.func.attributes["sym_name"] = StringAttr(source if k == 0 else
                                                              f"{source}_{k + 1}")
        by_temp = {i.temp: i for i in self.ordered}
        for inst in self.ordered:
            for op in inst.func.walk():
                if isinstance(op, (R.CallOp, R.FoldOp)):
                    target = by_temp[op.callee_name]
                    op.attributes["callee"] = SymbolRefAttr(target.func.sym_name.data)


VJP_SUFFIXES = (".fwd", ".bwd", ".vjp", ".value_vjp")
"""The functions psk-differentiate makes of a function f: f.fwd, f.bwd, f.vjp, f.value_vjp."""


def _forward_of(name: str) -> str | None:
    for suffix in VJP_SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return None


def _bind(spec: Any, args) -> Any:
    """A value of this spec made of the next block arguments."""
    if isinstance(spec, PTree):
        return PTree(tuple((p, next(args)) for p, _ in spec.items))
    if isinstance(spec, tuple):
        return tuple(_bind(s, args) for s in spec)
    if isinstance(spec, Hyper):
        return spec
    if isinstance(spec, Steps):
        return Steps(spec.form, tuple(next(args) for _ in spec.stacks))
    return next(args)


def _bound_prefix(func: C.FuncOp, specs: list[Any]) -> tuple[Axis, ...] | None:
    """What the function's `...` stands for: the leading axes of the first argument whose
    declared type has it."""
    def find(t: Attribute, spec: Any) -> tuple[Axis, ...] | None:
        if isinstance(t, C.TensorAttr) and t.shape.prefix and isinstance(spec, R.RTensorType):
            axes = spec.axis_list
            return axes[:len(axes) - len(t.shape.axes)]
        if isinstance(t, TupleType) and isinstance(spec, tuple):
            for item_type, item in zip(t.types.data, spec):
                if (found := find(item_type, item)) is not None:
                    return found
        return None

    for t, spec in zip(func.function_type.inputs.data, specs):
        if (found := find(t, spec)) is not None:
            return found
    return None


def _concrete(shape: TensorType, dims: dict[str, int],
              prefix: tuple[Axis, ...] | None) -> TensorType:
    axes = []
    for a in shape.axes:
        size = dims.get(a.size, a.size) if isinstance(a.size, str) else a.size
        if not isinstance(size, int):
            raise RecordError(f"the size `{a.size}` has no value")
        axes.append(Axis(a.name, size))
    if shape.prefix:
        if prefix is None:
            raise RecordError(f"the `...` of {shape} is bound by no argument")
        return TensorType(tuple(prefix) + tuple(axes), False)
    return TensorType(tuple(axes), False)


# --------------------------------------------------------------------------------------
# One instance's body
# --------------------------------------------------------------------------------------


class _Body:
    def __init__(self, rec: Recorder, func: C.FuncOp, block: Block, dims: dict[str, int],
                 prefix: tuple[Axis, ...] | None, types: dict[str, str]):
        self.rec, self.func, self.block = rec, func, block
        self.dims, self.prefix, self.types = dims, prefix, types
        self.callees: list[tuple[Instance, int]] = []

    def emit(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def run(self, args: list[Value]) -> tuple[list[SSAValue], Any]:
        env: dict[SSAValue, Any] = dict(zip(self.func.body.block.args, args))
        for op in self.func.body.block.ops:
            if isinstance(op, C.ReturnOp):
                value = env[op.value]
                leaves = [v for _, v in _leaves(value, "r")]
                self.emit(R.ReturnOp(leaves, site=op.site.data))
                self._drop_unread_slices()
                return leaves, _spec(value)
            try:
                env[op.results[0]] = self.step(op, [env[o] for o in op.operands])
            except (VerifyException, shapes.ShapeError) as exc:
                raise RecordError(f"{op.site.data}: {exc}") from None  # type: ignore[attr-defined]
        raise RecordError(f"{self.func.sym_name.data} has no return")

    def _drop_unread_slices(self) -> None:
        """A loop's iteration taken whole out of its stacks (`_step_value`) is read in part
        (the last accumulator): the slices nothing reads are erased."""
        for op in reversed(list(self.block.ops)):
            if isinstance(op, R.SliceOp) and not op.result.uses:
                self.block.erase_op(op)

    # ---- types ----
    def conc(self, t: Attribute, element: str) -> R.RTensorType:
        assert isinstance(t, C.TensorAttr)
        try:
            return R.RTensorType.from_shape(element, _concrete(t.shape, self.dims, self.prefix))
        except RecordError as exc:
            raise RecordError(f"{exc}") from None

    def plen(self, t: Attribute) -> int:
        """How many leading axes a Core type's `...` stands for here."""
        assert isinstance(t, C.TensorAttr)
        return len(self.prefix or ()) if t.shape.prefix else 0

    def read(self, value: SSAValue, element: str, site: str,
             cache: dict[SSAValue, SSAValue]) -> SSAValue:
        """The operand as the op reads it: converted when its type differs."""
        t = value.type
        assert isinstance(t, R.RTensorType)
        if R.element_name(t) == element:
            return value
        if value not in cache:
            cache[value] = self.emit(R.ConvertOp(value, element, site=site)).results[0]
        return cache[value]

    # ---- one Core op ----
    def step(self, op: Operation, args: list[Any]) -> Any:
        site = op.site.data  # type: ignore[attr-defined]
        name = op.source_name.data if getattr(op, "source_name", None) is not None else None  # type: ignore[attr-defined]
        if isinstance(op, C.GetOp) and isinstance(args[0], Steps):
            return self._step_value(args[0], op.index.value.data, site)
        if isinstance(op, C.GetOp):
            return args[0][op.index.value.data]
        if isinstance(op, C.TupleOp):
            return tuple(args)
        if isinstance(op, C.FieldOp):
            return args[0].field(op.field.data)
        if isinstance(op, C.ConstantOp):
            if isinstance(op.result.type, (Float64Type, IntegerType)):
                number = op.number
                return Hyper(int(number) if isinstance(op.result.type, IntegerType) else number)
            return self.emit(R.ConstantOp(op.number, self.types.get(site, "f64"), site=site,
                                          name=name)).results[0]
        if isinstance(op, C.RealOp):
            hyper = args[0]
            if not isinstance(hyper, Hyper):
                raise RecordError(f"{site}: real of a value that is not a hyperparameter")
            return self.emit(R.ConstantOp(float(hyper.value), self.types.get(site, "f64"),
                                          site=site, name=name)).results[0]
        if isinstance(op, C.CallOp):
            return self._call(op, args, site, name)
        if isinstance(op, C.FoldOp):
            return self._fold(op, args, site, name)
        if isinstance(op, C.TreeOp):
            return self._tree(op, args)
        if isinstance(op, C.ZerosLikeOp):
            return self._zeros_like(args[0], site, name)
        if isinstance(op, (C.FoldFwdOp, C.FoldScanOp)):
            return self._fold_forward(op, args, site, name)
        if isinstance(op, (C.FoldBwdOp, C.FoldVjpOp)):
            return self._fold_reverse(op, args, site, name)
        if isinstance(op, C.GradOp):
            raise RecordError(f"{site}: a `grad` is recorded once psk-differentiate has "
                              "replaced it (presk run --grad does)")
        if core_compute(op):
            return self._compute(op, args, site, name)
        raise RecordError(f"{site}: {op.name} is not recorded at PSK-Realize yet")

    def _compute(self, op: Operation, args: list[Any], site: str, name: str | None) -> SSAValue:
        stored = self.types.get(site, "f64")
        element = _compute_type(stored)
        result_t = self.conc(op.results[0].type, element)
        cache: dict[SSAValue, SSAValue] = {}
        tensor_args = args if not isinstance(op, C.SpreadOp) else args[:1]
        xs = [self.read(a, element, site, cache) for a in tensor_args]
        new = self._make(op, xs, args, result_t, site, name)
        if isinstance(new, (R.DotOp, R.ContractOp)) and self.rec.realization.fused(site):
            new.attributes["fma"] = UnitAttr()  # its multiply-adds fused (realize_to_kernel)
        value = self.emit(new).results[0]
        if stored != element:
            value = self.emit(R.ConvertOp(value, stored, site=site)).results[0]
        return value

    def _make(self, op: Operation, xs: list[SSAValue], args: list[Any],
              result_t: R.RTensorType, site: str, name: str | None) -> Operation:
        kw = {"site": site, "name": name}
        t = type(op)
        if t in UNARY:
            return UNARY[t](xs[0], result_type=result_t, **kw)
        if isinstance(op, C.PowIOp):
            return R.PowIOp(xs[0], op.n.value.data, **kw)
        if isinstance(op, C.HeavisideOp):
            return R.HeavisideOp(xs[0], op.at_zero_value, **kw)
        if t in BINARY:
            lhs, rhs = op.operands
            res, la, ra = shapes.alignment(lhs.type.shape, rhs.type.shape)  # type: ignore[attr-defined]
            p = len(self.prefix or ()) if res.prefix else 0
            lmap = (list(range(p)) if lhs.type.shape.prefix else []) + [p + i for i in la]  # type: ignore[attr-defined]
            rmap = (list(range(p)) if rhs.type.shape.prefix else []) + [p + i for i in ra]  # type: ignore[attr-defined]
            return BINARY[t](xs[0], xs[1], lmap, rmap, result_t, **kw)
        if t in REDUCE:
            axis = op.axis_name  # type: ignore[attr-defined]
            index = None
            if axis is not None:
                index = self.plen(op.operands[0].type) + \
                    op.operands[0].type.shape.index_of(axis)  # type: ignore[attr-defined]
            return REDUCE[t](xs[0], index, result_t, axis_name=axis, **kw)
        if isinstance(op, C.SoftmaxOp):
            axis = op.axis.data
            index = self.plen(op.operand.type) + op.operand.type.shape.index_of(axis)
            return R.SoftmaxOp(xs[0], index, axis_name=axis, **kw)
        if isinstance(op, C.DotOp):
            return R.DotOp(xs[0], xs[1], result_t, **kw)
        if isinstance(op, C.ContractOp):
            return self._contract(op, xs, result_t, kw)
        if isinstance(op, C.SumToOp):
            p = self.plen(op.operand.type)
            keep = (list(range(p)) if op.keep_prefix is not None else []) + \
                [p + k for k in op.kept]
            return R.SumToOp(xs[0], keep, result_t, **kw)
        if isinstance(op, C.SpreadOp):
            p = self.plen(op.like.type)
            places = (list(range(p)) if op.operand.type.shape.prefix else []) + \
                [p + k for k in op.place_list]
            like = args[1]
            return R.SpreadOp(xs[0], like, places, result_t, mean=op.mean is not None, **kw)
        if isinstance(op, C.BroadcastOp):
            source, target = op.operand.type.shape, op.result.type.shape
            _, places, _ = shapes.alignment(source, target)
            pt = self.plen(op.result.type)
            m = (list(range(pt)) if source.prefix else []) + [pt + x for x in places]
            return R.BroadcastOp(xs[0], m, result_t, **kw)
        raise RecordError(f"{site}: {op.name} is not recorded at PSK-Realize yet")

    def _contract(self, op: C.ContractOp, xs: list[SSAValue], result_t: R.RTensorType,
                  kw: dict) -> Operation:
        lhs, rhs, prefix = op.axes
        pa, pb = self.plen(op.lhs.type), self.plen(op.rhs.type)
        la = [pa + i for i in lhs] + (list(range(pa)) if prefix else [])
        ra = [pb + j for j in rhs] + (list(range(pb)) if prefix else [])
        a_rank = R._ttype(xs[0]).rank
        b_rank = R._ttype(xs[1]).rank
        rest_a = a_rank - len(la)
        n = rest_a + b_rank - len(ra)
        perm = None
        if pb and not prefix:  # b's prefix leads the result, as Core's type says
            perm = list(range(rest_a, rest_a + pb)) + list(range(rest_a)) + \
                list(range(rest_a + pb, n))
        return R.ContractOp(xs[0], xs[1], la, ra, result_t, perm=perm, **kw)

    # ---- calls and folds ----
    def _callee_dims(self, op: C.CallOp | C.FoldOp) -> dict[str, int]:
        out = {}
        for k, v in op.dim_env.items():
            size = self.dims.get(v, v) if isinstance(v, str) else v
            if not isinstance(size, int):
                raise RecordError(f"{op.site.data}: the dim {k} = {v} has no value")
            out[k] = size
        return out

    def _call(self, op: C.CallOp, args: list[Any], site: str, name: str | None) -> Any:
        return self._call_instance(op.callee_name, self._callee_dims(op), args, site, name)

    def _call_instance(self, callee: str, dims: dict[str, int], args: list[Any], site: str,
                       name: str | None = None) -> Any:
        """A call of `callee`'s instance for these arguments; its result rebuilt as the
        callee returns it (tuples, trees and f64 values from the instance's leaves)."""
        inst = self.rec.instance(callee, dims, [_spec(a) for a in args])
        leaves = [v for a in args for _, v in _leaves(a, "a")]
        call = self.emit(R.CallOp(inst.func.sym_name.data, leaves, inst.results, site=site,
                                  name=name))
        self.callees.append((inst, 1))
        return _bind(inst.result_form, iter(call.results))

    def _fold(self, op: C.FoldOp, args: list[Any], site: str, name: str | None) -> Any:
        tree, acc = args
        if not isinstance(tree, PTree) or not isinstance(acc, SSAValue):
            raise RecordError(f"{site}: a fold over a stacked tree with one tensor accumulator "
                              "is recorded; this one's accumulator is not a tensor")
        stacked = [v for _, v in tree.items]
        counts = {R._ttype(v).sizes[0] for v in stacked if R._ttype(v).rank}
        count = C.size_value(op.count)
        count = self.dims.get(count, count) if isinstance(count, str) else count
        if not isinstance(count, int) or (counts and counts != {count}):
            raise RecordError(f"{site}: the fold's count {count} is not its stack's")
        dims = self._callee_dims(op)
        sliced = PTree(tuple((p, _sliced(v.type)) for p, v in tree.items))
        i = 0
        while i < count:
            inst = self.rec.instance(op.callee_name, dims, [sliced, acc.type])
            if len(inst.results) != 1:
                raise RecordError(f"{site}: the fold's step returns {len(inst.results)} values")
            if R.fits(inst.results[0], acc.type):
                fold = self.emit(R.FoldOp(inst.func.sym_name.data, stacked, acc, i, count,
                                          site=site, name=name))
                self.callees.append((inst, count - i))
                return fold.results[0]
            slices = [self.emit(R.SliceOp(v, i, site=site)).results[0] for v in stacked]
            call = self.emit(R.CallOp(inst.func.sym_name.data, [*slices, acc], inst.results,
                                      site=site, name=name))
            self.callees.append((inst, 1))
            acc = call.results[0]
            i += 1
        return acc


    # ---- what reverse-mode differentiation makes ----
    def _tree(self, op: C.TreeOp, args: list[Any]) -> PTree:
        """A parameter tree from its fields, in declaration order: its leaves by path."""
        decl = self.rec.decls[op.result.type.module_name]
        items: list[tuple[str, Any]] = []
        for entry, value in zip(decl.entries, args):
            field_name = entry.field.data
            if isinstance(value, PTree):
                items += [(f"{field_name}.{p}", v) for p, v in value.items]
            else:
                items.append((field_name, value))
        return PTree(tuple(items))

    def _zeros_like(self, value: Any, site: str, name: str | None) -> Any:
        """Zeros of each tensor leaf's shape: a constant, broadcast where it has axes."""
        element = _compute_type(self.types.get(site, "f64"))

        def zeros(v: Any) -> Any:
            if isinstance(v, PTree):
                return PTree(tuple((p, zeros(x)) for p, x in v.items))
            if isinstance(v, tuple):
                return tuple(zeros(x) for x in v)
            if isinstance(v, Hyper):
                return v
            zero = self.emit(R.ConstantOp(0.0, element, site=site, name=name)).results[0]
            t = R._ttype(v)
            if not t.rank:
                return zero
            return self.emit(R.BroadcastOp(zero, [], t.with_element(element), site=site,
                                           name=name)).results[0]
        return zeros(value)

    def _slices(self, tree: Any, i: int, site: str) -> PTree:
        if not isinstance(tree, PTree):
            raise RecordError(f"{site}: a fold runs over a stacked parameter tree")
        return PTree(tuple((p, self.emit(R.SliceOp(v, i, site=site)).results[0])
                           for p, v in tree.items))

    def _fold_forward(self, op: C.FoldFwdOp | C.FoldScanOp, args: list[Any], site: str,
                      name: str | None) -> Any:
        """`fold_fwd` (every step's result) and `fold_scan` (every accumulator, the first
        one too). A `fold_fwd` whose iterations are one instance is one loop (`Steps`):
        each iteration's result leaves stacked, the accumulator carried. Else one call per
        iteration: an instance is specialized, so its count is known, and each
        iteration's values (the residuals the reverse sweep reads) stay separate values of
        their own types."""
        tree, acc = args
        dims = self._callee_dims(op)
        scan = isinstance(op, C.FoldScanOp)
        count = len(op.result.type.types.data) - (1 if scan else 0)
        if not scan and (loop := self._forward_loop(op, tree, acc, dims, count, site, name)):
            return loop
        out: list[Any] = [acc] if scan else []
        for i in range(count):
            step = self._call_instance(op.callee_name, dims, [self._slices(tree, i, site), acc],
                                       site, name)
            out.append(step)
            acc = step if scan else step[0]
        return tuple(out)

    def _forward_loop(self, op: C.FoldFwdOp, tree: Any, acc: Any, dims: dict[str, int],
                      count: int, site: str, name: str | None) -> Steps | None:
        """The steps as one `fold` stacking every result of the step's `.fwd` (its
        accumulator, result 0, too: psk-realize-drop-unread removes the stacks nothing
        reads), when iteration 0's instance returns the accumulator's type (so every
        iteration is that instance); else None."""
        if not isinstance(tree, PTree) or not isinstance(acc, SSAValue) or count < 1:
            return None
        sliced = PTree(tuple((p, _sliced(v.type)) for p, v in tree.items))
        inst = self.rec.instance(op.callee_name, dims, [sliced, acc.type])
        form = inst.result_form
        if not (isinstance(form, tuple) and form and isinstance(form[0], R.RTensorType)
                and R.fits(inst.results[0], acc.type)):
            return None
        fold = self.emit(R.FoldOp(inst.func.sym_name.data, [v for _, v in tree.items], acc, 0,
                                  count, site=site, name=name, acc_result=0,
                                  stacks=list(enumerate(inst.results))))
        self.callees.append((inst, count))
        return Steps(form, tuple(fold.res[1:]), fold.result)

    def _step_value(self, steps: Steps, i: int, site: str) -> Any:
        """Iteration i's result out of the stacks (its accumulator, at the last one, the
        fold's own result)."""
        leaves = [self.emit(R.SliceOp(v, i, site=site)).results[0] if k or i != steps.count - 1
                  or steps.last is None else steps.last
                  for k, v in enumerate(steps.stacks)]
        return _bind(steps.form, iter(leaves))

    def _fold_reverse(self, op: C.FoldBwdOp | C.FoldVjpOp, args: list[Any], site: str,
                      name: str | None) -> tuple:
        """`fold_bwd` (a step's `.bwd` on its stored result) and `fold_vjp` (a step's `.vjp`
        on its parameters and accumulator), from the last iteration to the first; each
        iteration's parameter cotangents stacked by path, iteration l at element l. A
        `fold_bwd` over a loop's `Steps` whose iterations are one instance is one reverse
        loop; else one call per iteration."""
        tree, kept, dy = args
        dims = self._callee_dims(op)
        vjp = isinstance(op, C.FoldVjpOp)
        if isinstance(kept, Steps) and not vjp and \
                (loop := self._reverse_loop(op, kept, dy, dims, site, name)):
            return loop
        count = kept.count if isinstance(kept, Steps) else len(kept) - (1 if vjp else 0)
        grads: list[Any] = [None] * count
        for i in reversed(range(count)):
            step = self._step_value(kept, i, site) if isinstance(kept, Steps) else kept[i]
            step_args = [self._slices(tree, i, site), step, dy] if vjp else [step, dy]
            grads[i], dy = self._call_instance(op.callee_name, dims, step_args, site, name)
        if not all(isinstance(g, PTree) for g in grads):
            raise RecordError(f"{site}: a fold's step returns no parameter tree cotangent")
        paths = [p for p, _ in grads[0].items]
        return (PTree(tuple((p, self._stack([g.field(p) for g in grads], site, name))
                            for p in paths)), dy)

    def _reverse_loop(self, op: C.FoldBwdOp, kept: Steps, dy: Any, dims: dict[str, int],
                      site: str, name: str | None) -> tuple | None:
        """The reverse steps as one `reverse` fold over the forward's stacks, carrying the
        accumulator's cotangent (the step's last result) and stacking its parameter
        cotangents, when the last iteration's instance returns the type it is given (so
        every iteration is that instance); else None."""
        if not isinstance(dy, SSAValue):
            return None
        inst = self.rec.instance(op.callee_name, dims, [kept.form, dy.type])
        form = inst.result_form
        if not (isinstance(form, tuple) and len(form) == 2 and isinstance(form[0], PTree)
                and isinstance(form[1], R.RTensorType) and R.fits(inst.results[-1], dy.type)):
            return None
        n = len(inst.results) - 1
        fold = self.emit(R.FoldOp(inst.func.sym_name.data, list(kept.stacks), dy, 0,
                                  kept.count, site=site, name=name, acc_result=n,
                                  stacks=list(enumerate(inst.results[:n])), reverse=True))
        self.callees.append((inst, kept.count))
        grads = PTree(tuple((p, v) for (p, _), v in zip(form[0].items, fold.res[1:])))
        return grads, fold.result

    def _stack(self, values: list[SSAValue], site: str, name: str | None) -> SSAValue:
        """One stacked tensor of the iterations' values, in one element type (f64 when
        the iterations' types differ)."""
        kinds = {R.element_name(R._ttype(v)) for v in values}
        element = kinds.pop() if len(kinds) == 1 else "f64"
        cache: dict[SSAValue, SSAValue] = {}
        values = [self.read(v, element, site, cache) for v in values]
        return self.emit(R.StackOp(values, site=site, name=name)).results[0]


# --------------------------------------------------------------------------------------
# The entry points
# --------------------------------------------------------------------------------------


def record(core_module: ModuleOp, entry: str, dims: dict[str, int],
           realization: Realization | None = None) -> ModuleOp:
    """The entry recorded at `dims` under `realization` (None: all f64), as a new
    module of psk_realize instances, verified."""
    module = Recorder(core_module, realization or Realization()).record(entry, dims)
    verify_built(module)
    return module


def record_value_and_gradient(core_module: ModuleOp, entry: str, dims: dict[str, int],
                              realization: Realization | None = None) -> ModuleOp:
    """`entry.value_vjp` recorded (the module differentiated already, psk-differentiate)
    as what `presk run --grad` computes: its inputs the entry's arguments, then the
    cotangent seed (named as `entry.bwd` names it, `d%7`, given 1); its results the value
    (`result`) and the gradient in the first argument (`grad.<path>`), the cotangents of
    the other arguments left out, and what only they read with them."""
    func = next((op for op in core_module.ops if isinstance(op, C.FuncOp)
                 and op.sym_name.data == entry), None)
    if func is None or not func.arg_name_list:
        raise RecordError(f"`{entry}` is no function with arguments to differentiate")
    module = record(core_module, entry + ".value_vjp", dims, realization)
    inst = R.entry_func(module)
    names = inst.arg_name_list

    def leaves_of(arg: str) -> int:
        return sum(1 for n in names if n == arg or n.startswith(arg + "."))
    first = func.arg_name_list[0]
    n_value = len(names) - sum(leaves_of(a) for a in func.arg_name_list)
    grads = [n for n in names if n == first or n.startswith(first + ".")]
    tree = isinstance(func.function_type.inputs.data[0], C.ParamsAttr)
    grad_names = [f"grad.{n[len(first) + 1:]}" if tree else f"grad.{n}" for n in grads]
    value_names = ["result"] if n_value == 1 else [f"result.{i}" for i in range(n_value)]
    _keep_results(inst, n_value + len(grads), value_names + grad_names)
    verify_built(module)
    return module


def _keep_results(func: R.FuncOp, count: int, names: list[str]) -> None:
    """The instance returns its first `count` results, named; ops nothing reads any more
    are erased."""
    from xdsl.dialects.builtin import ArrayAttr, FunctionType, StringAttr
    ret = func.body.block.last_op
    assert isinstance(ret, R.ReturnOp)
    kept, site = list(ret.values)[:count], ret.site.data
    ret.detach()
    ret.erase()
    func.body.block.add_op(R.ReturnOp(kept, site=site))
    func.attributes["function_type"] = FunctionType.from_lists(
        [a.type for a in func.args], [v.type for v in kept])
    func.attributes["result_names"] = ArrayAttr(StringAttr(n) for n in names)
    for op in reversed(list(func.body.block.ops)):
        if op.results and all(not r.uses for r in op.results):
            op.erase()


def parse_dims_text(text: str) -> dict[str, int]:
    """`B=4,C=2` or `B=4 C=2`."""
    dims: dict[str, int] = {}
    for item in text.replace(",", " ").split():
        k, _, v = item.partition("=")
        size = parse_size(v)
        if isinstance(size, str):
            raise RecordError(f"dims: `{item[:40]}` is not NAME=N: {size}")
        dims[k.strip()] = size
    return dims


@dataclass(frozen=True)
class ConvertCoreToRealizePass(ModulePass):
    """`convert-psk-core-to-realize{entry=loss dims="B=4" realize="path.json"}`: the
    module's Core functions replaced by the entry's instances. `grad=true`: the entry's
    value and gradient (`entry.value_vjp`, psk-differentiate before it), as
    `record_value_and_gradient` records it."""

    name = "convert-psk-core-to-realize"

    entry: str = "loss"
    dims: str = ""
    realize: str | None = None
    grad: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        realization = load_realization(self.realize)
        how = record_value_and_gradient if self.grad else record
        new = how(op, self.entry, parse_dims_text(self.dims), realization)
        replace_module_body(op, new)
