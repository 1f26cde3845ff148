"""From an xDSL `llvm`-dialect module to machine code in this process.

The native backend ends here: `llvm_ir` translates the module with xDSL's
`convert_module` (entries external, every other function internal so that O2 may inline
and delete it), `optimize` runs LLVM's O2 pipeline for the host CPU, `emit_object` makes
the object code and `load_object` hands it to MCJIT. Compiling always goes through the
object bytes, so a module compiled now and one loaded from the on-disk cache
(presk/runtime/cache.py) are loaded by the same code: the cache holds exactly what MCJIT
ran.

Bits: Presk promises the same bits as its interpreter, so no fast-math flag may reach
LLVM (`llvm_ir` refuses one) and the backend may not contract a*b+c into an FMA. LLVM's
default `TargetOptions.AllowFPOpFusion` is `Standard` (fuse only `llvm.fmuladd` and
`contract`-flagged ops), which llvmlite keeps; with neither in the IR there is no FMA.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable

import llvmlite.binding as binding
from llvmlite import ir
from xdsl.backend.llvm.convert import convert_module
from xdsl.dialects.builtin import ModuleOp

from presk.emit import mathlib
from presk.emit.mathlib_llvm import SYMBOL as MATH_SYMBOL
from presk.emit.mathlib_llvm import VECTOR_SYMBOL, has_wide_pick, to_llvm, vector_symbol
from presk.emit.short_loops import vectorize_short_loops
from presk.emit.wide_loops import PARTS, widen_loops

FAST_MATH_FLAGS = frozenset({"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn",
                             "reassoc"})


class NativeCompileError(Exception):
    """A module the native backend refuses: a fast-math flag, an entry it lacks, object
    code MCJIT cannot load, a symbol the loaded code does not define."""


@dataclass(frozen=True)
class HostTarget:
    """The machine we compile for: its triple, CPU name, CPU features and data layout."""

    triple: str
    cpu: str
    features: str
    data_layout: str

    def machine(self) -> binding.TargetMachine:
        """A new target machine at opt=2 for this host. MCJIT takes ownership of the
        machine it is given, so every engine gets its own.

        Position-independent code in the small code model, not MCJIT's default (large):
        there every constant of the pool takes a `movabs` of its address into a register,
        so a loop's constants are hoisted into registers and spilled — erf's 22 picked
        coefficients and its pieces' bounds spilled 2 KiB a launch of gelu's slope —
        where here they are RIP-relative memory operands (`vdivpd c(%rip){1to8}`), and
        each of erf's coefficient picks (a `vpermq`) reads its table from memory. The
        tutorial's gradient at B = 8 (f64, Zen 4): gelu's slope 182 → 156 ns a launch,
        a call 1.85 → 1.74 µs. It is safe to load: llvmlite's memory manager reserves
        one block for all of an object's sections (so a PC-relative reference within the
        object is in range), and the loader reaches a symbol outside it (the pool
        library's, libm's) through a stub or a GOT entry of its own; a static relocation
        model would need absolute 32-bit addresses (R_X86_64_32S), which the loader
        refuses."""
        target = binding.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=2,
                                            reloc="pic", codemodel="small")


@lru_cache(maxsize=1)
def host_target() -> HostTarget:
    """The host, with LLVM's native target initialized (`initialize_native_target` and
    `initialize_native_asmprinter`; `binding.initialize()` must not be called on
    llvmlite 0.50)."""
    binding.initialize_native_target()
    binding.initialize_native_asmprinter()
    triple = binding.get_default_triple()
    cpu = binding.get_host_cpu_name()
    features = widest_vectors(binding.get_host_cpu_features().flatten())
    tm = binding.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=2)
    return HostTarget(triple, cpu, features, str(tm.target_data))


def widest_vectors(features: str) -> str:
    """The host's features, and on an AVX-512 machine `-prefer-256-bit`: LLVM's tuning of
    many Intel CPUs vectorizes loops in 256-bit vectors (against the clock drop of the
    first AVX-512 parts), which halves the lanes of every element-wise kernel. In the
    machine's 512-bit vectors each lane runs the same IEEE operations, so the bits stay;
    measured on a 2-CPU Xeon (LLVM's `rocketlake`, load 4.7-4.8), the scaled Tower's
    gradient at B = 1024 all-f32, one thread: gelu 332 -> 244 µs a launch, its slope
    889 -> 765 µs, a call 32.0 -> 31.0 ms CPU (3 interleaved pairs)."""
    flags = features.split(",")
    if "+avx512f" in flags and "-prefer-256-bit" not in flags:
        return ",".join([*flags, "-prefer-256-bit"])
    return features


@lru_cache(maxsize=1)
def _shared_machine() -> binding.TargetMachine:
    """The target machine `optimize` and `emit_object` use (never given to an engine)."""
    return host_target().machine()


def _check_no_fast_math(function: ir.Function) -> None:
    for block in function.blocks:
        for instr in block.instructions:
            flags = set(getattr(instr, "flags", ()) or ()) | set(
                getattr(instr, "fastmath", ()) or ())
            bad = flags & FAST_MATH_FLAGS
            if bad:
                raise NativeCompileError(
                    f"@{function.name}: `{instr.opname}` carries the fast-math flag(s) "
                    f"{', '.join(sorted(bad))}; Presk compiles IEEE arithmetic only")


def llvm_ir(module: ModuleOp, entries: Iterable[str]) -> str:
    """The LLVM IR text of an llvm-dialect module for the host: every defined function
    whose name is not in `entries` gets internal linkage; entries stay external. Each
    math function with vector variants gets those its loops may run (`_variants`)."""
    wanted = set(entries)
    host = host_target()
    mod = convert_module(module, fallback_target_triple=host.triple,
                         data_layout=host.data_layout)
    isa = vector_isa(host)
    wide = _wide_picks(mod, isa)
    defined = set()
    for fn in mod.functions:
        if fn.is_declaration:
            continue
        defined.add(fn.name)
        _check_no_fast_math(fn)
        fn.linkage = "" if fn.name in wanted else "internal"
        if VECTOR_SYMBOL.fullmatch(fn.name):
            _keep_until_mapped(fn)
        elif MATH_SYMBOL.fullmatch(fn.name) and fn.name not in wide:
            # Straight-line code with selects: inlined, a loop calling it vectorizes.
            fn.attributes.add("alwaysinline")
    missing = wanted - defined
    if missing:
        raise NativeCompileError(f"the module defines no entry {', '.join(sorted(missing))}")
    one_vector = {name: _one_vector(name, isa) for name in wide}  # the widest first
    used = widen_loops(mod, {name: lanes[0] for name, lanes in one_vector.items()})
    vectorize_short_loops(mod, VARIANT_BITS[isa][0] if isa else 128)
    texts = []
    for name, lanes in one_vector.items():
        fn, ty = MATH_SYMBOL.fullmatch(name).groups()
        widths = [(lanes[0], k) for k in PARTS if lanes[0] * k in used[name]]
        widths += [(n, 1) for n in lanes]
        _map_to_vector_variants(mod.get_global(name),
                                [(vector_symbol(fn, ty, n * k), n * k) for n, k in widths])
        texts += [_variant(fn, ty, n, k, isa) for n, k in widths
                  if vector_symbol(fn, ty, n * k) not in defined]
    return _with_variants(str(mod), texts)


VARIANT_BITS = {"avx512": (512, 256, 128), "avx2": (256, 128)}
"""The widths of a math function's vector variants on each instruction set (`vector_isa`):
the widest vector's for long loops, the narrower ones for loops shorter than its lanes (a
fused row of 4 f64 elements, whose erf would otherwise be a call of the scalar function
per element); and, for the loops that run at it (presk/emit/wide_loops.py), the widest
vector times each of wide_loops.PARTS, in as many parts side by side."""


def vector_isa(host: HostTarget) -> str | None:
    """The instruction set the math functions' vector variants are written for on this
    host (mathlib_llvm.PERMUTES): AVX-512 (F and VL), else AVX2, else none."""
    flags = set(host.features.split(","))
    if {"+avx512f", "+avx512vl"} <= flags:
        return "avx512"
    return "avx2" if "+avx2" in flags else None


def _one_vector(name: str, isa: str) -> tuple[int, ...]:
    """The lanes of the single-vector variants of the math function `name`, widest first."""
    ty = MATH_SYMBOL.fullmatch(name).group(2)
    return tuple(bits // (64 if ty == "f64" else 32) for bits in VARIANT_BITS[isa])


def _wide_picks(mod: ir.Module, isa: str | None) -> list[str]:
    """On a host with vector variants, the math functions `mod` defines that pick among
    several constants (erf's pieces): those that get them."""
    if isa is None:
        return []
    return [fn.name for fn in mod.functions if not fn.is_declaration
            and (m := MATH_SYMBOL.fullmatch(fn.name)) and m.group(1) in mathlib.FUNCTIONS
            and has_wide_pick(*m.groups())]


def _keep_until_mapped(fn: ir.Function) -> None:
    fn.linkage = ""  # kept until the vectorizer has mapped the calls to it
    fn.attributes.add("alwaysinline")  # then inlined (`optimize`'s second pass)


@lru_cache(maxsize=None)
def _variant(fn: str, ty: str, lanes: int, parts: int, isa: str
             ) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A math function's vector variant as LLVM IR text, built once a process (10–30 ms
    for a vector, ~100 for four parts) and appended to each module's text that calls it:
    its definition, and its declarations (name, text) of the intrinsics it calls."""
    host = host_target()
    mod = convert_module(ModuleOp([to_llvm(fn, ty, lanes=lanes, parts=parts, isa=isa)]),
                         fallback_target_triple=host.triple, data_layout=host.data_layout)
    definition, declarations = "", []
    for f in mod.functions:
        if f.is_declaration:
            declarations.append((f.name, str(f)))
        else:
            _check_no_fast_math(f)
            _keep_until_mapped(f)
            definition = str(f)
    return definition, tuple(declarations)


def _with_variants(text: str, variants: list[tuple[str, tuple[tuple[str, str], ...]]]) -> str:
    """The module's text with the variants' definitions, and the declarations it lacks."""
    lines = [text]
    for definition, declarations in variants:
        for name, declaration in declarations:
            if f'@"{name}"(' not in text and declaration not in lines:
                lines.append(declaration)
        lines.append(definition)
    return "\n".join(lines)


def _map_to_vector_variants(fn: ir.Function, variants: list[tuple[str, int]]) -> None:
    """Tell LLVM's loop vectorizer that a call of `fn` over N lanes is a call of the
    variant of N lanes (the vector function ABI's `vector-function-abi-variant`, which the
    vectorizer reads from the callee), and keep the call until then: not inlined (LLVM
    infers that it touches no memory, so a loop calling it vectorizes) and known not to
    unwind."""
    args = "v" * len(fn.args)
    mapping = ",".join(f"_ZGV_LLVM_N{lanes}{args}_{fn.name}({variant})"
                       for variant, lanes in variants)
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    # llvmlite's attribute set takes only its known names; a string attribute is a
    # `"key"="value"` item, written as it is
    set.add(fn.attributes, f'"vector-function-abi-variant"="{mapping}"')


def parse(ir_text: str) -> binding.ModuleRef:
    """LLVM IR text → a verified llvmlite module."""
    mod = binding.parse_assembly(ir_text)
    mod.verify()
    return mod


def optimize(ir_text: str) -> binding.ModuleRef:
    """The module of `ir_text` after LLVM's O2 pipeline (new pass manager) for the host,
    then the always-inliner again, instcombine, simplifycfg and global DCE (the vector
    variants made internal first: once inlined nothing calls them, and each would
    otherwise be compiled to machine code for nothing — erf's four-part f64 variant alone
    0.1 s of codegen): the loop vectorizer runs
    after O2's inliner, so the calls it makes to a math function's vector variant (erf's,
    `_map_to_vector_variant`) stayed calls — every 16 lanes a call, the loop's live
    vectors spilled around it (all vector registers are caller-saved) and the variant's
    ~25 constants built anew. Inlined, those constants leave the loop: on the scaled
    Tower gelu's nest ran 12 % faster a launch and its slope's 8 % (f32, 2 workers), the
    value and gradient 1 %. Exact transformations only (no fast-math flags): the bits
    stay."""
    host_target()
    mod = parse(ir_text)
    tm = _shared_machine()
    pb = binding.create_pass_builder(tm, binding.PipelineTuningOptions(speed_level=2))
    pb.getModulePassManager().run(mod, pb)
    for fn in mod.functions:  # mapped now: inlined below, then dropped (no code made)
        if VECTOR_SYMBOL.fullmatch(fn.name) and not fn.is_declaration:
            fn.linkage = binding.Linkage.internal
    after = binding.create_new_module_pass_manager()
    after.add_always_inliner_pass()
    after.add_instruction_combine_pass()
    after.add_simplify_cfg_pass()
    after.add_global_dead_code_eliminate_pass()
    after.run(mod, pb)
    return mod


def emit_object(mod: binding.ModuleRef) -> bytes:
    """The host object code (ELF on Linux) of an optimized module."""
    return _shared_machine().emit_object(mod)


def load_object(obj: bytes, module: binding.ModuleRef | None = None) -> JitModule:
    """Object code loaded into a new MCJIT engine (behind an empty module): the symbols
    it defines are callable. `module`, the optimized IR it was made from, is kept only
    for `optimized_ir` and `asm()`."""
    host = host_target()
    ref = binding.ObjectFileRef.from_data(obj)
    if not ctypes.cast(ref._ptr, ctypes.c_void_p).value:
        raise NativeCompileError("the object code is not a valid object file")
    empty = binding.parse_assembly(
        f'target triple = "{host.triple}"\ntarget datalayout = "{host.data_layout}"\n')
    engine = binding.create_mcjit_compiler(empty, host.machine())
    engine.add_object_file(ref)
    engine.finalize_object()
    return JitModule(engine, obj, module)


def compile(code: str | bytes) -> JitModule:
    """LLVM IR text (optimized here at O2) or object bytes (loaded as they are) → a
    loaded module."""
    if isinstance(code, bytes):
        return load_object(code)
    mod = optimize(code)
    return load_object(emit_object(mod), mod)


@dataclass
class JitModule:
    """Machine code loaded by MCJIT. Holds the engine (and so the code) alive as long as
    it lives: keep it while any address taken from it may be called."""

    engine: binding.ExecutionEngine
    object_code: bytes
    module: binding.ModuleRef | None = None
    _ir: str | None = field(default=None, repr=False)

    def address(self, symbol: str) -> int:
        """The address of a function the loaded code defines (external linkage)."""
        addr = self.engine.get_function_address(symbol)
        if not addr:
            raise NativeCompileError(f"the native code defines no symbol `{symbol}`")
        return addr

    @property
    def optimized_ir(self) -> str | None:
        """The optimized LLVM IR text, or None when the code came from object bytes."""
        if self._ir is None and self.module is not None:
            self._ir = str(self.module)
        return self._ir

    def asm(self) -> str | None:
        """The host assembly of the optimized IR, or None when the code came from
        object bytes."""
        if self.module is None:
            return None
        return _shared_machine().emit_assembly(self.module)
