"""The registered passes and dialects: one table, read by `presk-opt` (which registers
them beside xDSL's own) and by the pipeline, which runs them in order — so that `presk`
and `presk-opt -p …` run the same thing.

Each entry is a function that imports its class when a pipeline first names it, so that
the driver starts fast and `presk check` never imports xDSL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..gc_pause import paused

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Dialect
    from xdsl.passes import ModulePass


def _core() -> Dialect:
    from ..dialects.core import Core

    return Core


def _realize() -> Dialect:
    from ..dialects.realize import Realize

    return Realize


def _kernel() -> Dialect:
    from ..dialects.kernel import Kernel

    return Kernel


PRESK_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "psk_core": _core,
    "psk_realize": _realize,
    "psk_kernel": _kernel,
}


def _differentiate() -> type[ModulePass]:
    from ..transforms.differentiate import DifferentiatePass

    return DifferentiatePass


def _egraph_opt() -> type[ModulePass]:
    from ..transforms.egraph import EGraphOptPass
    return EGraphOptPass


def _core_to_realize() -> type[ModulePass]:
    from ..conversion.core_to_realize import ConvertCoreToRealizePass

    return ConvertCoreToRealizePass


def _drop_unread() -> type[ModulePass]:
    from ..transforms.drop_unread import DropUnreadPass
    return DropUnreadPass


def _fuse() -> type[ModulePass]:
    from ..transforms.fuse import FusePass

    return FusePass


def _fuse_reduce() -> type[ModulePass]:
    from ..transforms.fuse_reduce import FuseReducePass

    return FuseReducePass


def _inline() -> type[ModulePass]:
    from ..transforms.inline_calls import InlinePass

    return InlinePass


def _realize_to_kernel() -> type[ModulePass]:
    from ..conversion.realize_to_kernel import ConvertRealizeToKernelPass

    return ConvertRealizeToKernelPass


def _fuse_siblings() -> type[ModulePass]:
    from ..transforms.fuse_siblings import FuseSiblingsPass
    return FuseSiblingsPass


def _kernel_dedup() -> type[ModulePass]:
    from ..transforms.kernel_dedup import KernelDedupPass
    return KernelDedupPass


def _forward_copies() -> type[ModulePass]:
    from ..transforms.forward_copies import ForwardCopiesPass
    return ForwardCopiesPass


def _share_converts() -> type[ModulePass]:
    from ..transforms.share_converts import ShareConvertsPass
    return ShareConvertsPass


def _hoist_input_converts() -> type[ModulePass]:
    from ..transforms.hoist_input_converts import HoistInputConvertsPass
    return HoistInputConvertsPass


def _kernel_split() -> type[ModulePass]:
    from ..transforms.kernel_split import KernelSplitPass
    return KernelSplitPass


def _plan_layout() -> type[ModulePass]:
    from ..transforms.plan_layout import PlanLayoutPass
    return PlanLayoutPass


def _kernel_to_std() -> type[ModulePass]:
    from ..conversion.kernel_to_std import ConvertKernelToStdPass

    return ConvertKernelToStdPass


def _std_to_llvm(cls: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        from ..conversion import std_to_llvm

        return getattr(std_to_llvm, cls)

    return load


# Passes join this table as they land: name → a function returning the pass class.
PRESK_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "psk-differentiate": _differentiate,
    "psk-egraph-opt": _egraph_opt,
    "convert-psk-core-to-realize": _core_to_realize,
    "psk-inline": _inline,
    "psk-realize-drop-unread": _drop_unread,
    "psk-fuse": _fuse,
    "psk-fuse-reduce": _fuse_reduce,
    "convert-psk-realize-to-kernel": _realize_to_kernel,
    "psk-kernel-dedup": _kernel_dedup,
    "psk-kernel-fuse-siblings": _fuse_siblings,
    "psk-kernel-forward-copies": _forward_copies,
    "psk-kernel-share-converts": _share_converts,
    "psk-kernel-hoist-input-converts": _hoist_input_converts,
    "psk-kernel-split": _kernel_split,
    "psk-plan-layout": _plan_layout,
    "convert-psk-kernel-to-std": _kernel_to_std,
    "convert-arith-to-llvm": _std_to_llvm("ConvertArithToLLVMPass"),
    "convert-func-to-llvm": _std_to_llvm("ConvertFuncToLLVMPass"),
    "convert-cf-to-llvm": _std_to_llvm("ConvertCfToLLVMPass"),
    "convert-index-to-llvm": _std_to_llvm("ConvertIndexToLLVMPass"),
    "convert-math-to-llvm": _std_to_llvm("ConvertMathToLLVMPass"),
}


def pass_errors() -> tuple[type[BaseException], ...]:
    """The exceptions Presk's passes raise for an input they cannot take (each with a
    one-line message): what a driver reports as the input's error, not as a crash."""
    from ..analysis.realization import RealizationError
    from ..conversion.core_to_realize import RecordError
    from ..conversion.kernel_to_std import NativeLoweringError
    from ..conversion.realize_to_kernel import KernelConversionError
    from ..limits import ResourceError
    from ..transforms.differentiate import DifferentiationError
    from ..transforms.egraph import OptimizerError
    from ..transforms.plan_layout import PlanError
    return (RecordError, RealizationError, KernelConversionError, NativeLoweringError,
            DifferentiationError, ResourceError, PlanError, OptimizerError)


def make_pass(name: str, **options: object) -> ModulePass:
    """The registered pass `name` with these options (those a pipeline text gives it)."""
    return PRESK_PASSES[name]()(**options)


def pipeline_text(passes: Sequence[ModulePass]) -> str:
    """The passes as `presk-opt -p` reads them: `name{option=value …},name` (options at
    their defaults left out); empty for no pass."""
    return ",".join(str(p.pipeline_pass_spec()) for p in passes)


def run_passes(module: ModuleOp, passes: Sequence[ModulePass]) -> ModuleOp:
    """Apply the passes to `module` in place, in order, as `presk-opt -p` does."""
    from xdsl.context import Context

    ctx = Context()
    with paused():  # presk/gc_pause.py
        for p in passes:
            p.apply(ctx, module)
    return module
