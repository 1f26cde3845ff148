"""Presk's modules import downward only, and never in a circle (issue 13).

Every module of presk/ is parsed (ast, nothing imported); every import in it counts, at
module level and inside functions alike — a function-local import that only hides a
cycle is still a cycle. Only `if TYPE_CHECKING:` blocks are left out: they are never run.

The layers, bottom first, are written once, in LAYERS (docs/architecture.md explains
them). A module belongs to the longest name listed that is it or a package holding it;
it may import its own layer and the layers below, never one above (and never in a
circle: see test_no_cycles).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PRESK = Path(__file__).resolve().parents[2] / "presk"

LAYERS: list[tuple[str, ...]] = [
    # Facts in pure Python (no xDSL, so that `presk check` stays light): the version and
    # the root's modules (limits, powers), the algebra of named axes, the data-file
    # format, the table of element-wise functions, the math library's algorithms (numpy),
    # which both interpreters and every emitter read, and the artifacts' reader and
    # atomic writer (the standard library only), which every writer of a file uses.
    ("presk", "presk.shapes", "presk.datafile", "presk.ops", "presk.emit.mathlib",
     "presk.analysis.artifact"),
    # The three dialects (xDSL IRDL).
    ("presk.dialects",),
    # The frontend (source → elaborated program → PSK-Core), the passes inside one
    # dialect, and the kernels' calling convention and arena plan.
    ("presk.frontend", "presk.transforms", "presk.kernel_abi"),
    # Reading IR: the interpreters (Core in f64/MPFR, the kernel interpreter), parameter
    # trees and weights, entries, the envelope, sensitivities, the artifacts' formats.
    ("presk.analysis",),
    # The passes between dialects, down to the llvm dialect.
    ("presk.conversion",),
    # Listings and targets: C, PyTorch, LLVM IR and the JIT.
    ("presk.emit",),
    # Native code in this process: compile, cache, buffers, calls.
    ("presk.runtime",),
    # The library every command calls: load, record, lower, compile, call.
    ("presk.pipeline",),
    # What runs the pipeline: training; the solver and the bounds, which measure a
    # realization by running it (kept in analysis/ beside the analyses they read).
    ("presk.train", "presk.analysis.solver", "presk.analysis.reverse_sweep",
     "presk.analysis.bounds", "presk.analysis.box",
     "presk.analysis.boxcheck", "presk.analysis.certify"),
    # The Python API (load, compile, calibrate, solve, train) and the PyTorch op on it.
    # The package root re-exports them lazily (PEP 562, by name: no import statement),
    # so that `import presk` stays light.
    ("presk.api", "presk.torch"),
    # The explain document's pictures and PDF (pure); the document itself, which runs
    # the commands, is presk.cli.explain.
    ("presk.explain",),
    # presk, presk-opt, presk-translate.
    ("presk.cli",),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PRESK.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PRESK.rglob("*.py"))}


def _run_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, but for the bodies of `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for other in node.orelse:
                yield other
                yield from _run_nodes(other)
            continue
        yield node
        yield from _run_nodes(node)


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The presk modules `name` imports anywhere in its text (`from . import x` counts
    as importing the module x when there is one, else the package)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _run_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("presk") and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def layer_of(module: str) -> tuple[int, str]:
    """(the layer's index, the prefix that places it there)."""
    best = max((p for layer in LAYERS for p in layer
                if module == p or module.startswith(p + ".")), key=len)
    return next(i for i, layer in enumerate(LAYERS) if best in layer), best


def test_every_module_has_a_layer() -> None:
    for module in modules():
        layer_of(module)  # raises ValueError on a module no prefix covers


def test_imports_go_downward() -> None:
    upward = []
    for module, targets in graph().items():
        here, unit = layer_of(module)
        for target in sorted(targets):
            there, other = layer_of(target)
            # A package's __init__ runs when one of its modules is imported: `presk`
            # (the version) and a package holding the importer are no upward import.
            if there > here and not module.startswith(other + "."):
                upward.append(f"{module} → {target} ({unit}: layer {here}, {other}: "
                              f"layer {there})")
    assert not upward, "imports that go upward:\n" + "\n".join(upward)


def test_no_cycles() -> None:
    edges = graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" → ".join(c) for c in cycles)


def test_nothing_outside_cli_imports_cli() -> None:
    users = sorted(m for m, targets in graph().items() if not m.startswith("presk.cli")
                   and any(t == "presk.cli" or t.startswith("presk.cli.") for t in targets))
    assert not users, f"modules outside presk.cli that import it: {users}"
