"""`presk-opt`: xDSL's MLIR-style driver with Presk's dialects and passes registered.

`presk-opt FILE.mlir -p pass,pass` reads IR, verifies it, runs the passes and prints the
result; `--verify-diagnostics --split-input-file` is how the verifier tests run. The table
of Presk's passes and dialects is presk/pipeline/passes.py, the one the pipeline runs.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from typing import IO, NoReturn

from xdsl.xdsl_opt_main import xDSLOptMain

from presk import __version__
from presk.cli.common import printable_streams
from presk.gc_pause import tune_process
from presk.pipeline.errors import InvalidInput
from presk.pipeline.load import parse_error_text, read_mlir_text, verify_error_text
from presk.pipeline.mlir_guard import MLIRTextError, check_mlir_text
from presk.pipeline.passes import PRESK_DIALECTS, PRESK_PASSES, pass_errors

__all__ = ["PRESK_DIALECTS", "PRESK_PASSES", "PreskOptMain", "main"]


class OptFailure(Exception):
    """What presk-opt prints (one line, or a diagnostic) and its exit code."""

    def __init__(self, text: str, code: int) -> None:
        super().__init__(text)
        self.code = code


def _usage(message: str) -> NoReturn:
    raise OptFailure(f"presk-opt: {message} (see `presk-opt --help`)", 2)


class PreskOptMain(xDSLOptMain):
    """xDSL's own dialects and passes, then Presk's; every failure one line (a bad flag,
    pass or file: exit 2) or a diagnostic at its place (a parse or verify error: exit 1)."""

    version_format = f"presk-opt {__version__}, built on xdsl {{xdsl_version}}"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in PRESK_DIALECTS.items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in PRESK_PASSES.items():
            self.register_pass(name, factory)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.error = _usage  # type: ignore[method-assign]

    def setup_pipeline(self) -> None:
        from xdsl.utils.exceptions import ArgSpecParseError
        try:
            super().setup_pipeline()
        except ValueError as exc:  # an unknown pass or option, an option of the wrong type
            _usage(f"-p {self.args.passes}: {' '.join(str(exc).split())}")
        except ArgSpecParseError as exc:  # a BaseException: the spec's syntax
            lines = str(exc).splitlines()
            _usage(f"-p {self.args.passes}: {lines[-1].strip()} (at column "
                   f"{lines[1].rsplit(':', 1)[-1]} of the pipeline)")

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        path = self.args.input_file
        if path is None:
            return super().get_input_stream()
        try:
            text = read_mlir_text(path, "presk-opt")
        except InvalidInput as exc:
            raise OptFailure(str(exc), 2) from None
        self.text = text
        return io.BytesIO(text.encode("utf-8")), "mlir"

    def parse_chunk(self, chunk, file_extension, start_offset=0):
        data = chunk.read()
        try:
            self.text = data.decode("utf-8")
        except UnicodeDecodeError as exc:  # standard input
            raise OptFailure(f"presk-opt: <stdin>: not UTF-8 (byte at {exc.start})", 2) \
                from None
        try:
            check_mlir_text(self.text)  # what xDSL's parser would hang or fail on
        except MLIRTextError as exc:
            raise OptFailure(exc.render(self.args.input_file or "<stdin>", self.text), 1) \
                from None
        module = super().parse_chunk(io.BytesIO(data), file_extension, start_offset)
        self.parsed = module
        return module

    def run(self) -> None:
        from xdsl.utils.exceptions import ParseError, VerifyException
        self.parsed = None
        try:
            super().run()
        except pass_errors() as exc:  # a pass refused its input: one line, exit 1
            raise OptFailure(f"presk-opt: error: {' '.join(str(exc).split())}", 1) from None
        except ParseError as exc:
            raise OptFailure(parse_error_text(exc), 1) from None
        except VerifyException as exc:
            where = self.args.input_file or "<stdin>"
            if self.parsed is not None:
                raise OptFailure(verify_error_text(where, self.text, self.parsed, exc), 1) \
                    from None
            raise OptFailure(f"{where}: error: {str(exc).splitlines()[0]}", 1) from None


def main(args: Sequence[str] | None = None) -> int:
    printable_streams()
    tune_process()  # presk/gc_pause.py: this process is ours
    try:
        PreskOptMain(description="Presk's modular optimizer driver", args=args).run()
    except OptFailure as exc:
        print(exc, file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
