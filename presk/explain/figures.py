"""The pictures of `presk explain`: plain data in, a PNG file and a one-line alt text out.

Each function here takes the dataclasses below (or lists of them), never a pipeline
object: `presk explain` converts its results into them, so this module imports only
matplotlib and the standard library. Each returns a `Drawn` (the PNG's path and its alt
text) or, when the data holds nothing to draw, a `NotDrawn` whose reason the document
prints ("not drawn: …") — never an empty plot.

The bytes are deterministic: every picture is drawn on a `Figure` of its own (no pyplot
state) under matplotlib's default style with the settings of `_STYLE`, at a fixed size
and dpi, and saved without the metadata that would vary (`Software`). Two runs on the same
data and the same matplotlib write the same file.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby
from statistics import median

from presk.analysis.artifact import write_atomic

DPI = 100
WIDTH = 7.0  # inches: 700 pixels, the text width of the PDF's page at 100 %

# matplotlib's defaults, then these: a font it ships (DejaVu Sans has ‖, ∂, θ, γ, ℝ),
# no hash salt that varies, no text that depends on the locale.
_STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 8.0,
    "axes.titlesize": 9.0,
    "axes.labelsize": 8.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.hashsalt": "presk",
    "axes.formatter.use_locale": False,
}

# One colour a storage type, the widest darkest; a type not listed takes the next of
# _OTHER in the order of its name.
TYPE_COLOURS = {
    "f64": "#1f3b73",
    "f32": "#4f8fd6",
    "f16": "#9fd17a",
    "bf16": "#f2a03d",
    "f8": "#d9534f",
}
_OTHER = ["#8e6bb8", "#6bb8a8", "#b86b8e", "#a8a8a8"]
BUDGET_COLOUR = "#c0392b"


@dataclass(frozen=True)
class Drawn:
    """A picture written to `path`, and the one line that says what it shows."""
    path: str
    alt: str

    def markdown(self, href: str) -> str:
        """The image as the document links it (`href` relative to the document)."""
        return f"![{self.alt}]({href})"


@dataclass(frozen=True)
class NotDrawn:
    """No picture: the data holds nothing to draw, and why."""
    reason: str

    def markdown(self) -> str:
        return f"Not drawn: {self.reason}."


Picture = Drawn | NotDrawn


# -- the data each picture takes -------------------------------------------------------

@dataclass(frozen=True)
class SiteSensitivity:
    """One site of §6.2: its name (`RMSNorm.apply/%10`, or a parameter's path), s =
    ‖∂L/∂v‖₁, and, when the site is a decision of the realization, its term s · r(type)
    of the solver's estimate (absolute, in the output's units)."""
    site: str
    s: float
    term: float | None = None


@dataclass(frozen=True)
class SiteType:
    """One stored value of the realization: its site, its storage type (`f64`, `f32`,
    `bf16`, …), the row it is drawn in (the function instance, `RMSNorm.apply`, or
    `parameters`), and its role (`decision`, `follows …`, `carried`; a carried value is
    another site's, drawn hatched)."""
    site: str
    type: str
    group: str
    role: str = "decision"


@dataclass(frozen=True)
class KernelTime:
    """One kernel (or nest): the cost model's time and the measured one, in seconds."""
    kernel: str
    predicted: float
    measured: float


@dataclass(frozen=True)
class LiveOp:
    """One operation of the call in the order it runs (a launch, a convert, a copy, a
    fill): the site it computes and the bytes live while it runs, the inputs apart."""
    site: str
    live: int


@dataclass(frozen=True)
class LossStep:
    """One logged step of a training run: the objective before the step's update."""
    step: int
    epoch: int
    loss: float


# -- (a) sensitivities ------------------------------------------------------------------

def sensitivities(rows: Sequence[SiteSensitivity], budget: float | None,
                  path: str) -> Picture:
    """Horizontal bars of s at each site, in the order given, on a log scale; beside them,
    when some site has a term and the budget is known, each decision's term against the
    budget line (the estimate is their sum)."""
    drawable = [r for r in rows if _positive(r.s)]
    if not drawable:
        return NotDrawn("no site has a positive sensitivity" if rows
                        else "no site has a sensitivity")
    terms = budget is not None and _positive(budget) and any(
        r.term is not None for r in rows)
    with _figure(WIDTH, 0.9 + 0.17 * len(rows)) as fig:
        if terms:
            left, right = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
        else:
            left, right = fig.subplots(1, 1), None
        y = list(range(len(rows)))
        left.barh(y, [r.s if _positive(r.s) else 0.0 for r in rows], color="#4f8fd6")
        _log_x(left)
        left.set_yticks(y, [r.site for r in rows])
        left.invert_yaxis()
        left.set_xlabel("‖∂L/∂v‖₁")
        left.set_title("the sensitivity at each site")
        _mark_zeros(left, [i for i, r in enumerate(rows) if not _positive(r.s)])
        if right is not None:
            _terms(right, rows, budget)
        _save(fig, path)
    top = max(drawable, key=lambda r: r.s)
    low = min(drawable, key=lambda r: r.s)
    alt = (f"The sensitivity ‖∂L/∂v‖₁ of {len(rows)} sites, log scale: the largest "
           f"{_sci(top.s)} at {top.site}, the smallest {_sci(low.s)} at {low.site}")
    if terms:
        total = sum(r.term for r in rows if r.term is not None)
        alt += (f"; beside it the terms of the estimate, {_sci(total)} in all, against "
                f"the budget {_sci(budget)}")
    return Drawn(path, alt)


def _terms(ax, rows: Sequence[SiteSensitivity], budget: float) -> None:
    y = [i for i, r in enumerate(rows) if r.term is not None and _positive(r.term)]
    ax.barh(y, [rows[i].term for i in y], color="#f2a03d")
    ax.axvline(budget, color=BUDGET_COLOUR, linestyle="--", linewidth=2.0,
               label=f"budget {_sci(budget)}")
    _log_x(ax, labels=5)  # the narrow panel
    ax.set_xlabel("s · r(type), the term of the estimate")
    ax.set_title("each decision's term")
    ax.legend(loc="best")
    _mark_zeros(ax, [i for i, r in enumerate(rows) if r.term is not None
                     and not _positive(r.term)])


def _log_x(ax, labels: int = 8) -> None:
    """A log x axis with at most `labels` labelled decades, and minor ticks at 2 and 5
    only: matplotlib labels those when the axis spans about a decade, and labels at 2, 3,
    4 would overlap."""
    from matplotlib.ticker import LogLocator
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(numticks=labels))
    ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))


def _mark_zeros(ax, rows: list[int]) -> None:
    """A value of 0 has no bar on a log scale: say so at the axis."""
    for i in rows:
        ax.annotate("0", (0, i), xycoords=("axes fraction", "data"), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7)


# -- (b) the realization's types ----------------------------------------------------------

def types(sites: Sequence[SiteType], path: str) -> Picture:
    """A strip for each function instance (in the order of first appearance), a cell for
    each of its stored values in order, coloured by its type; carried values hatched."""
    if not sites:
        return NotDrawn("the realization holds no stored value")
    rows = _groups(sites)
    colours = _type_colours(sorted({s.type for s in sites}))
    widths = {s.site: max(len(_short(s)), 3) * 0.62 + 0.8 for s in sites}
    span = max(sum(widths[s.site] for s in members) for _, members in rows)
    with _figure(WIDTH, 0.9 + 0.32 * len(rows)) as fig:
        ax = fig.subplots(1, 1)
        for y, (_, members) in enumerate(rows):
            x = 0.0
            for s in members:
                w = widths[s.site]
                ax.add_patch(_cell(x, y, w, colours[s.type], s.role == "carried"))
                dark = s.type in ("f64", "f32") and s.role != "carried"
                ax.text(x + w / 2, y, _short(s), ha="center", va="center", fontsize=6,
                        color="white" if dark else "black")
                x += w
        ax.set_xlim(0, span)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_yticks(range(len(rows)), [g for g, _ in rows])
        ax.set_xticks([])
        ax.grid(False)
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
        ax.legend(handles=_legend(colours, sites), loc="upper center",
                  bbox_to_anchor=(0.5, -0.02), ncol=len(colours) + 1, frameon=False)
        ax.set_title("the storage type of each value, by function")
        _save(fig, path)
    counts = ", ".join(f"{n} {t}" for t, n in _counts(sites))
    return Drawn(path, f"The realization's types at {len(sites)} stored values in "
                       f"{len(rows)} rows: {counts}")


def _groups(sites: Sequence[SiteType]) -> list[tuple[str, list[SiteType]]]:
    """The rows: each group in the order it first appears, its values in order."""
    rows: dict[str, list[SiteType]] = {}
    for s in sites:
        rows.setdefault(s.group, []).append(s)
    return list(rows.items())


def _short(s: SiteType) -> str:
    """A cell's label: the site's variable (`%10`, `ms`), or a parameter's whole path."""
    return s.site.rpartition("/")[2]


def _cell(x: float, y: int, w: float, colour: str, carried: bool):
    """A value's cell; a carried one pale and hatched in its type's colour, so that its
    label stays legible."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Rectangle
    face = to_rgba(colour, 0.3) if carried else colour
    return Rectangle((x + 0.04, y - 0.38), w - 0.08, 0.76, facecolor=face,
                     edgecolor=colour if carried else "white",
                     hatch="///" if carried else None, linewidth=0.5)


def _type_colours(names: list[str]) -> dict[str, str]:
    others = iter(_OTHER * (1 + len(names) // len(_OTHER)))
    return {t: TYPE_COLOURS.get(t) or next(others) for t in names}


def _counts(sites: Sequence[SiteType]) -> list[tuple[str, int]]:
    """(type, how many values) widest first as TYPE_COLOURS orders them, then by name."""
    rank = list(TYPE_COLOURS)
    names = sorted({s.type for s in sites},
                   key=lambda t: (rank.index(t) if t in rank else len(rank), t))
    return [(t, sum(s.type == t for s in sites)) for t in names]


def _legend(colours: dict[str, str], sites: Sequence[SiteType]) -> list:
    from matplotlib.patches import Patch
    handles = [Patch(facecolor=colours[t], label=f"{t} ({n})") for t, n in _counts(sites)]
    if any(s.role == "carried" for s in sites):
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="///",
                             label="carried (another site's value)"))
    return handles


# -- (c) predicted against measured ---------------------------------------------------------

def kernel_times(rows: Sequence[KernelTime], u: float | None, path: str) -> Picture:
    """Measured against predicted time, log-log, each kernel a point, the line y = x and,
    when the calibration's relative error u is known, the band (1 ± u) · x."""
    points = [r for r in rows if _positive(r.predicted) and _positive(r.measured)]
    if not points:
        return NotDrawn("no kernel has both a predicted and a measured time" if rows
                        else "no kernel time was measured")
    xs, ys = [r.predicted for r in points], [r.measured for r in points]
    lo, hi = min(xs + ys) / 2, max(xs + ys) * 2
    with _figure(WIDTH * 0.72, WIDTH * 0.66) as fig:
        ax = fig.subplots(1, 1)
        line = [lo, hi]
        ax.plot(line, line, color="#333333", linewidth=1, label="measured = predicted")
        if u is not None and _positive(u):
            ax.fill_between(line, [x * max(1 - u, 1e-300) for x in line],
                            [x * (1 + u) for x in line], color="#4f8fd6", alpha=0.18,
                            label=f"1 ± u, u = {u:.3g}")
        ax.scatter(xs, ys, s=14, color="#1f3b73", zorder=3, label="a kernel")
        if len(points) <= 12:
            for r in points:
                ax.annotate(r.kernel, (r.predicted, r.measured), xytext=(4, 2),
                            textcoords="offset points", fontsize=6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel("predicted by the profile's model (s)")
        ax.set_ylabel("measured (s)")
        ax.legend(loc="upper left")
        _save(fig, path)
    ratios = [r.measured / r.predicted for r in points]
    alt = (f"Measured against predicted time of {len(points)} kernels, log-log: the "
           f"median ratio measured/predicted {median(ratios):.3g}")
    if u is not None and _positive(u):
        inside = sum(abs(q - 1) <= u for q in ratios)
        alt += f", {inside} of {len(points)} inside 1 ± {u:.3g}"
    if len(points) < len(rows):
        alt += f" ({len(rows) - len(points)} without both times left out)"
    return Drawn(path, alt)


# -- (d) live bytes over the call ---------------------------------------------------------

def live_bytes(ops: Sequence[LiveOp], inputs: int, path: str) -> Picture:
    """The bytes live at each operation of one call (a step plot), its peak marked with
    the operation's site; beside it, apart, what the call needs: the inputs the caller
    holds and the peak on top of them."""
    if not ops:
        return NotDrawn("the call runs no operation")
    live = [op.live for op in ops]
    at = live.index(max(live))  # the first operation that reaches the peak
    peak, site = live[at], ops[at].site
    with _figure(WIDTH, 3.0) as fig:
        ax, need = fig.subplots(1, 2, width_ratios=[5, 1])
        edges = [k + 0.5 for k in range(len(ops) + 1)]  # operation k spans k ± 1/2
        ax.stairs(live, edges, fill=True, color="#4f8fd6", alpha=0.25)
        ax.stairs(live, edges, color="#1f3b73", linewidth=1.2)
        ax.plot([at + 1], [peak], marker="o", color=BUDGET_COLOUR)
        # the label above every step (the peak may be reached again), an arrow to the peak
        ax.annotate(f"peak {peak} bytes: operation {at + 1}, {site}", (at + 1, peak),
                    xytext=(min(max(at / len(ops), 0.02), 0.55), 0.95),
                    textcoords="axes fraction", va="top", fontsize=7,
                    color=BUDGET_COLOUR, arrowprops={"arrowstyle": "->",
                                                     "color": BUDGET_COLOUR})
        ax.set_xlim(0.5, len(ops) + 0.5)
        ax.set_ylim(0, max(peak, 1) * 1.4)
        ax.set_xlabel(f"operation, in the order it runs (of {len(ops)})")
        ax.set_ylabel("bytes live, the inputs apart")
        ax.set_title("live bytes over one call")
        _needs(need, inputs, peak)
        _save(fig, path)
    return Drawn(path, f"Live bytes over the call's {len(ops)} operations: the peak "
                       f"{peak} bytes at operation {at + 1} ({site}); with the inputs, "
                       f"{inputs} bytes, the call needs {inputs + peak}")


def _needs(ax, inputs: int, peak: int) -> None:
    ax.bar([0], [inputs], color="#a8a8a8", label="inputs")
    ax.bar([0], [peak], bottom=[inputs], color=BUDGET_COLOUR, alpha=0.7, label="peak")
    for low, size, name in ((0, inputs, "inputs"), (inputs, peak, "peak")):
        if size:
            ax.text(0, low + size / 2, f"{name}\n{size}", ha="center", va="center",
                    fontsize=7)
    ax.set_xticks([])
    ax.set_ylim(0, max(inputs + peak, 1) * 1.1)
    ax.set_title(f"needs {inputs + peak} bytes")


# -- (e) the loss curve -------------------------------------------------------------------

def loss_curve(steps: Sequence[LossStep], path: str) -> Picture:
    """Every logged step's loss, faint, and each epoch's mean at its last step, bold, on a
    log scale (linear when some loss is not positive)."""
    finite = [r for r in steps if math.isfinite(r.loss)]
    if not finite:
        return NotDrawn("the training run logged no finite loss" if steps
                        else "no training run has logged a step")
    ends, means = _epoch_means(finite)
    log = all(r.loss > 0 for r in finite)
    with _figure(WIDTH, 3.2) as fig:
        ax = fig.subplots(1, 1)
        ax.plot([r.step for r in finite], [r.loss for r in finite], linewidth=0.8,
                alpha=0.4, color="#4f8fd6", label="each step")
        ax.plot(ends, means, linewidth=1.8, marker="o", markersize=3, color="#1f3b73",
                label="epoch mean")
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("loss" + ("" if log else " (linear: some loss is not positive)"))
        ax.set_title("the loss of the training run")
        ax.legend(loc="upper right")
        _save(fig, path)
    first, last = finite[0], finite[-1]
    alt = (f"The loss over {len(finite)} steps in {len(ends)} epochs"
           f"{', log scale' if log else ''}: {_sci(first.loss)} at step {first.step}, "
           f"{_sci(last.loss)} at step {last.step}; the last epoch's mean {_sci(means[-1])}")
    if len(finite) < len(steps):
        alt += f" ({len(steps) - len(finite)} steps not finite, left out)"
    return Drawn(path, alt)


def _epoch_means(steps: Sequence[LossStep]) -> tuple[list[int], list[float]]:
    """(each epoch's last step, its steps' mean loss), epochs in the order they ran."""
    epochs = [list(run) for _, run in groupby(steps, key=lambda r: r.epoch)]
    return ([run[-1].step for run in epochs],
            [sum(r.loss for r in run) / len(run) for run in epochs])


# -- shared ---------------------------------------------------------------------------------

@contextmanager
def _figure(width: float, height: float):
    """A Figure of its own under a fixed style (matplotlib's defaults, then _STYLE),
    whatever the user's matplotlibrc says; the style is restored afterwards."""
    import matplotlib
    from matplotlib.figure import Figure
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(_STYLE)
        yield Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _save(fig, path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    write_atomic(path, buf.getvalue())


def _positive(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0


def _sci(x: float, digits: int = 3) -> str:
    """`2.104e-3`: the document's way of writing a figure."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"
