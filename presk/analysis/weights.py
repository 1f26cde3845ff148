"""Parameter trees at concrete dims: their layout, their initialization, their files.

A tree is flattened to tensors keyed by path (`blocks.proj.w`), read from the module
declarations of a PSK-Core module, so it works from a .psk program or an .mlir file.

Initialization is deterministic from a seed with one key per path: the generator for the
tensor at `path` is `numpy.random.default_rng(k)` with `k` the first 8 bytes (little-endian)
of SHA-256 of `"presk-init/1:<seed>:<path>"`. A stacked tensor (`blocks.proj.w :
ℝ[3, 4, 4]`) is drawn whole from its path's generator; its fans are those of one copy
(its last two axes). Inputs drawn from a seed use the same rule with `presk-input/1`.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from ..dialects import core as C
from .artifact import write_atomic


class WeightsError(Exception):
    """A weights or inputs file that does not fit: one line for the user."""


@dataclass(frozen=True)
class Field:
    path: str
    shape: tuple[int, ...]
    init: str  # the initializer as written: `xavier_uniform`, `normal(std = 0.02)`
    stack: int  # how many leading axes come from stacking


def module_decls(module: ModuleOp) -> dict[str, C.ModuleDeclOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, C.ModuleDeclOp)}


def _concrete(size, env: dict) -> int:
    value = env.get(size, size) if isinstance(size, str) else size
    if not isinstance(value, int):
        raise WeightsError(f"the size `{size}` has no value: give it with --dim {size}=N")
    return value


def tree_fields(module: ModuleOp, params: C.ParamsAttr, dims: dict[str, int] | None = None,
                prefix: str = "") -> list[Field]:
    """The tensors of a tree at concrete dims, in declaration order."""
    decls = module_decls(module)
    decl = decls[params.module_name]
    env = dict(zip(decl.dim_names, (_concrete(d, dims or {}) for d in params.dim_sizes)))
    stack = tuple(_concrete(s, dims or {}) for s in params.stack_counts)
    out: list[Field] = []
    for entry in decl.entries:
        path = prefix + entry.field.data
        t = entry.decl_type
        if isinstance(entry, C.ParamDeclOp):
            shape = stack + tuple(_concrete(a.size, env) for a in t.shape.axes)
            init = entry.init.data if entry.init is not None else "zeros"
            out.append(Field(path, shape, init, len(stack)))
        else:
            inner = t.substitute(env)
            nested = C.ParamsAttr.get(inner.module_name, inner.dim_sizes,
                                      stack + tuple(inner.stack_counts))
            out += tree_fields(module, nested, dims, path + ".")
    return out


def key_rng(kind: str, seed: int, path: str) -> np.random.Generator:
    digest = hashlib.sha256(f"presk-{kind}/1:{seed}:{path}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


_INIT = re.compile(r"(\w+)(?:\((.*)\))?$")


def _init_args(text: str) -> tuple[str, dict[str, float]]:
    m = _INIT.match(text.strip())
    if m is None:
        raise WeightsError(f"malformed initializer `{text}`")
    args = {}
    for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
        key, _, value = part.partition("=")
        args[key.strip()] = float(value)
    return m.group(1), args


def initialize(field: Field, seed: int) -> np.ndarray:
    name, args = _init_args(field.init)
    shape = field.shape
    if name == "zeros":
        return np.zeros(shape)
    if name == "ones":
        return np.ones(shape)
    rng = key_rng("init", seed, field.path)
    if name == "normal":
        return rng.normal(args.get("mean", 0.0), args.get("std", 1.0), shape)
    if name == "uniform":
        return rng.uniform(args.get("low", 0.0), args.get("high", 1.0), shape)
    own = shape[field.stack:]
    fan_in, fan_out = (own[-2], own[-1]) if len(own) >= 2 else (own[0], own[0]) if own else (1, 1)
    gain = args.get("gain", 1.0)
    if name == "xavier_uniform":
        bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, shape)
    if name == "xavier_normal":
        return rng.normal(0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), shape)
    raise WeightsError(f"unknown initializer `{name}`")


def initial_weights(fields: list[Field], seed: int) -> dict[str, np.ndarray]:
    return {f.path: initialize(f, seed) for f in fields}


def load_tensors(path: str) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    if os.path.isdir(path):
        raise WeightsError(f"{path}: is a directory, not a safetensors file")
    if not os.path.isfile(path):
        raise WeightsError(f"{path}: no such file")
    try:
        return load_file(path)
    except TypeError as exc:  # a dtype numpy has not, e.g. bfloat16
        raise WeightsError(f"{path}: a tensor's dtype cannot be read ({exc}); store F64, "
                           "F32 or F16") from None
    except (SafetensorError, OSError, ValueError) as exc:
        raise WeightsError(f"{path}: not a safetensors file ({exc})") from None


def check_tensors(tensors: dict[str, np.ndarray], fields: list[Field], path: str) -> None:
    """Every field present with its shape; one line naming what is wrong."""
    for f in fields:
        if f.path not in tensors:
            raise WeightsError(f"{path}: no tensor `{f.path}` (expected shape {list(f.shape)})")
        got = tuple(tensors[f.path].shape)
        if got != f.shape:
            raise WeightsError(f"{path}: tensor `{f.path}` has shape {list(got)}, expected "
                               f"{list(f.shape)}")
        if not np.issubdtype(tensors[f.path].dtype, np.floating):
            raise WeightsError(f"{path}: tensor `{f.path}` has dtype {tensors[f.path].dtype}, "
                               "not a float (store F64, F32 or F16)")


def save_tensors(tensors: dict[str, np.ndarray], path: str) -> None:
    """Write a safetensors file atomically (artifact.write_atomic: checked, a temporary
    file, then a rename)."""
    from safetensors.numpy import save
    # np.require keeps a 0-d array 0-d (ℝ[]); np.ascontiguousarray would make it [1].
    data = save({k: np.require(v, requirements="C") for k, v in tensors.items()})
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise WeightsError(f"{path}: cannot write ({exc.strerror or exc})") from None
