"""How often code under an `if` in the training step runs: every step, every N steps (`if step % N == 0`),
or once (`if it == 0:`, `if step == start`: a loop counter equal to one value). Reads source only (ast)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

# a loop counter by its name: `if it == 0:`, `if step == start_step:` run once, not every step
_COUNTER = re.compile(r"^(i|j|t|it|itr|iter|iters|iteration|idx|step|steps|epoch|batch_idx|batch_i|n_iter|"
                      r".+_step|step_.+|.+_steps|.+_epoch|epoch_.+|.+_iter|.+_idx)$")


def _mod_guard(test: ast.expr) -> str | None:
    """'N' of the first `x % N` in an if-test (a step-frequency guard), else None."""
    for n in ast.walk(test):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and not isinstance(n.left, (ast.Constant, ast.JoinedStr)):
            return " ".join(ast.unparse(n.right).split())
    return None


@dataclass(frozen=True)
class Guard:
    """How often the code under an `if` runs: every N steps (``text`` "N"), or only when a counter has one
    value (``once``: ``text`` the test, "it == 0")."""

    text: str
    once: bool = False

    def rank(self) -> int:
        return 2 if self.once else 1


def guard_rank(g: Guard | None) -> int:
    """0 every step, 1 every N steps, 2 once: the lower, the more often."""
    return 0 if g is None else g.rank()


def _counter(e: ast.expr, counters: set[str]) -> bool:
    """A loop counter, or arithmetic on one (`step + 1`)."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _counter(e.left, counters) or _counter(e.right, counters)
    return isinstance(e, ast.Name) and (e.id in counters or _COUNTER.match(e.id) is not None)


def _once(test: ast.expr, counters: set[str]) -> bool:
    """`it == 0`, `step == start`, `epoch == args.epochs - 1` (or several joined by `or`): a counter
    equal to one value, true on one step, not every step."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return all(_once(v, counters) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    left, right = test.left, test.comparators[0]
    if any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in ast.walk(test)):
        return False
    return _counter(left, counters) or _counter(right, counters)


def guard_of(test: ast.expr, outer: Guard | None, counters: set[str]) -> Guard | None:
    """The guard the body of `if test:` runs under, inside ``outer``'s: once stays once."""
    if outer is not None and outer.once:
        return outer
    n = _mod_guard(test)
    if n is not None:
        return Guard(n)
    if _once(test, counters):
        return Guard(" ".join(ast.unparse(test).split()), once=True)
    return outer
