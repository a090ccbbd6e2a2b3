"""Python tracebacks -> one LogError with the final ``ExcType: message`` and the last user frame."""

from __future__ import annotations

import re

from neurondesk.core.events.run_events import LogError

from ._common import ERROR, ERROR_CODE, Out, clip, is_library_path
from .neuron_runtime import runtime_code

_START = "Traceback (most recent call last)"
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+)(?:, in (.+))?')
_EXC = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_BARE_EXC = re.compile(r"(?:Error|Exception|Interrupt|Exit|Warning|Iteration|Unsupported)$")
_MAX_LINES = 5000  # a traceback longer than this is given up on (reported as cut off)
_MAX_STRAY = 50  # unindented non-exception lines (other output interleaved) tolerated inside one


class _Open:
    __slots__ = ("frames", "lines", "stray")

    def __init__(self) -> None:
        self.frames: list[tuple[str, str, str]] = []  # (file, line, function), outermost first
        self.lines = 0
        self.stray = 0


def error_code(exc_type: str, message: str) -> str | None:
    code = ERROR_CODE.search(message)
    if code:
        return code.group(1)
    if "OutOfMemoryError" in exc_type:
        return "device-oom"
    return runtime_code(message)


class TracebackParser:
    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}  # per stream and rank: ranks interleave their tracebacks

    def feed(self, s: str, t: float, out: Out, key: str = "") -> str | None:
        tb = self._open.get(key)
        if _START in s and s.lstrip().startswith(_START):
            self._open[key] = _Open()  # chained exceptions start a fresh one; each ends in its own line
            return ERROR
        if tb is None:
            return None
        tb.lines += 1
        if not s.strip() or s[:1] in " \t":
            m = _FRAME.match(s)
            if m:
                tb.frames.append((m.group(1), m.group(2), m.group(3) or "?"))
            if tb.lines > _MAX_LINES:
                self._emit(key, None, t, out)
            return ERROR
        m = _EXC.match(s.rstrip())
        if m and (m.group(2) is not None or "." in m.group(1) or _BARE_EXC.search(m.group(1))):
            exc, msg = m.group(1), (m.group(2) or "").strip()
            self._emit(key, (exc, msg), t, out)
            return ERROR
        tb.stray += 1
        if tb.stray > _MAX_STRAY:
            self._emit(key, None, t, out)
        return None

    def _emit(self, key: str, exc: tuple[str, str] | None, t: float, out: Out) -> None:
        tb = self._open.pop(key)
        frame = next((f for f in reversed(tb.frames) if not is_library_path(f[0])), None)
        frame = frame or (tb.frames[-1] if tb.frames else None)
        where = f" (at {frame[0]}:{frame[1]} in {frame[2]})" if frame else ""
        if exc is None:
            out.append(LogError(t=t, source="python",
                                message=f"traceback cut off before its exception line{where}"))
            return
        exc_type, msg = exc
        head = f"{exc_type}: {msg}" if msg else exc_type
        out.append(LogError(t=t, source="python", message=clip(head) + where, code=error_code(exc_type, msg)))

    def flush(self, t: float) -> Out:
        out: Out = []
        for key in list(self._open):
            self._emit(key, None, t, out)
        return out
