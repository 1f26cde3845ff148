"""The native lowering's first passes on a real program, the scaled Tower's value and
gradient (unfused, all f32, calls kept; recorded once, test/programs.py `scaled_call`):

* psk-kernel-forward-copies: it hands its residuals back as copies through four levels of
  hosts; the native lowering removes every one;
* psk-kernel-hoist-input-converts: it converts its batch and its seed into f32 in the
  hosts it calls, six converts down four levels of calls; the lowering narrows every f64
  argument instead, and the entry's batch and seed become inputs the caller rounds once
  (`given` f64);

and its code computes the kernel interpreter's bits on the recorded module, copies,
converts and all."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Float64Type

from presk.analysis.kernel_interpret import KernelInterpreter
from presk.dialects import kernel as K
from presk.runtime.compile import native_kernel_module, native_program, native_signatures
from presk.kernel_abi.arena import entry_signatures
from presk.kernel_abi.calling import ROUNDED_INPUTS
from presk.transforms.host_writes import written_args
from presk.transforms.hoist_input_converts import HoistInputConvertsPass
from presk.transforms.share_converts import ShareConvertsPass
from programs import scaled_call


def _copies(module) -> int:
    return sum(isinstance(op, K.CopyOp) for op in module.walk())


def test_the_scaled_towers_residual_copies_go_with_the_same_bits() -> None:
    call = scaled_call(8)
    recorded = call.pipeline.kernel
    assert _copies(recorded) >= 10  # the norms' γ and x, Linear's w and x, the stacks
    lowered = native_kernel_module(recorded)
    assert _copies(lowered) == 0
    # the arena shrinks against the lowering's other first passes alone
    without = recorded.clone()
    for p in (ShareConvertsPass(), HoistInputConvertsPass()):
        p.apply(Context(), without)
    arena = {s.host: s.arena_bytes for s in native_signatures(recorded)}
    assert arena[call.host] < {s.host: s.arena_bytes
                               for s in entry_signatures(without)}[call.host]
    want = KernelInterpreter(recorded).run(call.host, call.inputs)
    got = native_program(recorded).entry(call.host)(call.inputs)
    for name, g, w in zip(call.output_names, got, want):
        assert g.tobytes() == w.tobytes(), name


def test_a_host_writes_its_outputs_only_and_calls_write_what_their_callee_does() -> None:
    """`written_args`: over the calls, no host of the recording writes an input (so a
    backward's call reads its residuals in place), and each writes every output."""
    module = scaled_call(2).pipeline.kernel
    written = written_args(module)
    for name, host in K.hosts(module).items():
        inputs = len(host.args) - host.output_count
        assert written[name] == set(range(inputs, len(host.args))), name


def _converts(module) -> int:
    return sum(isinstance(op, K.ConvertOp) for op in module.walk())


def _f64_arguments(module) -> int:
    return sum(isinstance(a.type.element, Float64Type)
               for host in K.hosts(module).values() for a in host.args)


def test_the_scaled_towers_inputs_are_rounded_once_by_the_caller() -> None:
    call = scaled_call(8)
    recorded = call.pipeline.kernel
    assert _converts(recorded) == 6 and _f64_arguments(recorded) > 6
    lowered = native_kernel_module(recorded)
    assert _converts(lowered) == 0 and _f64_arguments(lowered) == 0
    entry = K.hosts(lowered)[call.host]
    assert [s.data for s in entry.attributes[ROUNDED_INPUTS]] == ["batch.0", "batch.1", "d%7"]
    (sig,) = native_signatures(recorded)
    given = {b.name: (b.element, b.given) for b in sig.inputs if b.given is not None}
    assert given == {n: ("f32", "f64") for n in ("batch.0", "batch.1", "d%7")}
    want = KernelInterpreter(recorded).run(call.host, call.inputs)
    got = native_program(recorded).entry(call.host)(call.inputs)
    for name, g, w in zip(call.output_names, got, want):
        assert g.tobytes() == w.tobytes(), name
