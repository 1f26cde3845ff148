"""Presk: a compiler for a small typed, differentiable tensor language."""
__version__ = "0.1.0"
