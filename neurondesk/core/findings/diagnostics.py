"""Verdicts in words a user acts on, from RunState. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.findings.checkpoint_advice import checkpoint_advice
from neurondesk.core.findings.neuron_errors import neuron_fault_findings
from neurondesk.core.node.node_health import health_words
from neurondesk.core.reduce.compile.compiles import STORM_STEPS
from neurondesk.core.reduce.state import INPUT_BOUND, INPUT_WARN, RunState
from neurondesk.core.reduce.telemetry import SteadyProcesses


def device_utilization(state: RunState) -> dict:
    """Mean and median device utilisation (%) over the samples taken in steady state."""
    xs = state.device_util_steady  # a bounded sketch (core/node/sketch.py)
    return {
        "mean": round(xs.total / len(xs), 2) if xs else None,
        "p50": None if not xs else round(xs.quantile(0.5), 2),
        "samples": len(xs),
        "source": state.device_util_source,
    }


def input_advice(state: RunState) -> str:
    """E.g. "input-bound: the loop waits 62% of each step for data; workload CPU 100% of one
    core; device 18% busy — try num_workers > 0, prefetching, or preprocessing offline".
    Process figures are means over the process-tree samples taken in steady state only (never a
    sample from compilation or teardown); without one they are left out."""
    frac = state.data_wait_fraction
    if frac is None:
        return "unknown: no step measured yet"
    steady = state.parts.telemetry.steady_processes
    facts = [f"the loop waits {frac * 100:.0f}% of each step for data", *_process_facts(steady)]
    util = device_utilization(state)
    if util["mean"] is not None:
        facts.append(f"device {util['mean']:.0f}% busy")
    text = f"{state.input_verdict()}: " + "; ".join(facts)
    if frac < INPUT_WARN:
        return text
    if steady.dataloader_workers == 0:
        hint = "try num_workers > 0, prefetching, or preprocessing offline"
    else:
        hint = "try more DataLoader workers, a faster decode/augment step, or preprocessing offline"
    if frac < INPUT_BOUND:
        hint = "worth watching: " + hint
    return f"{text} — {hint}"


def _process_facts(steady: SteadyProcesses) -> list[str]:
    if steady.cpu_percent is None:
        return []
    facts = [f"workload CPU {steady.cpu_percent:.0f}% of one core"]
    if steady.dataloader_workers and steady.dataloader_cpu_percent is not None:
        facts.append(f"{steady.dataloader_workers} DataLoader workers at {steady.dataloader_cpu_percent:.0f}%")
    return facts


@dataclass(frozen=True)
class Diagnostic:
    """A finding about the run in words a user acts on, with the code line it is about."""

    kind: str  # "graph-grows" | "no-steady-state"
    message: str
    location: str | None = None

    def as_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "location": self.location}


def diagnostics(state: RunState) -> list[Diagnostic]:
    neuron = [Diagnostic(kind=kind, message=text) for kind, text in neuron_fault_findings(state)]
    return [d for d in (*neuron, node_health(state), graph_grows(state), *many_graphs(state), no_steady_state(state),
                        checkpoint_interval(state), neff_sources(state), neff_evictions(state),
                        neff_unshared(state))
            if d is not None]


def neff_sources(state: RunState) -> Diagnostic | None:
    """TorchNeuron's metrics and its NEFF cache log counted the NEFF compiles differently
    (core/reduce/compile/neff.py): both numbers said."""
    words = state.parts.neff.disagreement()
    return None if words is None else Diagnostic(kind="neff-sources-disagree", message=words)


def neff_evictions(state: RunState) -> Diagnostic | None:
    """TorchNeuron's in-memory NEFF cache evicted NEFFs (core/reduce/compile/neff.py): the numbers and the fix."""
    words = state.parts.neff.evictions()
    return None if words is None else Diagnostic(kind="neff-cache-evictions", message=words)


def neff_unshared(state: RunState) -> Diagnostic | None:
    """Ranks compiling into NEFF cache folders of their own (core/reduce/compile/neff.py): what it cost, the fix."""
    words = state.parts.neff.unshared()
    return None if words is None else Diagnostic(kind="neff-cache-unshared", message=words)


def checkpoint_interval(state: RunState) -> Diagnostic | None:
    """The run checkpoints far more or less often than Young/Daly's interval for its save cost and
    failure rate (core/findings/checkpoint_advice.py); None when it is close, or nothing to base it on."""
    advice = checkpoint_advice(state.parts.checkpoints, state.elapsed_s(), state.parts.attempts.restarts)
    return Diagnostic(kind="checkpoint-interval", message=advice.words) if advice is not None and advice.off else None


def node_health(state: RunState) -> Diagnostic | None:
    """The node's EFA / NeuronLink / ECC / throttling counts that grew (core/node/node_health.py), beside its
    figures: "trn-07: 412 EFA retransmits in the last minute"; None while healthy or unmeasured."""
    h = state.parts.telemetry.health.health(state.parts.job.identity().node or "this node")
    words = None if h is None else health_words(h)
    return None if words is None else Diagnostic(kind="node-health", message=words)


MANY_GRAPHS = 8  # graphs compiled at one point of one phase before it is named


def many_graphs(state: RunState) -> list[Diagnostic]:
    """One point that compiles graph after graph (none of them a recompile: each is new), such as
    Trainer's evaluation concatenating its results on the device: on Neuron each is a compile wall."""
    storm = {c.point_key for c in state.parts.compiles.longest_growth} if graph_grows(state) else set()
    counts: dict[tuple[str, str], list] = {}
    for c in state.parts.compiles.compiles:
        if c.point_key in storm:
            continue  # the growing graph is named as such
        if c.point_key and c.source != "dynamo" and c.ok:
            counts.setdefault((c.phase, c.point_key), []).append(c)
    out = []
    for (phase, _point), cs in counts.items():
        if len(cs) < MANY_GRAPHS:
            continue
        where, lib = cs[-1].location or "?", cs[-1].library or ""
        trainer = "Trainer" in lib or "trainer.py" in where
        if lib:
            where = f"{where} (in {lib})"
        fix = ("in Trainer's evaluation, set eval_accumulation_steps (results go to the host every N steps) "
               "or prediction_loss_only=True (Trainer arguments, not an edit of its source)"
               if trainer and phase == "eval" else
               "keep the graph the same from call to call at this line: the same shapes (pad or bucket), no "
               "Python values that change baked into it, results moved to the host less often")
        total = sum(c.duration_s or 0.0 for c in cs)
        out.append(Diagnostic(
            kind="many-graphs",
            message=(f"{len(cs)} graphs compiled at {where} during {'evaluation' if phase == 'eval' else 'training'} "
                     f"({total:.1f} s in all): on Neuron each is a compile wall of its own; {fix}"),
            location=where))
    return out


def graph_grows(state: RunState) -> Diagnostic | None:
    """The recompile storm (see CompileReducer._track_growth), in words."""
    best = state.parts.compiles.longest_growth
    if len(best) < STORM_STEPS:
        return None
    inputs = " → ".join(str(c.graph_inputs) for c in best[-6:])
    return Diagnostic(
        kind="graph-grows",
        message=(f"the graph grows every step (graph inputs {inputs} over steps {best[0].step}–{best[-1].step}): "
                 "nothing cuts it, so each step compiles a larger graph holding every step before it; "
                 "call torch_xla.sync() (xm.mark_step()) at the end of each step"),
        location=best[-1].location)


def no_steady_state(state: RunState) -> Diagnostic | None:
    """Why there is no steady figure, when there is none."""
    if state.steady_times:
        return None
    done, warmup = state.steps_done, state.warmup_steps
    if done == 0:
        why = "no training step was seen (no optimizer step, and no XLA sync after a forward)"
    elif done <= warmup:
        why = (f"only {done} step{'s' if done != 1 else ''} ran; steady state starts after the first {warmup} "
               "(--warmup-steps)")
    else:
        why = f"every one of the {done - warmup} steps after warm-up compiled a graph"
    return Diagnostic(kind="no-steady-state", message=f"no steady state: {why}")
