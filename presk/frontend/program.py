"""The elaborated program: every file, module, instance and function with its types.

This is what elaboration produces and what the lowering to PSK-Core reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ..shapes import Size, TensorType
from . import ast as A
from .diagnostics import Diagnostic
from .types import ParamsT, Type, stacked

# Regularity classes, ordered: a function is at least as regular as the least regular
# operation between an argument and its result.
DISCONTINUOUS, C0, C0_PLUS, C_INF = 0, 1, 2, 3
REGULARITY_NAMES = {C_INF: "C∞", C0_PLUS: "C⁰⁺", C0: "C⁰", DISCONTINUOUS: "D"}


@dataclass(eq=False)
class ConstInfo:
    name: str
    type_name: str  # nat or f64
    value: int | float
    span: A.Span


@dataclass(eq=False)
class ParamInfo:
    name: str
    type: TensorType  # in the module's dims, consts replaced by their values
    init: A.InitSpec
    span: A.Span
    init_args: dict[str, float] = field(default_factory=dict)  # evaluated


@dataclass(eq=False)
class UseInfo:
    name: str
    target: ParamsT  # in the enclosing module's dims
    span: A.Span


@dataclass(eq=False)
class FnParamInfo:
    name: str
    type: Type
    default: int | float | None
    span: A.Span
    implicit: bool = False  # the θ of a module's function


@dataclass(eq=False)
class FnInfo:
    name: str  # qualified: `Linear.apply`, `loss`
    short: str
    module: "ModuleInfo | None"
    file: "FileInfo"
    decl: A.FnDecl
    params: list[FnParamInfo] = field(default_factory=list)
    result: Type | None = None
    dims: tuple[str, ...] = ()  # the dim symbols it is polymorphic in
    regularity: list[int] = field(default_factory=list)  # one per param
    checked: bool = False
    kinks: list[tuple[str, A.Span]] = field(default_factory=list)  # its own C⁰ builtins
    grads: list["GradRef"] = field(default_factory=list)  # the gradients it takes
    callees: list["FnInfo"] = field(default_factory=list)

    def reached_kinks(self) -> list[tuple["FnInfo", str, A.Span]]:
        """The C⁰ builtins this function and everything it calls apply."""
        out, seen, todo = [], set(), [self]
        while todo:
            fn = todo.pop(0)
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            out += [(fn, name, span) for name, span in fn.kinks]
            todo += fn.callees
        return out

    @property
    def explicit_params(self) -> list[FnParamInfo]:
        return [p for p in self.params if not p.implicit]


@dataclass(eq=False)
class ModuleInfo:
    name: str
    file: "FileInfo"
    decl: A.ModuleDecl
    dims: list[str]
    params: list[ParamInfo] = field(default_factory=list)
    uses: list[UseInfo] = field(default_factory=list)
    fns: dict[str, FnInfo] = field(default_factory=dict)

    def member(self, name: str) -> ParamInfo | UseInfo | None:
        for m in (*self.params, *self.uses):
            if m.name == name:
                return m
        return None


@dataclass(eq=False)
class OptimizerInfo:
    name: str
    kind: str  # adamw or sgd
    values: dict[str, float]  # every field, the written ones and the defaults
    schedule: str
    schedule_args: dict[str, int]
    decl: A.OptimizerDecl
    written: int = 0  # how many fields the block writes


@dataclass(eq=False)
class DataInfo:
    path: str  # as written
    resolved: str  # relative to the working directory, as displayed
    shuffle_seed: int | None
    batch_dim: str
    batch_size: int
    file_sample: str  # the sample type the file declares


@dataclass(eq=False)
class TrainingInfo:
    name: str
    model: ParamsT
    objective: FnInfo
    optimizer: OptimizerInfo
    data: DataInfo
    epochs: int
    checkpoint_every: int | None
    checkpoint_dir: str | None
    batch_type: Type
    sample_type: Type
    dims: dict[str, int]
    decl: A.TrainingDecl


@dataclass(eq=False)
class AssertInfo:
    decl: A.AssertDecl
    file: "FileInfo"
    outcome: str  # holds, or deferred with the dims it waits for


@dataclass(eq=False)
class FileInfo:
    path: str
    ast: A.SourceFile
    is_main: bool = False
    imports: dict[str, "FileInfo"] = field(default_factory=dict)
    dims: dict[str, A.Span] = field(default_factory=dict)
    consts: dict[str, ConstInfo] = field(default_factory=dict)
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    fns: dict[str, FnInfo] = field(default_factory=dict)
    optimizers: dict[str, OptimizerInfo] = field(default_factory=dict)
    trainings: dict[str, TrainingInfo] = field(default_factory=dict)
    asserts: list[AssertInfo] = field(default_factory=list)

    @property
    def basename(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(eq=False)
class Instance:
    """A module at concrete dims, with its parameters flattened by path."""

    params: ParamsT
    fields: list[tuple[str, TensorType]]

    @property
    def name(self) -> str:
        return self.params.instance_name()


def flatten(t: ParamsT, prefix: str = "") -> list[tuple[str, TensorType]]:
    """The tensors of a parameter tree, keyed by path (`blocks.proj.w`), in declaration order."""
    env, out = t.env(), []
    module = t.module
    for p in module.params:
        out.append((prefix + p.name, stacked(p.type.substitute(env), t.stack)))
    for u in module.uses:
        out += flatten(t.subtree(u.target), prefix + u.name + ".")
    return out


def reals(fields: list[tuple[str, TensorType]]) -> int | None:
    counts = [t.element_count() for _, t in fields]
    return None if any(c is None for c in counts) else sum(counts)  # type: ignore[misc]


@dataclass(eq=False)
class Program:
    files: list[FileInfo]  # imports before importers; the main file last
    main: FileInfo
    sources: dict[str, str]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)

    def functions(self) -> list[FnInfo]:
        """Every function of the program: modules' first, file by file, then top-level."""
        out: list[FnInfo] = []
        for f in self.files:
            for m in f.modules.values():
                out += m.fns.values()
            out += f.fns.values()
        return out

    def function(self, name: str) -> FnInfo | None:
        return next((f for f in self.functions() if f.name == name), None)

    def modules(self) -> list[ModuleInfo]:
        return [m for f in self.files for m in f.modules.values()]



# ---- what elaboration resolved each name and call to (on Name.ref and Call.ref) ----------

@dataclass(eq=False)
class LocalRef:
    """An argument or a let of the enclosing function."""

    name: str


@dataclass(eq=False)
class ParamRef:
    """A parameter of the enclosing module, read from its θ."""

    param: ParamInfo


@dataclass(eq=False)
class UseRef:
    """A sub-module's parameter tree, read from the enclosing module's θ."""

    use: UseInfo


@dataclass(eq=False)
class ConstRef:
    const: ConstInfo


@dataclass(eq=False)
class FieldRef:
    """`θ.blocks.proj`: fields of a local parameter tree."""

    base: str
    fields: list[str]


@dataclass(eq=False)
class BuiltinRef:
    name: str
    axis: str | None
    args: list[A.Expr]


@dataclass(eq=False)
class FnRef:
    """A call: the callee, the dims of its instance, where its θ comes from, and every
    argument in the callee's order (a default as its value)."""

    fn: FnInfo
    dims: dict[str, Size]
    receiver: str  # "self" (a sibling), "use" (a sub-module) or "explicit"
    use: UseInfo | None
    args: list["A.Expr | int | float"]


@dataclass(eq=False)
class FoldRef:
    """`blocks.apply(x)` on a stacked use: a fold of `fn` over the stack."""

    fn: FnInfo
    count: Size
    use: UseInfo
    dims: dict[str, Size]
    acc: A.Expr


@dataclass(eq=False)
class GradRef:
    """`grad(f)(θ, batch)` or `value_and_grad(f)(…)`: the gradient with respect to the first
    argument of the call `call` (an ordinary call of `f`, resolved)."""

    call: A.Call
    value: bool
    span: A.Span

    @property
    def fn(self) -> FnInfo:
        return self.call.ref.fn
