"""`presk data`: write and inspect data streams (`.psk.d`, see docs/data.md).

    presk data linear -o FILE [--width 4] [--count 256] [--slope 2] [--intercept 1] [--seed 0]
    presk data show FILE [--head 3]

`linear` writes pairs (x, y = slope·x + intercept), x drawn row by row from
`numpy.random.default_rng(seed).standard_normal((count, width))`, as samples of type
`(ℝ[model: W], ℝ[model: W])`: the data the tutorial's training run learns from.
`show` prints a file's header, what it implies (offset, bytes per sample), and the first
samples.

The main CLI adds this with `add_parser(subparsers)` and calls `run(args)`. A user's
mistake (a missing file, a malformed header) is one line `presk data: error: ...` on
stderr and exit code 2. numpy and the data format are imported when a verb runs, so that
`presk` pays nothing for this module at start-up.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Sequence, TextIO

from .common import output_file

if TYPE_CHECKING:
    import numpy as np

    from presk.datafile import Header

EXIT_OK = 0
EXIT_USAGE = 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `data` and its verbs to the `presk` command's subparsers; return its parser."""
    data = subparsers.add_parser(
        "data", help="write and inspect data streams (.psk.d)",
        description="Write and inspect Presk data streams (.psk.d files).")
    verbs = data.add_subparsers(dest="data_verb", metavar="VERB", required=True)
    _add_linear(verbs)
    _add_show(verbs)
    data.set_defaults(run=run)
    return data


def _add_linear(verbs: Any) -> None:
    p = verbs.add_parser("linear", help="pairs (x, slope·x + intercept), x standard normal",
                         description="Write pairs (x, y = slope·x + intercept), x drawn "
                                     "from numpy's default_rng(seed).standard_normal.")
    p.add_argument("-o", "--output", required=True, metavar="FILE", type=output_file,
                   help="the file to write")
    p.add_argument("--width", type=_positive, default=4, help="reals in x and y (default 4)")
    p.add_argument("--count", type=_natural, default=256, help="samples (default 256)")
    p.add_argument("--slope", type=float, default=2.0, help="default 2")
    p.add_argument("--intercept", type=float, default=1.0, help="default 1")
    p.add_argument("--seed", type=_natural, default=0, help="the generator's seed (default 0)")
    p.add_argument("--dtype", choices=["f64", "f32"], default="f64", help="default f64")


def _add_show(verbs: Any) -> None:
    p = verbs.add_parser("show", help="print a data file's header and first samples",
                         description="Print a data file's header and its first samples.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--head", type=_natural, default=3, help="samples to print (default 3)")


def _natural(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"`{text}` is not a natural number")
    return n


def _positive(text: str) -> int:
    n = _natural(text)
    if n == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run a parsed `presk data` command; return the exit code."""
    from presk.datafile import DataFileError

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        if args.data_verb == "linear":
            return _linear(args, out)
        return _show(args, out)
    except DataFileError as e:
        print(f"presk data: error: {e}", file=err)
        return EXIT_USAGE


def _linear(args: argparse.Namespace, out: TextIO) -> int:
    import numpy as np

    from presk.datafile import write_stream

    x = np.random.default_rng(args.seed).standard_normal((args.count, args.width))
    y = args.slope * x + args.intercept
    sample = f"(ℝ[model: {args.width}], ℝ[model: {args.width}])"
    description = (f"linear: y = {args.slope:g}·x + {args.intercept:g}, "
                   f"x ~ standard normal, seed {args.seed}")
    header = write_stream(args.output, sample, [(args.width,), (args.width,)], (x, y),
                          dtype=args.dtype, description=description)
    print(f"wrote {header.count} samples of {sample} to {args.output}", file=out)
    return EXIT_OK


def _show(args: argparse.Namespace, out: TextIO) -> int:
    from presk.datafile import iter_samples, read_header

    header = read_header(args.file)
    for line in header_lines(header):
        print(line, file=out)
    shown = min(args.head, header.count)
    print(f"-- {header.count} samples of {header.sample_bytes} bytes from byte "
          f"{header.data_offset}; the first {shown}:", file=out)
    for i, sample in enumerate(iter_samples(args.file, header, stop=shown)):
        print(f"[{i}] " + "  ".join(_format_tensor(t) for t in sample), file=out)
    return EXIT_OK


def header_lines(header: Header) -> list[str]:
    """The header's lines, its keys in the canonical order and unknown keys last."""
    lines = ["presk-data/1", f"sample: {header.sample}", f"dtype: {header.dtype}",
             f"count: {header.count}"]
    if header.description is not None:
        lines.append(f"description: {header.description}")
    lines += [f"{k}: {v}" for k, v in header.extra.items()]
    return lines + ["end"]


def _format_tensor(t: np.ndarray) -> str:
    import numpy as np

    return np.array2string(t, precision=6, floatmode="fixed", sign=" ",
                           max_line_width=10_000, separator=" ")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m presk.cli.data_cmd ...`: the verbs without the rest of `presk`."""
    parser = argparse.ArgumentParser(prog="presk")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
