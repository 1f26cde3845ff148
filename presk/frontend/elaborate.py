"""Elaboration: from parsed files to the typed program.

Resolves imports and names, binds consts, gives every module's parameters, uses and
functions their types, checks every function body (presk.frontend.check), instantiates the
modules at their dims, and checks the optimizers, training runs and static assertions
(presk.frontend.training).
"""

from __future__ import annotations

import math

from ..limits import check_size, parse_size
from ..shapes import Axis, Size, TensorType
from . import ast as A
from .check import BUILTINS, FnChecker, _kind
from .diagnostics import Diagnostic, did_you_mean, error
from .load import import_target, load_program
from .program import (
    ConstInfo, FileInfo, FnInfo, FnParamInfo, FnRef, FoldRef, Instance, ModuleInfo, ParamInfo,
    Program, UseInfo, flatten,
)
from .types import F64, NAT, ParamsT, TupleT, Type, stacked

# Checking a function checks its callees first, and a module's instance its sub-modules:
# deeper chains than this would reach Python's recursion limit.
MAX_NESTING = 64

INITIALIZERS = {
    "zeros": set(), "ones": set(), "normal": {"mean", "std"}, "uniform": {"low", "high"},
    "xavier_uniform": {"gain"}, "xavier_normal": {"gain"},
}


class Elaborator:
    def __init__(self) -> None:
        self.files: list[FileInfo] = []
        self.by_path: dict[str, FileInfo] = {}
        self.warnings: list[Diagnostic] = []
        self._checking: list[FnInfo] = []

    # ---- the driver ----
    def run(self, main_path: str, sources: dict[str, str]) -> Program:
        trees = load_program(main_path, sources)
        for tree in trees:
            info = FileInfo(tree.path, tree, is_main=tree is trees[-1])
            self.files.append(info)
            self.by_path[tree.path] = info
        for info in self.files:
            self._collect(info)
        for info in self.files:
            for m in info.modules.values():
                self._module_members(m)
        acyclic: set[ModuleInfo] = set()
        for m in (m for f in self.files for m in f.modules.values()):
            self._check_use_cycles(m, [], acyclic)
        for info in self.files:
            for fn in self._file_functions(info):
                self._signature(fn)
        for info in self.files:
            for fn in self._file_functions(info):
                self.ensure_checked(fn, fn.decl.name_span)
        program = Program(self.files, self.files[-1], sources, self.warnings)
        program.instances = self._instances()
        from .training import check_runs  # the data file reader is only needed here
        check_runs(self, program)
        return program

    @staticmethod
    def _file_functions(info: FileInfo) -> list[FnInfo]:
        return [f for m in info.modules.values() for f in m.fns.values()] + list(info.fns.values())

    # ---- names ----
    def _collect(self, info: FileInfo) -> None:
        seen: dict[str, A.Span] = {}

        def define(name: str, span: A.Span) -> None:
            if name in seen:
                first = seen[name]
                raise error("E0201", f"`{name}` is defined twice", span,
                            notes=[(first, "first defined here")])
            seen[name] = span

        for d in info.ast.decls:
            if isinstance(d, A.ImportDecl):
                define(d.alias, d.span)
                info.imports[d.alias] = self.by_path[import_target(info.ast, d)]
            elif isinstance(d, A.DimDecl):
                for name, span in zip(d.names, d.spans):
                    define(name, span)
                    info.dims[name] = span
            elif isinstance(d, A.ConstDecl):
                define(d.name, d.span)
                info.consts[d.name] = self._const(info, d)
            elif isinstance(d, A.ModuleDecl):
                define(d.name, d.name_span)
                info.modules[d.name] = ModuleInfo(d.name, info, d, d.dims)
            elif isinstance(d, A.FnDecl):
                define(d.name, d.name_span)
                info.fns[d.name] = FnInfo(d.name, d.name, None, info, d)
            elif isinstance(d, A.OptimizerDecl):
                define(d.name, d.name_span)
            elif isinstance(d, A.TrainingDecl):
                define(d.name, d.name_span)

    def _const(self, info: FileInfo, d: A.ConstDecl) -> ConstInfo:
        if d.type_name not in ("nat", "f64"):
            raise error("E0302", f"unknown const type `{d.type_name}`", d.type_span,
                        "a const is a `nat` or an `f64`")
        value = self.static_value(info, d.value, {})
        if d.type_name == "nat":
            if not (isinstance(value, int) or float(value).is_integer()) or value < 0:
                raise error("E0301", f"`{d.name} : nat` cannot hold {value}", d.value.span,
                            "a nat is a natural number: 0, 1, 2, …")
            value = int(value)
        else:
            value = float(value)
        return ConstInfo(d.name, d.type_name, value, d.span)

    def static_value(self, info: FileInfo, e: A.Expr, dims: dict[str, int]) -> int | float:
        """Evaluate an expression over literals, consts and bound dims."""
        if isinstance(e, A.Number):
            if len(e.text) > _MAX_DIGITS:
                raise error("E0605", "the number is too large", e.span)
            return _in_range(int(e.text) if e.is_natural else e.value, e.span)
        if isinstance(e, A.Neg):
            return -self.static_value(info, e.operand, dims)
        if isinstance(e, A.Name) and len(e.path) == 1:
            name = e.path[0]
            if name in dims:
                return dims[name]
            const = self.lookup_const(info, name)
            if const is not None:
                return const.value
            if name in info.dims:
                raise error("E0605", f"`{name}` is a dim, unbound here", e.span)
            later = next((d for d in info.ast.decls
                          if isinstance(d, A.ConstDecl) and d.name == name), None)
            raise error("E0204", f"unknown const `{name}`", e.span,
                        f"`{name}` is declared at line {later.span.line}: a const uses the consts "
                        "declared before it" if later is not None
                        else did_you_mean(name, info.consts))
        if isinstance(e, A.Binary) and e.op in _STATIC_OPS:
            lhs = self.static_value(info, e.lhs, dims)
            rhs = self.static_value(info, e.rhs, dims)
            if e.op == "pow" and abs(lhs) > 1 and rhs * math.log2(abs(lhs)) > _MAX_BITS:
                raise error("E0605", "the value is too large", e.span)
            try:
                value = _STATIC_OPS[e.op](lhs, rhs)
            except ZeroDivisionError:
                raise error("E0605", "division by zero", e.span) from None
            except OverflowError:
                raise error("E0605", "the value is too large", e.span) from None
            if isinstance(value, complex):
                raise error("E0605", f"{lhs} ^ {rhs} is not a real number", e.span)
            return _in_range(value, e.span)
        raise error("E0605", "not a static value: use literals and consts", e.span)

    def lookup_const(self, info: FileInfo, name: str) -> ConstInfo | None:
        return info.consts.get(name)

    def size(self, info: FileInfo, s: A.SizeExpr, module: ModuleInfo | None) -> Size:
        if s.is_literal:
            size = parse_size(s.text)
            if isinstance(size, str):
                raise error("E0308", f"{s.text[:20]}{'…' * (len(s.text) > 20)} is not a "
                            f"size: {size}", s.span)
            return size
        if module is not None and s.text in module.dims:
            return s.text
        if s.text in info.dims:
            return s.text
        const = info.consts.get(s.text)
        if const is not None:
            if const.type_name != "nat":
                raise error("E0202", f"`{s.text}` is an f64 const; a size is a nat", s.span)
            reason = check_size(int(const.value))
            if reason is not None:
                raise error("E0308", f"`{s.text}` = {_short(int(const.value))} is not a size: "
                            f"{reason}", s.span)
            return int(const.value)
        known = list(info.dims) + list(info.consts) + (module.dims if module else [])
        raise error("E0202", f"unknown dim or const `{s.text}`", s.span,
                    did_you_mean(s.text, known) or "declare it with `dim` or `const`")

    @classmethod
    def standalone_type(cls, info: FileInfo, t: A.TypeExpr) -> Type:
        """A type written outside the program (a data file's sample type), elaborated by
        a fresh elaborator: it can name no dim or const of the program."""
        return cls().type(info, t, None)

    def type(self, info: FileInfo, t: A.TypeExpr, module: ModuleInfo | None) -> Type:
        if isinstance(t, A.TensorTypeExpr):
            return TensorType(tuple(Axis(a.name, self.size(info, a.size, module)) for a in t.axes),
                              t.prefix)
        if isinstance(t, A.TupleTypeExpr):
            return TupleT(tuple(self.type(info, i, module) for i in t.items))
        if isinstance(t, A.ParamsTypeExpr):
            return self.module_ref(info, t.ref, module)
        if t.name in ("f64", "nat"):
            return F64 if t.name == "f64" else NAT
        raise error("E0302", f"unknown type `{t.name}`", t.span,
                    "a type is ℝ[…], a tuple, `params M`, `f64` or `nat`")

    def find_module(self, info: FileInfo, path: list[str], span: A.Span) -> ModuleInfo:
        here = info
        for alias in path[:-1]:
            if alias not in here.imports:
                raise error("E0203", f"unknown import `{alias}` in `{'.'.join(path)}`", span,
                            did_you_mean(alias, here.imports))
            here = here.imports[alias]
        module = here.modules.get(path[-1])
        if module is None:
            raise error("E0203", f"unknown module `{'.'.join(path)}`", span,
                        did_you_mean(path[-1], here.modules))
        return module

    def module_ref(self, info: FileInfo, ref: A.ModuleRef, within: ModuleInfo | None) -> ParamsT:
        module = self.find_module(info, ref.path, ref.span)
        if len(ref.sizes) != len(module.dims):
            want = f"{len(module.dims)} dim{'s' if len(module.dims) != 1 else ''}"
            if module.dims:
                want += " (" + " ".join(module.dims) + ")"
            raise error("E0304", f"`{module.name}` takes {want}, given {len(ref.sizes)}",
                        ref.span)
        dims = tuple(self.size(info, s, within) for s in ref.sizes)
        stack = (self.size(info, ref.stack, within),) if ref.stack is not None else ()
        return ParamsT(module, dims, stack)

    # ---- modules ----
    def _module_members(self, m: ModuleInfo) -> None:
        info, seen = m.file, {}
        for dim, span in zip(m.dims, m.decl.dim_spans):
            if dim in seen:
                raise error("E0201", f"dim `{dim}` is declared twice", span)
            seen[dim] = span
        for p in m.decl.params:
            self._define_member(seen, p.name, p.span)
            t = self.type(info, p.type, m)
            if not isinstance(t, TensorType) or t.prefix:
                raise error("E0305", f"parameter `{p.name}` is {t}; a parameter is a tensor "
                            "of fixed axes", p.type.span)
            args = self._check_init(info, p.init)
            m.params.append(ParamInfo(p.name, t, p.init, p.span, args))
        for u in m.decl.uses:
            self._define_member(seen, u.name, u.span)
            m.uses.append(UseInfo(u.name, self.module_ref(info, u.ref, m), u.span))
        for f in m.decl.fns:
            self._define_member(seen, f.name, f.name_span)
            m.fns[f.name] = FnInfo(f"{m.name}.{f.name}", f.name, m, info, f)

    @staticmethod
    def _define_member(seen: dict[str, A.Span], name: str, span: A.Span) -> None:
        if name in seen:
            raise error("E0201", f"`{name}` is defined twice in this module", span,
                        notes=[(seen[name], "first defined here")])
        seen[name] = span

    def _check_init(self, info: FileInfo, init: A.InitSpec) -> dict[str, float]:
        if init.name not in INITIALIZERS:
            raise error("E0303", f"unknown initializer `{init.name}`", init.span,
                        did_you_mean(init.name, INITIALIZERS)
                        or "one of " + ", ".join(INITIALIZERS))
        args: dict[str, float] = {}
        for arg in init.args:
            if arg.name not in INITIALIZERS[init.name]:
                allowed = ", ".join(sorted(INITIALIZERS[init.name])) or "no argument"
                raise error("E0303", f"`{init.name}` takes no argument `{arg.name}`", arg.span,
                            f"it takes {allowed}")
            args[arg.name] = float(self.static_value(info, arg.value, {}))
        reason = _init_domain(init.name, args)
        if reason is not None:
            raise error("E0303", f"`{init.name}` {reason}", init.span)
        return args

    def _check_use_cycles(self, m: ModuleInfo, path: list[ModuleInfo],
                          acyclic: set[ModuleInfo]) -> None:
        """A module may not contain itself; `acyclic` holds the modules already explored
        (without it, a module using another twice at each of n levels costs 2ⁿ)."""
        if m in acyclic:
            return
        if m in path:
            names = " → ".join(x.name for x in path[path.index(m):] + [m])
            raise error("E0306", f"module `{m.name}` contains itself: {names}", m.decl.name_span)
        if len(path) >= MAX_NESTING:
            raise error("E0005", f"modules nest more than {MAX_NESTING} deep: "
                        f"{_chain([*path, m])} → …", m.decl.name_span)
        for u in m.uses:
            self._check_use_cycles(u.target.module, path + [m], acyclic)
        acyclic.add(m)

    # ---- functions ----
    def _signature(self, fn: FnInfo) -> None:
        info, m, decl = fn.file, fn.module, fn.decl
        if m is not None:
            theta = ParamsT(m, tuple(m.dims))
            fn.params.append(FnParamInfo("θ", theta, None, decl.name_span, implicit=True))
            fn.dims = tuple(m.dims)
        seen = {"θ"} if m is not None else set()
        for p in decl.params:
            if p.name in seen:
                raise error("E0201", f"parameter `{p.name}` is declared twice", p.span)
            seen.add(p.name)
            t = self.type(info, p.type, m)
            fn.params.append(FnParamInfo(p.name, t, self._default(info, p, t), p.span))
        fn.result = self.type(info, decl.result, m)
        if m is None:
            fn.dims = tuple(sorted(_dim_symbols([p.type for p in fn.params] + [fn.result])))
        if isinstance(fn.result, TensorType) and fn.result.prefix and not any(
                isinstance(p.type, TensorType) and p.type.prefix for p in fn.params):
            raise error("E0308", f"`{fn.name}` returns `...` but no argument has it to bind",
                        decl.result.span)

    def _default(self, info: FileInfo, p: A.FnParam, t: Type) -> int | float | None:
        if p.default is None:
            return None
        if t not in (F64, NAT):
            raise error("E0307", f"only an f64 or a nat parameter has a default; `{p.name}` "
                        f"is {t}", p.default.span)
        value = self.static_value(info, p.default, {})
        if t == NAT and (not float(value).is_integer() or value < 0):
            raise error("E0307", f"`{p.name} : nat` cannot default to {value}", p.default.span)
        p.default.ty = t
        return int(value) if t == NAT else float(value)

    def ensure_checked(self, fn: FnInfo, span: A.Span) -> None:
        if fn.checked:
            return
        if fn in self._checking:
            names = " → ".join(f.name for f in self._checking[self._checking.index(fn):] + [fn])
            raise error("E0206", f"recursion is not supported: {names}", span)
        if len(self._checking) >= MAX_NESTING:
            raise error("E0005", f"calls nest more than {MAX_NESTING} functions deep: "
                        f"{_chain([*self._checking, fn])} → …", span)
        self._checking.append(fn)
        checker = FnChecker(self, fn)
        checker.run()
        self.warnings += checker.warnings
        self._checking.pop()
        fn.checked = True

    def resolve_callee(self, checker: FnChecker, call: A.Call) -> FnRef | FoldRef:
        """What `f(…)`, `proj.apply(…)`, `blocks.apply(…)` or `t.Tower.apply(θ, …)` calls."""
        path, span = call.callee.path, call.callee.span
        info, m = checker.fn.file, checker.fn.module
        if len(path) == 1:
            if m is not None and path[0] in m.fns:
                return FnRef(m.fns[path[0]], {d: d for d in m.dims}, "self", None, [])
            if path[0] in info.fns:
                return FnRef(info.fns[path[0]], {}, "explicit", None, [])
            if path[0] in checker.scope:  # a let or an argument that hides a builtin
                raise error("E0206", f"`{path[0]}` is {_kind(checker.scope[path[0]].type)} here, "
                            "not a function", span)
            known = list(info.fns) + list(BUILTINS) + (list(m.fns) if m else [])
            raise error("E0205", f"unknown function `{path[0]}`", span,
                        did_you_mean(path[0], known))
        head = path[0]
        if head in checker.scope and head not in info.imports:
            t = checker.scope[head].type
            raise error("E0206", f"`{head}` is {_kind(t)}, which has no functions", span,
                        f"pass the tree to its module's function: `{t.module.name}."
                        f"{path[-1]}({head}, …)`" if isinstance(t, ParamsT) else None)
        member = m.member(head) if m is not None else None
        if isinstance(member, UseInfo) and len(path) == 2:
            return self._use_call(member, path[1], span)
        if isinstance(member, ParamInfo):
            raise error("E0206", f"`{head}` is a parameter, {member.type}, not a sub-module: "
                        "it has no functions", span)
        if len(path) == 2 and head in info.imports and path[1] in info.imports[head].fns:
            return FnRef(info.imports[head].fns[path[1]], {}, "explicit", None, [])
        module = self.find_module(info, path[:-1], span)
        fn = module.fns.get(path[-1])
        if fn is None:
            raise error("E0205", f"`{module.name}` has no function `{path[-1]}`", span,
                        did_you_mean(path[-1], module.fns))
        return FnRef(fn, {}, "explicit", None, [])

    def _use_call(self, use: UseInfo, name: str, span: A.Span) -> FnRef | FoldRef:
        target = use.target
        fn = target.module.fns.get(name)
        if fn is None:
            raise error("E0205", f"`{use.name}` is a `{target.module.name}`, which has no "
                        f"function `{name}`", span, did_you_mean(name, target.module.fns))
        dims = target.env()
        if not target.stack:
            return FnRef(fn, dims, "use", use, [])
        if len(target.stack) > 1:
            raise error("E0409", f"`{use.name}` is stacked {len(target.stack)} times; a fold "
                        "runs over one stack", span)
        return FoldRef(fn, target.stack[0], use, dims, None)  # type: ignore[arg-type]

    def field_type(self, t: ParamsT, name: str, span: A.Span) -> Type:
        member = t.module.member(name)
        if member is None:
            names = [x.name for x in (*t.module.params, *t.module.uses)]
            raise error("E0204", f"`{t.instance_name()}` has no field `{name}`", span,
                        did_you_mean(name, names)
                        or ("its fields: " + ", ".join(names) if names else "it has no field"))
        if isinstance(member, ParamInfo):
            return stacked(member.type.substitute(t.env()), t.stack)
        return t.subtree(member.target)

    # ---- instances ----
    def _instances(self) -> list[Instance]:
        """Every module instance the program's dim-free modules reach, sub-instances first."""
        out: dict[tuple, Instance] = {}

        def visit(t: ParamsT) -> None:
            key = (id(t.module), t.dims)
            if key in out:
                return
            for u in t.module.uses:
                inner = t.subtree(u.target)
                visit(ParamsT(inner.module, inner.dims))
            out[key] = Instance(ParamsT(t.module, t.dims), flatten(ParamsT(t.module, t.dims)))

        for info in self.files:
            for m in info.modules.values():
                if not m.dims:
                    visit(ParamsT(m))
        return list(out.values())


def _dim_symbols(types: list[Type | None]) -> set[str]:
    out: set[str] = set()
    for t in types:
        if isinstance(t, TensorType):
            out |= {a.size for a in t.axes if isinstance(a.size, str)}
        elif isinstance(t, TupleT):
            out |= _dim_symbols(list(t.items))
        elif isinstance(t, ParamsT):
            out |= {d for d in (*t.dims, *t.stack) if isinstance(d, str)}
    return out


def _init_domain(name: str, args: dict[str, float]) -> str | None:
    """Why an initializer's arguments draw no distribution (numpy would raise), or None."""
    if name == "uniform":
        low, high = args.get("low", 0.0), args.get("high", 1.0)
        if not low <= high:
            return f"needs low ≤ high (low = {low:g}, high = {high:g})"
        if not math.isfinite(high - low):
            return f"has a range high − low beyond an f64 (low = {low:g}, high = {high:g})"
    if name == "normal" and not args.get("std", 1.0) >= 0:
        return f"needs std ≥ 0 (std = {args['std']:g})"
    if name.startswith("xavier") and not args.get("gain", 1.0) >= 0:
        return f"needs gain ≥ 0 (gain = {args['gain']:g})"
    return None


def _short(n: int) -> str:
    """`n`, or its first digits and its length when it is long."""
    text = str(n)
    return text if len(text) <= 20 else f"{text[:12]}… ({len(text)} digits)"


# A static value is an int that converts to an f64, or a finite f64.
_MAX_BITS = 1024
_MAX_DIGITS = 400


def _in_range(value: int | float, span: A.Span) -> int | float:
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise error("E0605", "the value is too large", span)
    if isinstance(value, float) and not math.isfinite(value):
        raise error("E0605", f"the value is out of the range of an f64 ({value})", span)
    return value


_STATIC_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b if not (isinstance(a, int) and isinstance(b, int) and a % b == 0)
    else a // b,
    "mod": lambda a, b: a % b, "pow": lambda a, b: a ** b,
}


def elaborate(main_path: str, sources: dict[str, str] | None = None) -> Program:
    """Elaborate the program whose main file is `main_path`.

    Raises CompileError with the first error; `sources` receives every file read, so the
    caller can render it.
    """
    el = Elaborator()
    try:
        return el.run(main_path, sources if sources is not None else {})
    except RecursionError:
        # Within MAX_NESTING calls and MAX_DEPTH levels of expression each, but both at
        # once: the chain of functions being checked says where.
        chain = el._checking
        if not chain:
            raise
        raise error("E0005", "the program nests too deeply to check: calls "
                    + _chain(chain) + ", each deep inside an expression",
                    chain[-1].decl.name_span, "split the expressions with `let`") from None


def _chain(items) -> str:
    """`a → b → … → z` of the first two and the last of a long chain of named things."""
    names = [x.name for x in items]
    return " → ".join(names if len(names) <= 4 else [*names[:2], "…", names[-1]])
