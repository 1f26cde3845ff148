"""convert-psk-kernel-to-std: PSK-Kernel → func/scf/arith over `llvm` pointers.

`convert.py` is the pass (its docstring says what each op becomes), `emitter.py` the
builder every lowering of PSK-Kernel shares, `tile_contraction.py` the register tiles of
a contraction's kernel. The arena plan and the calling convention it implements are
presk/kernel_abi/.
"""

from .convert import ConvertKernelToStdPass
from .emitter import PTR, Emitter, NativeLoweringError

__all__ = ["ConvertKernelToStdPass", "Emitter", "NativeLoweringError", "PTR"]
