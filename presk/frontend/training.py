"""Elaborate optimizers, training runs and static assertions."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..shapes import TensorType
from . import ast as A
from .diagnostics import CompileError, Diagnostic, did_you_mean, error
from .load import display_path
from .parser import parse_type
from .program import (
    C0_PLUS, C_INF, AssertInfo, DataInfo, FileInfo, FnInfo, OptimizerInfo, Program, TrainingInfo,
)
from .types import ParamsT, TupleT, Type

if TYPE_CHECKING:
    from .elaborate import Elaborator

# Field defaults are PyTorch's (torch.optim.AdamW, torch.optim.SGD).
OPTIMIZERS: dict[str, dict[str, float]] = {
    "adamw": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 1e-2},
    "sgd": {"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0},
}
SCHEDULES: dict[str, set[str]] = {"constant": set(), "cosine": {"warmup"}, "linear": {"warmup"}}
TRAINING_ITEMS = ("model", "objective", "optimizer", "data", "epochs", "checkpoint")


def check_runs(el: "Elaborator", program: Program) -> None:
    for info in program.files:
        for d in info.ast.decls:
            if isinstance(d, A.OptimizerDecl):
                info.optimizers[d.name] = _optimizer(el, info, d)
        for d in info.ast.decls:
            if isinstance(d, A.TrainingDecl):
                info.trainings[d.name] = _training(el, info, d, program.diagnostics)
        for d in info.ast.decls:
            if isinstance(d, A.AssertDecl):
                info.asserts.append(_assertion(el, info, d))


# ---- optimizers ----

def _optimizer(el: "Elaborator", info: FileInfo, d: A.OptimizerDecl) -> OptimizerInfo:
    if d.kind not in OPTIMIZERS:
        raise error("E0501", f"unknown optimizer `{d.kind}`", d.name_span,
                    did_you_mean(d.kind, OPTIMIZERS) or "one of " + ", ".join(OPTIMIZERS)
                    + "; name yours with `optimizer NAME : adamw { … }`")
    values = dict(OPTIMIZERS[d.kind])
    schedule, schedule_args, seen = "constant", {}, set()
    for f in d.fields:
        if f.name in seen:
            raise error("E0501", f"field `{f.name}` is set twice", f.span)
        seen.add(f.name)
        if f.name == "schedule":
            schedule, schedule_args = _schedule(el, info, f)
            continue
        if f.name not in values:
            raise error("E0501", f"`{d.kind}` has no field `{f.name}`", f.span,
                        did_you_mean(f.name, values)
                        or "its fields: " + ", ".join([*values, "schedule"]))
        if f.type_name != "f64" or f.value is None:
            raise error("E0502", f"`{f.name}` is an f64, written `{f.name} : f64 = …`", f.span)
        # static_value refuses a value that is not finite (E0605): every field is finite.
        values[f.name] = float(el.static_value(info, f.value, {}))
        refused = _refused(f.name, values[f.name])
        if refused is not None:
            raise error("E0504", refused[0], f.value.span, refused[1])
    return OptimizerInfo(d.name, d.kind, values, schedule, schedule_args, d, len(d.fields))


_BIAS_HINT = ("the step divides by the bias correction 1 − {name}^t, which is 0 at "
              "{name} = 1 and negative above")
_EPS_HINT = ("eps keeps the step's denominator √v̂ + eps above 0: with eps = 0 a gradient "
             "element that has been 0 so far steps by 0/0 (torch.optim.AdamW accepts 0)")
_DAMPENING_HINT = ("the momentum buffer adds (1 − dampening) × the gradient: outside [0, 1] "
                   "it adds a negative multiple, or more than the gradient "
                   "(torch.optim.SGD does not check dampening)")


def _refused(name: str, v: float) -> tuple[str, str | None] | None:
    """The message and hint for a field value the optimizer refuses, or None.

    The rules are torch.optim.AdamW's and SGD's, checked at `presk check` so that a run
    never stops at its start on a value the source fixed. Where presk/train/optim.py checks
    the same rule (lr, the betas, weight_decay, momentum) the message is its ValueError, so
    the two read alike. Beyond torch and the runtime: eps > 0, not ≥ 0, and
    0 ≤ dampening ≤ 1, which torch leaves unchecked (the hints say why); every value is
    finite (static_value's E0605), where torch takes inf, and SGD NaN.
    """
    if name == "lr" and not v >= 0.0:
        return f"the learning rate must be ≥ 0, not {v}", None
    if name in ("beta1", "beta2") and not 0.0 <= v < 1.0:
        return f"{name} must be in [0, 1), not {v}", (_BIAS_HINT.format(name=name) if v >= 1
                                                      else None)
    if name == "eps" and not v > 0.0:
        return f"eps must be > 0, not {v}", _EPS_HINT
    if name in ("weight_decay", "momentum") and not v >= 0.0:
        return f"{name} must be ≥ 0, not {v}", None
    if name == "dampening" and not 0.0 <= v <= 1.0:
        return f"dampening must be in [0, 1], not {v}", _DAMPENING_HINT
    return None


def _schedule(el: "Elaborator", info: FileInfo, f: A.OptField) -> tuple[str, dict[str, int]]:
    if f.value is not None or f.type_name not in SCHEDULES:
        raise error("E0503", f"unknown schedule `{f.type_name}`", f.span,
                    "one of " + ", ".join(f"{s}(warmup = N)" if a else s
                                          for s, a in SCHEDULES.items()))
    args: dict[str, int] = {}
    for a in f.schedule_args or []:
        if a.name not in SCHEDULES[f.type_name]:
            raise error("E0503", f"`{f.type_name}` takes no argument `{a.name}`", a.span)
        value = el.static_value(info, a.value, {})
        if not float(value).is_integer() or value < 0:
            raise error("E0503", f"`{a.name}` counts steps: a natural, not {value}",
                        a.value.span)
        args[a.name] = int(value)
    return f.type_name, args


def optimizer_regularity(opt: OptimizerInfo) -> list[tuple[str, list[tuple[str, int]]]]:
    """The optimizer's functions and their classes: a schedule with a warmup is piecewise
    smooth in the step (C⁰⁺); the update is smooth in the tree, the state and the gradient."""
    step = C0_PLUS if opt.schedule_args.get("warmup") else C_INF
    return [
        ("init", [("θ", C_INF)]),
        ("lr", [("t", step), ("total", step)]),
        ("step", [("θ", C_INF), ("s", C_INF), ("g", C_INF), ("t", step), ("total", step)]),
    ]


# ---- training runs ----

def _training(el: "Elaborator", info: FileInfo, d: A.TrainingDecl,
              warnings: list[Diagnostic]) -> TrainingInfo:
    items: dict[str, A.TrainItem] = {}
    for item in d.items:
        if item.key not in TRAINING_ITEMS:
            raise error("E0601", f"unknown training item `{item.key}`", item.span,
                        did_you_mean(item.key, TRAINING_ITEMS)
                        or "the items: " + ", ".join(TRAINING_ITEMS))
        if item.key in items:
            raise error("E0601", f"`{item.key}` is given twice", item.span)
        items[item.key] = item
    for key in TRAINING_ITEMS[:5]:
        if key not in items:
            raise error("E0601", f"training `{d.name}` has no `{key}`", d.name_span)
    model = _model(el, info, items["model"])
    objective = _objective(info, items["objective"], model)
    optimizer = _named_optimizer(info, items["optimizer"])
    batch_type = objective.params[1].type
    data, dims, sample, count = _data(el, info, items["data"], batch_type)
    epochs = _natural_item(el, info, items["epochs"])
    long_warmup = _long_warmup(d, items["optimizer"], optimizer, epochs, count, data.batch_size)
    if long_warmup is not None:
        warnings.append(long_warmup)
    ckpt = items.get("checkpoint")
    if ckpt is not None and ckpt.every == 0:
        raise error("E0601", "a checkpoint every 0 steps", ckpt.span)
    return TrainingInfo(d.name, model, objective, optimizer, data, epochs,
                        ckpt.every if ckpt else None, ckpt.directory if ckpt else None,
                        batch_type, sample, dims, d)


def _model(el: "Elaborator", info: FileInfo, item: A.TrainItem) -> ParamsT:
    if item.ref is None or item.ref.stack is not None:
        raise error("E0601", "`model` names a module: `model = t.Tower`", item.span)
    model = el.module_ref(info, item.ref, None)
    if any(isinstance(s, str) for s in model.dims):
        raise error("E0601", f"the model {model.instance_name()} must have fixed dims",
                    item.span)
    return model


def _objective(info: FileInfo, item: A.TrainItem, model: ParamsT) -> FnInfo:
    if item.ref is None or len(item.ref.path) != 1 or item.ref.sizes:
        raise error("E0601", "`objective` names a function of this file", item.span)
    name = item.ref.path[0]
    fn = info.fns.get(name)
    if fn is None:
        raise error("E0205", f"unknown function `{name}`", item.ref.span,
                    did_you_mean(name, info.fns))
    params = fn.params
    if len(params) != 2 or params[0].type != model:
        raise error("E0602", f"the objective `{name}` must take (params {model.instance_name()}, "
                    "a batch)", item.span, f"`{name}` takes ("
                    + ", ".join(str(p.type) for p in params) + ")")
    if fn.result != TensorType():
        raise error("E0602", f"the objective `{name}` must return ℝ[], not {fn.result}",
                    item.span)
    return fn


def _named_optimizer(info: FileInfo, item: A.TrainItem):
    if item.ref is None or len(item.ref.path) != 1 or item.ref.sizes:
        raise error("E0601", "`optimizer` names an optimizer of this file", item.span)
    name = item.ref.path[0]
    if name not in info.optimizers:
        raise error("E0501", f"unknown optimizer `{name}`", item.ref.span,
                    did_you_mean(name, info.optimizers))
    return info.optimizers[name]


def _long_warmup(d: A.TrainingDecl, item: A.TrainItem, opt: OptimizerInfo, epochs: int,
                 count: int, batch: int) -> Diagnostic | None:
    """W0501 when the optimizer's warmup outlasts the run: the learning rate would never
    reach `lr`. The run's steps are known here because the data file's header, already read
    for its sample type, gives its sample count; an epoch is `count // batch` steps, as
    presk/train/data.py reads it (the last partial batch dropped). `presk train --steps` or
    `--epochs` may change the length, so this is a warning, not an error."""
    warmup = opt.schedule_args.get("warmup", 0)
    per_epoch = count // batch
    steps = epochs * per_epoch
    if warmup <= steps:
        return None
    field = next(f for f in opt.decl.fields if f.name == "schedule")
    arg = next(a for a in field.schedule_args or [] if a.name == "warmup")
    return Diagnostic(
        "W0501", f"a warmup of {warmup} steps is longer than training `{d.name}`: {steps} "
        f"steps ({epochs} epochs × {per_epoch} batches of {batch} from {count} samples)",
        arg.value.span,
        "the learning rate never reaches `lr`: shorten the warmup, or train longer "
        "(`epochs`, or `presk train --epochs N`)",
        [(item.span, f"training `{d.name}` uses optimizer `{opt.name}`")])


def _natural_item(el: "Elaborator", info: FileInfo, item: A.TrainItem) -> int:
    if item.value is None or item.type_name != "nat":
        raise error("E0601", f"`{item.key}` is a nat, written `{item.key} : nat = …`", item.span)
    value = el.static_value(info, item.value, {})
    if not float(value).is_integer() or value < 0:
        raise error("E0601", f"`{item.key}` is a natural, not {value}", item.value.span)
    return int(value)


def _natural(el: "Elaborator", info: FileInfo, e: A.Expr, what: str) -> int:
    value = el.static_value(info, e, {})
    if not float(value).is_integer() or value < 0:
        raise error("E0603", f"{what} is a natural, not {value}", e.span)
    return int(value)


def _data(el: "Elaborator", info: FileInfo, item: A.TrainItem,
          batch_type: Type) -> tuple[DataInfo, dict[str, int], Type, int]:
    """The stream, the dim its batch binds, the sample type, and the file's sample count."""
    if item.stream is None:
        raise error("E0601", '`data` is a stream: `stream "file.psk.d" |> batch(B = 8)`',
                    item.span)
    seed, dim, size = None, None, None
    seen: set[str] = set()
    for stage in item.stages:
        args = {a.name: a for a in stage.args}
        if stage.name in seen:
            raise error("E0603", f"the stream has two `{stage.name}` stages", stage.span)
        seen.add(stage.name)
        if stage.name == "shuffle" and set(args) <= {"seed"}:
            seed = _natural(el, info, args["seed"].value, "a seed") if args else 0
        elif stage.name == "shuffle":
            raise error("E0603", "`shuffle` takes only `seed = N`", stage.span)
        elif stage.name == "batch" and len(stage.args) != 1:
            raise error("E0603", f"`batch` binds one dim, given {len(stage.args)}", stage.span,
                        "write `batch(B = 8)`")
        elif stage.name == "batch":
            dim, arg = next(iter(args.items()))
            if dim not in info.dims:
                raise error("E0603", f"`batch({dim} = …)` binds `{dim}`, which is not a dim",
                            arg.span, did_you_mean(dim, info.dims))
            size = _natural(el, info, arg.value, "a batch size")
            if size < 1:
                raise error("E0603", "a batch holds at least one sample", arg.span)
        else:
            raise error("E0603", f"unknown stream stage `{stage.name}`", stage.span,
                        "the stages: shuffle(seed = N), batch(DIM = N)")
    if dim is None or size is None:
        raise error("E0603", "the stream has no `batch(DIM = N)` stage", item.span)
    sample = _unbatch(batch_type, dim, item.span)
    if "\0" in item.stream:  # open() raises ValueError on it
        raise error("E0603", "a data path cannot hold a NUL character", item.stream_span)
    path = os.path.join(os.path.dirname(info.path), item.stream)
    shown = display_path(path)
    file_sample, count = _file_sample(el, shown, item)
    if not _same_sample(file_sample, sample):
        raise error("E0603", f"`{shown}` holds samples of type {file_sample}, but the "
                    f"objective's batch is {batch_type}: samples of type {sample}",
                    item.stream_span)
    return (DataInfo(item.stream, shown, seed, dim, size, str(file_sample)), {dim: size}, sample,
            count)


def _unbatch(t: Type, dim: str, span: A.Span) -> Type:
    """The sample type: the batch type without its leading batch axis."""
    if isinstance(t, TupleT):
        return TupleT(tuple(_unbatch(i, dim, span) for i in t.items))
    if isinstance(t, TensorType) and not t.prefix and t.axes and t.axes[0].size == dim:
        return TensorType(t.axes[1:])
    raise error("E0602", f"the objective's batch {t} must lead every tensor with an axis of "
                f"size {dim}", span)


def _file_sample(el: "Elaborator", path: str, item: A.TrainItem) -> tuple[Type, int]:
    """The sample type the data file's header declares, and its sample count."""
    from ..datafile import DataFileError, read_header
    try:
        header = read_header(path)
    except DataFileError as exc:
        raise error("E0603", str(exc), item.stream_span) from None
    try:
        tree = parse_type(path, header.sample, header.lines.get("sample", 1))
        return el.standalone_type(FileInfo(path, A.SourceFile(path, "", [])), tree), \
            header.count
    except CompileError as exc:
        # Its span is in the data file, whose text a diagnostic does not quote: report it
        # at the stream that names the file.
        raise error("E0603", f"{header.where('sample')}: the sample type `{header.sample}` "
                    f"does not read: {exc.diagnostic.message}", item.stream_span,
                    exc.diagnostic.hint) from None


def _same_sample(a: Type, b: Type) -> bool:
    if isinstance(a, TupleT) and isinstance(b, TupleT):
        return len(a.items) == len(b.items) and all(map(_same_sample, a.items, b.items))
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return len(a.axes) == len(b.axes) and all(
            x.size == y.size and (x.name is None or y.name is None or x.name == y.name)
            for x, y in zip(a.axes, b.axes))
    return False


# ---- static assertions ----

def _assertion(el: "Elaborator", info: FileInfo, d: A.AssertDecl) -> AssertInfo:
    free = sorted(_free_dims(d.cond, info))
    if free:
        bound = {k: v for t in info.trainings.values() for k, v in t.dims.items()}
        if not set(free) <= set(bound):
            return AssertInfo(d, info, "deferred until " + ", ".join(free) + " is bound")
        env = {k: bound[k] for k in free}
        where = " at " + ", ".join(f"{k} = {v}" for k, v in env.items())
    else:
        env, where = {}, ""
    if not _holds(el, info, d.cond, env):
        raise error("E0604", f"static assertion fails{where}: {d.text}", d.span)
    return AssertInfo(d, info, "holds" + where)


def _free_dims(c, info: FileInfo) -> set[str]:
    if isinstance(c, A.Logical):
        return set().union(*(_free_dims(o, info) for o in c.operands))
    if isinstance(c, A.Comparison):
        return _free_dims(c.lhs, info) | _free_dims(c.rhs, info)
    if isinstance(c, A.Name) and len(c.path) == 1 and c.path[0] in info.dims:
        return {c.path[0]}
    if isinstance(c, A.Binary):
        return _free_dims(c.lhs, info) | _free_dims(c.rhs, info)
    if isinstance(c, A.Neg):
        return _free_dims(c.operand, info)
    return set()


_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _holds(el: "Elaborator", info: FileInfo, c, env: dict[str, int]) -> bool:
    if isinstance(c, A.Comparison):
        return _COMPARE[c.op](el.static_value(info, c.lhs, env), el.static_value(info, c.rhs, env))
    if c.op == "not":
        return not _holds(el, info, c.operands[0], env)
    values = (_holds(el, info, o, env) for o in c.operands)
    return all(values) if c.op == "and" else any(values)
