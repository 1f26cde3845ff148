"""PSK-Kernel (`psk_kernel`): loop nests over buffers, and the host that launches them.

Two kinds of function live side by side in a module:

* `psk_kernel.kernel @k3(%0, %1, %2, %3)` — a loop nest over buffers, its inputs first,
  then its `outputs` (the last N arguments). Its body is `for` loops (bounds literal,
  loop-carried scalars for accumulators), `load`, `store`, scalar arithmetic (`add`, `sub`,
  `mul`, `div`, `min`, `max`, `neg`, and `fma` where a realization fuses a contraction's
  site), `math` (a function of the one math table:
  presk/analysis/kernel_math.py), `cast` between f32 and f64, and `constant`. Scalars are
  f32 or f64: bf16 is a storage type only, a bf16 buffer loads as f32 and a store to it
  rounds to nearest even. A `for` without loop-carried values is parallel (its iterations
  write disjoint elements and read nothing another writes); one with them runs in order,
  except a blocked sum (`attributes {partials = P}`, presk/summation.py): its iterations
  go to P partial sums in turn, then the partials are added pairwise.
  The `layout` attribute (`#psk_kernel.layout<default>`, or for a contraction
  `#psk_kernel.layout<tiled, tile = [4, 4], lanes = 4, order = "IJ">`) is a directive to
  the native backend: the nest in the body is the reference order of every arithmetic
  operation, and a layout may only change which elements run together, never the order
  of the operations that compute one element (a contraction sums k ascending, a sum in
  its blocked order). So every
  layout computes the same bits.

* `psk_kernel.host @RMSNorm.apply_2(...)` — a recorded Presk function instance over
  buffers, its inputs first, then its `outputs`, destination-passing. Its ops: `mark` and
  `release` of the arena, `alloc` (from the arena), `convert` (a whole buffer into
  another element type, rounding to nearest even), `fill` (a constant), `copy`, `at` (one
  element of a stacked buffer: a view), `launch @kN(buffers)` under the site of the value
  it computes, `call @host(buffers)`, and `fold` (a loop over a fold's iterations, the
  accumulator alternating between two scratch buffers).

Every verifier error starts with the site: a host op's `site`, else the name of the
kernel or host function that holds the op.

The package, like xDSL's `dialects/linalg/`: `types` (buffers, layouts), `base` (sites,
the op base), `scalar` (the scalar arithmetic of a kernel body), `loops` (kernels, loops,
loads, stores), `host` (the host and its ops, the walks of a module). Every name is
importable from here: `from presk.dialects import kernel as K; K.LoadOp`.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from .types import (BufferType, FLOAT_TYPES, LayoutAttr, compute_type, element_bytes, fits,
                    type_name)
from .base import KernelBaseOp, kernel_op, site_of
from .scalar import (AddOp, BinaryOp, CastOp, ConstantOp, DivOp, FmaOp, MATH_FUNCTIONS,
    MathOp, MaxOp, MinOp, MulOp, NegOp, SubOp)
from .loops import ForOp, KERNEL_BODY_OPS, KernelOp, LoadOp, StoreOp, YieldOp
from .host import (AllocOp, AtOp, CallOp, ConvertOp, CopyOp, FillOp, FoldOp, HOST_BODY_OPS,
    HostBodyOp, HostOp, LaunchOp, MarkOp, ReleaseOp, host_ops, hosts, kernels,
    number_kernels)


Kernel = Dialect(
    "psk_kernel",
    [
        KernelOp, ForOp, YieldOp, LoadOp, StoreOp, AddOp, SubOp, MulOp, DivOp, MinOp, MaxOp,
        NegOp, FmaOp, MathOp, CastOp, ConstantOp,
        HostOp, MarkOp, ReleaseOp, AllocOp, ConvertOp, CopyOp, FillOp, AtOp, LaunchOp, CallOp,
        FoldOp,
    ],
    [BufferType, LayoutAttr],
)
