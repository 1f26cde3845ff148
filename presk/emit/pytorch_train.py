"""A training run as a torchrun script: `presk export --target pytorch --train -o DIR`
writes DIR/train.py beside the exported modules (presk/emit/pytorch.py) and the initial
weights DIR/init.safetensors.

The script is the run `presk train` makes, on PyTorch's distributed engine: DDP over
torch.distributed (gloo on CPU, nccl where CUDA is present); each rank reads, of every
global batch in Presk's order (`presk.train.data.epoch_order`: the same batches as
`presk train`), its own B/N samples; DDP averages the shards' gradients, which is the
gradient of the batch's mean; the optimizer is torch's AdamW or SGD with the block's
hyperparameters and `LambdaLR(Schedule)`, stepped after it; the log and the checkpoints
are `presk train`'s (`log.csv`, `presk-checkpoint/1`), written by rank 0 with Presk's own
writers, so either side resumes the other's run. The script imports torch, the exported
modules and presk's data reader and checkpoint format (docs/export_pytorch.md).
"""

from __future__ import annotations

import os

from presk import __version__
from presk.emit.pytorch import ExportError, program_files

TRAIN_FILE = "train.py"
INIT_FILE = "init.safetensors"


def train_script(program, training, realization_name: str, weights_seed: int) -> str:
    """The text of train.py for `training` (a TrainingInfo of `program`)."""
    files = program_files(program)
    model = training.model.module.name
    objective = training.objective.name
    home = {n: f.module for f in files for n in (*f.classes, *f.functions)}
    if model not in home or objective not in home:
        raise ExportError(f"training run `{training.name}`: its model or objective is not "
                          "exported")
    dims = [d if isinstance(d, int) else None for d in training.model.dims]
    if None in dims or training.model.stack:
        raise ExportError(f"training run `{training.name}`: its model {model} takes dims "
                          "or stacks the export does not know the values of")
    opt = training.optimizer
    values = {k: float(v) for k, v in opt.values.items()}
    data = training.data
    constants = {
        "RUN": training.name, "OBJECTIVE": objective, "DATA": os.path.abspath(data.resolved),
        "SHUFFLE_SEED": data.shuffle_seed, "BATCH": data.batch_size,
        "EPOCHS": training.epochs, "CHECKPOINT_EVERY": training.checkpoint_every,
        "CHECKPOINT_DIR": (training.checkpoint_dir or "ckpt").rstrip("/"),
        "OPTIMIZER": opt.kind, "HYPER": values, "SCHEDULE": opt.schedule,
        "WARMUP": opt.schedule_args.get("warmup", 0), "SEED": weights_seed,
        "REALIZATION": realization_name, "MODEL_DIMS": tuple(dims),
        "DEFAULT_OUT": f"runs/{training.name}",
    }
    lines = "\n".join(f"{k} = {v!r}" for k, v in constants.items())
    return _TEMPLATE.format(version=__version__, run=training.name, constants=lines,
                            model_module=home[model], model=model,
                            objective_module=home[objective], objective=objective,
                            tuple_sample=_is_tuple(training.sample_type))


def _is_tuple(t) -> bool:
    from presk.frontend.types import TupleT
    return isinstance(t, TupleT)


_TEMPLATE = '''\
"""The training run `{run}` for torchrun: written by `presk export --target pytorch
--train` (Presk {version}).

    torchrun --nproc_per_node=N train.py [--out DIR] [--resume] [--steps S | --epochs E]

DDP over torch.distributed (gloo on CPU, nccl where CUDA is present). Every rank reads,
of each global batch of {{BATCH}} samples in Presk's order (presk.train.data.epoch_order:
the batches `presk train` reads), its own BATCH / N samples; DDP averages the shards'
gradients (the gradient of the batch's mean). torch's optimizer with the run's
hyperparameters and LambdaLR(Schedule) after each step. Rank 0 writes DIR/log.csv and the
checkpoints (presk-checkpoint/1) with Presk's writers: `presk train --resume DIR`
continues this run, and `--resume` here continues a run of `presk train`.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import load_file
from torch.nn.parallel import DistributedDataParallel

from presk.datafile import read_header, read_samples
from presk.train.checkpoint import Checkpoint, CheckpointError, check_fits, latest, save
from presk.train.data import epoch_order
from presk.train.loop import LOG, LogWriter, StepRecord, check_same_run, read_log
from presk.train.optim import Schedule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import {model_module}  # noqa: E402
import {objective_module}  # noqa: E402

{constants}
TUPLE_SAMPLE = {tuple_sample}
# presk's optimizer buffers (checkpoint keys `optim.<name>.<path>`) and torch's state keys
BUFFERS = {{"adamw": {{"exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}},
           "sgd": {{"momentum": "momentum_buffer"}}}}[OPTIMIZER]


class Objective(torch.nn.Module):
    """DDP's module: the model, and as its forward the objective on a shard."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch):
        return {objective_module}.{objective}(self.model, batch)


def optimizer(params: list[torch.Tensor]) -> torch.optim.Optimizer:
    h = HYPER
    if OPTIMIZER == "adamw":
        return torch.optim.AdamW(params, lr=h["lr"], betas=(h["beta1"], h["beta2"]),
                                 eps=h["eps"], weight_decay=h["weight_decay"])
    return torch.optim.SGD(params, lr=h["lr"], momentum=h["momentum"],
                           dampening=h["dampening"], weight_decay=h["weight_decay"])


def optimizer_state(opt, named: dict[str, torch.Tensor], steps: int) -> dict[str, np.ndarray]:
    """torch's state as presk's (`step`, `<buffer>.<path>`)."""
    out = {{"step": np.array(steps, dtype=np.int64)}}
    for path, p in named.items():
        state = opt.state.get(p, {{}})
        for mine, theirs in BUFFERS.items():
            if state.get(theirs) is not None:
                out[f"{{mine}}.{{path}}"] = state[theirs].detach().double().numpy().copy()
    return out


def load_optimizer_state(opt, named: dict[str, torch.Tensor], state: dict) -> int:
    """presk's state into torch's; the number of updates done."""
    steps = int(np.asarray(state["step"]))
    for path, p in named.items():
        bufs = {{theirs: torch.from_numpy(np.array(state[f"{{mine}}.{{path}}"])).to(p.dtype)
                for mine, theirs in BUFFERS.items() if f"{{mine}}.{{path}}" in state}}
        if bufs:
            if OPTIMIZER == "adamw":
                bufs["step"] = torch.tensor(float(steps))
            opt.state[p] = bufs
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description="the training run " + RUN + " under torchrun")
    parser.add_argument("--out", default=DEFAULT_OUT, help="the run's directory")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run of --out from its newest whole checkpoint")
    parser.add_argument("--steps", type=int, help="steps in all (default: the run's)")
    parser.add_argument("--epochs", type=int, help="epochs instead of the run's")
    parser.add_argument("--weights", default=os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "init.safetensors"), help="the initial weights")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{{int(os.environ.get('LOCAL_RANK', 0))}}") if cuda \\
        else torch.device("cpu")
    if BATCH % world:
        raise SystemExit(f"train.py: a batch of {{BATCH}} does not split over {{world}} ranks")
    shard = BATCH // world

    header = read_header(DATA)
    per_epoch = header.count // BATCH
    ckpt_dir = os.path.join(args.out, CHECKPOINT_DIR)
    ck = latest(ckpt_dir, lambda m: print(f"train.py: {{m}}", file=sys.stderr)) \\
        if args.resume else None
    if args.resume and ck is None:
        raise SystemExit(f"train.py: {{args.out}} holds no checkpoint to resume from")
    total = args.steps or (args.epochs or EPOCHS) * per_epoch
    if ck is not None and args.steps is None and args.epochs is None:
        total = int(ck.meta.get("total", total))

    model = {model_module}.{model}(*MODEL_DIMS, dtype=torch.float64)
    model.load_state_dict(load_file(args.weights), strict=True)
    named = dict(model.named_parameters())
    opt = optimizer(list(named.values()))
    schedule = Schedule(SCHEDULE, total, WARMUP)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    meta = {{"run": RUN, "objective": OBJECTIVE, "seed": SEED, "remat": "store",
            "total": total, "realization": REALIZATION}}
    step, history = 0, []
    if ck is not None:
        check_fits(ck, {{p: t.detach().numpy() for p, t in named.items()}})
        check_same_run(ck.meta, meta)
        data = ck.data
        mine = {{"seed": SHUFFLE_SEED, "batch_size": BATCH, "count": header.count}}
        if any(data.get(k) != v for k, v in mine.items()) or \\
                data.get("epoch", -1) * per_epoch + data.get("index", -1) != ck.step:
            raise SystemExit(f"train.py: {{ck.path}}: its data position does not fit this run")
        with torch.no_grad():
            for path, value in ck.params.items():
                named[path].copy_(torch.from_numpy(value))
        step = load_optimizer_state(opt, named, ck.optimizer)
        sched.last_epoch = step
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"] * schedule(step)
        log_path = os.path.join(args.out, LOG)
        history = read_log(log_path, upto=step) if os.path.exists(log_path) else []
    model.to(device)
    ddp = DistributedDataParallel(Objective(model), device_ids=[device.index] if cuda else None)

    log = None
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        log = LogWriter(os.path.join(args.out, LOG), history)

    def checkpoint(loss: float) -> None:
        if rank != 0:
            return
        log.flush(history)
        epoch, index = divmod(step, per_epoch)
        save(ckpt_dir, Checkpoint(
            step, {{p: t.detach().cpu().double().numpy().copy() for p, t in named.items()}},
            optimizer_state(opt, named, step),
            {{"epoch": epoch, "index": index, "seed": SHUFFLE_SEED, "batch_size": BATCH,
             "count": header.count}}, dict(meta, loss=loss)))

    orders: dict[int, np.ndarray] = {{}}
    while step < total:
        epoch, index = divmod(step, per_epoch)
        if epoch not in orders:
            orders = {{epoch: epoch_order(header.count, SHUFFLE_SEED, epoch)}}
        first = index * BATCH + rank * shard
        arrays = read_samples(DATA, header, orders[epoch][first:first + shard].tolist())
        arrays = arrays if isinstance(arrays, tuple) else (arrays,)
        tensors = tuple(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))
                        .to(device) for a in arrays)
        lr = opt.param_groups[0]["lr"]
        opt.zero_grad(set_to_none=True)
        loss = ddp(tensors if TUPLE_SAMPLE else tensors[0])
        loss.backward()
        opt.step()
        sched.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        step += 1
        history.append(StepRecord(step, epoch, float(mean) / world, lr))
        if CHECKPOINT_EVERY and step % CHECKPOINT_EVERY == 0:
            checkpoint(history[-1].loss)
    if rank == 0 and history:
        if not (CHECKPOINT_EVERY and step % CHECKPOINT_EVERY == 0):
            checkpoint(history[-1].loss)
        log.flush(history)
        print(f"trained `{{RUN}}` on {{world}} rank(s): {{step}} steps; loss "
              f"{{history[-1].loss:.6g}} at step {{step}}; checkpoints {{ckpt_dir}}")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except (CheckpointError, ValueError) as exc:
        raise SystemExit(f"train.py: {{exc}}") from None
    # Everything is saved and the group destroyed: leave without torch's C++ teardown at
    # interpreter exit, which can abort a finished run under load (a gloo thread still
    # joinable when its std::thread is destroyed: "terminate called without an active
    # exception", SIGABRT, and torchrun then reports the rank failed).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
'''
