"""The pipeline's two kinds of failure, each carrying the text the user reads.

The library never prints and never exits: the command line (cli/common.py `reported`) prints
`str(exc)` on stderr and exits 2 for an `InvalidInput`, 1 for an `InvalidProgram`; a
caller of the Python API catches `PipelineError`.
"""

from __future__ import annotations


class PipelineError(Exception):
    """A failure the user can fix; `str(exc)` is the whole message, ready to print."""


class InvalidInput(PipelineError):
    """An input that does not fit: a dim, a realization, weights, an entry's name, a file
    that cannot be read. One line (`presk: …`)."""


class InvalidProgram(PipelineError):
    """The program (or its IR) is wrong: a diagnostic (`file:line:col: error: …`, the
    line, a caret) or one line (`presk: error: …`)."""
