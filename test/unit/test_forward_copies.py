"""psk-kernel-forward-copies on a real program: the scaled Tower's value and gradient
(unfused, all f32, calls kept) hands its residuals back as copies through four levels of
hosts; the native lowering removes every one, and its code computes the kernel
interpreter's bits on the recorded module, copies and all."""

from __future__ import annotations

from xdsl.context import Context

from presk.analysis.kernel_interpret import KernelInterpreter
from presk.dialects import kernel as K
from presk.runtime.compile import native_kernel_module, native_program, native_signatures
from presk.kernel_abi.arena import entry_signatures
from presk.transforms.host_writes import written_args
from presk.transforms.hoist_input_converts import HoistInputConvertsPass
from presk.transforms.share_converts import ShareConvertsPass
from programs import scaled_call



def _copies(module) -> int:
    return sum(isinstance(op, K.CopyOp) for op in module.walk())


def test_the_scaled_towers_residual_copies_go_with_the_same_bits() -> None:
    call = scaled_call(8)
    recorded = call.pipeline.kernel
    assert _copies(recorded) >= 12  # x, w and the norm's input, per layer and level
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
