"""Render a summary (core/summary/types.py's Summary) as JSON, Markdown, CSV or a text table. No figure is
computed here: the rows show core's values."""

from __future__ import annotations

import csv
import io
import json
import math
import shlex

from neurondesk.core.figures.run_figures import FIGURES
from neurondesk.core.findings.crash import Crash
from neurondesk.core.findings.memory_creep import MemoryCreep
from neurondesk.core.summary.types import (
    CompileRow,
    ErrorItem,
    Evaluation,
    NeuronExecutions,
    ScriptThroughput,
    Summary,
)
from neurondesk.reports import fmt
from neurondesk.reports.goodput_text import goodput_markdown, goodput_words
from neurondesk.reports.neuron_rows import compile_split_lines, neuron_rows
from neurondesk.reports.phases_text import phases_markdown
from neurondesk.reports.safe_text import clean


def jsonable(x):
    """``x`` with non-finite floats as strings (JSON has no NaN): every JSON writer's."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)  # "nan" / "inf": a loss that exploded is information, and JSON has no NaN
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [jsonable(v) for v in x]
    return x


def to_json(summary: Summary) -> str:
    """summary.json's text: the struct's fields in their order, non-finite floats as strings."""
    return json.dumps(jsonable(summary.as_dict()), indent=2) + "\n"


def _fmt(x, unit: str = "", nd: int = 3) -> str:
    if x is None:
        return fmt.NONE
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        return f"{x:,.{nd}f}{unit}"
    return f"{x}{unit}"


def script_rate_text(r: ScriptThroughput | None) -> str:
    """``412.4 samples/s vs 300 samples/s (steady samples/s (one process)): +37.5% — off by more than 10%``."""
    if r is None:
        return fmt.NONE
    own = f"{r.value:,.4g} {r.unit}"
    if r.steady_value is None or r.vs_steady is None:
        return f"{own} (no {r.compared_with or 'steady figure'} to compare with)"
    text = f"{own} vs {r.steady_value:,.4g} {r.unit} ({r.compared_with}): {r.vs_steady * 100:+.1f}%"
    return text + (f" — off by more than {r.tolerance:.0%}" if r.off else "")


def summary_rows(s: Summary) -> list[tuple[str, str]]:
    """(label, value) pairs shared by the Markdown table, the headless table and CSV."""
    steady, cost, loss, dev = s.steady, s.cost, s.loss, s.device
    price = "—" if cost.price_per_hour is None else f"${cost.price_per_hour:.4f}/h"

    def money(name: str):
        # the run figure itself (summary version 2), not the cost section's copy rounded to 6 places:
        # rounding twice could show $0.0595 where every other output shows $0.0596
        return getattr(s.figures if s.figures is not None else cost, name)

    crash = s.crash  # how it died (core/findings/crash.py): a row only for a run that died
    creep = s.memory_creep  # memory that creeps (core/findings/memory_creep.py): a row only when some does
    step_time, p90 = steady.step_time_s, steady.step_time_p90_s
    return [
        ("command", shlex.join(str(a) for a in s.command)),
        ("exit code", _fmt(s.exit_code)),
        *([("died", f"{crash.kind}: {crash.finding}")] if crash else []),
        *([("memory creeps", creep.short.removeprefix("memory creeps: "))] if creep else []),
        ("device", f"{dev.kind or '—'} ({dev.name or 'unknown'})"),
        ("precision", _fmt(s.precision)),
        ("steps", _fmt(s.steps)),
        ("first compile", _fmt(s.first_compile_s, " s", 2)),
        ("compiles (total time)", f"{s.compile_count} ({_fmt(s.compile_total_s, ' s', 2)})"),
        ("recompiles after warm-up", _fmt(s.recompiles_after_warmup)),
        ("graph executions per step", _fmt(s.executions_per_step)),
        ("steady from step (steps)", f"{_fmt(steady.from_step)} ({steady.steps})"),
        ("steady step time mean / p90",
         f"{_fmt(step_time and step_time * 1000, ' ms', 1)} / {_fmt(p90 and p90 * 1000, ' ms', 1)}"),
        ("samples/s (steady)", fmt.rate(steady.samples_per_s)),
        ("tokens/s (steady)", fmt.rate(steady.tokens_per_s)),
        ("script's own throughput", script_rate_text(s.script_throughput)),
        ("data wait", f"{fmt.pct(s.data_wait_fraction)} ({s.input_verdict})"),
        ("loss first → last", f"{_fmt(loss.first, '', 4)} → {_fmt(loss.last, '', 4)}"),
        ("steps to target loss", _fmt(loss.steps_to_target)),
        ("instance, price", f"{cost.instance_type or '—'}, {price}"),
        ("price source", cost.price_source or "—"),
        ("cost so far", fmt.usd(money("total_usd"))),
        ("$ / 1k steps steady", fmt.usd(money("per_1k_steps_steady_usd"))),
        ("$ / 1k steps all-in", fmt.usd(money("per_1k_steps_all_in_usd"))),
        ("$ / 1M tokens", fmt.usd(money("per_million_tokens_usd"))),
        ("compile share of cost", fmt.pct(cost.compile_share)),
        ("errors", _errors_text(s)),
    ]


def _error_line(e: ErrorItem, width: int | None = None) -> str:
    """'NCC_EVRF024 (neuron-cc): message', the code not repeated where the message starts with it."""
    message = " ".join(clean(e.message).removeprefix(f"[{e.code}]").split())
    if width is not None and len(message) > width:
        message = message[: width - 1] + "…"
    return f"{e.code or '—'} ({e.source}): {message}"


def _errors_text(s: Summary, shown: int = 3) -> str:
    """The error count and the first few, one line."""
    if not s.error_count:
        return "0"
    return (f"{s.error_count}: " + "; ".join(_error_line(e, 60) for e in s.first_errors[:shown])
            + ("; …" if s.error_count > shown else ""))


def report_rows(s: Summary) -> list[tuple[str, str]]:
    """summary_rows plus MFU / HFU (kept apart so the console's summary screen stays as it is)."""
    why = "" if s.mfu is not None else f" ({s.mfu_note or 'unknown'})"
    rows = [*summary_rows(s), ("MFU / HFU", f"{fmt.pct(s.mfu)} / {fmt.pct(s.hfu)}{why}"),
            *([("goodput", goodput_words(s.goodput))] if s.goodput else []), *figure_rows(s)]
    ex, ev = s.neuron_executions, s.evaluation
    return (rows + ([("Neuron execution errors", _execution_errors(ex))] if ex else []) + neuron_rows(s)
            + ([("evaluation (not in throughput)", evaluation_text(ev))] if ev else []))


def figure_rows(s: Summary) -> list[tuple[str, str]]:
    """The figures core lists for reports (FigureInfo.report), read from the summary's figures
    (absent from a version 1 summary: no rows)."""
    f = s.figures
    if f is None:
        return []
    rows = [(info.label, fmt.value_text(getattr(f, info.name), info.kind)) for info in FIGURES
            if info.report and (getattr(f, info.name) or not info.quiet)]
    if f.budget is not None:
        rows.append(("budget", f.budget.words()))
    return rows


def evaluation_text(ev: Evaluation) -> str:
    """'4 phases, 160 batches, 12.3 s (8.1% of the run, $0.0123)'."""
    cost = f", {fmt.usd(ev.cost_usd)}" if ev.cost_usd is not None else ""
    return (f"{ev.phases} phase{'s' if ev.phases != 1 else ''}, {ev.batches:,} batches, "
            f"{_fmt(ev.time_s, ' s', 1)} ({fmt.pct(ev.share_of_run)} of the run{cost})")


def _execution_errors(ex: NeuronExecutions) -> str:
    """"4 of 43 executions (failed_to_queue 2, timed_out 1, ...)", from neuron-monitor's execution_stats."""
    total = ex.completed + ex.errors
    if not ex.errors:
        return f"none of {total:,} executions"
    by = sorted(ex.errors_by_status.items(), key=lambda kv: (-kv[1], kv[0]))
    return f"{ex.errors:,} of {total:,} executions ({', '.join(f'{k} {v:,}' for k, v in by)})"


def _compile_shapes(c: CompileRow) -> str:
    after = fmt.shapes(c.input_shapes)
    return f"{fmt.shapes(c.previous_shapes)} → {after}" if c.previous_shapes else after


def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", r"\|")


def _compile_row(i: int, c: CompileRow, world: int = 1) -> str:
    where = c.location or c.name or "—"
    if c.library:  # "in transformers Trainer.evaluation_loop at trainer.py:4675, called from run_clm.py:652"
        where = f"in {c.library}, called from {where}"
    cause = c.cause + (f" ({_rank_count(c, world)})" if world > 1 and c.ranks else "")
    return (f"| {i} | {_fmt(c.step)} | {_cell(cause)} | {_cell(where)} | {_cell(_compile_shapes(c))} | "
            f"{_cell(c.reason or '—')} | {_fmt(c.duration_s, ' s', 2)}"
            f"{'' if c.counted else ' (not in the total)'} | {c.cache or '—'} | "
            f"{c.status or '—'} | {c.graph_hash or '—'} |")


def _rank_count(c: CompileRow, world: int) -> str:
    """'x 4 ranks', or 'rank 3 only' / 'ranks 1, 3 only' for a graph some ranks compiled."""
    ranks = sorted(set(c.ranks))
    if len(ranks) >= world:
        return f"× {len(ranks)} ranks"
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} only"


def _ranks_markdown(s: Summary) -> list[str]:
    """'## Ranks' (one row per rank, then the stragglers) and '## Failed rank' with its traceback."""
    lines = []
    if s.ranks:
        lines += ["", "## Ranks", "",
                  "| rank | local rank | pid | steps | step time | presync | data wait | samples/s | compiles |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in s.ranks:
            lines.append(f"| {_fmt(r.rank)} | {_fmt(r.local_rank)} | {r.pid} | {_fmt(r.steps)} | "
                         f"{fmt.ms(r.step_time_s)} | {fmt.ms(r.presync_s)} | "
                         f"{fmt.pct(r.data_wait_fraction)} | {fmt.rate(r.samples_per_s)} | "
                         f"{_fmt(r.compile_count)} |")
        lines.append("")
        lines += [f"- straggler: {x.words}" for x in s.stragglers] or ["- no straggler"]
    f = s.failed_rank
    if f:
        who = f"rank {f.rank}" if f.rank is not None else "a process"
        at = f", at step {f.step}" if f.step is not None else ""
        lines += ["", "## Failed rank", "", f"{who} (pid {f.pid}){at}: {f.error}"]
        if f.traceback:
            lines += ["", "```", *(x.replace("```", "ˋˋˋ") for x in f.traceback), "```"]
    return lines


def crash_markdown(crash: Crash | None) -> list[str]:
    """summary.md's account of a death (core/findings/crash.py): the finding, what to try, the memory, the evidence."""
    if crash is None:
        return []
    lines = ["", "## How it died", "", f"**{crash.kind}**: {crash.finding}", "", f"- try: {crash.try_next}"]
    lines += [f"- {m.words}" for m in (crash.host_memory, crash.device_memory) if m is not None and m.words]
    if crash.evidence:
        lines.append(f"- told by: `{crash.evidence.replace('`', 'ˋ')}`")
    return lines


def creep_markdown(creep: MemoryCreep | None) -> list[str]:
    """summary.md's memory that creeps (core/findings/memory_creep.py): each leak in words (with the line lint
    found, where `neurondesk summary` asked it)."""
    if creep is None:
        return []
    return ["", "## Memory that creeps", "", *(f"- {x.words}" for x in creep.leaks)]


def _errors_markdown(s: Summary) -> list[str]:
    if not s.first_errors:
        return []
    lines = ["", "## Errors", ""]
    for e in s.first_errors:
        detail = e.detail or []
        lines.append(f"- {_error_line(e)}")
        lines += [f"  - {x}" for x in detail[:5]]
        if len(detail) > 5:
            lines.append(f"  - … {len(detail) - 5} more line(s)")
    if s.error_count > len(s.first_errors):
        lines.append(f"- … {s.error_count - len(s.first_errors)} more (summary.json lists the last 20)")
    return lines


def _missed_markdown(s: Summary) -> list[str]:
    if not (s.steps_lost or s.reduce_errors):
        return []
    lines = ["", "## What the recording missed", ""]
    if s.steps_lost:
        lines.append(f"- {s.steps_lost:,} step events were lost (the recorder fell behind); "
                     "the step count is the probe's own")
    if s.reduce_errors:
        lines.append(f"- {s.reduce_errors:,} event(s) could not be reduced and were skipped")
        lines += [f"  - {x}" for x in s.reduce_error_samples]
    return lines


def _disk_markdown(s: Summary) -> list[str]:
    disk = s.disk
    lost = disk.output_not_stored if disk is not None else None
    if disk is None or not (disk.filesystems or lost):
        return []
    lines = ["", "## Disks", ""]
    lines += [f"- {f.words} (`{f.path}`)" for f in disk.filesystems if f.words]
    if lost is not None and lost.words:
        lines.append(f"- {lost.words}")
    return lines


def to_markdown(s: Summary) -> str:
    lines = [f"# neurondesk run {s.run_id}", "", "| | |", "|---|---|"]
    lines += ["| {} | {} |".format(k, v.replace("|", r"\|")) for k, v in report_rows(s)]
    lines += crash_markdown(s.crash)
    lines += goodput_markdown(s)
    lines += creep_markdown(s.memory_creep)
    if s.compiles:
        lines += ["", "## Compiles", "",
                  "| # | step | cause | location | shapes (before → after) | reason | duration | cache | status | graph |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [_compile_row(i, c, s.world_size or 1) for i, c in enumerate(s.compiles, 1)]
    lines += _ranks_markdown(s)
    splits = compile_split_lines(s)
    if splits:
        lines += ["", "## TorchNeuron compile split (graph_stats)", "", *splits]
    lines += _errors_markdown(s)
    if s.split_points:
        lines += ["", "## Graph executions inside a step (split points)", ""]
        lines += [f"- {p.trigger} at {p.location or '?'}: {p.count}×" for p in s.split_points]
    lines += _missed_markdown(s)
    if s.time_breakdown:
        lines += ["", "## Where the time went", "", "| | seconds | share | cost |", "|---|---|---|---|"]
        lines += [f"| {x.name} | {x.seconds:,.1f} | {fmt.pct(x.share)} | {fmt.usd(x.usd)} |" for x in s.time_breakdown]
    lines += phases_markdown(s)  # the steady step by phase and its verdict (reports/phases_text.py)
    if s.advice:
        lines += ["", "## What to do", ""]
        lines += [f"- {a['message']}" for a in s.advice]
    if s.diagnostics:
        lines += ["", "## Diagnostics", ""]
        lines += [f"- {d.message}" + (f" (at `{d.location}`)" if d.location else "") for d in s.diagnostics]
    lines += _disk_markdown(s)
    if s.notices:
        lines += ["", "## Notices", "", *(f"- {n}" for n in s.notices)]
    if s.stderr_tail and s.exit_code not in (0, None):
        lines += ["", "## End of the workload's stderr", "", "```", *s.stderr_tail, "```"]
    return "\n".join(lines) + "\n"


def _flatten(d: dict, prefix: str = ""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        elif isinstance(v, list):
            if all(not isinstance(x, (dict, list)) for x in v):
                yield f"{prefix}{k}", " ".join(str(x) for x in v)
        else:
            yield f"{prefix}{k}", "" if v is None else v


def to_csv(s: Summary) -> str:
    """One row per scalar field, dotted keys, raw numbers (lists of records are left out)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["field", "value"])
    for k, v in _flatten(s.as_dict()):
        w.writerow([k, v])
    return buf.getvalue()


def to_text_table(s: Summary) -> str:
    rows = report_rows(s)
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows) + "\n"


WRITERS = {"json": to_json, "md": to_markdown, "csv": to_csv, "text": to_text_table}
