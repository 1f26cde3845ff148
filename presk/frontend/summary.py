"""What `presk check --summary` and `presk dump --stage elab` print of an elaborated program."""

from __future__ import annotations

from .program import (
    REGULARITY_NAMES, FileInfo, FnInfo, ModuleInfo, Program, flatten, reals,
)
from .training import optimizer_regularity
from .types import ParamsT


def _regularity(params: list[tuple[str, int]]) -> str:
    return "[" + ", ".join(f"{n} {REGULARITY_NAMES[c]}" for n, c in params) + "]"


def check_summary(program: Program) -> str:
    lines: list[str] = []
    for fn in program.functions():
        lines.append(f"{fn.file.basename} {fn.name} : {fn.result}")
        for let in fn.decl.lets:
            for name, t in zip(let.names, let.types):
                lines.append(f"    let {name} : {t}")
    lines.append("-- regularity and effects --")
    for fn in program.functions():
        classes = [(p.name, c) for p, c in zip(fn.params, fn.regularity)]
        lines.append(f"{fn.name} : {_regularity(classes)} uses none")
    for m in program.modules():
        # An initializer consumes a key split per parameter path: that is its effect.
        lines.append(f"{m.name}.init : [key C∞] uses Rand")
    for f in program.files:
        for opt in f.optimizers.values():
            for name, params in optimizer_regularity(opt):
                lines.append(f"{opt.name}.{name} : {_regularity(params)} uses none")
    lines += _differentiation(program)
    lines += _training(program)
    lines += _assertions(program)
    lines += _parameter_counts(program)
    return "\n".join(lines)


def _differentiation(program: Program) -> list[str]:
    """Each gradient the program takes, and the C⁰ points it passes through."""
    taken = [(fn, g.fn, f"{'value_and_grad' if g.value else 'grad'}", g.span)
             for fn in program.functions() for g in fn.grads]
    taken += [(None, t.objective, "training", t.decl.name_span)
              for f in program.files for t in f.trainings.values()]
    if not taken:
        return []
    lines = ["-- differentiation --"]
    for user, target, how, span in taken:
        where = f"{user.name}: {how}({target.name})" if user else \
            f"training differentiates {target.name}"
        kinks = target.reached_kinks()
        if not kinks:
            lines.append(f"{where} at {_place(span)}: smooth, C∞ on the way")
            continue
        lines.append(f"{where} at {_place(span)}: through {len(kinks)} C⁰ point"
                     f"{'s' * (len(kinks) > 1)}, where the gradient is a subgradient:")
        lines += [f"    {name} in {fn.name} at {_place(sp)}" for fn, name, sp in kinks]
    return lines


def _place(span) -> str:
    return f"{span.file.rsplit('/', 1)[-1]}:{span.line}:{span.col}"


def _training(program: Program) -> list[str]:
    runs = [t for f in program.files for t in f.trainings.values()]
    if not runs:
        return []
    lines = ["-- training --"]
    for t in runs:
        d = t.data
        stages = ([f"shuffle {d.shuffle_seed}"] if d.shuffle_seed is not None else []) + \
            [f"batch {d.batch_size}"]
        lines += [
            f"training {t.name}: model {t.model.instance_name()}, objective {t.objective.name}, "
            f"optimizer {t.optimizer.name}",
            f"    batch   : {t.batch_type}",
            f"    sample  : {t.sample_type}",
            f"    data    : {d.path} ({', '.join(stages)}) — file holds {d.file_sample}",
            f"    epochs  : {t.epochs}",
        ]
        if t.checkpoint_every is not None:
            lines.append(f"    ckpt    : every {t.checkpoint_every} steps to {t.checkpoint_dir}")
        lines.append("    dims    : " + ", ".join(f"{k} = {v}" for k, v in t.dims.items()))
    return lines


def _assertions(program: Program) -> list[str]:
    found = [a for f in program.files for a in f.asserts]
    if not found:
        return ["", "Static assertions: none."]
    lines = ["", f"Static assertions: {len(found)}."]
    for a in found:
        lines.append(f"  {a.file.basename}:{a.decl.span.line}  {a.decl.text}  {a.outcome}")
    return lines


def _parameter_counts(program: Program) -> list[str]:
    lines: list[str] = []
    for fn in program.main.fns.values():
        if not fn.params or not isinstance(fn.params[0].type, ParamsT):
            continue
        fields = flatten(fn.params[0].type)
        total = reals(fields)
        count = f"{total} reals" if total is not None else "reals depending on dims"
        tensors = f"{len(fields)} tensor{'s' * (len(fields) != 1)}"
        lines += ["", f"The parameters of {fn.name}, its first argument: {tensors}, "
                  f"{count}."]
        width = max((len(p) for p, _ in fields), default=0)
        for path, t in fields:
            n = t.element_count()
            lines.append(f"  {path:<{width}}  {str(t):<16} {n if n is not None else '-':>8}")
    return lines


# ---- presk dump --stage elab ----

def elab_listing(program: Program) -> str:
    lines: list[str] = []
    for f in program.files:
        lines.append(f"== {f.path}" + (" (main)" if f.is_main else ""))
        lines += _file_listing(f)
    lines.append("== instances")
    for inst in program.instances:
        lines.append(f"{inst.name}:")
        lines += [f"  {path} : {t}" for path, t in inst.fields]
    return "\n".join(lines)


def _file_listing(f: FileInfo) -> list[str]:
    lines = [f"import {alias} = {target.path}" for alias, target in f.imports.items()]
    if f.dims:
        lines.append("dim " + " ".join(f.dims))
    lines += [f"const {c.name} = {c.value}" for c in f.consts.values()]
    for m in f.modules.values():
        lines += _module_listing(m)
    lines += [_signature(fn) for fn in f.fns.values()]
    for opt in f.optimizers.values():
        lines.append(f"optimizer {opt.name} ({opt.written} fields)")
    for t in f.trainings.values():
        lines.append(f"training {t.name} ({len(t.decl.items)} items)")
    lines += [f"assert {a.decl.text}" for a in f.asserts]
    return lines


def _module_listing(m: ModuleInfo) -> list[str]:
    head = f"module {m.name}" + (f"{{{' '.join(m.dims)} : dim}}" if m.dims else "") + " {"
    lines = [head]
    lines += [f"  param {p.name} : {p.type}  init = {p.init.name}" for p in m.params]
    lines += [f"  use {u.name} : {u.target.instance_name()}" for u in m.uses]
    lines += ["  " + _signature(fn) for fn in m.fns.values()]
    return lines + ["}"]


def _signature(fn: FnInfo) -> str:
    params = ", ".join(f"{p.name} : {p.type}" + (" = …" if p.default is not None else "")
                       for p in fn.explicit_params)
    return f"fn {fn.short}({params}) -> {fn.result}"
