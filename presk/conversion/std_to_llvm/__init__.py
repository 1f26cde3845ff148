"""Standard dialects → xDSL's `llvm` dialect: the conversions xDSL 0.75 does not ship.

One pass per file, each a few `RewritePattern`s run by one greedy walker:

* `convert-index-to-llvm` (`index_to_llvm.py`): `index` → `i64` everywhere;
* `convert-arith-to-llvm` (`arith_to_llvm.py`): arith → llvm arithmetic, casts, compares;
* `convert-cf-to-llvm` (`cf_to_llvm.py`): `cf.br`/`cf.cond_br` → `llvm.br`/`llvm.cond_br`;
* `convert-func-to-llvm` (`func_to_llvm.py`): `func.func/return/call` → llvm, external linkage;
* `convert-math-to-llvm` (`math_to_llvm.py`): `math` → calls of the one math library,
  sqrt and fabs intrinsics.

The pipeline from scf to a module `xdsl.backend.llvm.convert_module` accepts:

    convert-scf-to-cf, convert-index-to-llvm, convert-arith-to-llvm, convert-math-to-llvm,
    convert-cf-to-llvm, convert-func-to-llvm, reconcile-unrealized-casts

`convert-index-to-llvm` runs before `convert-arith-to-llvm` (it turns `arith.index_cast`
into arith integer casts or nothing); the other three are independent of each other.
See docs/llvm.md.
"""

from presk.conversion.std_to_llvm.arith_to_llvm import ConvertArithToLLVMPass
from presk.conversion.std_to_llvm.cf_to_llvm import ConvertCfToLLVMPass
from presk.conversion.std_to_llvm.func_to_llvm import ConvertFuncToLLVMPass
from presk.conversion.std_to_llvm.index_to_llvm import ConvertIndexToLLVMPass
from presk.conversion.std_to_llvm.math_to_llvm import ConvertMathToLLVMPass

STD_TO_LLVM_PIPELINE = (
    "convert-scf-to-cf,convert-index-to-llvm,convert-arith-to-llvm,convert-math-to-llvm,"
    "convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts"
)

__all__ = [
    "ConvertArithToLLVMPass",
    "ConvertCfToLLVMPass",
    "ConvertFuncToLLVMPass",
    "ConvertIndexToLLVMPass",
    "ConvertMathToLLVMPass",
    "STD_TO_LLVM_PIPELINE",
]
