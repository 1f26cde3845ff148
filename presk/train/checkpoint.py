"""Checkpoints of a training run: `<dir>/step-00000050.safetensors` (the parameters as
`param.<path>`, the optimizer's state as `optim.<key>`) and `<dir>/step-00000050.json`
(format `presk-checkpoint/1`: the step, the data position, the run's facts, the tensor
file's name and SHA-256).

Nothing is left half-written: the tensor file is written to a temporary file and renamed,
then the JSON the same way — the JSON is the commit point, and it names the exact bytes of
its tensor file, so a truncated or altered tensor file is refused (`CheckpointError`, one
line) and `latest` falls back to the checkpoint before it. The last `keep` checkpoints are
kept, older ones removed after a new one is complete. docs/training.md describes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.artifact import check_format, expect, read_json, write_json
from ..analysis.weights import WeightsError, save_tensors

FORMAT = "presk-checkpoint/1"
_NAME = re.compile(r"step-(\d{8})\.json")


class CheckpointError(Exception):
    """A checkpoint that cannot be written or read (one line, naming the file)."""


@dataclass
class Checkpoint:
    step: int
    params: dict[str, np.ndarray]
    optimizer: dict[str, np.ndarray]
    data: dict[str, Any] = field(default_factory=dict)  # the stream's position
    meta: dict[str, Any] = field(default_factory=dict)  # run, program, loss, lr, …
    path: str = ""  # the JSON file it was read from or written to


def stem(step: int) -> str:
    return f"step-{step:08d}"


def save(directory: str, ck: Checkpoint, keep: int = 3) -> str:
    """Write `ck` into `directory` (created), then keep only the last `keep`; the JSON's
    path."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"{directory}: cannot create ({exc.strerror or exc})") from None
    tensors = {f"param.{k}": v for k, v in ck.params.items()}
    tensors.update({f"optim.{k}": v for k, v in ck.optimizer.items()})
    name = stem(ck.step)
    tensor_path = os.path.join(directory, name + ".safetensors")
    try:
        save_tensors(tensors, tensor_path)
    except WeightsError as exc:
        raise CheckpointError(str(exc)) from None
    record = {"format": FORMAT, "step": ck.step, "tensors": name + ".safetensors",
              "sha256": _sha256(tensor_path), "data": ck.data, "meta": ck.meta}
    ck.path = os.path.join(directory, name + ".json")
    write_json(ck.path, record, CheckpointError)
    prune(directory, keep)
    return ck.path


def load(path: str) -> Checkpoint:
    """The checkpoint of a JSON file; its tensor file must be the one it names, whole."""
    data, _ = read_json(path, "checkpoint", CheckpointError, nonfinite=True)  # a NaN loss
    record = check_format(data, path, FORMAT, "checkpoint",
                          {"format", "step", "tensors", "sha256", "data", "meta"},
                          CheckpointError)
    step = expect(record, "step", "natural", path, CheckpointError)
    name = expect(record, "tensors", "string", path, CheckpointError)
    expect(record, "sha256", "string", path, CheckpointError)
    position = expect(record, "data", "object", path, CheckpointError)
    meta = expect(record, "meta", "object", path, CheckpointError)
    if os.path.basename(name) != name or name in ("", ".", ".."):
        raise CheckpointError(f"{path}: \"tensors\" names {name!r}, not a file beside it")
    tensor_path = os.path.join(os.path.dirname(path), name)
    if not os.path.isfile(tensor_path):
        raise CheckpointError(f"{path}: its tensors `{tensor_path}` are missing")
    if _sha256(tensor_path) != record.get("sha256"):
        raise CheckpointError(f"{tensor_path}: truncated or altered (its SHA-256 is not the "
                              "one its checkpoint recorded)")
    from safetensors.numpy import load_file
    try:
        tensors = load_file(tensor_path)
    except Exception as exc:  # safetensors raises its own error types
        raise CheckpointError(f"{tensor_path}: cannot read ({exc})") from None
    return Checkpoint(step, _prefixed(tensors, "param."), _prefixed(tensors, "optim."),
                      dict(position), dict(meta), path)


def check_fits(ck: Checkpoint, params: dict[str, np.ndarray]) -> None:
    """A checkpoint that reads whole but was made for another program is refused (one
    line naming its tensor file): its parameters must be the run's, by path, shape and a
    float dtype, and the optimizer's buffers of a parameter its shape; every value finite."""
    where = ck.path[: -len(".json")] + ".safetensors" if ck.path else "the checkpoint"
    missing = sorted(set(params) - set(ck.params))
    extra = sorted(set(ck.params) - set(params))
    if missing or extra:
        raise CheckpointError(f"{where}: " + (f"no parameter `param.{missing[0]}`"
                                              if missing else "")
                              + ("; " if missing and extra else "")
                              + (f"`param.{extra[0]}` is no parameter of the run"
                                 if extra else ""))
    for key, value in [*(("param." + k, v) for k, v in ck.params.items()),
                       *(("optim." + k, v) for k, v in ck.optimizer.items())]:
        path = key.split(".", 2)[-1] if key.startswith("optim.") else key[len("param."):]
        want = params.get(path)
        if want is None:  # the optimizer's own state (its step): load_state checks it
            continue
        if not np.issubdtype(value.dtype, np.floating):
            raise CheckpointError(f"{where}: `{key}` has dtype {value.dtype}, not a float")
        if value.shape != want.shape:
            raise CheckpointError(f"{where}: `{key}` has shape {list(value.shape)}, the "
                                  f"run's `{path}` {list(want.shape)}")
        bad = np.flatnonzero(~np.isfinite(value))
        if bad.size:  # a run diverged, or the file was edited: no step can follow from it
            at = [int(i) for i in np.unravel_index(bad[0], value.shape)]
            raise CheckpointError(f"{where}: `{key}` holds {value.reshape(-1)[bad[0]]} at "
                                  f"{at} ({bad.size} of {value.size} values not finite)")


def checkpoints(directory: str) -> list[str]:
    """The JSON files of `directory`'s checkpoints, the newest (highest step) first."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = sorted((m.group(1), n) for n in names if (m := _NAME.fullmatch(n)))
    return [os.path.join(directory, n) for _, n in reversed(found)]


def latest(directory: str, warn: Callable[[str], None]) -> Checkpoint | None:
    """The newest checkpoint that reads whole; each newer one refused is reported by
    `warn` (one line) and skipped."""
    for path in checkpoints(directory):
        try:
            return load(path)
        except CheckpointError as exc:
            warn(f"{exc}; using the checkpoint before it")
    return None


def prune(directory: str, keep: int) -> None:
    """Remove all but the newest `keep` checkpoints (their JSON first: the commit point)."""
    for path in checkpoints(directory)[keep:]:
        tensors = path[: -len(".json")] + ".safetensors"
        for p in (path, tensors):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _prefixed(tensors: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
