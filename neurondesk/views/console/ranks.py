"""Ranks: every rank of the job in a strip, coloured by its time before the gradient sync against
the median over the ranks (normal / slower / straggler), the stragglers in words, the rank that
failed first, and a per-rank table when there is room. Shown only when the job has more than one
rank (the app hides the panel and its tab for a single process). The comparison is core's
(core/view/ranks_view.py); this panel lays it out."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult

from neurondesk.core.view.ranks_view import RankComparison
from neurondesk.core.view.run_view import RunView
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.panel import Line, Panel

LEVEL_STYLE = {"normal": "green", "slower": "bold yellow", "straggler": "bold white on red",
               "unknown": "dim", "failed": "bold red reverse"}
LABEL_W = 5  # "rank " / "ms   "
TABLE_HEAD = f"{'rank':>5} {'steps':>7} {'step':>8} {'presync':>8} {'wait':>6} {'samples/s':>10}"


def cell_label(presync_s: float | None) -> str:
    if presync_s is None:
        return "·"
    ms = presync_s * 1000
    return f"{ms:.0f}" if ms < 9999.5 else f"{presync_s:.0f}s"


class RanksPanel(Panel):
    EVERY = 4  # once every 4 s: core compares the ranks again that often (core/view/ranks_view.py)
    NAME = "Ranks"
    KEY = "r"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_class("multi-only")
        self._last: RunView | None = None

    def on_resize(self) -> None:
        """The strip is fitted to the width: shown for the first time, or resized, draw it again."""
        if self._last is not None:
            self.render_view(self._last)

    def compose(self) -> ComposeResult:
        yield Line(id="ranks-text")

    def render_view(self, view: RunView) -> None:
        self._last = view
        ranks = view.ranks
        width = max(20, self.content_size.width or self.size.width - 4)
        height = max(3, self.content_size.height or self.size.height - 2)
        compared = ranks.comparison
        if compared is None:
            self.query_one("#ranks-text", Line).show(Text("one process: nothing to compare across ranks",
                                                          style="dim"))
            return
        stragglers, levels = compared.stragglers, compared.levels
        failed, failed_ranks = ranks.failed_first, ranks.failed_ranks
        t = Text()
        t.append(f"{len(levels)} ranks", style="bold")
        if ranks.restarts:  # the current attempt's ranks; those before it are the attempts' (core/reduce/attempts.py)
            t.append(f" of attempt {ranks.attempt} ({ranks.restarts} before it)", style="bold yellow")
        t.append(f" · median {fmt.ms(compared.median_presync_s)} before sync · ", style="dim")
        for level, word in (("normal", "normal"), ("slower", ">10% slower"), ("straggler", "straggler")):
            t.append(word, style=LEVEL_STYLE[level])
            t.append(" ")
        self._strip(t, levels, failed_ranks, width)
        lines = [t]
        for s in stragglers:
            lines.append(Text("straggler: ", style="bold red") + Text(s.words()))
        if not stragglers:
            lines.append(Text("no straggler" if levels and levels[0].presync_s is not None
                              else "no straggler (not enough steady steps with a pre-sync time yet)", style="dim"))
        if failed is not None:
            at = f" at step {failed.step}" if failed.step is not None else ""
            who = f"rank {failed.rank}" if failed.rank is not None else "a process"
            head = f"failed first: {who} (pid {failed.pid}){at}: "
            lines.append(Text(head, style="bold red")
                         + Text(fmt.ellipsize(clean(failed.error), max(10, width - len(head)))))
        used = sum(x.plain.count("\n") + 1 for x in lines)
        table = self._table(compared, failed_ranks, height - used - 1)
        out = Text("\n").join(lines)
        if table is not None:
            out.append("\n")
            out.append_text(table)
        self.query_one("#ranks-text", Line).show(out)

    @staticmethod
    def _strip(t: Text, levels, failed_ranks: frozenset, width: int) -> None:
        """Rows of cells: the rank number above its pre-sync ms, coloured by level."""
        labels = [cell_label(x.presync_s) for x in levels]
        cell = max(4, 1 + max(len(str(x.rank)) for x in levels), 1 + max(len(s) for s in labels))
        per_row = max(1, (width - LABEL_W) // cell)
        rows = math.ceil(len(levels) / per_row)
        per_row = math.ceil(len(levels) / rows)  # balanced: 32 ranks in 2 rows of 16, not 18 + 14
        for start in range(0, len(levels), per_row):
            chunk = levels[start:start + per_row]
            labels_row = labels[start:start + per_row]
            t.append("\n" + "rank".ljust(LABEL_W), style="dim")
            for x in chunk:
                t.append(str(x.rank).rjust(cell), style="dim")
            t.append("\n" + "ms".ljust(LABEL_W), style="dim")
            for x, label in zip(chunk, labels_row, strict=True):
                level = "failed" if x.rank in failed_ranks else x.level
                t.append(" " * (cell - len(label)))
                t.append("✗" * len(label) if level == "failed" and x.presync_s is None else label,
                         style=LEVEL_STYLE[level])

    @staticmethod
    def _table(compared: RankComparison, failed_ranks: frozenset, room: int) -> Text | None:
        """rank, steps, step time, presync, data wait, samples/s: every rank when they fit, else the
        stragglers, the failed ranks and the slowest ones before sync (in rank order), and how many
        more there are."""
        if room < 3:
            return None
        stats = compared.rows
        level = {x.rank: x.level for x in compared.levels}
        shown = stats
        if len(stats) > room - 1:
            order = sorted(stats, key=lambda r: (r.rank not in failed_ranks, level.get(r.rank) != "straggler",
                                                 -(r.presync_s or 0.0), r.rank))
            shown = sorted(order[: room - 2], key=lambda r: (r.rank, r.pid))
        t = Text(TABLE_HEAD, style="bold")
        for r in shown:
            lv = "failed" if r.rank in failed_ranks else level.get(r.rank, "unknown")
            t.append("\n")
            t.append(f"{r.rank:>5}", style=LEVEL_STYLE[lv] if lv != "normal" else "")
            t.append(f" {r.steps:>7,} {fmt.ms(r.step_time_s):>8} {fmt.ms(r.presync_s):>8} "
                     f"{fmt.pct(r.data_wait_fraction):>6} {fmt.rate(r.samples_per_s):>10}")
        if len(shown) < len(stats):
            t.append(f"\n… {len(stats) - len(shown)} more (shown: the slowest before sync)", style="dim")
        return t
