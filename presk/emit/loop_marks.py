"""The innermost counted loops of LLVM IR and the `!llvm.loop` hints put on them.

Both passes that steer LLVM's loop vectorizer (presk/emit/wide_loops.py: loops calling a
math function's vector variant; presk/emit/short_loops.py: short element-wise loops)
recognize loops in the form xDSL's conversion gives an `scf.for` from 0 by 1 to a
constant: a header `%i = phi [0, …], [%next, latch]`, `icmp slt %i, N`, a conditional
branch into the body, and the latch's unconditional branch back; only innermost loops
(no other back edge inside) are marked.
"""

from __future__ import annotations

from llvmlite import ir

Hint = tuple[str, ...] | tuple[str, int] | tuple[str, "list[Hint]"]
"""A hint: its name and its value (an i32, an i1 `True`, or a list of follow-up hints)."""


def innermost_loops(blocks: list[ir.Block]) -> list[tuple[int, int]]:
    """(header, latch) indices of the loops whose latch branches back unconditionally and
    that hold no other back edge (the vectorizer works on innermost loops)."""
    index = {id(b): j for j, b in enumerate(blocks)}
    back = []  # (j, the earliest block j's terminator branches back to)
    for j, b in enumerate(blocks):
        targets = [index[id(t)] for t in getattr(b.terminator, "operands", ())
                   if isinstance(t, ir.Block)]
        if targets and min(targets) <= j:
            back.append((j, min(targets)))
    return [(head, j) for i, (j, head) in enumerate(back)
            if isinstance(blocks[j].terminator, ir.Branch)
            and not isinstance(blocks[j].terminator, ir.ConditionalBranch)
            and not (i and back[i - 1][0] >= head)]


def induction(head: ir.Block, latch: ir.Block) -> tuple[ir.PhiInstr, int] | None:
    """The phi `%i` and N of a header `%i = phi [0, …], [%i + 1, latch]; icmp slt %i, N`."""
    ins = head.instructions
    phi = next((i for i in ins if isinstance(i, ir.PhiInstr)), None)
    cmp = next((i for i in ins if isinstance(i, ir.ICMPInstr)), None)
    if phi is None or cmp is None or cmp.op not in ("slt", "<") or cmp.operands[0] is not phi:
        return None
    bound = cmp.operands[1]
    incoming = dict((id(b), v) for v, b in phi.incomings)
    start = [v for v, b in phi.incomings if b is not latch]
    step = incoming.get(id(latch))
    if not (isinstance(bound, ir.Constant) and len(start) == 1
            and isinstance(start[0], ir.Constant) and start[0].constant == 0
            and isinstance(step, ir.Instruction) and step.opname == "add"
            and step.operands[0] is phi and isinstance(step.operands[1], ir.Constant)
            and step.operands[1].constant == 1):
        return None
    return phi, int(bound.constant)


def trip_count(head: ir.Block, latch: ir.Block) -> int | None:
    """N for a loop `induction` recognizes."""
    found = induction(head, latch)
    return found[1] if found else None


def is_marked(latch: ir.Block) -> bool:
    """Whether a pass has put hints on the loop already."""
    return "llvm.loop" in latch.terminator.metadata


def mark(module: ir.Module, latch: ir.Block, hints: list[Hint], name: str) -> None:
    """`!llvm.loop !{!self, !{"name", value}, …}` on the latch's branch, a node of its own
    per loop (made unique by `presk.loop.<name>`, a name no other loop of the module has,
    then pointed at itself: llvmlite reuses a node of equal operands)."""
    loop = module.add_metadata([ir.MetaDataString(module, f"presk.loop.{name}")])
    loop.operands = (loop, *(_node(module, h) for h in hints))
    term = latch.terminator
    term.set_metadata("llvm.loop", loop)
    term._clear_string_cache()  # llvmlite caches an instruction's text once printed


def _node(module: ir.Module, hint: Hint) -> ir.MDValue:
    name, *value = hint
    operands: list = [ir.MetaDataString(module, name)]
    for v in value:
        if isinstance(v, bool):
            operands.append(ir.Constant(ir.IntType(1), int(v)))
        elif isinstance(v, int):
            operands.append(ir.Constant(ir.IntType(32), v))
        else:
            operands.extend(_node(module, h) for h in v)  # a follow-up's hints
    return module.add_metadata(operands)
