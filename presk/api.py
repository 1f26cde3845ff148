"""Presk from Python: load a program, make its initial weights, compile an entry and call
it on numpy arrays or torch tensors, calibrate, solve and train — what the command line
does, on the library below it (presk/pipeline/, presk/train/), never through the
command-line layer (cli/).

    prog = presk.load("tutorial/07_train.psk")
    params = prog.init("loss", B=4)                   # {path: float64 array}
    f = prog.compile("loss", B=4, grad=True)          # native code, compiled once
    value, grads = f(params, (x, y))                  # grads: {path: array}

A compiled entry binds its native buffers once. A call hands the native code the
caller's own arrays where their dtype, shape and layout are the buffer's (C-contiguous,
the buffer's storage dtype: float64 for f64, float32 for f32, uint16 bits or
torch.bfloat16 for bf16) — no copy; anything else is converted (rounded to nearest even)
into the bound buffer. An array seen at the previous call (the same object) is not
checked again. Every argument is checked before the native code runs: a wrong key,
shape or dtype is a `PreskError` naming the argument, never a crash.

Every failure the user can fix is a `PreskError` whose `diagnostic` is what the command
line would print (`file:line:col: error[E…]: …` with the line and a caret, or one line).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .pipeline.errors import InvalidProgram, PipelineError


class PreskError(Exception):
    """A failure the user can fix. `diagnostic` is the whole message (a diagnostic with
    its place, line and caret, or one line); `kind` is "input" (what the command line
    exits 2 for) or "program" (exit 1)."""

    def __init__(self, diagnostic: str, kind: str = "input"):
        super().__init__(diagnostic)
        self.diagnostic = diagnostic
        self.kind = kind


def _user_errors() -> tuple[type[BaseException], ...]:
    """The library's one-line errors (each names the file, argument or field)."""
    from .analysis.envelope import EnvelopeError
    from .analysis.realization import RealizationError
    from .analysis.sensitivity import SensitivityError
    from .analysis.solver import SolveError
    from .analysis.weights import WeightsError
    from .limits import ResourceError
    from .runtime.entry import RuntimeCallError
    from .train.checkpoint import CheckpointError
    from .train.data import DataError
    from .train.loop import LogError
    return (WeightsError, EnvelopeError, RealizationError, SensitivityError, SolveError,
            CheckpointError, DataError, LogError, RuntimeCallError, ResourceError)


@contextlib.contextmanager
def _reported() -> Iterator[None]:
    """The library's failures as PreskError, with the text the command line prints."""
    try:
        yield
    except PipelineError as exc:
        raise PreskError(str(exc), "program" if isinstance(exc, InvalidProgram)
                         else "input") from None
    except PreskError:
        raise
    except Exception as exc:
        if isinstance(exc, _user_errors()):
            text = str(exc)
            raise PreskError(text if text.startswith("presk") else f"presk: {text}") \
                from None
        raise


def load(path: str | os.PathLike[str]) -> Program:
    """A .psk program (elaborated and lowered to PSK-Core) or a PSK-Core .mlir file. Its
    warnings, rendered with their lines, are `Program.warnings`."""
    from .pipeline import load_core
    path = os.fspath(path)
    warnings: list[str] = []
    with _reported():
        core, program = load_core(path, warnings.append)
    return Program(path, core, program, warnings)


@dataclass
class Program:
    """A loaded program: its PSK-Core module and (for a .psk file) the elaborated
    program. Each method takes the entry's dims as keywords (`B=4`)."""

    path: str
    core: Any  # the PSK-Core ModuleOp
    elaborated: Any  # presk.frontend.program.Program, None for an .mlir file
    warnings: list[str]

    # ---- arguments ----
    def init(self, entry: str | None = None, *, seed: int = 0, **dims: int
             ) -> dict[str, np.ndarray]:
        """The entry's initial weights by parameter path (float64), as `presk init`
        draws them from `seed`; without `entry`, the training run's objective at the
        run's dims (unless given)."""
        from .analysis import entry as E
        if entry is None:
            training = self.training()
            entry, dims = training.objective.name, dims or dict(training.dims)
        with _reported():
            return E.weights(self._prepare(entry, dims), seed, None)

    def sample_inputs(self, entry: str, *, seed: int = 0, **dims: int) -> tuple:
        """The entry's arguments after its parameter tree, as `presk run --seed` draws
        them (standard normal, one key per argument path), shaped as the entry takes them:
        for `loss(θ, batch : (x, y))` the 1-tuple `((x, y),)`."""
        from .analysis import entry as E
        with _reported():
            prepared = self._prepare(entry, dims)
            values = E.inputs(prepared, seed, None)
        return tuple(_nest(name, t, values) for name, t in _value_arguments(prepared))

    def _prepare(self, entry: str, dims: Mapping[str, int]):
        from .pipeline import prepare
        with _reported():
            return prepare(self.core, entry, dict(dims))

    def training(self, run: str | None = None):
        """The program's `training run` (presk.frontend.program.TrainingInfo): `run` by
        name, or its only one."""
        runs = self.elaborated.main.trainings if self.elaborated is not None else {}
        if run is None and len(runs) != 1:
            what = "no `training` run" if not runs else f"several runs ({', '.join(runs)})"
            raise PreskError(f"presk: {self.path} has {what}: name one")
        name = run or next(iter(runs))
        if name not in runs:
            raise PreskError(f"presk: no training run `{name}` (the runs: {', '.join(runs)})")
        return runs[name]

    # ---- native code ----
    def compile(self, entry: str, *, realize=None, grad: bool = False,
                remat: str = "store", plan=None, cache: bool = True, copy: bool = True,
                **dims: int) -> Compiled:
        """The entry at `dims` under `realize` (None: all f64; a path, `@path`, inline
        JSON, a Realization, or a Solution of `solve`) and the layout `plan` (None: the
        default layouts; a `presk-plan/1` path or `@path`, passed to the pipeline),
        compiled to native code (or taken from the on-disk cache), its buffers bound once.
        With `grad`, a call returns the value and the gradient tree (`remat`: what the
        forward sweep keeps). `copy=False`: a tensor result and the gradients are views
        of the entry's output buffers (read-only), which the next call overwrites."""
        return Compiled(self, entry, dict(dims), _realization(realize), grad, remat, plan,
                        cache, copy)

    # ---- precision ----
    def calibrate(self, entry: str, *, bits: int = 128, samples: int = 1, seed: int = 0,
                  weights: str | None = None, inputs: str | None = None, **dims: int):
        """The envelope (presk.analysis.envelope.Envelope), as `presk calibrate` measures
        it: the entry run in MPFR at `bits` over `samples` samples. `envelope.to_json()` is
        what `--out` writes; `presk.analysis.envelope.save_envelope` writes it."""
        from .analysis.envelope import calibrate
        with _reported():
            self._prepare(entry, dims)
            return calibrate(self.core, entry, dims, bits, samples, seed, weights, inputs)

    def solve(self, envelope, *, budget: float, bits: int = 128, seed: int | None = None,
              weights: str | None = None, inputs: str | None = None):
        """The cheapest float type per stored value under `budget` (relative to the
        output), measured against MPFR, as `presk solve` finds it (the entry, dims, seed,
        weights and inputs are the envelope's unless given). The Solution's `realization`
        is what `--out` writes; `inside` whether the measured error is under the budget;
        `compile(realize=solution)` compiles it."""
        from .analysis import entry as E
        from .analysis.envelope import Envelope, load_envelope
        from .analysis.solver import solve
        if not (isinstance(budget, (int, float)) and 0 < budget < 1):
            raise PreskError(f"presk: budget {budget!r}: a budget is a relative error in "
                             "(0, 1)")
        if budget < 2.0 ** -(bits - 2):
            raise PreskError(f"presk: budget {budget:g} is below what the {bits}-bit exact "
                             "reference resolves: raise bits or the budget")
        with _reported():
            env = envelope if isinstance(envelope, Envelope) else load_envelope(envelope)
            dims = {k: int(v) for k, v in env.dims.items()}
            seed = (env.seed() or 0) if seed is None else seed
            prepared = self._prepare(env.entry, dims)
            params = E.weights(prepared, seed, weights or env.weights_file())
            values = E.inputs(prepared, seed, inputs or env.inputs_file())
            return solve(self.core, env.entry, dims, env, budget, params, values, seed, bits)

    # ---- training ----
    def train(self, run: str | None = None, *, out: str | os.PathLike[str],
              resume: bool = False, steps: int | None = None, epochs: int | None = None,
              seed: int = 0, weights: str | None = None, realize=None,
              remat: str = "store"):
        """Run the program's training run into the directory `out`, as `presk train --out
        out --quiet` does (the same steps, log.csv, checkpoints and loss.png, bit for bit);
        `resume=True` continues the run of `out` from its newest whole checkpoint, as
        `presk train --resume out`. Returns the Trainer (presk.train.loop): its `params`,
        `history` (the steps' losses and learning rates), `step`."""
        from .train.checkpoint import checkpoints
        from .train.loop import LOG, PLOT, LogWriter, Trainer, plot, resume_run, run_steps
        from .train.loop import saved_total
        training = self.training(run)
        directory = os.fspath(out)
        with _reported():
            if resume:
                if not os.path.isdir(directory):
                    raise PreskError(f"presk: {directory}: no such run directory")
                if steps is None and epochs is None:
                    steps = saved_total(directory, training)
            trainer = Trainer.create(self.core, training, directory, seed=seed,
                                     weights=weights, realization=_realization(realize),
                                     remat=remat, epochs=epochs, steps=steps)
            if resume:
                resume_run(trainer, lambda m: None)
            elif trainer.checkpoint_dir and checkpoints(trainer.checkpoint_dir):
                raise PreskError(f"presk: {directory} holds a run already: resume it, or "
                                 "train into another directory")
            os.makedirs(directory, exist_ok=True)
            try:
                run_steps(trainer, LogWriter(os.path.join(directory, LOG), trainer.history))
            finally:
                trainer.stream.close()
            plot(trainer.history, os.path.join(directory, PLOT),
                 f"{training.name}: {training.objective.name}")
        return trainer


def _realization(spec):
    """A Solution stands for its realization; anything else is the pipeline's spec."""
    return getattr(spec, "realization", spec) if spec is not None else None


# --------------------------------------------------------------------------------------
# An entry's arguments as the caller gives them
# --------------------------------------------------------------------------------------


def _value_arguments(prepared) -> list[tuple[str, Any]]:
    """The entry's arguments after its parameter tree: (name, Core type)."""
    from .dialects import core as C
    func = prepared.func
    return [(n, t) for n, t in zip(func.arg_name_list, func.function_type.inputs.data)
            if not isinstance(t, C.ParamsAttr)]


def _leaf_paths(name: str, t: Any) -> list[tuple[str, tuple[int, ...]]]:
    """(argument path, index into the argument) of each tensor of one argument."""
    from xdsl.dialects.builtin import TupleType
    if isinstance(t, TupleType):
        return [(path, (i, *index)) for i, item in enumerate(t.types.data)
                for path, index in _leaf_paths(f"{name}.{i}", item)]
    return [(name, ())]


def _nest(name: str, t: Any, values: Mapping[str, np.ndarray]):
    from xdsl.dialects.builtin import TupleType
    if isinstance(t, TupleType):
        return tuple(_nest(f"{name}.{i}", item, values) for i, item in enumerate(t.types.data))
    return values[name]


def _is_torch(x: object) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _torch_storage(t) -> np.ndarray:
    """A CPU tensor's numpy view, no copy (bf16 as its uint16 bits); another device's
    tensor copied to the CPU."""
    import torch
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


class _Slot:
    """One input buffer of the native entry, and the buffer the entry owns for it (filled
    when the caller's array does not fit)."""

    __slots__ = ("name", "shape", "element", "dtype", "index", "buffer", "pointer", "keep")

    def __init__(self, name: str, shape: tuple[int, ...], element: str, index: int,
                 buffer: np.ndarray):
        from .runtime.buffers import storage_dtype
        self.name, self.shape, self.element, self.index = name, shape, element, index
        self.dtype = storage_dtype(element)
        self.buffer, self.pointer = buffer, buffer.ctypes.data
        self.keep: np.ndarray | None = None  # a tensor's numpy view, kept alive

    def take(self, value: object, argv, where: str, outputs: Sequence[np.ndarray]) -> int:
        """Point argv at `value` in place when it fits (its pointer returned: a tensor's
        data pointer, 1 for an array), else convert it into the buffer (0 returned). An
        array over one of the entry's `outputs` (a result of `copy=False`) is copied: the
        call writes there while it reads its inputs."""
        torch_value = type(value) is not np.ndarray and _is_torch(value)
        array = _torch_storage(value) if torch_value else value
        if not isinstance(array, np.ndarray):
            if isinstance(array, (int, float)) and not isinstance(array, bool):
                array = np.asarray(array, dtype=np.float64)
            else:
                raise PreskError(f"presk: {where} `{self.name}` is a "
                                 f"{type(value).__name__}, not an array")
        if array.shape != self.shape:
            raise PreskError(f"presk: {where} `{self.name}` has shape {list(array.shape)}, "
                             f"the entry takes {list(self.shape)}")
        flags = array.flags
        if array.dtype == self.dtype and flags.c_contiguous and flags.aligned and not any(
                np.may_share_memory(array, out) for out in outputs):
            argv[self.index] = _address(array)
            self.keep = array if torch_value else None
            return value.data_ptr() if torch_value else 1  # type: ignore[attr-defined]
        if array.dtype == np.uint16 and not (torch_value or self.element == "bf16"):
            raise PreskError(f"presk: {where} `{self.name}` has dtype uint16: bf16 bits "
                             f"go to a bf16 buffer only, this one is {self.element}")
        if array.dtype != np.uint16 and not np.issubdtype(array.dtype, np.floating):
            raise PreskError(f"presk: {where} `{self.name}` has dtype {array.dtype}, not a "
                             "float")
        from .runtime.buffers import to_storage
        np.copyto(self.buffer, to_storage(array, self.element))
        argv[self.index] = self.pointer
        self.keep = None
        return 0


def _address(array: np.ndarray) -> int:
    """A C-contiguous array's data pointer: through the buffer protocol where it is
    writable (a third of what `ndarray.ctypes.data` costs), else by `ctypes.data`."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only
        return array.ctypes.data


def _gatherers(paths: Sequence[str], leaves: Sequence[tuple[int, ...]], n_args: int):
    """Two generated functions of subscripts (as `collections.namedtuple` generates its
    class), so that a call pays no loop, closure or dict of its own:
    `gather(params, args)`, the tuple of every input array (the parameters by path, then
    the arguments' leaves by index), and `same(params, args, last)`, whether the counts
    are the entry's and every array is the object of `last` (the last call's). The paths
    are passed as constants (`k0`…), never pasted as text."""
    items = [f"p[k{i}]" for i in range(len(paths))]
    items += ["a" + "".join(f"[{int(i)}]" for i in index) for index in leaves]
    same = [f"len(p) == {len(paths)}", f"len(a) == {int(n_args)}"]
    same += [f"{item} is l[{k}]" for k, item in enumerate(items)]
    namespace = {f"k{i}": path for i, path in enumerate(paths)}
    exec(f"def gather(p, a):\n    return ({', '.join(items)}{',' if items else ''})\n"
         f"def same(p, a, l):\n    return {' and '.join(same)}\n", namespace)
    return namespace["gather"], namespace["same"]


class Compiled:
    """A compiled entry: `f(params, *args)` → the value, or with grad (value, gradient
    tree). `params` maps every parameter path to an array; `args` are the entry's other
    arguments in order, a tuple where the entry takes one (`(x, y)` for `batch`); a
    tensor result's gradient needs `cotangent=` (the seed of ⟨c, result⟩). The results
    are new float64 arrays (a Python float for an ℝ[] value), torch tensors when the
    parameters are; with `copy=False`, read-only views of the output buffers (the same
    objects at every call: the next call overwrites them)."""

    def __init__(self, program: Program, entry: str, dims: dict[str, int], realization,
                 grad: bool, remat: str, plan, cache: bool, copy: bool = True):
        from .analysis import entry as E
        from .pipeline import compile_call, entry_call
        self.entry, self.dims, self.grad, self.copy = entry, dims, grad, copy
        prepared = program._prepare(entry, dims)
        self.paths = [f.path for f in prepared.fields]
        shape = None
        with _reported():
            if grad:
                shape = E.result_shape(prepared)
            params = {f.path: np.zeros(f.shape) for f in prepared.fields}
            values = {n: np.zeros(s) for n, s in prepared.inputs.items()}
            call = entry_call(program.core, entry, dims, params, values, realization, True,
                              grad, remat, None if not shape else np.ones(shape), plan)
            self.native_program, self.native = compile_call(call, cache)
        self.call, self.result_shape = call, shape
        self.realization_name = call.pipeline.realization_name
        self._plan_inputs(prepared)
        self._plan_outputs()
        self._call = self.native.function
        self._argv_address = ctypes.addressof(self._argv)
        self._arena = self.native.arena.ctypes.data

    def _plan_inputs(self, prepared) -> None:
        """The input slots in the order a call gathers them (the parameters by path, then
        the arguments' leaves), their getters, and argv pointing at the entry's own
        buffers (the cotangent's holding 1)."""
        call, sig = self.call, self.native.sig
        # the entry's own buffers, in its types (an input the lowering narrowed to f32 is
        # one: psk-kernel-hoist-input-converts)
        inputs = self.native.check_inputs(call.inputs)
        slots = {b.name: _Slot(b.name, b.shape, b.element, i, a)
                 for i, (b, a) in enumerate(zip(sig.inputs, inputs))}
        by_path = {n.partition(".")[2]: slot for n, slot in slots.items()
                   if n not in prepared.inputs and n.partition(".")[2] in set(self.paths)}
        for path, slot in by_path.items():
            slot.name = path  # named as the caller's key (`θ.w` is the entry's name)
        arguments = _value_arguments(prepared)
        leaves = [(path, (k, *index)) for k, (name, t) in enumerate(arguments)
                  for path, index in _leaf_paths(name, t)]
        self._slots = [by_path[p] for p in self.paths] + [slots[p] for p, _ in leaves]
        self._where = ["parameter"] * len(self.paths) + ["argument"] * len(leaves)
        self._leaves = leaves
        self._gather, self._same = _gatherers(self.paths, [index for _, index in leaves],
                                              len(arguments))
        self._n_args, self._n_params = len(arguments), len(self.paths)
        self._last: list[object] = [None] * len(self._slots)  # read in place at the last call
        self._pointers = [0] * len(self._slots)  # a tensor's data pointer then (1: an array)
        self._torch_in = self._torch_out = False  # a tensor read in place; tensors given
        self._cotangent = slots[sig.inputs[-1].name] if self.grad else None
        self._one = inputs[-1].ctypes.data if self.grad else 0
        self._seed_moved = bool(self.result_shape)  # a tensor result: the caller seeds it
        self._argv = (ctypes.c_void_p * len(sig.args))(*[a.ctypes.data for a in inputs])
        self._inputs = inputs  # argv points into them

    def _plan_outputs(self) -> None:
        """The output buffers (bound once, after the inputs in argv) and how a call reads
        them: the value a Python float (ℝ[]) or an array, the gradients arrays — new ones
        (a copy, or bf16 and f32 widened exactly to float64), or with `copy=False` and
        float64 buffers read-only views made once here, so that a call reads nothing."""
        from .runtime.buffers import empty, to_f64
        sig, names = self.native.sig, self.call.output_names
        self.outputs = [empty(b) for b in sig.outputs]
        for k, out in enumerate(self.outputs):
            self._argv[len(sig.inputs) + k] = out.ctypes.data
        wide = all(b.element == "f64" for b in sig.outputs)
        self._views = not self.copy and wide  # else a new array per result and call
        convert = np.ndarray.copy if wide else to_f64
        grads = [self.outputs[names.index(f"grad.{p}")] for p in self.paths] \
            if self.grad else []
        r = self._result = self.outputs[names.index("result")]
        self._torch_views: tuple | None = None  # the same buffers as tensors, made once
        if self._views:
            views = dict(zip(self.paths, [_read_only(g) for g in grads]))
            result = _read_only(r)
            self._read_grads = views.copy  # a new dict of the same views
            array_value = lambda: result  # noqa: E731
        else:
            self._read_grads = lambda: dict(zip(self.paths, [convert(g) for g in grads]))
            array_value = functools.partial(convert, r)
        value = self._value = (r.item if r.dtype == np.float64 else
                               lambda: float(to_f64(r))) if r.ndim == 0 else array_value
        read_grads = self._read_grads
        self._read_numpy = (lambda: (value(), read_grads())) if self.grad else value
        self._read = self._read_numpy  # the results' reader: numpy, or tensors (_take)
        self._grad_buffers = grads

    @property
    def parameters(self) -> list[str]:
        return list(self.paths)

    def bare(self):
        """The native call on the bound buffers, nothing checked or converted: what a call
        costs without the API (bench/api.py times both)."""
        return functools.partial(self._call, self._argv_address, self._arena)

    def __call__(self, params: Mapping[str, Any], *args: Any, cotangent=None):
        # The fast path — the arrays of the last call, an ℝ[] result, numpy — is one
        # identity test per array (`same`), the native call and the results' reading.
        try:
            same = self._same(params, args, self._last)
            if not same or self._torch_in:
                given = self._gather(params, args)
        except (KeyError, IndexError, TypeError):
            raise self._refusal(params, args) from None
        if not same or self._torch_in:
            if len(params) != self._n_params or len(args) != self._n_args:
                raise self._refusal(params, args)
            self._take(given, args)
        if cotangent is not None or self._seed_moved:
            self._seed(cotangent)
        self._call(self._argv_address, self._arena)
        return self._read()

    def _seed(self, cotangent) -> None:
        """The cotangent into its slot; None: the bound 1 of an ℝ[] result."""
        slot = self._cotangent
        if slot is None:
            raise PreskError(f"presk: `{self.entry}` is compiled without grad: it takes no "
                             "cotangent")
        if cotangent is not None:
            slot.take(cotangent, self._argv, "the cotangent", self.outputs)
            self._seed_moved = True
        elif self.result_shape:
            raise PreskError(f"presk: `{self.entry}` returns a tensor of shape "
                             f"{list(self.result_shape)}: its gradient needs cotangent=")
        else:
            self._argv[slot.index] = self._one
            self._seed_moved = False

    def _take(self, given: tuple, args: tuple) -> None:
        """Check and bind each value not read in place at the last call (a tensor read in
        place is checked again: its storage may have moved)."""
        last, pointers, argv = self._last, self._pointers, self._argv
        for k, (slot, value) in enumerate(zip(self._slots, given)):
            if value is last[k] and (pointers[k] <= 1 or
                                     value.data_ptr() == pointers[k]):  # type: ignore
                continue
            if k >= len(self.paths):
                self._check_nesting(args, self._leaves[k - len(self.paths)])
            pointers[k] = slot.take(value, argv, self._where[k], self.outputs)
            last[k] = value if pointers[k] else None
        self._torch_in = max(pointers, default=0) > 1
        self._torch_out = bool(self.paths) and type(given[0]) is not np.ndarray \
            and _is_torch(given[0])
        self._read = self._torch_results if self._torch_out else self._read_numpy

    def _check_nesting(self, args: tuple, leaf: tuple[str, tuple[int, ...]]) -> None:
        """A PreskError where the arguments lack the tuple the leaf `path` sits in."""
        path, index = leaf
        value = args[index[0]]
        for depth, i in enumerate(index[1:], 1):
            if not isinstance(value, (tuple, list)) or len(value) <= i:
                where = ".".join(path.split(".")[:depth])
                if not isinstance(value, (tuple, list)):
                    raise PreskError(f"presk: argument `{path}`: the entry takes a tuple at "
                                     f"`{where}`, got a {type(value).__name__}")
                raise PreskError(f"presk: argument `{path}`: the tuple `{where}` has "
                                 f"{len(value)} element(s)")
            value = value[i]

    def _refusal(self, params, args) -> PreskError:
        """Why the parameters or arguments could not be gathered."""
        if not isinstance(params, Mapping):
            return PreskError(f"presk: the parameters of `{self.entry}` are a "
                              f"{type(params).__name__}, not a mapping of path to array")
        paths = ", ".join(self.paths)
        missing = [p for p in self.paths if p not in params]
        if missing:
            return PreskError(f"presk: no parameter `{missing[0]}` in the parameters of "
                              f"`{self.entry}` (its paths: {paths})")
        extra = sorted(set(params) - set(self.paths))
        if extra:
            return PreskError(f"presk: `{extra[0]}` is no parameter of `{self.entry}` (its "
                              f"paths: {paths})")
        if len(args) != self._n_args:
            return PreskError(f"presk: `{self.entry}` takes {self._n_args} argument(s) "
                              f"after its parameters, got {len(args)}")
        for leaf in self._leaves:
            try:
                self._check_nesting(args, leaf)
            except PreskError as exc:
                return exc
        return PreskError(f"presk: the arguments of `{self.entry}` do not fit it")

    def _torch_results(self):
        """The results as tensors: new ones, or with `copy=False` tensors over the output
        buffers (made at the first call that needs them; torch has no read-only tensor)."""
        if not self._views:
            value = _as_torch(self._value())
            if not self.grad:
                return value
            return value, {p: _as_torch(g) for p, g in self._read_grads().items()}
        if self._torch_views is None:
            import torch
            self._torch_views = (torch.from_numpy(self._result),
                                 [torch.from_numpy(g) for g in self._grad_buffers])
        result, grads = self._torch_views
        value = _as_torch(self._value()) if self._result.ndim == 0 else result
        return (value, dict(zip(self.paths, grads))) if self.grad else value


def _as_torch(x):
    import torch
    return torch.from_numpy(x) if isinstance(x, np.ndarray) else torch.tensor(
        x, dtype=torch.float64)


def _read_only(array: np.ndarray) -> np.ndarray:
    """A view of `array` that cannot be written through (the buffer itself stays
    writable: the native code writes it)."""
    view = array.view()
    view.flags.writeable = False
    return view


__all__ = ["Compiled", "PreskError", "Program", "load"]
