"""psk-kernel-hoist-input-converts: an entry input read only in f32 is passed in f32.

An entry's inputs are f64 (the data the caller gives); a realization that reads one only
in f32 makes the entry host convert it on every call (`convert %batch.0 to %x_f32`, after
psk-kernel-share-converts at most once per type): the scaled Tower's batch, 1024 × 256 ×
2, cost a fifth of its forward in f32. Where an entry host's input is read by nothing but
one `convert` into f32, the input itself becomes f32 and the convert goes: the caller
rounds the data once, to nearest even as the convert would, when it binds the call (the
runtime's `NativeEntry`, from the input's `given` type), and a call of a bound entry reads
the f32 data as it is. The same bits in every call.

Only a convert in the entry host counts: an input handed to a called host (the tutorial
recorded without --fuse-reductions, its calls kept) is that host's argument, converted
there, and stays f64.

The host records the inputs it so narrowed in `rounded_inputs` (their names), which
`entry_signatures` turns into the buffers' `given` element (f64): what the caller may
pass. Only the native lowering runs this pass: the recorded module (`presk dump`, `presk
memory`'s steps, the interpreters, the C export) keeps its f64 inputs and their converts.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (ArrayAttr, Float32Type, Float64Type, FunctionType,
                                   ModuleOp, StringAttr)
from xdsl.ir import BlockArgument
from xdsl.passes import ModulePass

from presk.dialects import kernel as K
from presk.kernel_abi.calling import ROUNDED_INPUTS
from presk.transforms.host_writes import Writes
from presk.transforms.share_converts import written_only_by


def _sole_convert(arg: BlockArgument, writes: Writes) -> K.ConvertOp | None:
    """The one op reading `arg` when it is a convert of all of it from f64 into f32,
    into a fresh buffer nothing else writes (an input is only read)."""
    uses = list(arg.uses)
    if len(uses) != 1:
        return None
    op = uses[0].operation
    if not (isinstance(op, K.ConvertOp) and op.source is arg):
        return None
    a, b = op.source.type, op.dest.type
    assert isinstance(a, K.BufferType) and isinstance(b, K.BufferType)
    if not (isinstance(a.element, Float64Type) and isinstance(b.element, Float32Type)
            and written_only_by(op.dest, op, writes)):
        return None
    return op


def hoist_host(host: K.HostOp, writes: Writes) -> list[str]:
    """Narrow the entry host's inputs read only through one f32 convert; their names."""
    block = host.body.block
    names = host.arg_name_list
    done = []
    for index, arg in enumerate(host.input_args):
        convert = _sole_convert(arg, writes)
        if convert is None:
            continue
        narrow = block.insert_arg(convert.dest.type, index)
        old = block.args[index + 1]
        alloc = convert.dest.owner
        convert.dest.replace_all_uses_with(narrow)
        convert.detach()
        convert.erase()
        alloc.detach()
        alloc.erase()
        block.erase_arg(old)
        done.append(names[index])
    if done:
        host.attributes["function_type"] = FunctionType.from_lists(
            [a.type for a in block.args], [])
        host.attributes[ROUNDED_INPUTS] = ArrayAttr(StringAttr(n) for n in done)
    return done


def hoist_input_converts(module: ModuleOp) -> int:
    """Every entry host's inputs read only in f32, narrowed; how many."""
    writes = Writes(module)
    return sum(len(hoist_host(h, writes)) for h in K.hosts(module).values()
               if h.entry is not None)


@dataclass(frozen=True)
class HoistInputConvertsPass(ModulePass):
    """`psk-kernel-hoist-input-converts`: an entry's input read only in f32 is passed in
    f32 (see the module docstring)."""

    name = "psk-kernel-hoist-input-converts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        hoist_input_converts(op)
