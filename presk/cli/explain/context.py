"""What one `presk explain` run knows: its options, the commands its sections show, and the
program and artifacts those commands made, loaded once and shared by every section."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from .run import Command, Runner

ENVELOPE = "$DOC/artifacts/envelope.json"
REALIZATION = "$DOC/artifacts/realization.json"
PLAN = "$DOC/artifacts/plan.json"
C_DIR = "$DOC/artifacts/c"
PYTORCH_DIR = "$DOC/artifacts/pytorch"
TARGETS = ("native", "c", "pytorch")


@dataclass(frozen=True)
class Options:
    """The command line of `presk explain`, checked."""

    file: str
    entry: str
    dims: tuple[str, ...]  # `B=4`, as given
    out: str
    budget: float | None = None
    budget_text: str | None = None  # as the user wrote it: `1e-3`
    bits: int = 128
    profile: str | None = None
    threads: int | None = None
    remat: str = "store"
    opt: bool = False
    weights: str | None = None
    targets: tuple[str, ...] = TARGETS
    measure: bool = False
    pdf: bool = False
    solve_price: str = "bytes"  # or "time": the solver priced by --profile
    train: bool = True  # make the training run whose objective is the entry (§10)


@dataclass
class Section:
    """A section of the document: its heading, its Markdown and the commands behind it."""

    key: str  # `0`, `6.1`, `params`, `appendix`
    title: str
    body: list[str]
    commands: list[Command] = field(default_factory=list)


class Explain:
    """The run: the options, the command runner, the program loaded once."""

    def __init__(self, options: Options, doc: str, parse: Callable[[list[str]], Any]):
        self.options = options
        self.doc = doc
        self.runner = Runner(doc, parse)
        self.listings: dict[str, str] = {}  # DIR/listings/<name> → its text
        self.notes: dict[str, Any] = {}  # what one section computed and a later one reads

    # ---- the program ----

    @functools.cached_property
    def loaded(self) -> tuple[Any, Any]:
        from ...pipeline import load_core
        return load_core(self.options.file)

    @property
    def core(self):
        return self.loaded[0]

    @property
    def program(self):
        return self.loaded[1]

    @functools.cached_property
    def dims(self) -> dict[str, int]:
        from ...pipeline import parse_dims, prepare
        return dict(prepare(self.core, self.options.entry,
                            parse_dims(list(self.options.dims))).dims)

    @functools.cached_property
    def reached(self) -> list[str]:
        from ...pipeline import reached
        return reached(self.core, self.options.entry)

    # ---- the commands ----

    def dim_flags(self) -> list[str]:
        return [a for d in self.options.dims for a in ("--dim", d)]

    def weights_flags(self) -> list[str]:
        return ["--weights", self.options.weights] if self.options.weights else []

    def opt_flags(self) -> list[str]:
        return ["--opt"] if self.options.opt else []

    def command(self, *argv: str | None) -> Command:
        return Command(tuple(a for a in argv if a is not None))

    @property
    def solved(self) -> bool:
        """A realization was solved (--budget given and the solve ran)."""
        return os.path.exists(self.path(REALIZATION))

    @property
    def planned(self) -> bool:
        return os.path.exists(self.path(PLAN))

    def realize_flags(self) -> list[str]:
        return ["--realize", "@" + REALIZATION] if self.solved else []

    def plan_flags(self) -> list[str]:
        return ["--plan", "@" + PLAN] if self.planned else []

    def path(self, doc_path: str) -> str:
        """A `$DOC/…` path as this process opens it."""
        return doc_path.replace("$DOC", self.doc)

    def realization_spec(self) -> str | None:
        return "@" + self.path(REALIZATION) if self.solved else None

    def plan_spec(self) -> str | None:
        return "@" + self.path(PLAN) if self.planned else None
