"""Many ranks in the views: the console's Ranks panel (snapshots at fixed sizes: 32 ranks legible
at 80x24 in a tab, 64 at 160x48), the headless status line and end-of-run lines, summary.md's
rank sections. The run is a synthetic event stream built here (ProcessAttached + StepEnded with
presync_s for N ranks, rank 2 about 40 ms slower before the sync), reduced by the real RunState.

Update the snapshots after an intended change: pytest tests/views/test_console_ranks.py --snapshot-update
"""

from __future__ import annotations

import asyncio
import io
import random
from importlib.metadata import version
from pathlib import Path

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.view.run_view import view_of
from neurondesk.reports.summary_writer import to_markdown
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.panel import Line
from neurondesk.views.headless import HeadlessPrinter, status_line

TAKEN_WITH = "8.2.8"
snapshots = pytest.mark.skipif(
    version("textual") != TAKEN_WITH,
    reason=f"snapshots taken with textual {TAKEN_WITH}, this is {version('textual')}: "
           "check the screens by eye, then retake them with --snapshot-update and change TAKEN_WITH")

T0 = 1_790_000_000.0
TRACEBACK = ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>',
             "    loss = step(batch)", '  File "train.py", line 61, in step',
             "    raise RuntimeError('crash requested at step 30 on rank 5')",
             "RuntimeError: crash requested at step 30 on rank 5"]


def job(n: int, steps: int = 60, straggler: int | None = 2, extra_ms: float = 40.0, fail_rank: int | None = None,
        seed: int = 7) -> list[ev.Event]:
    """n ranks at about 45 ms before the sync (±3 ms), 100 ms a step, 8 samples a step; the
    straggler ``extra_ms`` slower before its sync; ``fail_rank`` dies at the last step."""
    rng = random.Random(seed)
    out: list[ev.Event] = [ev.RunStarted(t=T0, run_id="ranks-synthetic", command=["torchrun", "--nproc_per_node",
                                                                                  str(n), "train.py"],
                                         instance_type="trn1.32xlarge", price_per_hour=21.5, warmup_steps=5)]
    out += [ev.ProcessAttached(t=T0 + 0.5, pid=1000 + r, ppid=999, rank=r, local_rank=r % 32, world_size=n)
            for r in range(n)]
    for i in range(steps):
        for r in range(n):
            pre = 0.045 + rng.uniform(-0.003, 0.003) + (extra_ms / 1000 if r == straggler else 0.0)
            out.append(ev.StepEnded(t=T0 + 2 + 0.1 * i, pid=1000 + r, step=i, duration_s=0.1, samples=8,
                                    data_wait_s=0.001, presync_s=pre))
    if fail_rank is not None:
        out.append(ev.ProcessFailed(t=T0 + 2 + 0.1 * steps, pid=1000 + fail_rank, error=TRACEBACK[-1],
                                    step=steps, traceback=TRACEBACK))
    return out


def state_of(events: list[ev.Event]) -> RunState:
    st = RunState()
    for e in events:
        st.apply(e)
    return st


class FixedSource:
    """A run caught mid-way: every event applied at once, the clock stopped at the last one."""

    live = False
    done = False

    def __init__(self, events: list[ev.Event], label: str) -> None:
        self.state = state_of(events)
        self.label = label
        self._now = events[-1].t

    def poll(self) -> int:
        return 0

    def now(self) -> float:
        return self._now

    def stop(self) -> str:
        return "nothing to stop"

    def export_summary(self) -> Path:  # pragma: no cover - not pressed here
        raise OSError("not here")


def app_for(n: int, **kw) -> ConsoleApp:
    return ConsoleApp(FixedSource(job(n, **kw), f"synthetic {n}-rank job"), frozen=True)


# ---------------------------------------------------------------- snapshots
@snapshots
def test_32_ranks_in_a_tab_80x24(snap_compare):
    async def show_ranks(pilot):
        await pilot.pause()  # the first poll: the Ranks tab shows once it has seen two ranks
        await pilot.press("r")

    assert snap_compare(app_for(32), run_before=show_ranks, terminal_size=(80, 24))


@snapshots
def test_64_ranks_with_every_panel_160x48(snap_compare):
    assert snap_compare(app_for(64, fail_rank=5), terminal_size=(160, 48))


# ---------------------------------------------------------------- the panel
def seen(app: ConsoleApp, size: tuple[int, int], keys: tuple[str, ...] = ()) -> dict:
    """Drive the real app (App.run_test), then say what it shows."""
    async def go():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()  # the first poll (the Ranks tab shows once it has seen two ranks)
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            return {"text": app.query_one("#ranks-text", Line).text.plain, "active": app.active,
                    "multi": app.multi_rank, "tabbed": app.tabbed, "grid_row": app.has_class("-ranks"),
                    "shown": app.query_one("#ranks").display, "visible": [p.id for p in app.visible_panels()]}
    return asyncio.run(go())


def test_the_panel_names_the_straggler_and_the_failed_rank_and_fits_32_ranks_in_80_columns():
    got = seen(app_for(32, fail_rank=5), (80, 24), ("r",))
    assert got["active"] == "ranks" and got["multi"] and got["tabbed"]
    text = got["text"]
    assert "32 ranks" in text
    assert "straggler: rank 2 +40 ms before sync (compute)" in text
    assert "failed first: rank 5 (pid 1005) at step 60: RuntimeError: crash requested" in text
    assert all(len(line) <= 78 for line in text.splitlines())  # no line wraps in 80 columns
    rank_rows = [line.split()[1:] for line in text.splitlines() if line.startswith("rank ")]
    assert [int(x) for row in rank_rows for x in row] == list(range(32))
    assert len(rank_rows) == 2  # two rows of 16


def test_64_ranks_fit_the_wide_grid_and_the_table_shows_when_there_is_room():
    got = seen(app_for(64), (160, 48))
    assert not got["tabbed"] and got["grid_row"] and "ranks" in got["visible"]
    assert len([line for line in got["text"].splitlines() if line.startswith("rank ")]) == 2  # 2 rows of 32
    assert "straggler: rank 2" in got["text"]
    got = seen(app_for(4), (100, 40), ("r",))
    rows = [line.split() for line in got["text"].splitlines() if line[:5].strip().isdigit()]
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]  # every rank in the table
    assert rows[2][:4] == ["2", "60", "100.0", "ms"]  # rank 2: 60 steps, 100 ms a step
    assert 80 < float(rows[2][4]) < 90 and rows[2][-1] == "80.0"  # presync about 85 ms; 8 samples / 0.1 s


def test_a_single_process_has_no_ranks_panel_nor_tab():
    events = [e for e in job(1, straggler=None) if not isinstance(e, ev.ProcessAttached)]
    got = seen(ConsoleApp(FixedSource(events, "one process"), frozen=True), (80, 24), ("r",))
    assert not got["multi"] and got["active"] == "overview" and not got["shown"]
    got = seen(ConsoleApp(FixedSource(events, "one process"), frozen=True), (160, 48))
    assert "ranks" not in got["visible"] and not got["grid_row"]


# ---------------------------------------------------------------- headless and summary.md
def test_the_status_line_names_the_first_straggler():
    st = state_of(job(8))
    line = status_line(view_of(st, T0 + 10))
    assert "straggler: rank 2 +40 ms before sync (compute)" in line
    assert "straggler" not in status_line(view_of(state_of(job(8, straggler=None)), T0 + 10))


class EndedSource(FixedSource):
    done = True
    recorder_lost = False
    fallback = None
    final_summary = None
    run_dir = Path("/tmp/ranks-run")

    def summary(self):  # FollowSource.summary: the recorder's, else rebuilt by core
        return self.final_summary if self.final_summary is not None else run_summary(self.state)


def test_the_end_of_a_headless_run_names_the_failed_rank_with_its_traceback():
    events = job(4, fail_rank=1)
    events.append(ev.RunFinished(t=events[-1].t + 1, exit_code=1))
    out, err = io.StringIO(), io.StringIO()
    printer = HeadlessPrinter(EndedSource(events, "x"), out=out, err=err)
    assert printer._final() == 1
    e = err.getvalue()
    assert "neurondesk: rank 1 (pid 1001) failed first, at step 60: RuntimeError: crash requested" in e
    assert "    raise RuntimeError('crash requested at step 30 on rank 5')" in e  # the traceback's last lines
    assert "neurondesk: straggler: rank 2 +40 ms before sync (compute)" in e


def test_summary_md_has_the_ranks_table_the_stragglers_and_the_failed_rank():
    s = run_summary(state_of(job(4, fail_rank=1)))
    md = to_markdown(s)
    assert "## Ranks" in md
    assert "| rank | local rank | pid | steps | step time | presync | data wait | samples/s | compiles |" in md
    assert "| 2 | 2 | 1002 | 60 | 100.0 ms |" in md
    assert "- straggler: rank 2 +40 ms before sync (compute)" in md
    failed = md.split("## Failed rank", 1)[1]
    assert "rank 1 (pid 1001), at step 60: RuntimeError: crash requested at step 30 on rank 5" in failed
    assert "```\n" + "\n".join(TRACEBACK) + "\n```" in failed
    single = to_markdown(run_summary(state_of(job(1, straggler=None))))
    assert "## Ranks" not in single and "## Failed rank" not in single
