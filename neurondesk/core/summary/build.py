"""The run summary (the summary.json contract, core/summary/types.py) built from a RunState. Pure.

Every figure in it is core/figures/run_figures.py's, read, never recomputed. Unknown figures are None (null in
JSON), never a made-up number. ``run_summary`` gives the typed Summary every reader takes; the recorder builds
it once at the end of a run and hands that one to every output.
"""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from neurondesk.core.figures.cost import cost_so_far
from neurondesk.core.figures.run_figures import RunFigures, run_figures
from neurondesk.core.figures.time_breakdown import time_breakdown
from neurondesk.core.findings.advice import advise
from neurondesk.core.findings.diagnostics import device_utilization, diagnostics, input_advice
from neurondesk.core.node.prices import PriceTable
from neurondesk.core.reduce.loss import ScriptRate
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary import types as st
from neurondesk.core.summary.neuron_summary import CompileSplitSection, neuron_section, split_section
from neurondesk.core.summary.types import SUMMARY_VERSION, Summary

__all__ = ["SUMMARY_VERSION", "Summary", "run_summary", "script_throughput_row"]
FIRST_ERRORS = 5  # errors listed in full (with their detail lines) from the start of the run


def _round(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(float(x), nd)  # a float always: 0 and 0.0 print alike after a JSON trip


def _sig(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else float(f"{x:.{digits}g}")


def _devices(state: RunState) -> st.Devices | None:
    """What was on the machine (the inventory taken at start), reasons included; the Neuron counts
    from neuron-monitor's neuron_hardware_info when neuron-ls listed none."""
    inv, hw = state.inventory, state.parts.telemetry.neuron_hardware
    if inv is None and hw is None:
        return None
    devices = inv.neuron.devices if inv is not None and inv.neuron is not None else []
    if devices or hw is None:
        counts = (len(devices), sum(d.nc_count or 0 for d in devices), "neuron-ls" if devices else None)
    else:
        counts = (hw.device_count, hw.total_cores, "neuron-monitor neuron_hardware_info")
    return st.Devices(
        neuron_devices=counts[0],
        neuron_cores=counts[1],
        neuron_source=counts[2],
        neuron_reason=inv.neuron_reason if inv is not None else None,
        gpus=[g.name for g in inv.gpus] if inv is not None else [],
        gpu_reason=inv.gpu_reason if inv is not None else None,
        cpu=msgspec.to_builtins(inv.cpu) if inv is not None else None,
    )


def _neuron_executions(state: RunState) -> st.NeuronExecutions | None:
    """neuron-monitor's execution_stats over the run: completed, and the errors by status and class."""
    tel = state.parts.telemetry
    if not tel.executions_seen:
        return None
    return st.NeuronExecutions(
        completed=tel.executions_completed_total,
        errors=sum(tel.execution_errors_by_status.values()),
        errors_by_status=dict(tel.execution_errors_by_status),
        errors_by_class=dict(tel.execution_errors_by_class),
    )


def _evaluation(state: RunState, elapsed: float) -> st.Evaluation | None:
    """Evaluation phases: their own time, share of the run and of its cost; never in throughput."""
    e = state.parts.evaluation
    if not e.phases:
        return None
    price = state.price_per_hour
    return st.Evaluation(
        phases=e.phases,
        time_s=_round(e.total_s, 3),
        share_of_run=_round(e.total_s / elapsed, 4) if elapsed > 0 else None,
        cost_usd=_round(cost_so_far(price, e.total_s), 6),
        batches=e.batches,
        samples=e.samples,
        tokens=e.tokens or None,
        compiles=e.compiles,
    )


def _ranks(state: RunState) -> list[dict]:
    """One row per rank (empty for a single process)."""
    ranks = state.parts.ranks
    if ranks.world < 2:
        return []
    per_pid = state.parts.compiles.per_pid
    tree = state.process_tree
    procs = {p.pid: p for p in tree.processes} if tree is not None else {}
    neuron = state.neuron
    rows = []
    for r in ranks.by_rank():
        compiles = per_pid.get(r.pid, [0, 0.0, 0])
        proc = procs.get(r.pid)
        cores = [c for c in (neuron.cores if neuron is not None else []) if c.owner_pid == r.pid]
        utils = [c.utilization for c in cores if c.utilization is not None]
        rows.append({
            "cpu_percent": _round(proc.cpu_percent, 1) if proc is not None else None,
            "rss_bytes": proc.rss if proc is not None else None,
            "neuron_cores": [c.core for c in cores],
            "neuron_utilization": _round(sum(utils) / len(utils), 1) if utils else None,
            "rank": r.rank, "local_rank": r.local_rank, "pid": r.pid, "steps": r.steps,
            "step_time_s": _round(r.step_time_s), "mean_step_s": _round(r.mean_step_s), "presync_s": _round(r.presync_s),
            "own_s": _round(r.own_s), "collective_s": _round(r.collective_s), "step_data_wait_s": _round(r.split_wait_s),
            "data_wait_fraction": _round(r.data_wait_fraction, 4),
            "samples_per_s": _round(r.samples_per_s, 3),
            "compile_count": compiles[0], "compile_total_s": _round(compiles[1]),
            "recompiles_after_warmup": compiles[2],
        })
    return rows


def _graphs(state: RunState, index: int) -> list[CompileSplitSection]:
    """The TorchNeuron graphs a compile made (forward, backward), each once: name, id, node count, times."""
    return [split_section(index, g) for g in state.parts.telemetry.graph_stats.graphs_of(index)]


def _failed_rank(state: RunState) -> st.FailedRank | None:
    f = state.parts.ranks.failed_first
    if f is None:
        return None
    return st.FailedRank(rank=f.rank, pid=f.pid, error=f.error, step=f.step, traceback=list(f.traceback))


def run_summary(state: RunState, now: float | None = None, peaks: PriceTable | None = None) -> Summary:
    """``peaks``: the table whose chip rows give MFU's peak FLOPS (default: the bundled one)."""
    slices = tuple(time_breakdown(state, now))  # once a summary: its breakdown, goodput and training share
    f = run_figures(state, now, peaks, slices)
    started = (datetime.fromtimestamp(state.started_t, UTC).isoformat(timespec="seconds")
               if state.started_t is not None else None)
    compiles = state.parts.compiles
    return Summary(
        summary_version=SUMMARY_VERSION,
        run_id=state.run_id,
        command=list(state.command),
        started_at=started,
        elapsed_s=_round(f.elapsed_s, 3),
        exit_code=state.exit_code,
        exit_signal=state.exit_signal,
        finished=state.finished,
        device=st.Device(kind=state.device_kind, name=state.device_name, framework=state.parts.procs.framework,
                         framework_version=state.parts.procs.framework_version, cores=state.parts.procs.cores),
        precision=state.precision or state.config.get("precision"),
        config=state.config or None,
        steps=f.steps,
        steps_requested=f.steps_requested,
        warmup_steps=state.warmup_steps,
        processes=len(state.processes),
        world_size=state.world,
        ranks=[msgspec.convert(r, st.RankRow) for r in _ranks(state)],
        stragglers=[st.Straggler(rank=x.rank, presync_s=_round(x.presync_s), vs_median_s=_round(x.vs_median_s),
                                 cause=x.cause, words=x.words()) for x in state.parts.ranks.stragglers()],
        failed_rank=_failed_rank(state),
        job=state.parts.job.identity(),
        first_compile_s=_round(f.first_compile_s),
        compile_count=f.compile_count,
        compile_total_s=_round(f.compile_total_s),
        compiles=[st.CompileRow(**c.as_dict(), after_warmup=compiles.after_warmup(c), graphs=_graphs(state, c.index))
                  for c in state.compiles],
        recompiles_after_warmup=f.recompiles_after_warmup,
        recompiles_by_phase=compiles.recompiles_by_phase(),
        executions_per_step=state.executions_per_step,
        split_points=[st.SplitPoint(trigger=p.trigger, location=p.location, count=p.count, library=p.library,
                                    called_from=p.called_from)
                      for p in state.split_points.values()],
        graph_breaks=[st.GraphBreak(reason=g.reason, location=g.location, step=g.step, explanation=g.explanation,
                                    hints=list(g.hints), registry_id=g.registry_id) for g in state.graph_breaks],
        steady=st.Steady(
            from_step=state.steady_from,
            steps=f.steady_steps,
            step_time_s=_round(f.step_time_s),
            step_time_p90_s=_round(f.step_time_p90_s),
            samples_per_s=_round(f.samples_per_s, 3),
            tokens_per_s=_round(f.tokens_per_s, 3),
            rule=f"steps >= {state.warmup_steps} in which nothing compiled",
        ),
        evaluation=_evaluation(state, f.elapsed_s),
        data_wait_fraction=_round(f.data_wait_fraction, 4),
        input_verdict=state.input_verdict(),
        input_advice=input_advice(state),
        diagnostics=[st.DiagnosticRow(kind=d.kind, message=d.message, location=d.location) for d in diagnostics(state)],
        advice=[a.as_dict() for a in advise(state)],
        time_breakdown=[st.TimeSlice(name=x.name, seconds=x.seconds, share=x.share, usd=x.usd)
                        for x in slices],
        device_utilization=st.DeviceUtilization(**device_utilization(state)),
        devices=_devices(state),
        neuron_executions=_neuron_executions(state),
        neuron=neuron_section(state),
        loss=st.Loss(first=state.loss_first, last=state.loss_last, target=state.target_loss,
                     steps_to_target=state.steps_to_target, time_to_target_s=_round(state.time_to_target_s, 3),
                     nonfinite=state.loss_nonfinite),
        script_throughput=_script_throughput(state),
        mfu=_sig(f.mfu),
        hfu=_sig(f.hfu),
        mfu_note=f.mfu_note,
        flops=st.Flops(model_per_s=_sig(f.model_flops_per_s), hardware_per_s=_sig(f.hardware_flops_per_s),
                       peak_per_s=_sig(f.peak_flops_per_s)),
        cost=_cost(state, f),
        errors=[st.ErrorItem(source=e.source, message=e.message, code=e.code) for e in state.errors[-20:]],
        error_count=len(state.errors),
        first_errors=[st.ErrorItem(source=e.source, message=e.message, code=e.code, detail=e.detail)
                      for e in state.errors[:FIRST_ERRORS]],
        stderr_tail=list(state.stderr_tail),
        left_running=[st.LeftRunning(pid=p.pid, command=p.command) for p in state.left_running],
        parse_problems=state.parse_problems,
        steps_lost=state.steps_lost,
        probe_messages_lost=state.messages_lost,
        reduce_errors=state.reduce_errors,
        reduce_error_samples=list(state.reduce_error_samples),
        notices=_notices(state),
        disk=msgspec.convert(state.parts.disk.as_dict(), st.Disk),  # free space, growth, forecast (core/node/disk.py)
        figures=f,
        step_phases=f.step_phases,
        crash=f.crash,
        # its own copy: `neurondesk summary` adds lint's line to this one (lint/locate.py), the figures keep core's
        memory_creep=None if f.memory_creep is None else msgspec.structs.replace(f.memory_creep),
        goodput=f.goodput,
    )


def _cost(state: RunState, f: RunFigures) -> st.Cost:
    return st.Cost(
        instance_type=state.instance_type, price_per_hour=f.price_per_hour, price_source=state.price_source,
        total_usd=_round(f.total_usd), per_1k_steps_steady_usd=_round(f.per_1k_steps_steady_usd),
        per_1k_steps_all_in_usd=_round(f.per_1k_steps_all_in_usd),
        per_million_tokens_usd=_round(f.per_million_tokens_usd), compile_share=_round(f.compile_share_of_cost, 4),
        projected_usd=_round(f.projected_usd), to_target_usd=_round(f.to_target_usd))


def _script_throughput(state: RunState) -> st.ScriptThroughput | None:
    """The script's own throughput figure, neurondesk's steady one in the same unit, and how far apart."""
    rate = state.script_throughput()
    return None if rate is None else script_throughput_row(rate)


def script_throughput_row(rate: ScriptRate) -> st.ScriptThroughput:
    """summary.json's ``script_throughput`` (the console's throughput panel shows the same row)."""
    return st.ScriptThroughput(**rate.as_dict())


def _notices(state: RunState) -> list[str]:
    """The latest warnings and errors, then what the recorder itself lost or skipped, then a script
    throughput figure that disagrees with the steady one."""
    lines = [n.message for n in state.notices if n.level in ("warn", "error")][-20:]
    rate = state.script_throughput()
    derived = (state.steps_lost_text, state.reduce_error_text, _left_running_text(state),
               state.parts.disk.output_not_stored_words(),
               rate.warning() if rate is not None else None)
    return lines + [x for x in derived if x]


def with_late_notices(summary: Summary, state: RunState) -> Summary:
    """The recorder's summary with what its journal says after it was built: the recorder writes the summary
    first, then journals what went wrong writing it (an unwritable folder, the fallback the journal went on
    in). A reader of the finished run shows those too, where the summary file cannot hold them."""
    late = [n for n in _notices(state) if n not in summary.notices]
    return msgspec.structs.replace(summary, notices=[*summary.notices, *late]) if late else summary


def _left_running_text(state: RunState) -> str | None:
    left = state.left_running
    if not left:
        return None
    named = ", ".join(f"pid {p.pid} ({p.command[:60]})" for p in left[:5]) + (" ..." if len(left) > 5 else "")
    return (f"{len(left)} process{'es' if len(left) > 1 else ''} started by the workload still ran when it "
            f"exited: {named}; neurondesk left {'them' if len(left) > 1 else 'it'} running and did not bill "
            "the time after the exit")
