"""PSK-Core as PyTorch: one Python module per .psk file (§10 of the reference).

Each Presk module becomes an `nn.Module` whose parameters are registered under their
field names, so that `state_dict()` keys are Presk's parameter paths (`blocks.proj.w`):
a `use` is a submodule, and a `stack{L}(Block)` is one `Block` built with `stack=(L,)`,
every tensor holding a leading L axis as Presk stores it; its fold is a loop over
`blocks.at(i)`, a view of copy i. A module's `apply` is its `forward` (a call is
`θ(x)`), its other functions are methods of the same name, and a top-level function is a
module-level function taking the parameter module and tensors.

The code is generated from PSK-Core, one statement per operation with the op's site and
Presk type in a trailing comment, so that it reads against `presk dump --stage core`.
Named axes are positional dims: the emitter knows each value's type, so a reduction gets
its `dim`, and an operand of an element-wise op is indexed with `None` where the
alignment Core computed (presk.shapes.alignment) puts an axis it lacks. A tensor's
`...` are its leading dims, as in the interpreter, so a dim of an operand with a prefix
is counted from the right.

The generated files import only torch (and each other), and compute in the dtype of their
parameters and inputs: built with `dtype=torch.float64` they compute what Presk's f64
interpreter computes, up to the rounding of torch's own sums and math functions. An
ℝ[] constant that meets a tensor is a Python number, which takes the tensor's dtype.

One file, though a little over the house's ~800 lines: the exporter (`_Exporter`: the
files and their Python names), a file's emitter (`_FileEmitter`: the module classes) and
a function's (`_FunctionEmitter`: the statements and their shape expressions) are one walk
over PSK-Core sharing one naming state, and are not used apart.
"""

from __future__ import annotations

import keyword
import math
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import Float64Type, IntegerType, ModuleOp, TupleType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from presk import __version__, ops, shapes
from presk.dialects import core as C
from presk.dialects.core import type_text
from presk.emit.core_listing import format_float
from presk.shapes import Size, TensorType


class ExportError(Exception):
    """A program the PyTorch export cannot write: one line naming the site or the field."""


# Every public attribute of torch.nn.Module (torch 2.13): a parameter, submodule or method
# of that name would shadow it or be refused by `register_parameter`.
_MODULE_ATTRIBUTES = frozenset({
    "T_destination", "add_module", "apply", "bfloat16", "buffers", "call_super_init",
    "children", "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr",
    "float", "forward", "get_buffer", "get_extra_state", "get_parameter", "get_submodule",
    "half", "ipu", "load_state_dict", "modules", "mtia", "named_buffers", "named_children",
    "named_modules", "named_parameters", "parameters", "register_backward_hook",
    "register_buffer", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "register_full_backward_pre_hook",
    "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook",
    "register_module", "register_parameter", "register_state_dict_post_hook",
    "register_state_dict_pre_hook", "requires_grad_", "set_extra_state", "set_submodule",
    "share_memory", "state_dict", "to", "to_empty", "train", "training", "type", "xpu",
    "zero_grad",
    "at",  # ours: a stacked module's copy i
})
# Names the generated code uses itself; a Presk name equal to one is renamed.
_GLOBALS = frozenset({"torch", "nn", "F", "math", "annotations", "self", "dt"})


def _plain(name: str) -> bool:
    """A name Python reads back as itself: an identifier, stable under NFKC, no keyword."""
    return (name.isidentifier() and not keyword.iskeyword(name)
            and unicodedata.normalize("NFKC", name) == name)


def python_module_name(source_name: str) -> str:
    """`01_linear.psk` → `_01_linear`: always a leading underscore, so a file never
    shadows a module torch imports (`math.psk` → `_math`), and a leading digit imports."""
    stem = os.path.basename(source_name)
    stem = stem[:-len(".psk")] if stem.endswith(".psk") else os.path.splitext(stem)[0]
    return "_" + re.sub(r"\W", "_", stem, flags=re.ASCII)


# --------------------------------------------------------------------------------------
# Which file holds what
# --------------------------------------------------------------------------------------


@dataclass
class FileSpec:
    """One generated module: the .psk file it comes from and what it defines."""

    source: str  # the .psk file's base name, or the .mlir's
    module: str  # the Python module's name: `_01_linear`
    classes: list[str] = field(default_factory=list)  # Presk modules, in order
    functions: list[str] = field(default_factory=list)  # top-level Core functions

    @property
    def filename(self) -> str:
        return self.module + ".py"


@dataclass
class Export:
    """The generated files and what they hold, for the summary line."""

    sources: dict[str, str]  # file name → text, in import order
    modules: int
    methods: int
    functions: list[str]  # the module-level ones
    parameters: int  # nn.Parameters declared, over every module
    trees: dict[str, tuple[int, int]]  # a function's parameter tree: (tensors, reals)


@dataclass
class Realized:
    """A realization as the export applies it: the storage type (`f64`, `f32`, `bf16`) of
    every value the recorded entry computes, by its Core site (followers and carried
    values as convert-psk-core-to-realize decided them), and of every parameter, by path
    in the tree of the module `root` (the entry's parameter tree)."""

    entry: str
    name: str  # `f64+9sites+4params`
    root: str  # the Presk module of the entry's tree
    sites: dict[str, str]  # a site recorded in several types (a carried value) is left out
    params: dict[str, str]


_TORCH_DTYPE = {"f64": "torch.float64", "f32": "torch.float32", "bf16": "torch.bfloat16"}
_COMPUTE = {"f64": "f64", "f32": "f32", "bf16": "f32"}  # bf16 is a storage type


def pytorch_sources(source, name: str = "model") -> dict[str, str]:
    """File name → Python text for a Program (one file per .psk file) or a PSK-Core
    ModuleOp (one file, `_<name>.py`: Core does not record files)."""
    return pytorch_export(source, name).sources


def pytorch_export(source, name: str = "model", *, program=None,
                   realized: Realized | None = None) -> Export:
    """The export of a Program, or of a ModuleOp (lowered from `program` when given, whose
    files and default arguments it then follows). With `realized`, each parameter is
    stored and each site computed in its type (docs/export_pytorch.md)."""
    if isinstance(source, ModuleOp):
        module = source
    else:
        from presk.frontend.lower import lower_program
        module, program = lower_program(source), source
    files = program_files(program) if program is not None else None
    defaults = _program_defaults(program) if program is not None else {}
    return _Exporter(module, files, defaults, name, realized).run()


def program_files(program) -> list[FileSpec]:
    return [FileSpec(f.basename, python_module_name(f.basename), list(f.modules),
                     [fn.name for fn in f.fns.values()]) for f in program.files]


def _program_defaults(program) -> dict[str, dict[str, float]]:
    """Each function's default arguments by name: Core passes them at every call."""
    return {fn.name: {p.name: p.default for p in fn.params if p.default is not None}
            for fn in program.functions()}


# --------------------------------------------------------------------------------------
# The program
# --------------------------------------------------------------------------------------


class _Exporter:
    def __init__(self, module: ModuleOp, files: list[FileSpec] | None,
                 defaults: dict[str, dict[str, float]], name: str,
                 realized: Realized | None = None):
        self.realized = realized
        self.decls = {op.sym_name.data: op for op in module.ops
                      if isinstance(op, C.ModuleDeclOp)}
        self.funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
        self.module, self.defaults = module, defaults
        self.methods = {n: f for n, f in self.funcs.items() if self._method_of(f) is not None}
        if files is None:
            files = [FileSpec(name, python_module_name(name), list(self.decls),
                              [n for n in self.funcs if n not in self.methods])]
        self.files = files
        self._place_orphans()
        self.home = {n: f for f in files for n in (*f.classes, *f.functions)}

    def _method_of(self, func: C.FuncOp) -> str | None:
        """The module whose method `func` is: named `M.f`, θ : params M first."""
        module, dot, _ = func.sym_name.data.partition(".")
        inputs = func.function_type.inputs.data
        if (dot and module in self.decls and inputs and isinstance(inputs[0], C.ParamsAttr)
                and inputs[0].module_name == module and not inputs[0].stack.data):
            return module
        return None

    def _place_orphans(self) -> None:
        """Core functions no file names (made by a pass) go to the main, last, file."""
        named = {n for f in self.files for n in f.functions}
        for n in self.funcs:
            if n not in self.methods and n not in named:
                self.files[-1].functions.append(n)

    def run(self) -> Export:
        sources = {f.filename: _FileEmitter(self, f).text() for f in self.files}
        params = sum(isinstance(e, C.ParamDeclOp) for d in self.decls.values() for e in d.entries)
        functions = [n for n in self.funcs if n not in self.methods]
        return Export(sources, len(self.decls), len(self.methods), functions, params,
                      {n: t for n in functions if (t := self._tree_size(n)) is not None})

    def _tree_size(self, name: str) -> tuple[int, int] | None:
        """The tensors and reals of a function's parameter tree, when its dims are fixed."""
        from presk.analysis.weights import WeightsError, tree_fields
        inputs = self.funcs[name].function_type.inputs.data
        if not inputs or not isinstance(inputs[0], C.ParamsAttr):
            return None
        try:
            fields = tree_fields(self.module, inputs[0])
        except WeightsError:
            return None
        return len(fields), sum(math.prod(f.shape) for f in fields)

    def method_name(self, func_name: str) -> str:
        """`Linear.apply` → `forward`; another function keeps its name (a trailing `_`
        where nn.Module or Python has the name)."""
        short = func_name.split(".", 1)[1]
        if short == "apply":
            return "forward"
        return short if _plain(short) and short not in _MODULE_ATTRIBUTES | _GLOBALS \
            else _sanitize(short) + "_"


def _sanitize(name: str) -> str:
    out = re.sub(r"\W", "_", unicodedata.normalize("NFKC", name))
    return out if out.isidentifier() and not keyword.iskeyword(out) else "_" + out


def _member(obj: str, name: str) -> str:
    """`obj.name`, or getattr where the name is not an attribute Python reads back."""
    return f"{obj}.{name}" if _plain(name) else f"getattr({obj}, {name!r})"


# --------------------------------------------------------------------------------------
# One file
# --------------------------------------------------------------------------------------


class _FileEmitter:
    def __init__(self, exporter: _Exporter, spec: FileSpec):
        self.x, self.spec = exporter, spec
        self.imports: set[str] = set()  # other generated modules this one needs
        self.uses_math = self.uses_functional = False

    def text(self) -> str:
        body: list[str] = []
        for name in self.spec.classes:
            body += ["", ""] + self._class(name)
        for name in self.spec.functions:
            body += ["", ""] + _FunctionEmitter(self, self.x.funcs[name], None).lines()
        return "\n".join(self._header() + self._realized() + body) + "\n"

    def _realized(self) -> list[str]:
        """Under a realization: the root module's PARAMETER_DTYPES, the entry's file's
        SITE_DTYPES (what each site computes in and stores), and the helper that hands a
        submodule its parameters' dtypes."""
        r = self.x.realized
        if r is None:
            return []
        lines: list[str] = []
        if r.root in self.spec.classes:
            lines += ["", "", f"# {r.name}: each parameter's dtype, by its path in {r.root}",
                      "PARAMETER_DTYPES = {"]
            lines += [f"    {p!r}: {_TORCH_DTYPE[t]}," for p, t in r.params.items()] + ["}"]
        if r.entry in self.spec.functions:
            lines += ["", "", f"# {r.name}: the dtype each site of `{r.entry}` stores its "
                      "value in (bf16 computed in float32)", "SITE_DTYPES = {"]
            lines += [f"    {p!r}: {_TORCH_DTYPE[t]}," for p, t in r.sites.items()] + ["}"]
        if any(isinstance(e, C.UseDeclOp) for c in self.spec.classes
               for e in self.x.decls[c].entries):
            lines += ["", "", "def _below(dtypes: dict[str, torch.dtype], field: str) -> "
                      "dict[str, torch.dtype]:",
                      '    """The dtypes of the submodule `field`\'s parameters, by path below '
                      'it."""',
                      '    return {k[len(field) + 1:]: v for k, v in dtypes.items() '
                      'if k.startswith(field + ".")}']
        return lines

    # ---- references to what another file defines ----
    def ref(self, name: str) -> str:
        """A class or top-level function, qualified by its module when it is elsewhere."""
        home = self.x.home[name]
        if home is self.spec:
            return name
        self.imports.add(home.module)
        return f"{home.module}.{name}"

    def _dtype_doc(self) -> list[str]:
        r = self.x.realized
        if r is None:
            return ["The dtype is the parameters' and inputs': float64 computes as Presk's f64",
                    "interpreter."]
        return [f"Realized ({r.name}, recorded for `{r.entry}`): each parameter is stored in its",
                "type (PARAMETER_DTYPES) and each operation reads its operands converted to",
                "its site's type and computes in it (SITE_DTYPES; bf16 computed in float32,",
                "then stored), as Presk's realized loop nests do."]

    def _header(self) -> list[str]:
        spec = self.spec
        what = [f"Modules: {', '.join(spec.classes) or 'none'}.",
                f"Functions: {', '.join(spec.functions) or 'none'}."]
        lines = [
            f'"""{spec.source} as PyTorch: written by `presk export --target pytorch` '
            f"(Presk {__version__}) from PSK-Core.",
            "",
            " ".join(what),
            "Each statement computes one PSK-Core operation; its comment gives the site",
            "(`presk dump --stage core`) and the Presk type. A tensor's dims are its type's",
            "axes in order, after the leading dims its `...` stands for.",
            *self._dtype_doc(),
            '"""',
            "",
            "from __future__ import annotations",
            "",
        ]
        if self.uses_math:
            lines += ["import math", ""]
        lines += ["import torch"] + (["from torch import nn"] if self.spec.classes else [])
        if self.uses_functional:
            lines.append("from torch.nn import functional as F")
        if self.imports:
            order = [f.module for f in self.x.files if f.module in self.imports]
            lines += [""] + [f"import {m}" for m in order]
        return lines

    # ---- a Presk module as an nn.Module ----
    def _class(self, name: str) -> list[str]:
        decl = self.x.decls[name]
        dims = [_dim_name(d) for d in decl.dim_names]
        fields = [e.field.data for e in decl.entries]
        for f in fields:
            if f in _MODULE_ATTRIBUTES or f in dims or f in _GLOBALS:
                raise ExportError(f"{name}.{f}: a field named `{f}` clashes with "
                                  "torch.nn.Module's attribute or the module's dim")
        lines = [f"class {name}(nn.Module):"] + _indent(self._class_doc(decl), 1)
        lines += [""] + _indent(self._init(decl, dims), 1)
        lines += [""] + _indent(self._at(decl, dims), 1)
        for fname, func in self.x.methods.items():
            if self.x._method_of(func) == name:
                lines += [""] + _indent(_FunctionEmitter(self, func, decl).lines(), 1)
        return lines

    def _class_doc(self, decl: C.ModuleDeclOp) -> list[str]:
        name = decl.sym_name.data
        dims = "{" + " ".join(decl.dim_names) + "}" if decl.dim_names else ""
        members = [f"{e.field.data} : {type_text(e.decl_type)}"
                   + (f" (init {e.init.data})" if isinstance(e, C.ParamDeclOp) and e.init
                      else "") for e in decl.entries]
        return ['"""' + f"Presk's module {name}{dims} of {self.spec.source}.", "",
                "Fields (state_dict keys are Presk's paths):" if members else "No fields.",
                *("  " + m for m in members), "",
                "`stack` gives the leading axes of stacked copies (stack{L}(M) holds every",
                "tensor with a leading L axis); `dtype` is the parameters' dtype.", '"""']

    def _init(self, decl: C.ModuleDeclOp, dims: list[str]) -> list[str]:
        sig = "".join(f"{d}: int, " for d in dims)
        realized = self.x.realized
        typed = ", dtypes: dict[str, torch.dtype] | None = None" if realized else ""
        lines = [f"def __init__(self, {sig}*, stack: tuple[int, ...] = (), "
                 f"dtype: torch.dtype | None = None{typed}) -> None:",
                 "    super().__init__()"]
        if realized is not None:  # each parameter's dtype by its path below this module
            default = "PARAMETER_DTYPES" if decl.sym_name.data == realized.root else "{}"
            lines.append(f"    dtypes = {default} if dtypes is None else dtypes")
        if dims:
            lines.append(f"    {', '.join('self.' + d for d in dims)} = {', '.join(dims)}")
        env = dict(zip(decl.dim_names, dims))
        for e in decl.entries:
            lines += ["    " + s for s in self._field_init(decl, e, env)]
        return lines

    def _field_init(self, decl: C.ModuleDeclOp, e: C.FieldDeclOp, env: dict[str, str]) -> list[str]:
        name = e.field.data
        t = e.decl_type
        if isinstance(t, C.ParamsAttr):
            args = [_size_expr(s, env) for s in t.dim_sizes]
            counts = [_size_expr(s, env) for s in t.stack_counts]
            stack = f"(*stack, {', '.join(counts)})" if counts else "stack"
            typed = f", dtypes=_below(dtypes, {name!r})" if self.x.realized else ""
            value = f"{self.ref(t.module_name)}({''.join(a + ', ' for a in args)}" \
                    f"stack={stack}, dtype=dtype{typed})"
            return [_assign_member(name, value, "add_module")]
        assert isinstance(e, C.ParamDeclOp) and isinstance(t, C.TensorAttr)
        own = [_size_expr(a.size, env) for a in t.shape.axes]
        # a ℝ[] parameter: `stack` itself, a tuple (torch.ones(*()) is a TypeError)
        shape = ", ".join(["*stack", *own]) if own else "stack"
        init = e.init.data if e.init is not None else "zeros"
        dt = f"dtypes.get({name!r}, dtype)" if self.x.realized else "dtype"
        try:
            pre, value = self._initializer(init, shape, own, dt)
        except ExportError as err:
            raise ExportError(f"{decl.sym_name.data}.{name}: {err}") from None
        return pre + [_assign_member(name, f"nn.Parameter({value})", "register_parameter")]

    def _initializer(self, text: str, shape: str, own: list[str], dt: str = "dtype"
                     ) -> tuple[list[str], str]:
        """The tensor an initializer makes (torch's generator, Presk's distribution and
        fans: the last two axes of one copy)."""
        m = re.fullmatch(r"(\w+)(?:\((.*)\))?", text.strip())
        if m is None:
            raise ExportError(f"malformed initializer `{text}`")
        kind, args = m.group(1), {}
        for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
            key, _, value = part.partition("=")
            args[key.strip()] = float(value)
        empty = f"torch.empty({shape}, dtype={dt})"
        if kind in ("zeros", "ones"):
            return [], f"torch.{kind}({shape}, dtype={dt})"
        if kind == "normal":
            return [], f"{empty}.normal_({args.get('mean', 0.0)!r}, {args.get('std', 1.0)!r})"
        if kind == "uniform":
            return [], f"{empty}.uniform_({args.get('low', 0.0)!r}, {args.get('high', 1.0)!r})"
        if kind not in ("xavier_uniform", "xavier_normal"):
            raise ExportError(f"no PyTorch initializer for `{kind}`")
        self.uses_math = True
        fan_in, fan_out = (own[-2], own[-1]) if len(own) >= 2 else \
            (own[0], own[0]) if own else ("1", "1")
        gain = args.get("gain", 1.0)
        scale = "" if gain == 1.0 else f"{gain!r} * "
        if kind == "xavier_uniform":
            return ([f"bound = {scale}math.sqrt(6.0 / ({fan_in} + {fan_out}))  # {text}"],
                    f"{empty}.uniform_(-bound, bound)")
        return [], f"{empty}.normal_(0.0, {scale}math.sqrt(2.0 / ({fan_in} + {fan_out})))"

    def _at(self, decl: C.ModuleDeclOp, dims: list[str]) -> list[str]:
        name = decl.sym_name.data
        lines = [f'def at(self, i: int) -> "{name}":',
                 '    """Copy i of stacked copies: every tensor indexed at i on its leading',
                 '    axis (a view: gradients reach the stacked parameters)."""',
                 f"    view = {name}.__new__({name})",
                 "    nn.Module.__init__(view)"]
        if dims:
            lines.append(f"    {', '.join('view.' + d for d in dims)} = "
                         f"{', '.join('self.' + d for d in dims)}")
        for e in decl.entries:
            f = e.field.data
            value = f"{_member('self', f)}.at(i)" if isinstance(e, C.UseDeclOp) \
                else f"{_member('self', f)}[i]"
            lines.append("    " + (f"view.{f} = {value}" if _plain(f)
                                   else f"object.__setattr__(view, {f!r}, {value})"
                                   if isinstance(e, C.ParamDeclOp)
                                   else f"view.add_module({f!r}, {value})"))
        return lines + ["    return view"]


def _assign_member(name: str, value: str, register: str) -> str:
    return f"self.{name} = {value}" if _plain(name) else f"self.{register}({name!r}, {value})"


def _dim_name(dim: str) -> str:
    if not _plain(dim) or dim in _GLOBALS or dim in ("stack", "dtype", "i", "view", "bound"):
        raise ExportError(f"the dim `{dim}` is no Python name the export can use")
    return dim


def _size_expr(size: Size, env: dict[str, str]) -> str:
    if isinstance(size, int):
        return str(size)
    if size not in env:
        raise ExportError(f"the size `{size}` has no value here")
    return env[size]


def _indent(lines: list[str], levels: int) -> list[str]:
    pad = "    " * levels
    return [pad + s if s else s for s in lines]


# --------------------------------------------------------------------------------------
# One function
# --------------------------------------------------------------------------------------

# each element-wise function's spelling, by its Core op's name (the table's rows)
_SPELLING = {f"psk_core.{f.name}": f.torch for f in ops.rows(core=True)}
_OPERATORS = {name for name, spelling in _SPELLING.items() if spelling.startswith("{a} ")}
# ops that carry a value (a call's, a fold's, a field's, a tuple's): no type of their own
_CARRIERS = (C.CallOp, C.FoldOp, C.FieldOp, C.GetOp, C.TupleOp, C.ReturnOp)
_REDUCE = {C.SumOp: "{x}.sum({d})", C.MeanOp: "{x}.mean({d})", C.MaxOp: "{x}.amax({d})",
           C.MinOp: "{x}.amin({d})"}


class _FunctionEmitter:
    """A Core function as a Python function (or method, `θ` being `self`)."""

    def __init__(self, file: _FileEmitter, func: C.FuncOp, decl: C.ModuleDeclOp | None):
        self.file, self.func, self.decl = file, func, decl
        self.name = func.sym_name.data
        reserved = set(_GLOBALS) | set(file.x.home) | {f.module for f in file.x.files}
        self.taken: set[str] = set(reserved)
        self.names: dict[SSAValue, str] = {}
        self.weak = _weak_values(func)
        self.needs_dtype = False
        self.known: dict[SSAValue, str] = {}  # a value's storage type, where it is known
        self.tensor_dtype: str | None = None  # the dtype of a realized site's constant

    # ---- names ----
    def _fresh(self, preferred: str | None, number: str) -> str:
        if preferred is not None and _plain(preferred) and preferred not in self.taken:
            name = preferred
        elif preferred is not None and _plain(preferred):
            name = f"{preferred}_{number}"
        else:
            name = f"_{number}"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def _bind(self, value: SSAValue, op: Operation) -> str:
        source = op.attributes.get("name")
        number = op.attributes["site"].data.rsplit("%", 1)[-1]  # type: ignore[union-attr]
        name = self._fresh(source.data if source is not None else None, number)
        self.names[value] = name
        return name

    def v(self, value: SSAValue) -> str:
        return self.names[value]

    # ---- the function ----
    def lines(self) -> list[str]:
        args = self.func.args
        params: list[str] = []
        defaults = self.file.x.defaults.get(self.name, {})
        for i, (arg, source) in enumerate(zip(args, self.func.arg_name_list)):
            if i == 0 and self.decl is not None:
                self.names[arg] = "self"
                params.append("self")
                continue
            name = self._fresh(source, str(i))
            self.names[arg] = name
            text = f"{name}: {self._annotation(arg.type)}"
            if source in defaults:
                text += f" = {_number(defaults[source])}"
            params.append(text)
        body: list[str] = []
        for op in self.func.body.block.ops:
            body += self._op(op)
        if self.needs_dtype:
            body.insert(0, f"dt = {self._dtype_source()}  # the computation's dtype")
        head = self.file.x.method_name(self.name) if self.decl is not None else self.name
        result = self._annotation(self.func.result_type)
        return [f"def {head}({', '.join(params)}) -> {result}:",
                *_indent(self._doc(), 1), *_indent(body, 1)]

    def _doc(self) -> list[str]:
        f = self.func
        dims = "{" + " ".join(f.dim_names) + "}" if f.dim_names else ""
        args = ", ".join(f"{n} : {type_text(a.type)}" for n, a in zip(f.arg_name_list, f.args))
        lines = [f'"""Presk: {self.name}{dims}({args}) -> {type_text(f.result_type)}']
        if self.decl is not None:
            lines += ["", f"θ is self. PSK-Core function @{self.name}."]
        return lines + ['"""']

    def _annotation(self, t: Attribute) -> str:
        if isinstance(t, C.TensorAttr):
            return "torch.Tensor"
        if isinstance(t, C.ParamsAttr):
            return self.file.ref(t.module_name)
        if isinstance(t, TupleType):
            return "tuple[" + ", ".join(self._annotation(e) for e in t.types.data) + "]"
        if isinstance(t, IntegerType):
            return "int"
        if isinstance(t, Float64Type):
            return "float"
        raise ExportError(f"{self.name}: no Python type for {type_text(t)}")

    def _dtype_source(self) -> str:
        """The dtype of the first tensor argument, else of the first parameter of the
        first tree, else torch's default."""
        trees: list[tuple[str, C.ParamsAttr]] = []
        for arg in self.func.args:
            path = _first_tensor(self.v(arg), arg.type)
            if path is not None:
                return f"{path}.dtype"
            if isinstance(arg.type, C.ParamsAttr):
                trees.append((self.v(arg), arg.type))
        for base, t in trees:
            path = self._first_param(base, t.module_name)
            if path is not None:
                return f"{path}.dtype"
        return "torch.get_default_dtype()"

    def _first_param(self, base: str, module: str) -> str | None:
        for e in self.file.x.decls[module].entries:
            if isinstance(e, C.ParamDeclOp):
                return _member(base, e.field.data)
            found = self._first_param(_member(base, e.field.data), e.decl_type.module_name)
            if found is not None:
                return found
        return None

    # ---- operations ----
    def _op(self, op: Operation) -> list[str]:
        site = op.attributes["site"].data  # type: ignore[union-attr]
        if isinstance(op, C.ReturnOp):
            return [f"return {self.v(op.value)}  # {site}"]
        if isinstance(op, C.FoldOp):
            return self._fold(op, site)
        element = self._site_type(op, site)
        if element is None:
            rhs = self._rhs(op, site)
            result = op.results[0]
            return [f"{self._bind(result, op)} = {rhs}  # {site} {type_text(result.type)}"]
        return self._realized_op(op, site, element)

    # ---- under a realization ----
    def _site_type(self, op: Operation, site: str) -> str | None:
        """The type a computing op's site has under the realization (None: no realization,
        a site the entry does not reach, or a carried value: it keeps what it carries)."""
        r = self.file.x.realized
        if r is None or isinstance(op, _CARRIERS):
            return None
        return r.sites.get(site)

    def _realized_op(self, op: Operation, site: str, element: str) -> list[str]:
        """`x_f32 = x.to(torch.float32)` for each tensor operand not known to have the
        op's compute type (as convert-psk-core-to-realize inserts a convert), the op in
        that type, its result rounded to bf16 where that is its storage."""
        compute = _COMPUTE[element]
        lines, saved = [], {}
        for operand in dict.fromkeys(op.operands):
            if not isinstance(operand.type, C.TensorAttr) or operand in self.weak \
                    or self.known.get(operand) == compute:
                continue
            name = self._fresh(f"{self.v(operand)}_{compute}", site.rsplit("%", 1)[-1])
            lines.append(f"{name} = {self.v(operand)}.to({_TORCH_DTYPE[compute]})  "
                         f"# {site} convert")
            saved[operand], self.names[operand] = self.names[operand], name
        self.tensor_dtype = _TORCH_DTYPE[compute]
        rhs = self._rhs(op, site)
        self.tensor_dtype = None
        self.names.update(saved)
        if element == "bf16":
            rhs = f"({rhs}).to(torch.bfloat16)"
        result = op.results[0]
        if result not in self.weak:
            self.known[result] = element
        return lines + [f"{self._bind(result, op)} = {rhs}  # {site} {type_text(result.type)}"
                        f" in {element}"]

    def _rhs(self, op: Operation, site: str) -> str:
        if isinstance(op, C.ConstantOp):
            return self._constant(op)
        if isinstance(op, C.RealOp):
            return f"float({self.v(op.operands[0])})" if op.results[0] in self.weak \
                else self._tensor(f"float({self.v(op.operands[0])})")
        if isinstance(op, C.PowIOp):
            return f"{self.v(op.operand)} ** {op.n.value.data}"
        if isinstance(op, C.SoftmaxOp):
            return f"torch.softmax({self.v(op.operand)}, dim={_dim(op.operand, op.axis.data)})"
        if isinstance(op, C.HeavisideOp):
            x = self.v(op.operand)
            return f"torch.heaviside({x}, {x}.new_tensor({_number(op.at_zero_value)}))"
        if isinstance(op, C.UnaryOp) and op.name in _SPELLING:
            spelling = _SPELLING[op.name]
            self.file.uses_functional |= "F." in spelling
            self.file.uses_math |= "math." in spelling
            return spelling.format(x=self.v(op.operands[0]))
        if isinstance(op, C.DotOp):
            return self._dot(op)
        if isinstance(op, C.BinaryOp):
            return self._binary(op)
        if isinstance(op, C.ReduceOp):
            return self._reduce(op)
        if isinstance(op, C.BroadcastOp):
            return self._broadcast(op)
        if isinstance(op, C.TupleOp):
            items = [self.v(e) for e in op.elements]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if isinstance(op, C.GetOp):
            return f"{self.v(op.operand)}[{op.index.value.data}]"
        if isinstance(op, C.FieldOp):
            return _member(self.v(op.operand), op.field.data)
        if isinstance(op, C.CallOp):
            return self._call(op.callee_name, [self.v(a) for a in op.arguments])
        raise ExportError(f"{site}: {op.name} has no PyTorch form (export the program "
                          "before differentiation: torch autograd takes its gradients)")

    def _tensor(self, value: str) -> str:
        if self.tensor_dtype is not None:  # a realized site's own type
            return f"torch.tensor({value}, dtype={self.tensor_dtype})"
        self.needs_dtype = True
        return f"torch.tensor({value}, dtype=dt)"

    def _constant(self, op: C.ConstantOp) -> str:
        t = op.results[0].type
        if isinstance(t, IntegerType):
            return str(int(op.number))
        if isinstance(t, C.TensorAttr) and op.results[0] not in self.weak:
            return self._tensor(_number(op.number))
        return _number(op.number)

    def _binary(self, op: C.BinaryOp) -> str:
        lt, rt = op.lhs.type.shape, op.rhs.type.shape  # type: ignore[attr-defined]
        result, lp, rp = shapes.alignment(lt, rt)
        n = len(result.axes)
        a = _placed(self.v(op.lhs), lt, lp, n)
        b = _placed(self.v(op.rhs), rt, rp, n)
        return _SPELLING[op.name].format(a=a, b=b)

    def _dot(self, op: C.DotOp) -> str:
        a, b = self.v(op.lhs), self.v(op.rhs)
        if len(op.rhs.type.shape.axes) <= 2:  # type: ignore[attr-defined]
            return f"{a} @ {b}"
        return f"torch.tensordot({a}, {b}, dims=1)"

    def _reduce(self, op: C.ReduceOp) -> str:
        x, axis = self.v(op.operand), op.axis_name
        if isinstance(op, C.LogSumExpOp):
            return f"torch.logsumexp({x}.reshape(-1), dim=0)" if axis is None \
                else f"torch.logsumexp({x}, dim={_dim(op.operand, axis)})"
        d = "" if axis is None else f"dim={_dim(op.operand, axis)}"
        return _REDUCE[type(op)].format(x=x, d=d)

    def _broadcast(self, op: C.BroadcastOp) -> str:
        source = op.operand.type.shape  # type: ignore[attr-defined]
        target = op.results[0].type.shape  # type: ignore[attr-defined]
        _, places, _ = shapes.alignment(source, target)
        x = self.v(op.operand)
        placed = _placed(x, source, places, len(target.axes))
        sizes = ["-1" if k in places else self._size(a.size, op)
                 for k, a in enumerate(target.axes)]
        lead = []
        if target.prefix:
            lead = [f"*{x}.shape[:{x}.dim() - {len(source.axes)}]"] if source.prefix \
                else [f"*{self._bound_prefix(op)}"]
        return f"{placed}.expand({', '.join(lead + sizes)})"

    def _size(self, size: Size, op: Operation) -> str:
        """A size as Python: a literal, a dim of the module (self.D), or read off an
        argument whose type has an axis of that size."""
        if isinstance(size, int):
            return str(size)
        if self.decl is not None and size in self.decl.dim_names:
            return f"self.{size}"
        for arg in self.func.args:
            found = _axis_of(self.v(arg), arg.type, size)
            if found is not None:
                return found
        raise ExportError(f"{op.attributes['site'].data}: the size `{size}` is given by no "
                          "argument")

    def _bound_prefix(self, op: Operation) -> str:
        for arg in self.func.args:
            found = _prefix_of(self.v(arg), arg.type)
            if found is not None:
                return found
        raise ExportError(f"{op.attributes['site'].data}: `...` is bound by no argument")

    def _call(self, callee: str, args: list[str]) -> str:
        x = self.file.x
        if callee in x.methods:
            theta, rest = args[0], ", ".join(args[1:])
            method = x.method_name(callee)
            return f"{theta}({rest})" if method == "forward" else f"{theta}.{method}({rest})"
        return f"{self.file.ref(callee)}({', '.join(args)})"

    def _fold(self, op: C.FoldOp, site: str) -> list[str]:
        result = op.results[0]
        name = self._bind(result, op)
        count = op.count_value
        n = str(count) if isinstance(count, int) else self._size(count, op)
        i = self._fresh("i", "i")
        step = self._call(op.callee_name, [f"{self.v(op.stacked)}.at({i})", name])
        return [f"{name} = {self.v(op.acc)}  # {site} {type_text(result.type)}: "
                f"fold {count} {op.callee_name} over {self.v(op.stacked)}",
                f"for {i} in range({n}):",
                f"    {name} = {step}"]


def _number(value: float) -> str:
    text = format_float(float(value))
    return text if text not in ("inf", "-inf", "nan") else f"float({text!r})"


def _dim(value: SSAValue, axis: str) -> int:
    """The dim of a named axis: from the left without a prefix, from the right with one."""
    t = value.type.shape  # type: ignore[attr-defined]
    index = t.index_of(axis)
    if index is None:
        raise ExportError(f"no axis `{axis}` in {t}")
    return index - len(t.axes) if t.prefix else index


def _placed(expr: str, t: TensorType, places: Sequence[int], n: int) -> str:
    """`expr` indexed so that torch's broadcasting (from the right) puts its explicit axes
    at `places` among the result's n explicit axes: `None` where it lacks one."""
    if t.is_scalar:
        return expr
    present = set(places)
    start = 0 if t.prefix else (min(places) if places else n)
    index = [":" if j in present else "None" for j in range(start, n)]
    if "None" not in index:
        return expr
    if t.prefix:
        return f"{expr}[..., {', '.join(index)}]"
    while index[-1] == ":":
        index.pop()
    return f"{expr}[{', '.join(index)}]"


def _find(base: str, t: Attribute, at: Callable[[str, C.TensorAttr], str | None]) -> str | None:
    """The first tensor of a (nested) tuple value `base` of type `t` for which `at` says
    something, and what it says (`at(expression, type)`), in the tuple's order."""
    if isinstance(t, C.TensorAttr):
        return at(base, t)
    if isinstance(t, TupleType):
        for k, item in enumerate(t.types.data):
            found = _find(f"{base}[{k}]", item, at)
            if found is not None:
                return found
    return None


def _first_tensor(base: str, t: Attribute) -> str | None:
    return _find(base, t, lambda e, _: e)


def _axis_of(base: str, t: Attribute, size: str) -> str | None:
    def at(e: str, tensor: C.TensorAttr) -> str | None:
        axes = tensor.shape.axes
        for k, a in enumerate(axes):
            if a.size == size:
                return f"{e}.shape[{k - len(axes) if tensor.shape.prefix else k}]"
        return None
    return _find(base, t, at)


def _prefix_of(base: str, t: Attribute) -> str | None:
    return _find(base, t, lambda e, tensor: f"{e}.shape[:{e}.dim() - {len(tensor.shape.axes)}]"
                 if tensor.shape.prefix else None)


def _weak_values(func: C.FuncOp) -> set[SSAValue]:
    """The ℝ[] constants and reals that stay Python numbers: every use an arithmetic
    operator whose other operand is a tensor, which gives the result its dtype."""
    def candidate(v: SSAValue) -> bool:
        return isinstance(v, SSAValue) and not isinstance(v, BlockArgument) \
            and isinstance(v.owner, (C.ConstantOp, C.RealOp)) \
            and isinstance(v.type, C.TensorAttr)

    weak = set()
    for op in func.body.block.ops:
        for v in op.results:
            if not candidate(v) or not v.uses:
                continue
            if all(u.operation.name in _OPERATORS
                   and not candidate(u.operation.operands[1 - u.index]) for u in v.uses):
                weak.add(v)
    return weak


def summary_line(export: Export, directory: str) -> str:
    """`presk export`'s line: files, modules, functions, parameters, where."""
    def count(n: int, what: str) -> str:
        return f"{n} {what}{'' if n == 1 else 's'}"

    fns = f" ({', '.join(export.functions)})" if export.functions else ""
    trees = "".join(f"; {fn}'s tree: {count(n, 'tensor')}, {count(r, 'real')}"
                    for fn, (n, r) in export.trees.items())
    return (f"presk export: {count(len(export.sources), 'Python file')} "
            f"({', '.join(export.sources)}), {count(export.modules, 'nn.Module')} with "
            f"{count(export.methods, 'method')}, {count(len(export.functions), 'function')}"
            f"{fns}, {count(export.parameters, 'parameter')} declared{trees}; into {directory}")


__all__: Iterable[str] = ("ExportError", "Export", "pytorch_sources", "pytorch_export",
                          "python_module_name", "summary_line")
