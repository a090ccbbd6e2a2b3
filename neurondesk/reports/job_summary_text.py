"""A job summary (core/job/job_summary.py) in words: the findings, worst first, then a row per node.
The same words as the live job view (reports/job_text.py) where they say the same thing."""

from __future__ import annotations

import json

from neurondesk.core.job.job_summary import JobSummary
from neurondesk.reports.fmt import ms, pct, rate, secs, usd
from neurondesk.reports.job_text import figures_words, slow_collective_words, slow_words
from neurondesk.reports.safe_text import clean


def findings(j: JobSummary) -> list[str]:
    lines = [f"job {j.job_id or '(no job id)'}: {figures_words(j.figures, len(j.ranks))}"]
    f = j.first_failure
    if f is not None:
        rank = f"rank {f.rank}" if f.rank is not None else "a rank"
        step = f" at step {f.step:,}" if f.step is not None else ""
        when = f" at {f.at}" if f.at else ""
        last = f"; last stderr line: {f.last_line}" if f.last_line else ""
        lines.append(f"failed first: {rank} on node {f.node}{when}{step}: {f.what}{last}")
    g = j.goodput
    if g is not None:
        lines.append(f"goodput {pct(g.fraction, 0)} of {secs(g.wall_s, 1)} node-seconds"
                     + (f"; {g.restarts} restart(s) cost the job {secs(g.restart_cost_s, 1)} (node-seconds), "
                        f"{g.steps_lost:,} steps lost" if g.restarts else ""))
        for x in g.disruptions[:5]:
            d = x.disruption
            rank = f"rank {d.rank}" if d.rank is not None else "a rank"
            said = f"ended attempt {d.attempt} with {x.with_node}" if x.with_node else f"failed (attempt {d.attempt})"
            lines.append(f"node {x.node} {said}: {rank} at step {d.step or 0:,}: {d.cause[:160]}")
    unfinished = [n.node for n in j.nodes if not n.finished]
    if unfinished:
        lines.append(f"not ended in its journal: {', '.join(unfinished[:8])} (its recorder stopped, or the run "
                     "goes on: its figures are as far as recorded)")
    if j.compile_slowest_node is not None and len(j.nodes) > 1 and j.figures.compile_wait_s > 0:
        node = next(n for n in j.nodes if n.node == j.compile_slowest_node)
        misses = f", {node.cache_misses} cache miss(es)" if node.cache_misses else ""
        lines.append(f"{node.node} compiled longest ({secs(node.compile_total_s, 1)} over {node.compile_count} "
                     f"compile(s){misses}): the other nodes waited {secs(j.figures.compile_wait_s, 1)} "
                     "(node-seconds), counted in the job's compile share")
    if j.slowest is not None:
        lines.append(slow_words(j.slowest, len(j.ranks)))
    elif j.slow_collective is not None:
        lines.append(slow_collective_words(j.slow_collective))
    lines += [f"problem: {p}" for p in j.problems]
    return [clean(line) for line in lines]


NODE_HEAD = ("node", "node rank", "run", "ranks", "steps", "step time", "samples/s", "compile", "cache miss",
             "$/hour", "cost", "exit")


def node_rows(j: JobSummary) -> list[list[str]]:
    return [[n.node, "—" if n.node_rank is None else str(n.node_rank), n.run_id or "—",
             ",".join(map(str, n.ranks[:16])) + ("…" if len(n.ranks) > 16 else ""), f"{n.steps:,}",
             ms(n.step_time_s), rate(n.samples_per_s), secs(n.compile_total_s, 1), str(n.cache_misses),
             usd(n.price_per_hour), usd(n.total_usd),
             n.exit_signal or ("—" if n.exit_code is None else str(n.exit_code))] for n in j.nodes]


def text(j: JobSummary) -> str:
    out = findings(j) + [""]
    rows = [list(NODE_HEAD)] + node_rows(j)
    widths = [max(len(clean(r[i])) for r in rows) for i in range(len(NODE_HEAD))]
    out += ["  ".join(clean(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(out) + "\n"


def _md_cell(c: str) -> str:
    return clean(c).replace("|", "\\|")


def markdown(j: JobSummary) -> str:
    out = [f"# Job {_md_cell(j.job_id or '(no job id)')}", ""]
    out += [f"- {_md_cell(line)}" for line in findings(j)]
    f = j.figures
    out += ["", "| figure | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in (
        ("nodes", f"{f.nodes}" + (f" of {j.nodes_expected}" if j.nodes_expected else "")),
        ("ranks", str(len(j.ranks))), ("steps (every node)", f"{f.steps:,}"),
        ("steady step time (slowest node)", ms(f.step_time_s)), ("steady samples/s (job)", rate(f.samples_per_s)),
        ("steady tokens/s (job)", rate(f.tokens_per_s)), ("$ / hour (every node)", usd(f.price_per_hour)),
        ("cost", usd(f.total_usd)), ("$ / 1k steps steady", usd(f.per_1k_steps_steady_usd)),
        ("$ / 1k steps all-in", usd(f.per_1k_steps_all_in_usd)), ("$ / 1M tokens", usd(f.per_million_tokens_usd)),
        ("compile wall (slowest node)", secs(f.compile_wall_s, 1)),
        ("waited for another node's compile", secs(f.compile_wait_s, 1)),
        ("compile share", pct(f.compile_share)), ("MFU (every device)", pct(f.mfu)))]
    out += ["", "| " + " | ".join(NODE_HEAD) + " |", "|" + "---|" * len(NODE_HEAD)]
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in node_rows(j)]
    return "\n".join(out) + "\n"


def as_json(j: JobSummary) -> str:
    return json.dumps(j.as_dict(), indent=2) + "\n"


WRITERS = {"text": text, "md": markdown, "json": as_json}
