"""psk-kernel-hoist-input-converts: an entry input read only in f32 is passed in f32.

An entry's inputs are f64 (the data the caller gives); a realization that reads one only
in f32 makes the hosts convert it on every call (`convert %batch.0 to %x_f32`). Where every
reader of an input is such a convert, the input itself becomes f32 and the converts go: the
caller rounds the data once, to nearest even as the converts would, when it binds the call
(the runtime's `NativeEntry`, from the input's `given` type; a native training step as it
gathers the batch), and a call of a bound entry reads the f32 data as it is. The same bits
in every call.

The converts need not be the entry host's own. With the calls kept (no --fuse-reductions)
an input reaches the called hosts as their argument, and each converts it where it reads
it: the scaled Tower's value and gradient converted its batch six times a call — the first
block's RMSNorm and residual in the forward, the norm again in the backward, the target
in the loss and its slope — through four levels of calls. So the pass narrows arguments
of any host, as a greatest fixed point over the calls: a host's f64 input argument is
narrowed when

* each of its uses is a `convert` of it into f32, into a fresh buffer nothing else writes
  (the buffer's readers then read the argument), or a call that hands it to a callee's
  argument that is narrowed too; and
* the host is the entry, or it is called, and every call gives it, at that place, an
  argument of the caller that is narrowed too.

The entry host records the inputs so narrowed in `rounded_inputs` (their names), which
`entry_signatures` turns into the buffers' `given` element (f64): what the caller may
pass. Only the native lowering runs this pass: the recorded module (`presk dump`, `presk
memory`'s steps, the interpreters, the C export) keeps its f64 inputs and their converts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (ArrayAttr, Float32Type, Float64Type, FunctionType,
                                   ModuleOp, StringAttr, f32)
from xdsl.ir import BlockArgument, SSAValue, Use
from xdsl.passes import ModulePass

from presk.dialects import kernel as K
from presk.kernel_abi.calling import ROUNDED_INPUTS
from presk.transforms.host_writes import Writes, call_sites, written_args
from presk.transforms.share_converts import written_only_by

Place = tuple[str, int]  # a host's name and the index of one of its arguments


def _is_f64(value: SSAValue) -> bool:
    return isinstance(value.type, K.BufferType) and isinstance(value.type.element, Float64Type)


def _narrowing_convert(use: Use, writes: Writes) -> K.ConvertOp | None:
    """`use`'s op when it converts all of the used buffer into a fresh f32 buffer that
    nothing else writes."""
    op = use.operation
    if not (isinstance(op, K.ConvertOp) and use.index == 0):
        return None
    dest = op.dest.type
    assert isinstance(dest, K.BufferType)
    if not (isinstance(dest.element, Float32Type) and written_only_by(op.dest, op, writes)):
        return None
    return op


def _candidates(hosts: dict[str, K.HostOp], calls: dict[str, list[K.CallOp]]
                ) -> Iterator[Place]:
    """Every f64 input argument of an entry or of a host that is called."""
    for name, host in hosts.items():
        if host.entry is not None or calls[name]:
            for arg in host.input_args:
                if _is_f64(arg):
                    yield name, arg.index


def _holds(place: Place, places: set[Place], hosts: dict[str, K.HostOp],
           calls: dict[str, list[K.CallOp]], writes: Writes) -> bool:
    """Whether the argument at `place` may be narrowed while every place of `places` is."""
    name, index = place
    host = hosts[name]
    for use in host.body.block.args[index].uses:
        op = use.operation
        if isinstance(op, K.CallOp):
            if (op.callee_name, use.index) not in places:
                return False
        elif _narrowing_convert(use, writes) is None:
            return False
    if host.entry is not None:
        return True
    for call in calls[name]:  # given an argument of the calling host itself
        given = call.arguments[index]
        caller = given.owner.parent_op() if isinstance(given, BlockArgument) else None
        if not (isinstance(caller, K.HostOp) and (caller.sym_name.data, given.index) in places):
            return False
    return True


def _narrowable(hosts: dict[str, K.HostOp], calls: dict[str, list[K.CallOp]],
                writes: Writes) -> set[Place]:
    """The arguments to narrow: the greatest set in which each holds (`_holds`)."""
    places = set(_candidates(hosts, calls))
    while failed := {p for p in places if not _holds(p, places, hosts, calls, writes)}:
        places -= failed
    return places


def _narrow(host: K.HostOp, index: int, writes: Writes) -> None:
    """The argument at `index` becomes f32; its converts' buffers are the argument."""
    block = host.body.block
    old = block.args[index]
    assert isinstance(old.type, K.BufferType)
    narrow = block.insert_arg(K.BufferType(f32, old.type.axes), index)
    for use in list(old.uses):
        convert = _narrowing_convert(use, writes)
        if convert is not None:
            alloc = convert.dest.owner
            convert.dest.replace_all_uses_with(narrow)
            convert.detach()
            convert.erase()
            alloc.detach()
            alloc.erase()
    old.replace_all_uses_with(narrow)  # the calls: their callees' arguments are f32 too
    block.erase_arg(old)


def hoist_input_converts(module: ModuleOp) -> int:
    """Every input read only in f32, down the calls, narrowed; how many arguments."""
    writes = Writes(module, written_args(module))
    hosts = K.hosts(module)
    places = _narrowable(hosts, call_sites(hosts), writes)
    for name, index in sorted(places):
        _narrow(hosts[name], index, writes)
    for name in {name for name, _ in places}:
        host = hosts[name]
        host.attributes["function_type"] = FunctionType.from_lists(
            [a.type for a in host.body.block.args], [])
        if host.entry is not None:
            before = host.attributes.get(ROUNDED_INPUTS)
            names = [s.data for s in before.data] if isinstance(before, ArrayAttr) else []
            names += [host.arg_name_list[i] for n, i in sorted(places) if n == name]
            host.attributes[ROUNDED_INPUTS] = ArrayAttr(StringAttr(n) for n in names)
    return len(places)


@dataclass(frozen=True)
class HoistInputConvertsPass(ModulePass):
    """`psk-kernel-hoist-input-converts`: an entry's input read only in f32 is passed in
    f32 (see the module docstring)."""

    name = "psk-kernel-hoist-input-converts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        hoist_input_converts(op)
