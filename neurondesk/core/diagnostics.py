"""Verdicts in words a user acts on, from RunState. Pure."""

from __future__ import annotations

from neurondesk.core.state import INPUT_BOUND, INPUT_WARN, RunState, quantile


def device_utilization(state: RunState) -> dict:
    """Mean and median device utilisation (%) over the samples taken in steady state."""
    xs = state.device_util_steady
    return {
        "mean": round(sum(xs) / len(xs), 2) if xs else None,
        "p50": None if not xs else round(quantile(xs, 0.5), 2),
        "samples": len(xs),
        "source": state.device_util_source,
    }


def input_advice(state: RunState) -> str:
    """E.g. "input-bound: the loop waits 62% of each step for data; workload CPU 100% of one
    core; device 18% busy — try num_workers > 0, prefetching, or preprocessing offline"."""
    frac = state.data_wait_fraction
    if frac is None:
        return "unknown: no step measured yet"
    verdict = state.input_verdict()
    facts = [f"the loop waits {frac * 100:.0f}% of each step for data"]
    tree = state.process_tree
    if tree is not None:
        facts.append(f"workload CPU {tree.total_cpu_percent:.0f}% of one core")
        if tree.dataloader_workers:
            facts.append(f"{tree.dataloader_workers} DataLoader workers at {tree.dataloader_cpu_percent:.0f}%")
    util = device_utilization(state)
    if util["mean"] is not None:
        facts.append(f"device {util['mean']:.0f}% busy")
    text = f"{verdict}: " + "; ".join(facts)
    if frac < INPUT_WARN:
        return text
    workers = tree.dataloader_workers if tree is not None else 0
    if workers == 0:
        hint = "try num_workers > 0, prefetching, or preprocessing offline"
    else:
        hint = "try more DataLoader workers, a faster decode/augment step, or preprocessing offline"
    if frac < INPUT_BOUND:
        hint = "worth watching: " + hint
    return f"{text} — {hint}"
