"""The realization artifact: a float type per site and per parameter path.

Format `presk-realization/1` (docs/artifacts.md):

    {"format": "presk-realization/1", "entry": "loss",
     "sites": {"RMSNorm.apply/%10": "f32", …}, "params": {"blocks.proj.w": "f32", …},
     "fma": ["Linear.apply/%3", …]}

A site or parameter absent from it is f64. `fma` (optional) lists contraction sites whose
multiply-adds are fused, a·b + acc rounded once (a numerics choice, not a layout): a
contraction not listed multiplies and adds with two roundings. Commands take it as a path, as `@path`, or
inline (a JSON object's text); `load_realization` refuses a malformed one with a
RealizationError whose message is one line (the CLI prints it and exits with code 2).
Pure Python: no xDSL.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .artifact import check_format, read_json, write_json

FORMAT = "presk-realization/1"
TYPES = ("f64", "f32", "bf16")
_SITE = re.compile(r".+/%\d+")


class RealizationError(Exception):
    """A realization that cannot be read or does not fit: one line for the user."""


@dataclass
class Realization:
    """Types by site (`RMSNorm.apply/%10`) and by parameter path (`blocks.proj.w`);
    what neither lists is f64."""

    entry: str | None = None
    sites: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    fma: tuple[str, ...] = ()  # contraction sites computed with fused multiply-adds

    def site_type(self, site: str) -> str:
        return self.sites.get(site, "f64")

    def param_type(self, path: str) -> str:
        return self.params.get(path, "f64")

    def to_json(self) -> dict:
        out: dict = {"format": FORMAT}
        if self.entry is not None:
            out["entry"] = self.entry
        out["sites"] = dict(self.sites)
        out["params"] = dict(self.params)
        if self.fma:
            out["fma"] = list(self.fma)
        return out

    def fused(self, site: str) -> bool:
        """Whether the contraction at `site` computes with fused multiply-adds."""
        return site in self.fma

    def types_name(self) -> str:
        """The name of its types alone: `f64+9sites+4params`, `all-f64`, and `+12fma` when
        it fuses contractions (what a plan checks it was made for; the PyTorch export's,
        whose kernels are not Presk's)."""
        narrowed = {k: v for k, v in self.sites.items() if v != "f64"}
        params = {k: v for k, v in self.params.items() if v != "f64"}
        fused = f"+{len(self.fma)}fma" if self.fma else ""
        if not narrowed and not params:
            return "all-f64" + fused
        return f"f64+{len(narrowed)}sites+{len(params)}params" + fused

    def summary(self, threads: int = 1) -> str:
        """Its name with its threading (the reference's): `f64+sequential+9sites+4params`,
        `all-f64+sequential`, `f64+2threads+9sites+4params` when a launch divides over two
        workers, `+12fma` when it fuses contractions. `threads`: the most workers a launch
        of the kernels it runs as divides over (presk/pipeline/record.py
        `realization_name`); 1, the default, for every engine that runs one worker (the
        interpreters, the precision analyses)."""
        head, _, rest = self.types_name().partition("+")
        word = threading(threads)
        return f"{head}+{word}+{rest}" if rest else f"{head}+{word}"


def threading(threads: int) -> str:
    """`sequential` when every launch runs on one worker, else `<N>threads`, N the most
    workers a launch divides over."""
    return "sequential" if threads <= 1 else f"{threads}threads"


def types_of_name(name: str) -> str:
    """A realization's name without its threading word (`f64+sequential+9sites+4params` →
    `f64+9sites+4params`); a name without one (a plan written before names carried it) is
    returned as it is."""
    parts = name.split("+")
    if len(parts) > 1 and (parts[1] == "sequential" or
                           (parts[1].endswith("threads") and parts[1][:-7].isdigit())):
        del parts[1]
    return "+".join(parts)


ALL_F64 = Realization()


def load_realization(spec: str | None) -> Realization:
    """From `None` (all f64), `@path`, a path, or inline JSON text."""
    if spec is None:
        return Realization()
    data, where = read_json(spec, "realization", RealizationError)
    return parse_realization(data, where)


def parse_realization(data: object, where: str = "the realization") -> Realization:
    data = check_format(data, where, FORMAT, "realization",
                        {"format", "entry", "sites", "params", "fma"}, RealizationError)
    entry = data.get("entry")
    if entry is not None and not isinstance(entry, str):
        raise RealizationError(f"{where}: \"entry\" is a function's name, a string")
    sites = _types(data.get("sites", {}), "sites", where)
    for site in sites:
        if not _SITE.fullmatch(site):
            raise RealizationError(f"{where}: site \"{site}\" is not of the form "
                                   "<function>/%<n>")
    params = _types(data.get("params", {}), "params", where)
    return Realization(entry, sites, params, _fma(data.get("fma", []), where))


def _fma(obj: object, where: str) -> tuple[str, ...]:
    if not isinstance(obj, list) or not all(isinstance(s, str) for s in obj):
        raise RealizationError(f"{where}: \"fma\" is a list of contraction sites")
    for site in obj:
        if not _SITE.fullmatch(site):
            raise RealizationError(f"{where}: fma site \"{site}\" is not of the form "
                                   "<function>/%<n>")
    return tuple(dict.fromkeys(obj))


def _types(obj: object, what: str, where: str) -> dict[str, str]:
    if not isinstance(obj, dict):
        raise RealizationError(f"{where}: \"{what}\" maps names to types, an object")
    out = {}
    for key, value in obj.items():
        if value not in TYPES:
            raise RealizationError(f"{where}: {what} \"{key}\" has type {json.dumps(value)}, "
                                   f"not one of {', '.join(TYPES)}")
        out[key] = value
    return out


def save_realization(realization: Realization, path: str) -> None:
    """Write atomically: a temporary file, then a rename."""
    write_json(path, realization.to_json(), RealizationError)
