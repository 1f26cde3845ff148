"""convert-psk-realize-to-kernel: PSK-Realize instances → PSK-Kernel loop nests and hosts.

`convert.py` is the pass (its docstring says what each op becomes; two tables key the
work by op kind: the host ops, and the kernel builder of each kind of compute op),
`nests.py` the loop nests those builders make and a contraction's default layout.
"""

from .convert import ConvertRealizeToKernelPass, RealizeToKernel, realize_to_kernel
from .nests import (SPLIT_WORK, VECTOR_BYTES, KernelConversionError, NestBuilder,
    buffer_type, default_layout, scalar_function, scalar_op, workers)

__all__ = [
    "ConvertRealizeToKernelPass", "KernelConversionError", "NestBuilder", "RealizeToKernel",
    "SPLIT_WORK", "VECTOR_BYTES", "buffer_type", "default_layout", "realize_to_kernel",
    "scalar_function", "scalar_op", "workers",
]
