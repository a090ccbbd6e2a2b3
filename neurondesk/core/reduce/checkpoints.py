"""Checkpoint saves and loads (core/events/checkpoint_events.py), for the job.

Seconds are the job's wall time: a save made on several ranks at once (a DCP save, every rank
writing its own file) counts once, as the union of its spans, never as the sum over ranks. A job
checkpoint (the count, the interval) is the saves of one step that start within SAME_SAVE_S of its
first: every rank's part of it, every file of it (an async save's ranks need not overlap). A save
that raised is counted as failed, and its time is counted (it was spent). An async save counts the
time until its call returned (training stopped that long); its background write is kept apart
(``async_background_s``) and it becomes the last good checkpoint when that write ends. The failures
of the job's processes (an uncaught exception, a rank torchrun saw die) are counted as disruptions,
those within FAILURE_GAP_S of one another as one: the checkpoint interval advice
(core/findings/checkpoint_advice.py) reads them.

The other ranks' wait for a save (``wait_s``): the long torch.distributed calls of the processes that
did not make it (LongCollective: a barrier, an all-reduce past 20 ms) in progress during the save,
ending after it began and within WAIT_AFTER_S of its end, counted from the save's start (or the
call's, if later). A checkpoint's wait is its longest such call (a rank held by a save is held in
one call; the call just before it may end a few ms into the save); the job's is their sum.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.checkpoint_events import CheckpointOp, LongCollective
from neurondesk.core.reduce.attempts import AttemptReducer

MAX_SPANS = 4096  # merged spans kept; older ones are folded into a count and seconds
SAME_SAVE_S = 60.0  # saves of one step that start within this of the first are one checkpoint (one a rank, or its files)
FAILURE_GAP_S = 60.0  # process failures closer than this are one disruption (the ranks torn down with it)
WAIT_AFTER_S = 0.5  # a call that ends this long after a save's end still waited for it (the saver's next call, clocks)
RECENT = 256  # saves and long calls kept to match one against the other (either may arrive first)


class Spans:
    """The union of time spans, kept merged and sorted: its seconds and how many separate spans."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.total_s = 0.0
        self.folded = 0  # spans dropped from the lists (their seconds stay in total_s)

    def __len__(self) -> int:
        return self.folded + len(self.starts)

    def add(self, a: float, b: float) -> None:
        b = max(a, b)
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(starts, a)
        lo = i - 1 if i > 0 and ends[i - 1] >= a else i
        hi = i
        while hi < len(starts) and starts[hi] <= b:
            hi += 1
        if lo < hi:  # overlaps spans lo..hi-1: one span now
            a, b = min(a, starts[lo]), max(b, max(ends[lo:hi]))
            self.total_s -= sum(ends[k] - starts[k] for k in range(lo, hi))
        starts[lo:hi], ends[lo:hi] = [a], [b]
        self.total_s += b - a
        if len(starts) > MAX_SPANS:
            del starts[0], ends[0]
            self.folded += 1


class SaveWaits:
    """The other processes' wait for the saves: recent saves and long collective calls, matched as
    each arrives (a waiting rank's call may reach the recorder before or after the save)."""

    def __init__(self) -> None:
        self.saves: list[tuple[int, float, float, tuple]] = []  # (pid, start, end, the checkpoint's key)
        self.calls: list[list] = []  # [pid, start, end, matched]
        self.by_checkpoint: dict[tuple, float] = {}  # the checkpoint's key -> its longest wait
        self.wait_s = 0.0  # each checkpoint's longest wait, summed

    def on_save(self, pid: int, a: float, b: float, key: tuple) -> None:
        save = (pid, a, b, key)
        self.saves.append(save)
        del self.saves[:-RECENT]
        for call in self.calls:
            self._match(save, call)

    def on_call(self, e: LongCollective) -> None:
        call = [e.pid, e.start_t, e.t, False]
        self.calls.append(call)
        del self.calls[:-RECENT]
        for save in self.saves:
            self._match(save, call)

    def _match(self, save: tuple, call: list) -> None:
        pid, a, b, key = save
        cpid, cs, ce, matched = call
        # in progress during the save, and ended after it began and a moment after its end at the latest
        if matched or cpid == pid or not (cs < b and a < ce <= b + WAIT_AFTER_S):
            return
        call[3] = True  # one checkpoint's wait, however many ranks saved it
        before = self.by_checkpoint.get(key, 0.0)
        self.by_checkpoint[key] = max(before, ce - max(cs, a))
        self.wait_s += self.by_checkpoint[key] - before
        if len(self.by_checkpoint) > 64:
            del self.by_checkpoint[next(iter(self.by_checkpoint))]


class CheckpointReducer:
    def __init__(self, attempts: AttemptReducer | None = None) -> None:
        # a process's attempt: a restart's probe counts its steps from 0 again, so the same step number
        # in two attempts is two checkpoints, and the job's step is the attempt's resumed step plus it
        self._attempts = attempts
        self.save_spans = Spans()  # every save's blocking span, failed ones too
        self.saves = 0  # job checkpoints that did not raise: one a step, however many ranks or calls wrote it
        self.save_starts: list[float] = []  # each job checkpoint's first start, sorted (the last MAX_SPANS)
        self._step_started: dict[tuple[int, int | None], float] = {}  # (attempt, step) -> its first start
        self.load_spans = Spans()
        self.sized_spans = Spans()  # the saves that said their bytes: the write rate's seconds
        self.rank_saves = 0  # save calls, over all ranks
        self.rank_loads = 0
        self.failed_saves = 0
        self.failed_loads = 0
        self.last_error: str | None = None  # the latest failed save's or load's error, as the user got it
        self.last_error_step: int | None = None
        self.bytes_written = 0
        self.sized_bytes = 0  # the bytes of the saves in sized_spans (an async save's are written after its call)
        self.bytes_read = 0
        self.async_saves = 0
        self.async_background_s = 0.0  # async saves' writes after their call returned, summed
        self.last_save_step: int | None = None  # the last good checkpoint: the job's step when it was made
        self.last_save_t: float | None = None  # ... and when it was written (its end)
        self.apis: dict[str, int] = {}  # calls by API ("torch.save": 12)
        self.failures = 0  # disruptions: process failures, those within FAILURE_GAP_S of one another as one
        self._last_failure_t: float | None = None
        self.waits = SaveWaits()

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"checkpoint": self.on_checkpoint, "long_collective": self.waits.on_call,
                "process_failed": self.on_failure, "rank_exited": self.on_failure}

    # ------------------------------------------------------------------ the interface the goodput figures read
    @property
    def save_s(self) -> float:
        """Job seconds spent saving (the union over ranks of each save's blocking time)."""
        return self.save_spans.total_s

    @property
    def wait_s(self) -> float:
        """Job seconds the other ranks waited for the saves (each checkpoint's longest wait, summed)."""
        return self.waits.wait_s

    @property
    def load_s(self) -> float:
        return self.load_spans.total_s

    @property
    def loads(self) -> int:
        return len(self.load_spans)

    @property
    def write_rate(self) -> float | None:
        """Bytes written a job second of the blocking saves that said their bytes (None: none did)."""
        s = self.sized_spans.total_s
        return self.sized_bytes / s if self.sized_bytes and s > 0 else None

    @property
    def interval_s(self) -> float | None:
        """The mean time from one job save's start to the next."""
        n = len(self.save_starts)
        return (self.save_starts[-1] - self.save_starts[0]) / (n - 1) if n >= 2 else None

    # ------------------------------------------------------------------ reduce
    def on_checkpoint(self, e: CheckpointOp) -> None:
        self.apis[e.api] = self.apis.get(e.api, 0) + 1
        if e.op == "async_done":
            self.async_background_s += max(0.0, e.duration_s)
            self._written(e)
            return
        if not e.ok:
            self.last_error, self.last_error_step = e.error, e.step
        if e.op == "load":
            self.rank_loads += 1
            self.failed_loads += not e.ok
            self.load_spans.add(e.start_t, e.t)
            if e.ok:
                self.bytes_read += e.bytes or 0
            return
        self.rank_saves += 1
        self.failed_saves += not e.ok
        self.save_spans.add(e.start_t, e.t)
        attempt = self._attempts.attempt_of(e.pid) if self._attempts else 0
        self.waits.on_save(e.pid, e.start_t, e.t, (attempt, e.step))
        if e.ok:
            self._count(e)
        if e.pending:
            self.async_saves += 1
        else:
            self._written(e)

    def _count(self, e: CheckpointOp) -> None:
        """A save that did not raise: a new job checkpoint unless its step was saved a moment ago (another
        rank's part of it, or another file of it)."""
        key = (self._attempts.attempt_of(e.pid) if self._attempts else 0, e.step)
        first = self._step_started.get(key)
        if first is not None and abs(e.start_t - first) <= SAME_SAVE_S:
            return
        self._step_started[key] = e.start_t
        if len(self._step_started) > 64:
            del self._step_started[next(iter(self._step_started))]
        self.saves += 1
        bisect.insort(self.save_starts, e.start_t)
        if len(self.save_starts) > MAX_SPANS:
            del self.save_starts[0]

    def _written(self, e: CheckpointOp) -> None:
        """A save whose bytes are on disk (a save that returned, an async save's write that ended)."""
        if not e.ok:
            return
        if e.bytes is not None and e.op != "async_done":
            self.sized_spans.add(e.start_t, e.t)
            self.sized_bytes += e.bytes
        self.bytes_written += e.bytes or 0
        if self.last_save_t is None or e.t >= self.last_save_t:
            step = self._attempts.job_step(e.pid, e.step) if self._attempts else e.step
            self.last_save_t, self.last_save_step = e.t, step

    def on_failure(self, e: ev.ProcessFailed | ev.RankExited) -> None:
        if isinstance(e, ev.RankExited) and e.exit_code == 0:
            return
        if self._last_failure_t is None or abs(e.t - self._last_failure_t) > FAILURE_GAP_S:
            self.failures += 1
        self._last_failure_t = e.t if self._last_failure_t is None else max(e.t, self._last_failure_t)
