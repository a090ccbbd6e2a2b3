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

# diagnostics that fail the gate whatever the thresholds: a graph that grows each step, and
# TorchNeuron's failures (their kinds: core/findings/neuron_errors.py TORCHNEURON_KINDS)
GATED_DIAGNOSTICS = frozenset({"graph-grows", "dynamic-shape", "graph-fallback", "cpu-fallback", "mode-ignored"})


@dataclass(frozen=True)
class Thresholds:
    max_recompiles_after_warmup: int | None = None
    loss_finite: bool = False
    max_first_compile_s: float | None = None
    min_samples_per_s: float | None = None


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _recompile_detail(s: dict, limit: int = 3) -> str:
    late = [c for c in s.get("compiles") or [] if _late_recompile(c, s["warmup_steps"])]
    shown = [f"step {c['step']} {c.get('cause') or '?'}{' (evaluation)' if c.get('phase') == 'eval' else ''} "
             f"at {c.get('location') or '?'}" for c in late[:limit]]
    more = f" and {len(late) - limit} more" if len(late) > limit else ""
    return ": " + "; ".join(shown) + more if shown else ""


def _late_recompile(c: dict, warmup: int) -> bool:
    if "recompile" in c and "after_warmup" in c:
        return bool(c["recompile"] and c["after_warmup"])
    return c.get("step") is not None and c["step"] >= warmup  # a summary from before phases were told apart


def evaluate(s: dict, t: Thresholds) -> list[str]:
    """Failed checks of summary ``s`` (see core/summary/build.py), one plain line each."""
    failed: list[str] = []
    steps, requested = s.get("steps") or 0, s.get("steps_requested")
    if steps <= 0:
        failed.append("no training step was seen (the probe saw no optimizer step or XLA sync)")
    elif requested and steps < requested:
        failed.append(f"ran {steps} of {requested} requested steps")
    if t.max_recompiles_after_warmup is not None:
        n = s.get("recompiles_after_warmup") or 0
        if n > t.max_recompiles_after_warmup:
            failed.append(f"{n} recompile(s) after warm-up (training step >= {s['warmup_steps']}, or an "
                          "evaluation after the first), "
                          f"max {t.max_recompiles_after_warmup}{_recompile_detail(s)}")
    for d in s.get("diagnostics") or []:
        if d.get("kind") in GATED_DIAGNOSTICS:
            failed.append(f"{d['message']} (at {d.get('location') or '?'})")
    if t.loss_finite:
        loss = s.get("loss") or {}
        if loss.get("first") is None and loss.get("last") is None:
            failed.append("loss not finite: no loss value was seen in the workload's output "
                          "(print lines like 'step 10 loss 2.31')")
        elif loss.get("nonfinite") or not _finite(loss.get("last")):
            failed.append(f"loss not finite: {loss.get('nonfinite') or 1} nan/inf loss value(s), "
                          f"last {loss.get('last')}")
    if t.max_first_compile_s is not None:
        first = s.get("first_compile_s")
        if first is not None and first > t.max_first_compile_s:
            failed.append(f"first compile took {first:.1f} s, max {t.max_first_compile_s:g} s")
    if t.min_samples_per_s is not None:
        sps = (s.get("steady") or {}).get("samples_per_s")
        if sps is None:
            failed.append(f"steady samples/s unknown (no steady step: fewer than {s['warmup_steps'] + 1} "
                          f"steps, or every step compiled), min {t.min_samples_per_s:g}")
        elif sps < t.min_samples_per_s:
            failed.append(f"steady samples/s {sps:,.1f} below min {t.min_samples_per_s:g}")
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
    return ", ".join(parts)
