"""`presk-opt`: xDSL's MLIR-style driver with Presk's dialects and passes registered.

`presk-opt FILE.mlir -p pass,pass` reads IR, verifies it, runs the passes and prints the
result; `--verify-diagnostics --split-input-file` is how the verifier tests run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.xdsl_opt_main import xDSLOptMain

from presk import __version__


def _core() -> Dialect:
    from presk.dialects.core import Core

    return Core


# Each dialect is loaded when a file first names it, so that the driver starts fast.
def _realize() -> Dialect:
    from presk.dialects.realize import Realize

    return Realize


def _kernel() -> Dialect:
    from presk.dialects.kernel import Kernel

    return Kernel


PRESK_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "psk_core": _core,
    "psk_realize": _realize,
    "psk_kernel": _kernel,
}

def _differentiate() -> type[ModulePass]:
    from presk.transforms.differentiate import DifferentiatePass

    return DifferentiatePass


def _core_to_realize() -> type[ModulePass]:
    from presk.conversion.core_to_realize import ConvertCoreToRealizePass

    return ConvertCoreToRealizePass


def _fuse() -> type[ModulePass]:
    from presk.transforms.fuse import FusePass

    return FusePass


def _realize_to_kernel() -> type[ModulePass]:
    from presk.conversion.realize_to_kernel import ConvertRealizeToKernelPass

    return ConvertRealizeToKernelPass


def _kernel_to_std() -> type[ModulePass]:
    from presk.conversion.kernel_to_std import ConvertKernelToStdPass

    return ConvertKernelToStdPass


def _std_to_llvm(cls: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        from presk.conversion import std_to_llvm

        return getattr(std_to_llvm, cls)

    return load


# Passes join this table as they land: name → a function returning the pass class.
PRESK_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "psk-differentiate": _differentiate,
    "convert-psk-core-to-realize": _core_to_realize,
    "psk-fuse": _fuse,
    "convert-psk-realize-to-kernel": _realize_to_kernel,
    "convert-psk-kernel-to-std": _kernel_to_std,
    "convert-arith-to-llvm": _std_to_llvm("ConvertArithToLLVMPass"),
    "convert-func-to-llvm": _std_to_llvm("ConvertFuncToLLVMPass"),
    "convert-cf-to-llvm": _std_to_llvm("ConvertCfToLLVMPass"),
    "convert-index-to-llvm": _std_to_llvm("ConvertIndexToLLVMPass"),
    "convert-math-to-llvm": _std_to_llvm("ConvertMathToLLVMPass"),
}


class PreskOptMain(xDSLOptMain):
    """xDSL's own dialects and passes, then Presk's."""

    version_format = f"presk-opt {__version__}, built on xdsl {{xdsl_version}}"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in PRESK_DIALECTS.items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in PRESK_PASSES.items():
            self.register_pass(name, factory)


def main(args: Sequence[str] | None = None) -> None:
    PreskOptMain(description="Presk's modular optimizer driver", args=args).run()


if __name__ == "__main__":
    main()
