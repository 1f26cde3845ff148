"""psk-kernel-hoist-input-converts on a real program: the scaled Tower's value and gradient
(all f32, calls kept) converts its batch and its seed into f32 in the hosts it calls, six
converts down four levels of calls; the native lowering narrows every f64 argument instead,
the entry's batch and seed become inputs the caller rounds once (`given` f64), and its
code computes the kernel interpreter's bits on the recorded module, converts and all."""

from __future__ import annotations

from xdsl.dialects.builtin import Float64Type

from presk.analysis.kernel_interpret import KernelInterpreter
from presk.dialects import kernel as K
from presk.kernel_abi.calling import ROUNDED_INPUTS
from presk.runtime.compile import native_kernel_module, native_program, native_signatures
from programs import scaled_call


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
