"""Why a compile happened: dynamo's guard failures, named by kind and paired with the recompile
they caused.

A guard-failure line (TORCH_LOGS=recompiles) is printed just before its recompile starts; the
compile is reported when it ends. They come through different channels (the workload's output,
read late; the probe's socket), so a reason pairs with a recompile whose [start, end] it falls
in, give or take REASON_SLACK_S.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from neurondesk.core.events import run_events as ev

if TYPE_CHECKING:
    from neurondesk.core.reduce.compile.compile_record import CompileRecord

REASON_SLACK_S = 30.0
BREAK_SLACK_S = 2.0  # a graph break read from the script's output, after the compile it broke ended
PENDING_KEEP = 64  # unpaired reasons / recompiles kept waiting for their other half

# (words in the guard's text, the cause it names), first match wins
GUARD_KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("grad_mode",), "grad-mode"),
    (("GLOBAL_STATE", "global state"), "global-state"),
    (("requires_grad",), "requires-grad"),
    (("dtype",), "dtype-change"),
    (("size mismatch", "stride mismatch", "shape", "rank mismatch", "dim mismatch", ".size()", ".stride()"),
     "shape-change"),
    (("device",), "device-change"),
    (("___check_type_id", "TYPE_MATCH", "type mismatch"), "type-change"),
    (("___check_obj_id", "ID_MATCH", "id(", "object id"), "object-identity"),
    (("len(", "length"), "length-change"),
    (("==", "!=", "EQUALS_MATCH", "CONSTANT_MATCH"), "value-change"),
)


def guard_kind(reason: str) -> str:
    """The kind of guard that failed, from its text: `tensor 'x' size mismatch at index 0` is a
    shape-change, `GLOBAL_STATE changed: grad_mode` a grad-mode change, `___check_obj_id(...)` an
    object-identity change. Anything else: guard-failed."""
    for words, kind in GUARD_KINDS:
        if any(w in reason for w in words):
            return kind
    return "guard-failed"


class DynamoReasons:
    """Pairs dynamo recompiles (probe) with their guard-failure reasons (TORCH_LOGS output).

    Either half may arrive first, by any delay up to REASON_SLACK_S beyond the compile's span.
    Pairs form oldest first (the n-th reason of a process goes to its n-th recompile), within one
    process when both halves know their pid.
    """

    def __init__(self) -> None:
        self.reasons: deque[ev.DynamoRecompile] = deque(maxlen=PENDING_KEEP)
        self.recompiles: deque[tuple[CompileRecord, float, int | None]] = deque(maxlen=PENDING_KEEP)

    @staticmethod
    def _fits(r: ev.DynamoRecompile, record: CompileRecord, start: float, pid: int | None) -> bool:
        if r.pid is not None and pid is not None and r.pid != pid:
            return False
        return start - REASON_SLACK_S <= r.t <= record.t + REASON_SLACK_S

    def recompile(self, record: CompileRecord, start: float, pid: int | None) -> None:
        for i, r in enumerate(self.reasons):
            if self._fits(r, record, start, pid):
                del self.reasons[i]
                apply_reason(record, r)
                return
        self.recompiles.append((record, start, pid))

    def reason(self, r: ev.DynamoRecompile) -> None:
        for i, (record, start, pid) in enumerate(self.recompiles):
            if self._fits(r, record, start, pid):
                del self.recompiles[i]
                apply_reason(record, r)
                return
        self.reasons.append(r)


def apply_reason(record: CompileRecord, r: ev.DynamoRecompile) -> None:
    record.reason = r.reason
    record.location = record.location or r.location
    record.cause = guard_kind(r.reason)


class BreakJoin:
    """A graph break belongs to the dynamo compile of its process that was tracing the frame: the
    one running when the break arrives (the probe's log record comes before the compile's end), else
    one that ended with the break inside its span (the script's own TORCH_LOGS output, read late)."""

    def __init__(self) -> None:
        self.pending: dict[int | None, ev.GraphBreak] = {}  # pid -> a break in its dynamo compile running now

    def on_break(self, e: ev.GraphBreak, running: bool, recent: list[CompileRecord]) -> None:
        if running:
            self.pending[e.pid] = e
            return
        for record in reversed(recent):
            if (record.source == "dynamo" and record.graph_break is None and (e.pid is None or record.pid == e.pid)
                    and record.t - (record.duration_s or 0.0) - BREAK_SLACK_S <= e.t <= record.t + BREAK_SLACK_S):
                record.graph_break = break_words(e)
                return

    def on_compile(self, record: CompileRecord) -> None:
        """A dynamo compile ended: the break its frame made while it ran, if any."""
        brk = self.pending.pop(record.pid, None) if record.source == "dynamo" else None
        if brk is not None:
            record.graph_break = break_words(brk)


def break_words(e: ev.GraphBreak) -> str:
    """"Failed to trace builtin operator at x.py:18: Dynamo does not know how to trace builtin
    operator `print` ... (gb0059); hint: Avoid calling builtin `print` ...": what broke, where, why,
    and what to do, as dynamo said it (a compile record's ``graph_break``)."""
    text = e.reason + (f" at {e.location}" if e.location else "")
    if e.explanation:
        text += f": {e.explanation}"
    if e.registry_id:
        text += f" ({e.registry_id})"
    if e.hints:
        text += f"; hint: {e.hints[0]}"
    return text
