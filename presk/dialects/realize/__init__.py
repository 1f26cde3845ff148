"""PSK-Realize (`psk_realize`): one entry recorded at concrete dims under a realization.

Where PSK-Core is polymorphic (symbolic dims, `...`, ℝ), PSK-Realize is what one call of
an entry (`--entry loss --dim B=4`) runs: every value has a concrete shape and a builtin
float element type (f64, f32 or bf16) chosen by the realization, every change of type is
an explicit `convert`, every function is an INSTANCE (one per distinct dims, argument
types and hyperparameter values), and element-wise work may be grouped (`group`).

Textual forms (one line each; attributes print sorted, `site` on every op):

  type      !psk_realize.tensor<f32, batch: 4, model: 4>     scalar !psk_realize.tensor<f64>
            listing form (rtype_text): f32[batch: 4, model: 4], f64[]
  func      psk_realize.func @RMSNorm.apply_2(%0: T, %1: T) -> T attributes {arg_names = ["θ.γ", "x"],
                dims = {D = 4 : i64}, source = "RMSNorm.apply"} { … }       (`entry` unit attr on the entry)
  unary     %r = psk_realize.sqrt %a {site = "RMSNorm.apply/%7"} : T
            one per unary function of presk/ops (neg sqrt exp log tanh sigmoid relu gelu …);
            psk_realize.powi %a {n = 2 : i64, …} : T;  psk_realize.heaviside %a {at_zero = 0.5 : f64, …} : T
  binary    %r = psk_realize.add %a, %b {lhs_map = array<i64: 0>, rhs_map = array<i64: 0, 1>, site = …} : (A, B) -> R
            one per binary function of presk/ops (add sub mul div minimum maximum pow)
  reduce    %r = psk_realize.mean %a {axis = 1 : i64, axis_name = "model", site = …} : (A) -> R
            sum mean max min logsumexp; no `axis` = over every axis
  softmax   %r = psk_realize.softmax %a {axis = 1 : i64, axis_name = "model", site = …} : T
  dot       %r = psk_realize.dot %a, %b {site = …} : (A, B) -> R    (a's last axis with b's first)
  contract  %r = psk_realize.contract %a, %b {lhs_axes = array<i64: …>, rhs_axes = array<i64: …>[, perm = array<i64: …>]}
  sum_to    %r = psk_realize.sum_to %a {keep = array<i64: …>, …} : (A) -> R
  spread    %r = psk_realize.spread %a, %like {places = array<i64: …>[, mean], …} : (A, L) -> L
  broadcast %r = psk_realize.broadcast %a {map = array<i64: …>, …} : (A) -> R
  convert   %r = psk_realize.convert %a {site = <the reader's site>} : (f64-tensor) -> f32-tensor
  constant  %r = psk_realize.constant {site = "RMSNorm.apply/%5", value = 1.000000e-06 : f64} : !psk_realize.tensor<f64>
  slice     %r = psk_realize.slice %stacked {index = 0 : i64, site = "Tower.apply/%3"} : (S) -> R
  stack     %r = psk_realize.stack %g0, %g1, %g2 {site = "Tower.apply.bwd/%18"} : (T, T, T) -> S
  func (--grad entry) … attributes {…, result_names = ["result", "grad.w", …]}: the results' paths
  call      %r = psk_realize.call @RMSNorm.apply_2(%a, %b) {site = "Block.apply/%4"} : (A, B) -> R
  fold      %r = psk_realize.fold @Block.apply(%s0, %s1, %s2, %acc) {from = 1 : i64, site = …, to = 3 : i64} : (…) -> R
  group     %r = psk_realize.group %i0, %i1 {site = "RMSNorm.apply/%7"} : (A, B) -> R {
            ^0(%a: A, %b: B):  …element-wise ops…  psk_realize.yield %s : R }
  reduce_group %r = psk_realize.reduce_group %i0, … {site = "RMSNorm.apply/%10"} : (…) -> R {
            ^0(…):  …element-wise ops and reductions over the rows of one shape…  yield }
  return    psk_realize.return %r {site = "loss/%8"} : T

Semantics a consumer needs (the kernel stage, interpreters):
- A tensor is laid out row-major in its axes' order; a Core `...` has become explicit
  leading axes. Names are for display only: two types FIT when their element types and
  sizes are equal (`fits`).
- Binary ops: `lhs_map[k]` is the result axis the lhs's axis k lands on (strictly
  increasing); a result axis no map names is broadcast. A numpy view: reshape the operand
  to the result's rank with its sizes at the mapped places and 1 elsewhere. `broadcast`
  uses `map` the same way; `spread` uses `places` (onto `like`'s axes).
- Every operand of an arithmetic op has the result's element type; no arithmetic op has
  element type bf16 (a bf16 site computes in f32 and is converted). `convert` rounds to
  nearest even when it narrows; a widening convert (bf16→f32, bf16→f64, f32→f64) is exact
  and a kernel may fold it into its loads.
- `constant` is a scalar of any element type: `value` rounded to it.
- `slice %s {index = i}` is iteration i's view of a stacked value (its leading axis);
  `stack %v0, …, %vn-1` the inverse: a new leading axis of n, element l being %vl (the
  parameter cotangents of a fold's iterations, which a vjp records one call each).
- `fold @f(%s…, %acc) {from, to}`: acc = f(slice(s…, i), acc) for i in from..to-1; the
  callee takes the sliced stacked values, then the accumulator, and returns it.
- `group`: its block's arguments are its inputs (the operands, same order), its body is
  element-wise ops whose results all have ONE shape (the group's), ending in `yield`;
  its site is the site of the value it yields (its root). Intermediates never reach memory.
- `reduce_group` (psk-fuse-reduce): like a group, its body reductions over one axis (or
  every axis) of one shape F and element-wise ops making F or the reduced shape K, an F
  step reading a K value of the group on the kept axes: one nest over the rows, each
  step computed as the unfused op computes it (FusedOp is what both kinds share).
- Instances: `psk_realize.func`; `source` is the Core function, `dims` its dims, arguments
  are tensors only (a parameter tree flattened to its leaves in declaration order, names
  are paths `θ.norm.γ`; a tuple to its elements, `batch.0`). One func has the unit
  attribute `entry`. `instance_runs(module)` gives how many times each instance runs per
  call of the entry.

Python API (stable): RTensorType (.element, .axes, .sizes, .shape, .rank, .count,
.with_element, get, scalar), rtype_text, element_name, ELEMENT_TYPES, fits; op classes
below (each constructor takes `site=` and optional `name=`), FuncOp.make, GroupOp.make;
is_compute, is_elementwise, is_arithmetic, funcs, entry_func, instance_runs, launch_count,
epilogue_of, epilogue_count, lookup_instance.

The package, like xDSL's `dialects/linalg/`: `types` (the tensor type and its names),
`base` (the op bases and sites), `elementwise` (one class per element-wise function),
`ops` (reductions, contraction, converts, constants, slices, stacks, groups),
`functions` (instances, calls, folds, and the queries above). Every name is importable
from here: `from presk.dialects import realize as R; R.AddOp`.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from .types import (ELEMENT_TYPES, ElementType, RTensorType, _ttype, element_name, fits,
    rtype_text)
from .base import ComputeOp, RealizeOp, _i64s, _ints, realize_op
from .elementwise import FUNCTION_OPS, BinaryOp, HeavisideOp, PowIOp, UnaryOp

globals().update({cls.__name__: cls for cls in FUNCTION_OPS.values()})  # AddOp, GeluOp, …
from .ops import (BroadcastOp, ConstantOp, ContractOp, ConvertOp, DotOp, FusedOp, GroupOp,
    LogSumExpOp, MaxOp, MeanOp, MinOp, ReduceGroupOp, ReduceOp, SliceOp, SoftmaxOp, SpreadOp,
    StackOp, SumOp, SumToOp, YieldOp)
from .functions import (CallOp, FoldOp, FuncOp, ReturnOp, entry_func, epilogue_of,
    epilogue_count, funcs, instance_runs, is_arithmetic, is_compute, is_elementwise,
    launch_count, lookup_instance)


Realize = Dialect(
    "psk_realize",
    [
        *FUNCTION_OPS.values(), HeavisideOp, PowIOp,
        SumOp, MeanOp, MaxOp, MinOp, LogSumExpOp, SoftmaxOp,
        DotOp, ContractOp, SumToOp, SpreadOp, BroadcastOp,
        ConvertOp, ConstantOp, SliceOp, StackOp,
        FuncOp, CallOp, FoldOp, GroupOp, ReduceGroupOp, YieldOp, ReturnOp,
    ],
    [RTensorType],
)
