"""`presk-opt`: xDSL's MLIR-style driver with Presk's dialects and passes registered.

`presk-opt FILE.mlir -p pass,pass` reads IR, verifies it, runs the passes and prints the
result; `--verify-diagnostics --split-input-file` is how the verifier tests run. The table
of Presk's passes and dialects is presk/pipeline/passes.py, the one the pipeline runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain

from presk import __version__
from presk.pipeline.passes import PRESK_DIALECTS, PRESK_PASSES

__all__ = ["PRESK_DIALECTS", "PRESK_PASSES", "PreskOptMain", "main"]


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
