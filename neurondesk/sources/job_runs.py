"""The run folders of one job, gathered and reduced for the job summary (core/job/job_summary.py).

Each argument is a run folder (holding events.jsonl) or a folder of run folders (the nodes' folders
copied to one place, or a job's folder on shared storage: its direct children are looked at). Every run
is reduced from its journal, as `neurondesk summary` does. The runs must be one job's: runs of
different job ids are refused unless ``job`` names the one to take (the others are then left out, and
said). One node given twice is one of two things: under a named job (--job, torchrun's --rdzv-id, a SLURM
job id) a relaunch of the job (a requeue, the same --job run again): its runs are that node's attempts, the
latest its run and the earlier ones kept for the job's goodput (core/job/job_goodput.py); under no job id,
refused: a job's data is never mixed with another run's. A relaunch comes after the run before it: a node's
runs whose lifetimes overlap (two runs started at once with the same --job) are concurrent runs, each the
node's run in its own right (no restart between them, no steps lost), the node's seconds counted once
(``NodeRun.share``: each run's part of the time the node's runs spanned together).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.core.findings.run_end import first_failure
from neurondesk.core.job.job_summary import NodeRun
from neurondesk.core.summary.build import run_summary
from neurondesk.sources.rebuild import state_from_run_dir
from neurondesk.store.rundir import RunPaths

MAX_RUNS = 4096  # folders of one job: far more nodes than a job has


class JobRunsError(ValueError):
    """The folders given are not one job's runs; the message says what to give instead."""


@dataclass
class JobRuns:
    job_id: str
    runs: list[NodeRun]
    states: list = field(default_factory=list)  # each run's reduced RunState, with keep_states
    notes: list[str] = field(default_factory=list)  # what was skipped or left out, one line each


def run_folders(args: list[Path]) -> list[Path]:
    out: list[Path] = []
    for a in args:
        if RunPaths(a).events.is_file():
            out.append(a)
        elif a.is_dir():
            found = sorted(d for d in a.iterdir() if d.is_dir() and not d.is_symlink() and RunPaths(d).events.is_file())
            if not found:
                raise JobRunsError(f"{a} holds no run folder (no events.jsonl in it nor in its folders): give each "
                                   "node's run folder, or the folder they were copied to")
            out += found
        else:
            raise JobRunsError(f"{a} is no folder: give each node's run folder, or the folder they were copied to")
        if len(out) > MAX_RUNS:
            raise JobRunsError(f"more than {MAX_RUNS} run folders given: give one job's folders")
    seen, unique = set(), []
    for d in out:  # a folder named twice (itself and its parent) is one run
        key = d.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


def gather(args: list[Path], job: str | None = None, target_loss: float | None = None,
           keep_states: bool = False) -> JobRuns:
    """``keep_states``: keep each run's reduced state (the trace export draws from them)."""
    folders = run_folders(args)
    notes: list[str] = []
    reduced = []
    for d in folders:
        try:
            state, problems = state_from_run_dir(d, target_loss, notes=[])
        except (OSError, ValueError) as exc:
            raise JobRunsError(f"{d}: {exc}") from exc
        if problems:
            notes.append(f"{RunPaths(d).events}: {len(problems)} unreadable line(s) skipped (first: line "
                         f"{problems[0].line}: {problems[0].error})")
        summary = run_summary(state)
        reduced.append((d, state, summary))
    by_job: dict[str, list] = {}
    for item in reduced:
        by_job.setdefault(item[2].job.job_id if item[2].job else "", []).append(item)
    chosen = _choose(by_job, job, notes)
    items = by_job[chosen]
    items, earlier, shares = _attempts(items, chosen, notes)
    if chosen == "" and len(items) > 1:
        notes.append("these runs name no job id (no --job, no torchrun --rdzv-id, no SLURM job): merged because "
                     "they were given together; give `--job ID` to each node's `neurondesk run` next time")
    runs = [NodeRun(run_dir=str(d), summary=s, end=first_failure(state), started_t=state.started_t,
                    earlier=earlier.get(str(d), []), share=shares.get(str(d), 1.0))
            for d, state, s in items]
    return JobRuns(job_id=chosen, runs=runs, states=[state for _, state, _ in items] if keep_states else [], notes=notes)


def _choose(by_job: dict[str, list], job: str | None, notes: list[str]) -> str:
    if job is not None:
        if job not in by_job:
            have = ", ".join(repr(j) for j in sorted(by_job))
            raise JobRunsError(f"no run of job {job!r} among the folders given (they are of: {have})")
        for other, items in sorted(by_job.items()):
            if other != job:
                notes.append(f"left out {len(items)} run(s) of job {other!r}: "
                             + ", ".join(str(d) for d, _, _ in items[:5]))
        return job
    if len(by_job) > 1:
        groups = "; ".join(f"job {j!r}: " + ", ".join(str(d) for d, _, _ in items[:3])
                           + (f" and {len(items) - 3} more" if len(items) > 3 else "")
                           for j, items in sorted(by_job.items()))
        raise JobRunsError(f"these runs belong to {len(by_job)} jobs ({groups}): a job summary merges one job; "
                           "give one job's folders, or --job ID")
    return next(iter(by_job))


def _span(item) -> tuple[float, float] | None:
    """(start, end) of a run on its node's clock; None when its start or length is not known."""
    _, state, s = item
    if state.started_t is None or s.elapsed_s is None:
        return None
    return state.started_t, state.started_t + max(0.0, s.elapsed_s)


def concurrent_share(spans: list[tuple[float, float]]) -> float | None:
    """The part of its length each run is billed when some of ``spans`` (sorted by start) overlap: the
    time they covered together over the sum of their lengths; None when none overlaps another."""
    covered, total, end, overlap = 0.0, 0.0, float("-inf"), False
    for start, stop in spans:
        total += stop - start
        overlap = overlap or start < end
        covered += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return (covered / total if total > 0 else 1.0) if overlap else None


def _attempts(items: list, job: str, notes: list[str]) -> tuple[list, dict[str, list], dict[str, float]]:
    """(each node's run: its latest, or every one of runs that overlap; {its folder: the node's earlier runs'
    summaries, oldest first}; {folder: its share of the node's seconds}, for concurrent runs); two runs
    of a node under no job id are refused."""
    by_node: dict[str, list] = {}
    for item in items:
        d, state, s = item
        by_node.setdefault(s.job.node if s.job else (s.run_id or str(d)), []).append(item)
    latest, earlier, shares = [], {}, {}
    for node, same in sorted(by_node.items()):
        same.sort(key=lambda x: x[1].started_t if x[1].started_t is not None else float("-inf"))
        spans = [_span(x) for x in same]
        share = concurrent_share(spans) if len(same) > 1 and job and None not in spans else None
        if share is not None:  # started at once (same --job): concurrent runs, never a relaunch
            latest += same
            shares |= {str(d): share for d, _, _ in same}
            notes.append(f"node {node!r} has {len(same)} runs of job {job!r} whose lifetimes overlap: concurrent "
                         "runs, not relaunches (no restart between them); the node's seconds are counted once, "
                         "shared between them")
            continue
        latest.append(same[-1])
        if len(same) > 1 and job:
            earlier[str(same[-1][0])] = [s for _, _, s in same[:-1]]
            notes.append(f"node {node!r} has {len(same)} runs of job {job!r}: relaunches of the job, taken as its "
                         f"attempts (the latest, {same[-1][0]}, is the node's run; the earlier count in its goodput)")
        elif len(same) > 1:
            same = [(d, s) for d, _, s in same]
            where = ", ".join(f"{d} (run {s.run_id}, started {s.started_at or '?'})" for d, s in same)
            raise JobRunsError(f"node {node!r} has {len(same)} runs among the folders given ({where}): a job summary "
                               "takes one run a node under no job id; give the one you mean, or run each attempt "
                               "with the same --job (its relaunches are then the job's attempts)")
    return latest, earlier, shares
