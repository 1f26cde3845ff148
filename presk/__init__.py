"""Presk: a compiler for a small typed, differentiable tensor language.

The Python API (presk/api.py, docs/python.md) is re-exported here — `presk.load`,
`presk.Program`, `presk.PreskError` — and `presk.torch` is the PyTorch op. Both are loaded
on first use (PEP 562): importing `presk` (as `presk check` does) loads neither xDSL nor
torch.
"""
__version__ = "0.1.0"

_API = {"load", "Program", "Compiled", "PreskError"}


def __getattr__(name: str):
    import importlib
    if name in _API:
        return getattr(importlib.import_module("presk.api"), name)
    if name == "torch":
        return importlib.import_module("presk.torch")
    raise AttributeError(f"module 'presk' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, "torch"])
