"""PSK-Core (`psk_core`): the program after elaboration, in A-normal form.

One typed operation per SSA value. The element type is ℝ, an abstract real: a tensor
type carries axes (an optional name and a size, a literal or a dim symbol), optionally
after `...`, a polymorphic prefix. Functions are polymorphic in their module's dims,
parameters are trees read by `field`, and a stacked tree is consumed by `fold`.

Every op in a function body carries its `site` ("RMSNorm.apply/%10") and, for a named
let, its source `name` ("ms"); every verifier error starts with the site. Shapes are
checked with the shared algebra of `presk.shapes`, the one the frontend uses.

The package, like xDSL's `dialects/linalg/`: `types` (ℝ[axes], parameter trees, the type
algebra), `base` (the op base and sites), `elementwise` (one class per element-wise
function), `ops` (reductions, contraction, broadcast, scalars, tuples), `modules`
(parameter trees), `functions` (functions, calls, folds, gradients). The shared syntax
(names, raw UTF-8 strings, axes, the generic op form) is `presk.dialects.common`. Every
name is importable from here: `from presk.dialects import core as C; C.AddOp`.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from presk.dialects.common import AxisAttr, size_attr, size_value

from .types import (Binder, ParamsAttr, TensorAttr, apply_prefix, substitute_type,
    type_conforms, type_symbols, type_text)
from .base import CoreOp, _dims_attr, core_op, site_message, site_of
from .elementwise import FUNCTION_OPS, BinaryOp, HeavisideOp, PowIOp, UnaryOp
from .ops import (BroadcastOp, ConstantOp, ContractOp, DotOp, GetOp, LogSumExpOp, MaxOp,
    MeanOp, MinOp, RealOp, ReduceOp, SoftmaxOp, SpreadOp, SumOp, SumToOp, TreeOp, TupleOp,
    ZerosLikeOp)
from .modules import (FieldDeclOp, FieldOp, ModuleDeclOp, ParamDeclOp, UseDeclOp,
    field_type, lookup_module)
globals().update({cls.__name__: cls for cls in FUNCTION_OPS.values()})  # AddOp, GeluOp, …
from .functions import (CallOp, FoldBwdOp, FoldFwdOp, FoldOp, FoldScanOp, FoldVjpOp, FuncOp,
    GradOp, ReturnOp, call_result_type, fold_result_type, lookup_function)


Core = Dialect(
    "psk_core",
    [
        *FUNCTION_OPS.values(), PowIOp,
        SumOp, MeanOp, MaxOp, MinOp, LogSumExpOp, SoftmaxOp,
        DotOp, BroadcastOp, RealOp, ConstantOp, TupleOp, GetOp,
        ModuleDeclOp, ParamDeclOp, UseDeclOp, FieldOp,
        FuncOp, ReturnOp, CallOp, FoldOp,
        HeavisideOp, SumToOp, SpreadOp, ContractOp, ZerosLikeOp, TreeOp, FoldScanOp,
        FoldVjpOp, FoldFwdOp, FoldBwdOp, GradOp,
    ],
    [AxisAttr, TensorAttr, ParamsAttr],
)
