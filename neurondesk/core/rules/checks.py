"""The CI gate: a run summary against thresholds → one line per failed check. Pure.

The tutorial's smoke test: the workload compiles, runs its steps, and the loss does not explode.
``--check`` always asks that at least one step ran and, when the requested step count is known,
that all of them ran, and that TorchNeuron told none of its silent failures (a dynamic shape rejected,
a mode ignored, a graph run eagerly, eager ops on the CPU: core/findings/neuron_errors.py); each
threshold adds one check. An empty list means the gate passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from neurondesk.core.summary.types import CompileRow, Summary

# diagnostics that fail the gate whatever the thresholds: a graph that grows each step, and
# TorchNeuron's failures (their kinds: core/findings/neuron_errors.py TORCHNEURON_KINDS)
GATED_DIAGNOSTICS = frozenset({"graph-grows", "dynamic-shape", "graph-fallback", "cpu-fallback", "mode-ignored"})


@dataclass(frozen=True)
class Thresholds:
    max_recompiles_after_warmup: int | None = None
    loss_finite: bool = False
    max_first_compile_s: float | None = None
    min_samples_per_s: float | None = None
    min_goodput: float | None = None  # 0..1: productive training time / wall time (core/figures/goodput.py)


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _recompile_detail(s: Summary, limit: int = 3) -> str:
    late = [c for c in s.compiles if _late_recompile(c, s.warmup_steps)]
    shown = [f"step {c.step} {c.cause or '?'}{' (evaluation)' if c.phase == 'eval' else ''} "
             f"at {c.location or '?'}" for c in late[:limit]]
    more = f" and {len(late) - limit} more" if len(late) > limit else ""
    return ": " + "; ".join(shown) + more if shown else ""


def _late_recompile(c: CompileRow, warmup: int | None) -> bool:
    if c.recompile is not None and c.after_warmup is not None:
        return c.recompile and c.after_warmup
    return c.step is not None and c.step >= warmup  # a summary from before phases were told apart


def evaluate(s: Summary, t: Thresholds) -> list[str]:
    """Failed checks of summary ``s`` (core/summary/types.py), one plain line each."""
    failed: list[str] = []
    steps, requested = s.steps, s.steps_requested
    if steps <= 0:
        failed.append("no training step was seen (the probe saw no optimizer step or XLA sync)")
    elif requested and steps < requested:
        failed.append(f"ran {steps} of {requested} requested steps")
    if t.max_recompiles_after_warmup is not None:
        n = s.recompiles_after_warmup
        if n > t.max_recompiles_after_warmup:
            failed.append(f"{n} recompile(s) after warm-up (training step >= {s.warmup_steps}, or an "
                          "evaluation after the first), "
                          f"max {t.max_recompiles_after_warmup}{_recompile_detail(s)}")
    for d in s.diagnostics:
        if d.kind in GATED_DIAGNOSTICS:
            failed.append(f"{d.message} (at {d.location or '?'})")
    if t.loss_finite:
        loss = s.loss
        if loss.first is None and loss.last is None:
            failed.append("loss not finite: no loss value was seen in the workload's output "
                          "(print lines like 'step 10 loss 2.31')")
        elif loss.nonfinite or not _finite(loss.last):
            failed.append(f"loss not finite: {loss.nonfinite or 1} nan/inf loss value(s), last {loss.last}")
    if t.max_first_compile_s is not None:
        first = s.first_compile_s
        if first is not None and first > t.max_first_compile_s:
            failed.append(f"first compile took {first:.1f} s, max {t.max_first_compile_s:g} s")
    if t.min_samples_per_s is not None:
        sps = s.steady.samples_per_s
        if sps is None:
            failed.append(f"steady samples/s unknown (no steady step: fewer than {(s.warmup_steps or 0) + 1} "
                          f"steps, or every step compiled), min {t.min_samples_per_s:g}")
        elif sps < t.min_samples_per_s:
            failed.append(f"steady samples/s {sps:,.1f} below min {t.min_samples_per_s:g}")
    if t.min_goodput is not None:
        g = s.goodput
        share = g.fraction if g is not None else None
        if not _finite(share):
            failed.append(f"goodput unknown (a summary written before goodput, or no wall time), "
                          f"min {t.min_goodput:.0%}")
        elif share < t.min_goodput:
            bad = sorted(((v, k) for k, v in g.badput.items() if _finite(v) and v > 0), reverse=True)
            where = ", ".join(f"{k.replace('_', ' ')} {v:,.1f} s" for v, k in bad[:3])
            failed.append(f"goodput {share:.1%} below min {t.min_goodput:.0%}" + (f" (badput: {where})" if where else ""))
    return failed


def describe(t: Thresholds) -> str:
    """The checks applied, for the line printed when the gate passes."""
    parts = ["steps ran"]
    if t.max_recompiles_after_warmup is not None:
        parts.append(f"recompiles after warm-up <= {t.max_recompiles_after_warmup}")
    if t.loss_finite:
        parts.append("loss finite")
    if t.max_first_compile_s is not None:
        parts.append(f"first compile <= {t.max_first_compile_s:g} s")
    if t.min_samples_per_s is not None:
        parts.append(f"samples/s >= {t.min_samples_per_s:g}")
    if t.min_goodput is not None:
        parts.append(f"goodput >= {t.min_goodput:.0%}")
    return ", ".join(parts)
