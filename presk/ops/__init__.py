"""The facts about operations that every stage reads, kept once: `table` holds the
element-wise functions (one row each), `expr` the expression form their composites and
derivative rules are written in. Pure Python: importable without xDSL or llvmlite."""

from .expr import DR, A, B, X, Y, Apply, Const, Expr, Heaviside, Powi, Var, Walker, call, functions_of, has_signed, signed, variables_of
from .table import (
    BY_NAME, C0, C_INF, EXACT_ULPS, LIBRARY_ULPS, NO_ROUNDING, ROWS, Bounded, Composite, Derivative, Exact,
    Function, Library, Monotone, builtins, calls_library, kernel_arithmetic, kernel_math, library, row, rows,
)

__all__ = [
    "A", "B", "BY_NAME", "Bounded", "NO_ROUNDING", "C0", "C_INF", "DR", "EXACT_ULPS", "LIBRARY_ULPS", "ROWS", "X", "Y", "Apply",
    "Composite", "Const", "Derivative", "Exact", "Expr", "Function", "Heaviside", "Library",
    "Monotone", "Powi", "Var", "Walker", "builtins", "call", "calls_library", "functions_of", "has_signed", "kernel_arithmetic", "kernel_math", "library", "row",
    "rows", "signed", "variables_of",
]
