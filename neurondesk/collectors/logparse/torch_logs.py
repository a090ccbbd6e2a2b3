"""TORCH_LOGS="recompiles,graph_breaks" output of torch dynamo (written against torch 2.9).

Each log record spans several lines, each carrying the logging prefix
``V1130 08:50:33.006000 4155 torch/_dynamo/guards.py:4181] [0/1] [__recompiles] ``; state is
kept per process id so records of different ranks do not mix.
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
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_LIMIT = re.compile(r"torch\._dynamo hit config\.(\w+) \((\d+)\)")


def _reason(text: str) -> str:
    return clip(_GUARD_COMMENT.sub("", text).strip())


class TorchLogsParser:
    def __init__(self) -> None:
        self._recompile: dict[int | None, list] = {}  # pid -> [function, location]
        self._break: dict[int | None, list] = {}  # pid -> [location, reason]
        self._limit: dict[int | None, list[str]] = {}  # pid -> lines of a recompile-limit warning

    def feed(self, s: str, t: float, out: Out) -> str | None:
        busy = self._recompile or self._break or self._limit
        if not (busy or "ecompil" in s or "raph " in s or "_dynamo" in s or "guard failure" in s):
            return None
        m = _GLOG.match(s) if s[:1] in "VIWEDF" else None
        pid = small_int(m.group(1)) if m else None
        body = s[m.end():] if m else s
        tag = COMPILE if m and ("_dynamo" in m.group(2) or m.group(3)) else None
        if busy and self._continue(pid, body, t, out):
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
            self._break[pid] = [b.group(1), None]
            return COMPILE
        b = _BREAK_OLD.search(body)
        if b and b.group(1).strip():
            self._break[pid] = [None, b.group(1).strip()]
            return COMPILE
        lim = _LIMIT.search(body)
        if lim:
            self._limit[pid] = [f"torch._dynamo hit config.{lim.group(1)} ({lim.group(2)})"]
            return COMPILE
        return tag

    def _continue(self, pid: int | None, body: str, t: float, out: Out) -> bool:
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
            location, reason = self._break[pid]
            r = _BREAK_REASON.match(body) if reason is None else None
            f = _FILE_LINE.search(body) if reason is not None else None
            if r or f:
                if f:
                    location = f"{f.group(1)}:{f.group(2)}"
                self._emit_break(pid, r.group(1) if r else reason, location, t, out)
                return True
            self._emit_break(pid, reason or "unknown", location, t, out)
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

    def _emit_break(self, pid: int | None, reason: str, location: str | None, t: float, out: Out) -> None:
        del self._break[pid]
        out.append(GraphBreak(t=t, reason=clip(reason), location=location, pid=pid))

    def _emit_limit(self, pid: int | None, t: float, out: Out) -> None:
        lines = self._limit.pop(pid)
        out.append(Notice(t=t, level="warn", source="dynamo", message=clip("; ".join(lines))))

    def flush(self, t: float) -> Out:
        out: Out = []
        for pid in list(self._recompile):
            self._emit_recompile(pid, "unknown (no guard failure printed)", t, out)
        for pid, (location, reason) in list(self._break.items()):
            self._emit_break(pid, reason or "unknown", location, t, out)
        for pid in list(self._limit):
            self._emit_limit(pid, t, out)
        return out
