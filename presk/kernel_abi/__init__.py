"""The ABI of a PSK-Kernel module: what native code and the C program agree on about it.
`calling` (pure Python: entry symbols, buffer and entry signatures, strides, the arena's
alignment), `lives` (the buffers' lives in a host's run), `placement` (the arena placed by
them) and `arena` (the static arena plan those give, the entries a module exports, the
kernels whose buffers may alias). Import the submodules: the runtime reads `calling`
without loading xDSL.
"""
