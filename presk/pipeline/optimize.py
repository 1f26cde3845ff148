"""The e-graph optimizer as the commands run it (`--opt`, `presk dump --stage opt`): the
pass psk-egraph-opt (presk/transforms/egraph.py) with a probe of the entry — its f64 run
on the entry's inputs, from which the cost's accuracy term measures condition numbers —
and the report of what it did, as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InvalidInput
from .load import prepare_entry, reached

PROBE_SIZE = 16  # the probe runs each --dim at most this large: κ is a mean over elements


def probe_entry(module, entry: str, dims: Mapping[str, int], seed: int = 0,
                weights: str | None = None, inputs: str | None = None):
    """The entry run in f64 on its inputs (the weights and inputs given, else drawn from
    `seed`), every value kept (egraph.Probe)."""
    from ..analysis import entry as E
    from ..analysis.interpret import InterpretError, Interpreter
    from ..analysis.numbers import number_system
    from ..transforms.egraph_cost import Probe

    prepared, params, values = prepare_entry(module, entry, dict(dims), seed, weights, inputs)
    f64 = number_system(None)
    recorded: dict[Any, Any] = {}
    interp = Interpreter(module, f64)
    call = interp.call

    def recording(func, args, d=None):
        recorded.update(zip(func.body.block.args, args))
        return call(func, args, d)

    interp.call = recording  # type: ignore[method-assign]
    interp.trace_op = lambda op, _, value: recorded.__setitem__(op.results[0], value)
    interp.run(entry, E.arguments(prepared, f64, params, values), prepared.dims)
    import numpy as np

    def step(op, args):
        try:
            with np.errstate(all="ignore"), f64.context():
                return interp.step(op, args, prepared.dims)
        except (InterpretError, ValueError, ArithmeticError):
            return None
    return Probe(recorded, step), prepared.dims


def prices(profile: str | None):
    """(the time term's prices, the profile's name) from the profile `profile` names, else
    this machine's cached one (`presk profile calibrate`); (None, None) when there is
    none and none was named: the time term is then operations and bytes."""
    from ..transforms.egraph_cost import Prices
    from .profile import cached_profile_path, profile_for
    if profile is None and not cached_profile_path().exists():
        return None, None
    found, name = profile_for(profile)
    m, machine = found.model, found.machine
    return Prices(m.work["f64"], m.math["f64"], m.loads["f64"],
                  tuple(1 / m.bandwidth[k] for k in ("l2", "l3", "mem")),
                  (machine.l2, machine.l3), m.p), name


def optimize(module, entry: str | None = None, dims: Mapping[str, int] | None = None,
             seed: int = 0, weights: str | None = None, inputs: str | None = None,
             budget: float | None = None, node_limit: int | None = None,
             time_limit: float | None = None, profile: str | None = None):
    """Optimize every function of `module` in place; with an entry, the cost's accuracy
    term measures on its f64 run; with a machine profile (named, or this machine's
    cached one), the time term is its predicted seconds (egraph.ModuleReport)."""
    from ..transforms import egraph as G
    priced, profile_name = prices(profile)
    probe, run_dims = None, dict(dims or {})
    if entry is not None:
        reached(module, entry)  # an unknown entry is the user's one line
        small = {k: min(v, PROBE_SIZE) for k, v in run_dims.items()}
        if inputs is not None:  # given inputs fix their shapes: the probe takes them whole
            small = run_dims
        probe, probed = probe_entry(module, entry, small, seed, weights, inputs)
        run_dims = {**probed, **run_dims}
    options = G.Options(node_limit or G.DEFAULT_NODE_LIMIT, time_limit or G.DEFAULT_TIME_LIMIT,
                        G.DEFAULT_ITERATIONS, budget, run_dims, priced)
    try:
        report = G.optimize(module, options, probe)
    except G.OptimizerError as exc:
        raise InvalidInput(str(exc)) from None
    report.priced_by = profile_name
    return report


def report_text(report, functions: list[str] | None = None, times: bool = True) -> str:
    """The optimizer's figures per function and the rewrites the result uses; without
    `times`, not its own seconds (saturation, extraction), which change from run to run."""
    unit = (f"seconds predicted by the profile {report.priced_by}" if report.priced_by
            else "operations + bytes/4 (no machine profile)")
    lines = [f"The e-graph optimizer (psk-egraph-opt): cost = time + W·bits, time in {unit}, "
             "W = 5 % of the function's time per bit lost (docs/egraph.md)", ""]
    clock = f" {'sat s':>6} {'ext s':>6}" if times else ""
    lines.append(f"{'function':<28} {'values':>6} {'nodes':>6} {'classes':>7} {'iter':>4} "
                 f"{'stop':<10}{clock} {'time before':>12} "
                 f"{'after':>10} {'bits before':>11} {'after':>6}")
    for f in report.functions:
        if functions is not None and f.name not in functions:
            continue
        clock = f" {f.saturate_seconds:>6.3f} {f.extract_seconds:>6.3f}" if times else ""
        lines.append(f"{f.name:<28} {f.values:>6} {f.nodes:>6} {f.classes:>7} "
                     f"{f.iterations:>4} {f.stop:<10}{clock} {f.time_before:>12.4g} "
                     f"{f.time_after:>10.4g} {f.bits_before:>11.1f} {f.bits_after:>6.1f}")
    rewrites = [(n, e) for n, e in report.rewrites if functions is None or n in functions]
    lines += ["", f"Rewrites used ({len(rewrites)}):"]
    for _, e in rewrites:
        made = ", ".join(e.new_sites) if e.new_sites else "none"
        lines.append(f"  {e.site}  [{e.rule}]  {e.before}  →  {e.after}")
        lines.append(f"      new sites: {made}; predicted saving {e.saving:.4g} "
                     f"(time {e.time_saving:+.4g}, bits {e.bits_saving:+.1f})")
    if not rewrites:
        lines.append("  none: the program is already the cheapest form the rules reach")
    return "\n".join(lines)
