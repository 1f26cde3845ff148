"""psk-plan-layout: give each kernel of a PSK-Kernel module the layout a plan chose.

A nest's layout space is the points the native backend lowers today (`layout_space`):

* every kernel: run as written, or split over 2…n workers (psk-kernel-split honours a
  split when the kernel's body is one parallel loop of at least two iterations);
* a contraction (`dot`, `dot+add`, `contract`) also: a register tile [R, C] — R rows
  unrolled, C columns in one vector of C lanes (tile_contraction.py; the rows past the
  last full tile run as a tile of fewer rows) — for R in 1, 2, 4, 8, 12 and C in 2, 4,
  8, 16, 32 up to the nest's rows and columns, each split or not; and
  for R ≥ 4 and C·(the element's bytes) ≥ 64 (16 f32 or 8 f64 columns) each of those again
  with its operands packed into panels
  (`pack = "panels"`: the j operand's tile columns, and an xᵀ operand's tile rows,
  contiguous along k), and when its k loop has 2·KBLOCK = 512 iterations or more each
  panelled point once more with k swept in blocks of 256 (`kblock = 256`).

The layout's other words are not choices the lowering makes: its tiles are visited I-major
(`order` "IJ"), an operand read along j where j is not
its last axis is packed j-last when no panels hold it (not a choice), and the `lanes`
word of a tiled layout is C. A
point never changes bits (the dialect's contract; test/e2e/test_plan_bits.py runs them).

The plan is an artifact, `presk-plan/1` (docs/artifacts.md): per nest — a kernel, named by
the site of its first launch — the chosen point. `load_plan(spec)` reads one and
`Plan.layouts()` gives each kernel's layout; `apply_plan(module, plan)` sets them after
checking that the plan was made for this recording (entry, dimensions, gradient, and each
nest's kernel, title and operand sizes); the pass is `psk-plan-layout{plan=@plan.json}`.
Choosing the points (the cost model) is presk/analysis/cost_model.py and
presk/pipeline/plan.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from presk.analysis.artifact import check_format, expect, read_json
from presk.dialects import kernel as K
from presk.kernel_abi.tiles import KBLOCK, innermost_pair, panel_columns

FORMAT = "presk-plan/1"
ROWS = (1, 2, 4, 8, 12)
COLUMNS = (2, 4, 8, 16, 32)
PANEL_ROWS = 4
"""The rows of the tiles whose operands the space also offers packed into panels, with a
row of a cache line or more (kernel_abi/tiles.py `PANEL_BYTES`; the tutorial's space, all
of 4 columns, stays as it was)."""


class PlanError(Exception):
    """A plan that cannot be read or does not fit the module: one line."""


# --------------------------------------------------------------------------------------
# A point of the space
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Point:
    """A layout: `tile` () for a nest run as written, else [R, C]; `split` the workers
    its outermost loop is divided among (1: none); `panels` a tiled product's operands
    packed into panels (`pack = "panels"`); `kblock` its k loop swept in blocks of that
    length (0: whole)."""

    tile: tuple[int, ...] = ()
    split: int = 1
    panels: bool = False
    kblock: int = 0

    @property
    def tiled(self) -> bool:
        return bool(self.tile)

    def attr(self) -> K.LayoutAttr:
        split = (0, self.split) if self.split > 1 else ()
        if self.tiled:
            return K.LayoutAttr.tiled(self.tile, self.tile[1], "IJ", split,
                                      "panels" if self.panels else "", self.kblock)
        return K.LayoutAttr.default().with_split(split)

    def text(self) -> str:
        split = f"split (0, {self.split})" if self.split > 1 else "split none"
        if self.tiled:
            panels = ", panels" if self.panels else ""
            kblock = f", kblock {self.kblock}" if self.kblock else ""
            return f"tiled, tile [{self.tile[0]}, {self.tile[1]}]{panels}{kblock}, {split}"
        return f"as written, {split}"

    def to_json(self) -> dict:
        out: dict = {"tile": list(self.tile), "split": self.split}
        if self.panels:
            out["pack"] = "panels"
        if self.kblock:
            out["kblock"] = self.kblock
        return out

    @classmethod
    def of(cls, layout: K.LayoutAttr) -> Point:
        split = layout.split.data[1].data if layout.split.data else 1
        tile = tuple(t.data for t in layout.tile) if not layout.is_default else ()
        return cls(tile, split, layout.panels, layout.kblock.data)


def is_contraction(kernel: K.KernelOp) -> bool:
    return kernel.title.data.startswith(("dot", "contract"))


def _split_trip(kernel: K.KernelOp) -> int:
    """The trip of the one parallel outermost loop a split divides (0: cannot split)."""
    loops = [op for op in kernel.body.block.ops if isinstance(op, K.ForOp)]
    if len(loops) != 1 or loops[0].inits:
        return 0
    return loops[0].trip


def contraction_sides(kernel: K.KernelOp) -> tuple[int, int] | None:
    """(I, J): the trips of the two loops a register tile covers, or None."""
    loops = innermost_pair(kernel.body.block)
    return None if loops is None else (loops[0].trip, loops[1].trip)


def k_trip(kernel: K.KernelOp) -> int:
    """The trip of a contraction's k loop (the one loop carrying a sum inside its tile
    loops), or 0."""
    loops = innermost_pair(kernel.body.block)
    if loops is None:
        return 0
    carried = [op for op in loops[1].body.block.ops if isinstance(op, K.ForOp) and op.inits]
    return carried[0].trip if len(carried) == 1 else 0


def layout_space(kernel: K.KernelOp, workers: int) -> list[Point]:
    """The points of `kernel`'s layout space that lower, on `workers` workers."""
    trip = _split_trip(kernel)
    blocked = k_trip(kernel) >= 2 * KBLOCK if is_contraction(kernel) else False
    splits = [1] + [n for n in range(2, workers + 1) if trip >= n]
    tiles: list[tuple[int, ...]] = [()]
    sides = contraction_sides(kernel) if is_contraction(kernel) else None
    if sides is not None:
        rows, cols = sides
        tiles += [(r, c) for r in ROWS for c in COLUMNS if r <= rows and c <= cols]
    columns = panel_columns(kernel.body.block.args[-1].type.element)
    points = []
    for tile in tiles:
        for n in splits:
            if tile and n > 1 and -(-trip // tile[0]) < n:
                continue  # a tiled split's parts are whole tiles' rows: one per worker
            points.append(Point(tile, n))
            if tile and tile[0] >= PANEL_ROWS and tile[1] >= columns:
                points.append(Point(tile, n, True))
                if blocked:
                    points.append(Point(tile, n, True, KBLOCK))
    return points


# --------------------------------------------------------------------------------------
# The artifact
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedNest:
    """A nest of the plan: its kernel, the site of its first launch, its title, its
    buffers' sizes (inputs, then outputs) and the chosen point."""

    kernel: str
    site: str
    title: str
    operands: tuple[tuple[int, ...], ...]
    point: Point
    launches: int = 1
    predicted: float | None = None  # seconds a launch, when a profile priced it

    def to_json(self) -> dict:
        out = {"kernel": self.kernel, "site": self.site, "title": self.title,
               "operands": [list(o) for o in self.operands], "launches": self.launches,
               "layout": self.point.to_json()}
        if self.predicted is not None:
            out["predicted"] = self.predicted
        return out


@dataclass
class Plan:
    """A layout per nest, for one recording: `entry` at `dims` (`grad`: its value and
    gradient) under the realization `realization` (its name), on `workers` workers."""

    entry: str
    dims: dict[str, int]
    grad: bool
    realization: str
    workers: int
    nests: list[PlannedNest] = field(default_factory=list)
    profile: str = ""  # the profile it was priced under (informational)

    def layouts(self) -> dict[str, K.LayoutAttr]:
        """Each kernel's layout, by kernel name (`k3`)."""
        return {n.kernel: n.point.attr() for n in self.nests}

    def to_json(self) -> dict:
        return {"format": FORMAT, "entry": self.entry, "dims": dict(self.dims),
                "grad": self.grad, "realization": self.realization,
                "workers": self.workers, "profile": self.profile,
                "nests": [n.to_json() for n in self.nests]}


_TOP = {"format", "entry", "dims", "grad", "realization", "workers", "profile", "nests"}
_NEST = {"kernel": "string", "site": "string", "title": "string", "operands": "list",
         "launches": "natural", "layout": "object"}


def _point(data: dict, where: str) -> Point:
    if unknown := sorted(set(data) - {"tile", "split", "pack", "kblock"}):
        raise PlanError(f"{where}: unknown field \"{unknown[0]}\"")
    kblock = data.get("kblock", 0)
    if not isinstance(kblock, int) or isinstance(kblock, bool) or kblock < 0 or \
            (kblock and not data.get("tile")):
        raise PlanError(f"{where}: \"kblock\" is a k block's length ≥ 1 (with a tile), not "
                        f"{kblock!r}")
    pack = data.get("pack", "")
    if pack not in ("", "panels") or (pack and not data.get("tile")):
        raise PlanError(f"{where}: \"pack\" is \"panels\" (with a tile), not {pack!r}")
    tile = expect(data, "tile", "list", where, PlanError)
    split = expect(data, "split", "natural", where, PlanError)
    if len(tile) not in (0, 2) or not all(isinstance(t, int) and not isinstance(t, bool)
                                          and t >= 1 for t in tile):
        raise PlanError(f"{where}: \"tile\" is [] or two positive sizes, not {tile}")
    if split < 1:
        raise PlanError(f"{where}: \"split\" is 1 (none) or more workers, not 0")
    return Point(tuple(tile), split, pack == "panels", kblock)


def _nest(data: object, where: str) -> PlannedNest:
    if not isinstance(data, dict):
        raise PlanError(f"{where}: a nest is a JSON object")
    if unknown := sorted(set(data) - set(_NEST) - {"predicted"}):
        raise PlanError(f"{where}: unknown field \"{unknown[0]}\"")
    got = {n: expect(data, n, kind, where, PlanError) for n, kind in _NEST.items()}
    operands = got["operands"]
    if not all(isinstance(o, list) and all(isinstance(s, int) and not isinstance(s, bool)
                                           and s >= 1 for s in o) for o in operands):
        raise PlanError(f"{where}: \"operands\" is a list of buffer sizes")
    predicted = data.get("predicted")
    if predicted is not None and (not isinstance(predicted, (int, float))
                                  or isinstance(predicted, bool) or predicted < 0):
        raise PlanError(f"{where}: \"predicted\" is seconds, a number ≥ 0")
    return PlannedNest(got["kernel"], got["site"], got["title"],
                       tuple(tuple(o) for o in operands), _point(got["layout"], where),
                       got["launches"], predicted)


def plan_from_json(data: object, where: str) -> Plan:
    top = check_format(data, where, FORMAT, "plan", _TOP, PlanError)
    dims = expect(top, "dims", "object", where, PlanError)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
               for v in dims.values()):
        raise PlanError(f"{where}: \"dims\" maps each dimension to a size ≥ 1")
    nests = [_nest(n, f"{where}: nest {i}")
             for i, n in enumerate(expect(top, "nests", "list", where, PlanError))]
    workers = expect(top, "workers", "natural", where, PlanError)
    return Plan(expect(top, "entry", "string", where, PlanError), dict(dims),
                expect(top, "grad", "boolean", where, PlanError),
                expect(top, "realization", "string", where, PlanError), max(workers, 1),
                nests, str(top.get("profile", "")))


def load_plan(spec: str) -> Plan:
    """The plan in `spec` (`@path`, a path, or inline JSON); PlanError, one line."""
    data, where = read_json(spec, "plan", PlanError)
    return plan_from_json(data, where)


# --------------------------------------------------------------------------------------
# Applying it
# --------------------------------------------------------------------------------------


def first_sites(module: ModuleOp) -> dict[str, tuple[str, int]]:
    """Each kernel's (the first site its first launch computes — a dot+add's is the
    dot's —, its launch ops in the module's hosts)."""
    out: dict[str, tuple[str, int]] = {}
    for host in K.hosts(module).values():
        for op in K.host_ops(host):
            if isinstance(op, K.LaunchOp):
                first = op.site.data if op.fused is not None else op.site_list[0]
                site, n = out.get(op.callee_name, (first, 0))
                out[op.callee_name] = (site, n + 1)
    return out


def operand_sizes(kernel: K.KernelOp) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(t.shape) for t in kernel.arg_types)  # type: ignore[attr-defined]


def apply_plan(module: ModuleOp, plan: Plan, where: str = "the plan") -> None:
    """Set each planned kernel's layout; PlanError when a nest does not fit the module's
    kernel of that name (another recording's plan)."""
    kernels = {k.sym_name.data: k for k in module.ops if isinstance(k, K.KernelOp)}
    sites = first_sites(module)
    for nest in plan.nests:
        kernel = kernels.get(nest.kernel)
        if kernel is None or kernel.title.data != nest.title or \
                operand_sizes(kernel) != nest.operands or \
                sites.get(nest.kernel, ("", 0))[0] != nest.site:
            raise PlanError(f"{where}: nest {nest.site} ({nest.kernel}, {nest.title}) is not "
                            f"a kernel of this recording: the plan was made for "
                            f"`{plan.entry}` at {_dims(plan.dims)}"
                            f"{' with its gradient' if plan.grad else ''} under "
                            f"{plan.realization}")
        if nest.point.tiled and not is_contraction(kernel):
            raise PlanError(f"{where}: nest {nest.site} is not a contraction: it cannot "
                            "be tiled")
        kernel.layout = nest.point.attr()


def _dims(dims: dict[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in dims.items()) or "no dimensions"


@dataclass(frozen=True)
class PlanLayoutPass(ModulePass):
    """`psk-plan-layout{plan=@plan.json}`: the plan's layouts on the module's kernels."""

    name = "psk-plan-layout"
    plan: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.plan:
            apply_plan(op, load_plan(self.plan), self.plan.lstrip("@"))
