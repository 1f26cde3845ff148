"""An entry's arguments at concrete dims: weights and inputs from files or from a seed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import Float64Type, ModuleOp, TupleType
from xdsl.ir import Attribute

from ..dialects import core as C
from ..limits import require_memory
from ..shapes import TensorType
from .interpret import Tree
from .numbers import Numbers
from .weights import (
    Field, WeightsError, check_tensors, initial_weights, key_rng, load_tensors, tree_fields,
)


@dataclass
class Entry:
    """An entry function and what its arguments are made of."""

    func: C.FuncOp
    dims: dict[str, int]
    fields: list[Field]  # of its parameter-tree argument, if it has one
    inputs: dict[str, tuple[int, ...]]  # every tensor input by path (`batch.0`)


def find_entry(module: ModuleOp, name: str) -> C.FuncOp:
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
    if name not in funcs:
        known = ", ".join(funcs) or "none"
        raise WeightsError(f"no function `{name}` (the functions: {known})")
    return funcs[name]


def prepare(module: ModuleOp, name: str, dims: dict[str, int]) -> Entry:
    func = find_entry(module, name)
    missing = [d for d in func.dim_names if d not in dims]
    if missing:
        raise WeightsError(f"`{name}` needs " + " ".join(f"--dim {d}=N" for d in missing))
    unknown = [d for d in dims if d not in func.dim_names]
    if unknown:
        have = ", ".join(func.dim_names) or "none"
        raise WeightsError(f"`{name}` has no dim {', '.join(unknown)} (its dims: {have})")
    fields: list[Field] = []
    inputs: dict[str, tuple[int, ...]] = {}
    for arg_name, t in zip(func.arg_name_list, func.function_type.inputs.data):
        if isinstance(t, C.ParamsAttr):
            fields += tree_fields(module, t, dims)
        else:
            _inputs(arg_name, t, dims, inputs)
    entry = Entry(func, dims, fields, inputs)
    require_memory(argument_bytes(entry), f"the arguments of `{name}`{_at(dims)}")
    return entry


def _at(dims: dict[str, int]) -> str:
    return " at " + ", ".join(f"{k} = {v}" for k, v in dims.items()) if dims else ""


def argument_bytes(entry: Entry, bytes_per_real: int = 8) -> int:
    """What the entry's arguments (its parameters and inputs) take as f64 arrays: less
    than any engine needs to run it, so a call refused on these bytes would never fit."""
    reals = sum(math.prod(f.shape) for f in entry.fields)
    reals += sum(math.prod(s) for s in entry.inputs.values())
    return reals * bytes_per_real


def _inputs(path: str, t: Attribute, dims: dict[str, int], out: dict) -> None:
    if isinstance(t, TupleType):
        for i, item in enumerate(t.types.data):
            _inputs(f"{path}.{i}", item, dims, out)
    elif isinstance(t, C.TensorAttr):
        out[path] = _concrete_shape(path, t.shape, dims)
    elif isinstance(t, Float64Type):
        raise WeightsError(f"the entry's argument `{path}` is an f64: call the entry from a "
                           "function that passes it")
    else:
        raise WeightsError(f"the entry's argument `{path}` has type {t}, which cannot be given")


def _concrete_shape(path: str, t: TensorType, dims: dict[str, int]) -> tuple[int, ...]:
    if t.prefix:
        raise WeightsError(f"the entry's argument `{path}` is {t}: its `...` has no value; "
                           "call the entry from a function with fixed axes")
    out = []
    for a in t.axes:
        size = dims.get(a.size, a.size) if isinstance(a.size, str) else a.size
        if not isinstance(size, int):
            raise WeightsError(f"the size `{a.size}` of `{path}` needs --dim {a.size}=N")
        out.append(size)
    return tuple(out)


def weights(entry: Entry, seed: int, path: str | None) -> dict[str, np.ndarray]:
    if path is None:
        return initial_weights(entry.fields, seed)
    tensors = load_tensors(path)
    check_tensors(tensors, entry.fields, path)
    return {f.path: np.asarray(tensors[f.path], dtype=np.float64) for f in entry.fields}


def require_finite(tensors: dict[str, np.ndarray], what: str, why: str) -> None:
    """Refuse (WeightsError, one line) the first tensor holding a NaN or an infinity:
    `why` says what cannot be computed at such a point."""
    for name, array in tensors.items():
        bad = ~np.isfinite(np.asarray(array, dtype=np.float64))
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            value = float(np.asarray(array, dtype=np.float64)[index])
            raise WeightsError(f"{what} `{name}` holds {value} at {list(index)}: {why}")


def inputs(entry: Entry, seed: int, path: str | None) -> dict[str, np.ndarray]:
    """Inputs from a file where it has them, the rest standard normal from the seed."""
    given = load_tensors(path) if path is not None else {}
    unknown = sorted(set(given) - set(entry.inputs))
    if unknown:
        raise WeightsError(f"{path}: `{unknown[0]}` is not an input of the entry (its inputs: "
                           + ", ".join(entry.inputs) + ")")
    out = {}
    for name, shape in entry.inputs.items():
        if name in given:
            if tuple(given[name].shape) != shape:
                raise WeightsError(f"{path}: input `{name}` has shape {list(given[name].shape)}, "
                                   f"expected {list(shape)}")
            if not np.issubdtype(given[name].dtype, np.floating):
                raise WeightsError(f"{path}: input `{name}` has dtype {given[name].dtype}, "
                                   "not a float (store F64, F32 or F16)")
            out[name] = np.asarray(given[name], dtype=np.float64)
        else:
            out[name] = key_rng("input", seed, name).standard_normal(shape)
    return out


def arguments(entry: Entry, numbers: Numbers, params: dict[str, np.ndarray],
              values: dict[str, np.ndarray]) -> list:
    """The entry's arguments in a number system."""
    if numbers.bytes_per_real > 8:
        require_memory(argument_bytes(entry, numbers.bytes_per_real),
                       f"the arguments of `{entry.func.sym_name.data}`{_at(entry.dims)} in "
                       f"{numbers.name}")
    with numbers.context():
        args = []
        for name, t in zip(entry.func.arg_name_list, entry.func.function_type.inputs.data):
            if isinstance(t, C.ParamsAttr):
                args.append(Tree({k: numbers.array(v) for k, v in params.items()}))
            else:
                args.append(_argument(name, t, numbers, values))
        return args


def _argument(path: str, t: Attribute, numbers: Numbers, values: dict[str, np.ndarray]):
    if isinstance(t, TupleType):
        return tuple(_argument(f"{path}.{i}", item, numbers, values)
                     for i, item in enumerate(t.types.data))
    return numbers.array(values[path])


def flatten_result(value, path: str = "result") -> dict[str, object]:
    """A result's tensors by path: a tuple's items `.0`, `.1`…, a tree's tensors by their
    paths in it (`result.blocks.proj.w`, the gradient `grad(loss)` returns)."""
    if isinstance(value, Tree):
        return {f"{path}.{p}": v for p, v in value.items()}
    if isinstance(value, tuple):
        out: dict[str, object] = {}
        for i, v in enumerate(value):
            out.update(flatten_result(v, f"{path}.{i}"))
        return out
    return {path: value}


def flatten_gradient(entry: Entry, grad) -> dict[str, object]:
    """The gradient in the entry's first argument, keyed `grad.<path>`."""
    if isinstance(grad, Tree):
        return {f"grad.{path}": value for path, value in grad.items()}
    name = entry.func.arg_name_list[0]
    return flatten_result(grad, f"grad.{name}")


def result_shape(entry: Entry) -> tuple[int, ...]:
    """The shape of the entry's result, a tensor (() for ℝ[]); a tuple result is refused
    (its cotangent and its sensitivities are not defined here)."""
    t = entry.func.result_type
    if not isinstance(t, C.TensorAttr):
        raise WeightsError(f"`{entry.func.sym_name.data}` returns {t}: a cotangent, the "
                           "sensitivities and the bounds are defined for one tensor result "
                           "(a tuple is not one yet)")
    return _concrete_shape("result", t.shape, entry.dims)


def cotangent(entry: Entry, spec: str | None) -> np.ndarray:
    """The cotangent seed of `presk run --grad`, what multiplies the result: 1 for a
    scalar result (ℝ[]) when `spec` is None; else `spec` — a number (every element that
    value) or a safetensors file holding one tensor, `result`, of the result's shape."""
    shape = result_shape(entry)
    name = entry.func.sym_name.data
    if spec is None:
        if shape:
            raise WeightsError(
                f"`{name}` returns a tensor of shape {list(shape)}: --grad differentiates "
                f"⟨cotangent, result⟩, give it with --cotangent (a number for every element, "
                f"or a safetensors file with `result` of shape {list(shape)})")
        return np.ones(())
    try:
        value = float(spec)
    except ValueError:
        value = None
    if value is not None:
        if not np.isfinite(value):
            raise WeightsError(f"--cotangent {spec}: a finite number")
        return np.full(shape, value)
    tensors = load_tensors(spec)
    if set(tensors) != {"result"}:
        raise WeightsError(f"{spec}: a cotangent file holds one tensor, `result`, not "
                           + ", ".join(f"`{k}`" for k in sorted(tensors)))
    array = np.asarray(tensors["result"], dtype=np.float64)
    if array.shape != shape:
        raise WeightsError(f"{spec}: `result` has shape {list(array.shape)}, the result "
                           f"{list(shape)}")
    if not np.all(np.isfinite(array)):
        raise WeightsError(f"{spec}: `result` holds a non-finite number")
    return array
