"""`neurondesk ls`: live runs, then the most recent finished ones. Text only; the rows are typed
values made by the wiring (neurondesk.sources.runs), passed in by the command line."""

from __future__ import annotations

import shlex

from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.reports.tables import render

LIVE_COLUMNS = [("id", "live run", "text"), ("command", "command", "text"), ("phase", "phase", "text"),
                ("step", "step", "text"), ("elapsed", "elapsed", "text"), ("cost", "cost so far", "usd")]
DONE_COLUMNS = [("id", "finished run", "text"), ("command", "command", "text"), ("started", "started", "text"),
                ("steps", "steps", "int"), ("exit", "exit", "text"), ("cost", "cost", "usd")]
COMMAND_WIDTH = 48


def _command(cmd) -> str:
    """Paths shortened to their last part: `python train.py --steps 100` reads better than a venv path."""
    words = cmd if isinstance(cmd, list) else shlex.split(cmd or "")
    text = shlex.join(w.rsplit("/", 1)[-1] if "/" in w and not w.startswith("-") else w for w in words)
    text = clean(text)  # a `python -c` program on one row; no control sequence cut in two
    return text if len(text) <= COMMAND_WIDTH else text[: COMMAND_WIDTH - 1] + "…"


def format_runs(live: list, finished: list) -> str:
    out = []
    if live:
        rows = [{"id": r.run_id, "command": _command(r.command), "phase": r.phase,
                 "step": f"{r.step}" + (f"/{r.steps_requested}" if r.steps_requested else ""),
                 "elapsed": fmt.clock(r.elapsed_s), "cost": r.cost_so_far_usd} for r in live]
        out.append(render(LIVE_COLUMNS, rows))
    else:
        out.append("no live run (start one with `neurondesk run --detach -- CMD`)\n")
    if finished:
        rows = [{"id": r.run_id, "command": _command(r.command), "started": (r.started_at or "")[:19],
                 "steps": r.steps, "exit": "lost" if r.lost else "—" if r.exit_code is None else str(r.exit_code),
                 "cost": r.total_usd} for r in finished]
        out.append("\n" + render(DONE_COLUMNS, rows))
        out += [f"{clean(r.run_id)}: {clean(r.lost)} (billed to then; `neurondesk summary {clean(r.run_dir)}` "
                "sums up what was recorded)\n" for r in finished if r.lost]
        out += [f"{clean(r.run_id)}: not in the run index yet ({clean(r.unindexed)}); "
                "the next neurondesk command adds it\n" for r in finished if r.unindexed]
    return "".join(out)
