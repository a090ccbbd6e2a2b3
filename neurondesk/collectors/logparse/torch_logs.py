"""TORCH_LOGS="recompiles,graph_breaks" output of torch dynamo (written against torch 2.9 and 2.13).

Each log record spans several lines, each carrying the logging prefix
``V1130 08:50:33.006000 4155 torch/_dynamo/guards.py:4181] [0/1] [__recompiles] ``; state is
kept per process id so records of different ranks do not mix.

A graph break's record names what broke on the lines after its first ones: torch 2.9 says
``Graph Break Reason: Failed to trace builtin operator``, torch 2.13 only ``Graph Break Reason:
Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):`` with the
same headline on a line of its own after it; both then give ``Explanation:``, ``Hint:`` lines
and the graph-break registry's page (``.../gb/gb0059.html``). The record is read to its end (a
line with another prefix, or the end of the probe's message) so the break carries all of them.
"""

from __future__ import annotations

import re

from neurondesk.core.events.run_events import DynamoRecompile, GraphBreak, Notice

from ._common import COMPILE, Out, clip, small_int

_GLOG = re.compile(
    r"^[VIWEDF]\d{4} \d\d:\d\d:\d\d\.\d+\s+(\d+) ([^\]\s]+)\] (?:\[[\d/_]+\] )?(?:\[__(\w+)\] )?"
)
_RECOMPILING = re.compile(r"Recompiling function (\S+) in (\S+?:\d+)")
_GUARD = re.compile(r"^\s*-\s+(?:\d+/\d+:\s*)?(.*\S)")
_GUARD_COMMENT = re.compile(r"\s{2,}#.*$")  # "scale == 2.0      # return x * scale  # x.py:5 in f"
_BREAK_AT = re.compile(r"Graph break(?: \([^)]*\))? in user code at (\S+?:\d+)")
_BREAK_OLD = re.compile(r"Graph break: (.*?) ?from user code at:")  # torch <= 2.4
_BREAK_REASON = re.compile(r"^\s*(?:Graph Break )?Reason: (.*\S)")
_GENERIC = "Encountered graph break when attempting to trace"  # torch >= 2.10's first reason line
_EXPLANATION = re.compile(r"^\s*Explanation: (.*\S)")
_HINT = re.compile(r"^\s*Hint: (.*\S)")
_REGISTRY = re.compile(r"/gb/(gb\d+)\.html|\b(GB\d{4,})\b")
_NOT_HEADLINE = ("Developer debug context", "For more details", "User code traceback", "File ", "Graph break")
HINTS_KEPT = 2
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_LIMIT = re.compile(r"torch\._dynamo hit config\.(\w+) \((\d+)\)")


def _reason(text: str) -> str:
    return clip(_GUARD_COMMENT.sub("", text).strip())


class TorchLogsParser:
    def __init__(self) -> None:
        self._recompile: dict[int | None, list] = {}  # pid -> [function, location]
        self._break: dict[int | None, _Break] = {}  # pid -> the graph break record being read
        self._limit: dict[int | None, list[str]] = {}  # pid -> lines of a recompile-limit warning

    def feed(self, s: str, t: float, out: Out, key: str = "") -> str | None:
        busy = self._recompile or self._break or self._limit
        if not (busy or "ecompil" in s or "raph " in s or "_dynamo" in s or "guard failure" in s):
            return None
        m = _GLOG.match(s) if s[:1] in "VIWEDF" else None
        pid = small_int(m.group(1)) if m else None
        body = s[m.end():] if m else s
        tag = COMPILE if m and ("_dynamo" in m.group(2) or m.group(3)) else None
        if busy and self._continue(pid, s[:m.end()] if m else None, body, t, out):
            return COMPILE
        r = _RECOMPILING.search(body)
        if r:
            self._recompile[pid] = [r.group(1), r.group(2)]
            rest = body[r.end():]
            if "guard failure" in rest:
                self._guard_header(pid, rest, t, out)
            return COMPILE
        b = _BREAK_AT.search(body)
        if b:
            self._break[pid] = _Break(s[:m.end()] if m else None, b.group(1), None)
            return COMPILE
        b = _BREAK_OLD.search(body)
        if b and b.group(1).strip():
            self._break[pid] = _Break(s[:m.end()] if m else None, None, b.group(1).strip())
            return COMPILE
        lim = _LIMIT.search(body)
        if lim:
            self._limit[pid] = [f"torch._dynamo hit config.{lim.group(1)} ({lim.group(2)})"]
            return COMPILE
        return tag

    def _continue(self, pid: int | None, prefix: str | None, body: str, t: float, out: Out) -> bool:
        """A line that may belong to a record left open for this process; True if it did."""
        if pid in self._recompile:
            if "guard failure" in body:
                return self._guard_header(pid, body, t, out)
            g = _GUARD.match(body)
            if g:
                self._emit_recompile(pid, g.group(1), t, out)
                return True
            self._emit_recompile(pid, "unknown (no guard failure printed)", t, out)
        if pid in self._break:
            if self._break[pid].take(prefix, body):
                return True
            self._emit_break(pid, t, out)
        if pid in self._limit:
            text = body.strip()
            if text.startswith(("function:", "last reason:")):
                self._limit[pid].append(text)
                if text.startswith("last reason:"):
                    self._emit_limit(pid, t, out)
                return True
            self._emit_limit(pid, t, out)
        return False

    def _guard_header(self, pid: int | None, body: str, t: float, out: Out) -> bool:
        # torch 2.0 put the reason on the header line: "triggered by the following guard failure: X"
        inline = body.split("guard failure", 1)[1].lstrip("(s)").lstrip(":").strip()
        if inline:
            self._emit_recompile(pid, inline.lstrip("- "), t, out)
        return True

    def _emit_recompile(self, pid: int | None, reason: str, t: float, out: Out) -> None:
        function, location = self._recompile.pop(pid)
        out.append(DynamoRecompile(t=t, reason=_reason(reason), function=function, location=location,
                                   pid=pid))

    def _emit_break(self, pid: int | None, t: float, out: Out) -> None:
        out.append(self._break.pop(pid).event(t, pid))

    def _emit_limit(self, pid: int | None, t: float, out: Out) -> None:
        lines = self._limit.pop(pid)
        out.append(Notice(t=t, level="warn", source="dynamo", message=clip("; ".join(lines))))

    def flush(self, t: float) -> Out:
        out: Out = []
        for pid in list(self._recompile):
            self._emit_recompile(pid, "unknown (no guard failure printed)", t, out)
        for pid in list(self._break):
            self._emit_break(pid, t, out)
        for pid in list(self._limit):
            self._emit_limit(pid, t, out)
        return out


class _Break:
    """One graph break's log record, read line by line to its end."""

    def __init__(self, prefix: str | None, location: str | None, reason: str | None) -> None:
        self.prefix = prefix  # the logging prefix its lines share (None: a torch that prints none)
        self.location = location
        self.reason = reason
        self.headline: str | None = None  # torch >= 2.10: what broke, on a line after the generic reason
        self.explanation: str | None = None
        self.hints: list[str] = []
        self.registry_id: str | None = None
        self.old_form = reason is not None  # torch <= 2.4: reason first, the user's File line ends it

    def take(self, prefix: str | None, body: str) -> bool:
        """Whether the line belongs to this record (and was read into it)."""
        if self.old_form:
            f = _FILE_LINE.search(body)
            if f:
                self.location = f"{f.group(1)}:{f.group(2)}"
                self.old_form = False
                self.prefix = prefix if prefix is not None else self.prefix
                return True
            return False
        if prefix != self.prefix:
            return False
        if self.prefix is None and self.reason is not None and not body.strip():
            return True  # no prefix to tell records apart: a blank line inside the record
        text = body.strip()
        r = _BREAK_REASON.match(body) if self.reason is None else None
        if r:
            self.reason = r.group(1)
        elif m := _EXPLANATION.match(body):
            self.explanation = self.explanation or m.group(1)
        elif m := _HINT.match(body):
            if len(self.hints) < HINTS_KEPT and "report an issue" not in m.group(1):
                self.hints.append(m.group(1))
        elif m := _REGISTRY.search(body):
            self.registry_id = (m.group(1) or m.group(2)).lower()
        elif (text and self.headline is None and self.explanation is None and self.reason is not None
              and self.reason.startswith(_GENERIC) and not text.startswith(_NOT_HEADLINE)):
            self.headline = text
        elif self.prefix is None and self.reason is not None and not (text.startswith(_NOT_HEADLINE) or body[:1].isspace()):
            return False  # no prefix: a line of the script's own ends the record
        return True

    def event(self, t: float, pid: int | None) -> GraphBreak:
        reason = self.reason or "unknown"
        if self.headline and reason.startswith(_GENERIC):
            reason = self.headline  # what broke, not torch 2.10+'s generic first line
        return GraphBreak(t=t, reason=clip(reason), location=self.location, pid=pid,
                          explanation=clip(self.explanation) if self.explanation else None,
                          hints=[clip(h) for h in self.hints], registry_id=self.registry_id)
