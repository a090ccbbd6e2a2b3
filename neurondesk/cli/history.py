"""The recorded runs: `ls` (live runs, then the latest finished), `compare` (runs or jobs side by side),
`history` (the run list, or the cost board with --group-by), `reindex` (the run index rebuilt); and
`resolve_run`, a run named by its folder or its id."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from neurondesk.cli.args import MAX_ROWS, whole
from neurondesk.cli.errors import die, say
from neurondesk.core.summary.types import Summary
from neurondesk.reports.tables import FORMATS


# ---------------------------------------------------------------------- ls
def cmd_ls(args) -> int:
    from neurondesk.reports.runs_list import format_runs
    from neurondesk.sources.runs import finished_runs, live_runs, sweep_socket_dirs

    sweep_socket_dirs()  # socket folders of recorders killed with SIGKILL
    notes: list[str] = []  # runs moved or deleted while live; a refused registry of live runs
    ended: list = []  # runs whose recorder is gone, settled on the way (their index row written)
    live = live_runs(notes=notes, ended=ended)
    say(notes)
    sys.stdout.write(format_runs(live, finished_runs(limit=args.last, ended=ended)))
    return 0


# ---------------------------------------------------------------------- compare
def resolve_run(text: str) -> Path:
    """A run folder, or a run id: under the run root, or wherever the run index says it is."""
    from neurondesk.store.index import RunIndex, RunIndexError
    from neurondesk.store.rundir import RunPaths, default_run_root, index_path

    candidates = [Path(text), default_run_root() / text]
    index = index_path(default_run_root())
    if index.exists():
        try:
            candidates += [Path(r.run_dir) for r in RunIndex(index).list_runs(limit=-1) if r.id == text]
        except RunIndexError:
            pass
    for candidate in candidates:
        if RunPaths(candidate).events.exists():
            return candidate
    die(f"run {text!r} not found: give a run folder (holding events.jsonl) or a run id from `neurondesk history`")


def cmd_compare(args) -> int:
    from neurondesk.core.rules.compare import choose_target, compare
    from neurondesk.reports.compare_writer import WRITERS

    if len(args.runs) < 2:
        die("compare needs at least two runs: neurondesk compare RUN_A RUN_B [...]")
    sources = [_compare_source(r) for r in args.runs]
    summaries = [_compared_summary(kind, where, None) for kind, where in sources]
    target, _ = choose_target(summaries, args.target_loss)
    if target is not None:  # reduce every run again as if it had been started with this target
        summaries = [s if s.loss.target == target or kind == "job file" else _compared_summary(kind, where, target)
                     for s, (kind, where) in zip(summaries, sources, strict=True)]
    sys.stdout.write(WRITERS[args.format](compare(summaries, args.target_loss)))
    return 0


def _compare_source(text: str) -> tuple[str, Path]:
    """("run", its folder), ("job folder", a folder of a job's run folders) or ("job file", a job summary's JSON)."""
    from neurondesk.store.rundir import RunPaths

    path = Path(text)
    if path.is_file():
        return "job file", path
    if path.is_dir() and not RunPaths(path).events.exists() and any(
            RunPaths(d).events.is_file() for d in path.iterdir() if d.is_dir() and not d.is_symlink()):
        return "job folder", path
    return "run", resolve_run(text)


def _compared_summary(kind: str, where: Path, target: float | None) -> Summary:
    """A run's summary, or a job's in the shape of one (core/job_summary.as_run_summary)."""
    from neurondesk.core.job.job_summary import JobSummaryError, as_run_summary, job_summary, load_job_summary
    from neurondesk.sources.job_runs import JobRunsError, gather
    from neurondesk.sources.rebuild import summary_from_run_dir
    from neurondesk.store.input_files import read_regular

    try:
        if kind == "job file":
            return as_run_summary(load_job_summary(read_regular(where, "a job summary", 64 << 20)))
        if kind == "job folder":
            runs = gather([where], target_loss=target)
            for note in runs.notes:
                sys.stderr.write(f"neurondesk: {note}\n")
            return as_run_summary(job_summary(runs.runs))
        s, problems = summary_from_run_dir(where, target)
    except JobSummaryError as exc:
        die(f"{where}: {exc}")
    except (OSError, ValueError) as exc:  # JobRunsError is a ValueError: its message names the folder
        die(str(exc) if isinstance(exc, JobRunsError) else f"{where}: {exc}")
    for p in problems[:3]:
        sys.stderr.write(f"neurondesk: {where}/events.jsonl line {p.line}: {p.error} (skipped)\n")
    return s


# ---------------------------------------------------------------------- history / cost board
RUN_COLUMNS = [("id", "run", "text"), ("started_at", "started", "text"), ("device", "device", "text"),
               ("steps", "steps", "int"), ("samples_per_s", "samples/s", "rate"),
               ("per_1k_steps_steady_usd", "$/1k st.", "usd"), ("exit_code", "exit", "int"),
               ("command", "command", "text"), ("state", "state", "text")]
BOARD_COLUMNS = [("period", "period (UTC)", "text"), ("device", "device", "text"), ("runs", "runs", "int"),
                 ("steps", "steps", "int"), ("cost_usd", "cost", "usd"),
                 ("per_1k_steps_steady_usd", "$/1k steps steady", "usd"),
                 ("per_1k_steps_all_in_usd", "$/1k steps all-in", "usd"),
                 ("per_million_tokens_usd", "$/1M tokens", "usd"), ("compile_share", "compile share", "pct")]


def cmd_history(args) -> int:
    from neurondesk.core.summary.board import cost_board, device_of, parse_since
    from neurondesk.reports.fmt import rate
    from neurondesk.reports.safe_text import clean
    from neurondesk.reports.tables import render
    from neurondesk.sources.ended import lost_recorder
    from neurondesk.store.index import RunIndex, RunIndexError
    from neurondesk.store.rundir import default_run_root, index_path

    since = None
    if args.since:
        try:
            since = parse_since(args.since, datetime.now(UTC))
        except ValueError as exc:
            die(str(exc))
    path = index_path(default_run_root())
    waiting: list = []  # ended runs whose row the locked index could not take yet
    live = [] if args.group_by else _live_rows(since, waiting)  # the board adds up finished runs only
    if not path.exists() and not live and not waiting:
        sys.stdout.write(f"no runs recorded yet (index {path} does not exist)\n")
        return 0
    rows = []
    if path.exists():
        try:
            index = RunIndex(path)
            rows = index.list_runs(since=since, limit=-1 if args.group_by else args.limit)
        except RunIndexError as exc:
            die(str(exc))
        if index.skipped:
            sys.stderr.write(f"neurondesk: {index.skipped} unreadable row(s) in the run index {path} skipped; "
                             "`neurondesk reindex` rebuilds it from the run folders\n")
    finished = {(r.id, r.run_dir) for r in rows}
    rows = [r for r in waiting if (r.id, r.run_dir) not in finished] + rows
    finished = {(r.id, r.run_dir) for r in rows}
    live = [r for r in live if (r.id, r.run_dir) not in finished]  # it ended while we looked
    states = ["live"] * len(live) + ["finished"] * len(rows)
    rows = live + rows
    if args.group_by:
        sys.stdout.write(render(BOARD_COLUMNS, cost_board([r.summary for r in rows], args.group_by), args.format))
        return 0
    if args.format == "text":
        fmt = "{:<22} {:<20} {:<8} {:>7} {:>10} {:>10} {:>6}  {}"
        sys.stdout.write(fmt.format("run", "started", "device", "steps", "samples/s", "$/1k st.", "exit", "command") + "\n")
        for r, state in zip(rows, states, strict=True):
            sps = "—" if r.steady_samples_per_s is None else rate(r.steady_samples_per_s)
            usd = "—" if r.usd_per_1k_steps_steady is None else f"${r.usd_per_1k_steps_steady:,.4f}"
            exit_ = "live" if state == "live" else r.exit_code if r.exit_code is not None else (
                "lost" if lost_recorder(r.run_dir, r.summary) else "—")
            sys.stdout.write(fmt.format(r.id, (r.started_at or "")[:19], r.device_kind or "—", r.steps or 0, sps, usd,
                                        exit_, clean(r.command or "")[:60]) + "\n")
        return 0
    table = [{"id": r.id, "started_at": r.started_at, "device": device_of(r.summary), "steps": r.steps,
              "samples_per_s": r.steady_samples_per_s, "per_1k_steps_steady_usd": r.usd_per_1k_steps_steady,
              "exit_code": r.exit_code, "command": r.command, "state": state}
             for r, state in zip(rows, states, strict=True)]
    sys.stdout.write(render(RUN_COLUMNS, table, args.format))
    return 0


def _live_rows(since: datetime | None, waiting: list | None = None) -> list:
    """Index-like rows of the live runs (their summary so far), wherever their folders are;
    ``waiting``: rows of ended runs the index could not take yet (it is locked), from their summary."""
    from neurondesk.reports.safe_text import clean
    from neurondesk.sources.ended import unindexed_rows
    from neurondesk.sources.runs import live_summaries
    from neurondesk.store.index import row_of

    notes: list[str] = []
    ended: list = []
    rows = [row_of(s, d) for d, s in live_summaries(notes=notes, ended=ended)]
    for note in notes:
        sys.stderr.write(f"neurondesk: {clean(note)}\n")
    if waiting is not None:
        waiting += [r for _, r in unindexed_rows(ended)]
    rows = [r for r in rows if r is not None]
    if since is None:
        return rows

    def started(r) -> float | None:
        try:
            return datetime.fromisoformat(r.started_at).timestamp() if r.started_at else None
        except ValueError:
            return None
    return [r for r in rows if (started(r) or since.timestamp()) >= since.timestamp()]


# ---------------------------------------------------------------------- reindex
def cmd_reindex(args) -> int:
    """The run index rebuilt from the run folders: summary.json, else the journal replayed."""
    from neurondesk.sources.rebuild import summary_from_run_dir
    from neurondesk.store.index import RunIndex, RunIndexError
    from neurondesk.store.rundir import RunPaths, default_run_root, index_path
    from neurondesk.store.summary_files import read_summary

    root = default_run_root()
    items, from_journal, skipped = [], 0, []
    dirs = sorted(d for d in root.iterdir() if d.is_dir() and not d.is_symlink()) if root.is_dir() else []
    dirs += _indexed_elsewhere(root, dirs)  # --run-dir folders outside the root: only the index knows them
    for d in dirs:
        summary = None
        try:
            summary = read_summary(d)  # a regular file, bounded (a FIFO or /dev/zero there is skipped, never read)
        except (OSError, ValueError, RecursionError):
            pass
        if summary is None or not summary.run_id:
            summary = None
            if RunPaths(d).events.is_file():
                try:
                    summary, _ = summary_from_run_dir(d)
                    from_journal += 1
                except (OSError, ValueError) as exc:
                    skipped.append(f"{d.name}: {exc}")
                    continue
        if summary is None or not summary.run_id:
            if RunPaths(d).events.exists() or RunPaths(d).summary_json.exists():
                skipped.append(f"{d.name}: no run id in its summary or journal")
            continue
        items.append((summary, d))
    path = index_path(root)
    try:
        index = RunIndex(path)
    except RunIndexError as exc:  # not a database at all: moved aside, rebuilt fresh
        aside = path.with_name(f"{path.name}.broken-{datetime.now():%Y%m%d-%H%M%S}")
        try:
            for suffix in ("", "-wal", "-shm"):
                if Path(f"{path}{suffix}").exists():
                    Path(f"{path}{suffix}").rename(f"{aside}{suffix}")
            index = RunIndex(path)
        except (OSError, RunIndexError):
            die(str(exc), 1)
        sys.stderr.write(f"neurondesk: the unusable run index was moved to {aside}\n")
    try:
        n = index.replace_all(items)
    except RunIndexError as exc:
        die(str(exc), 1)
    for line in skipped[:10]:
        sys.stderr.write(f"neurondesk: skipped {line}\n")
    sys.stdout.write(f"indexed {n} run(s) from {root} ({from_journal} from their journals: no usable summary.json)"
                     f"{f'; {len(skipped)} folder(s) skipped' if skipped else ''}\n")
    return 0


def _indexed_elsewhere(root: Path, dirs: list[Path]) -> list[Path]:
    """The run folders the index names that are not among ``dirs`` (none when it cannot be read)."""
    import os

    from neurondesk.store.index import RunIndex, RunIndexError
    from neurondesk.store.rundir import index_path

    path = index_path(root)
    if not path.exists():
        return []
    try:
        rows = RunIndex(path).list_runs(limit=-1)
    except RunIndexError:
        return []
    seen = {os.path.realpath(d) for d in dirs}
    out = []
    for r in rows:
        d = Path(r.run_dir)
        if d.is_dir() and not d.is_symlink() and os.path.realpath(d) not in seen:
            seen.add(os.path.realpath(d))
            out.append(d)
    return out


def add_parsers(sub) -> None:
    ls = sub.add_parser("ls", help="live runs, then the most recent finished ones")
    ls.add_argument("--last", type=whole(0, MAX_ROWS), default=10, help="finished runs to list (default 10)")
    ls.set_defaults(fn=cmd_ls)

    cmp_ = sub.add_parser("compare", help="runs side by side: throughput, compile, cost, MFU, verdict")
    cmp_.add_argument("runs", nargs="+", metavar="RUN",
                      help="run folders or run ids (two or more); a job: a folder of its nodes' run folders, or "
                           "its `neurondesk job summary --format json` file")
    cmp_.add_argument("--target-loss", type=float, help="compare steps, time and cost to this loss")
    cmp_.add_argument("--format", choices=("md", "json", "csv"), default="md")
    cmp_.set_defaults(fn=cmd_compare)

    hist = sub.add_parser("history", help="past runs, or the cost board with --group-by")
    hist.add_argument("--limit", type=whole(0, MAX_ROWS), default=50, help="runs listed (default 50; the board uses them all)")
    hist.add_argument("--since", help="only runs started since: 7d, 12h, 2w, or a date (2026-11-01)")
    hist.add_argument("--group-by", choices=("day", "week"), help="the cost board: per period (UTC) and device")
    hist.add_argument("--format", choices=FORMATS, default="text")
    hist.set_defaults(fn=cmd_history)

    rei = sub.add_parser("reindex", help="rebuild the run index from the run folders (summary.json, else the journal)")
    rei.set_defaults(fn=cmd_reindex)
