"""torchrun's failure report (torch.distributed.elastic's ChildFailedError) -> one RankExited per rank.

    Root Cause (first observed failure):
    [0]:
      time      : 2026-12-03_10:40:00
      host      : trn-01
      rank      : 2 (local_rank: 0)
      exitcode  : -9 (pid: 1234)
      error_file: <N/A>
      traceback : Signal 9 (SIGKILL) received by PID 1234

A rank killed by a signal (the OOM killer's SIGKILL, a segfault) raises nothing in Python: this report
is where its rank, exit code and signal are said. The "Root Cause" entry is marked first.

The agent also says each failure as it sees it, before a restart (``--max-restarts``) and with no report:

    E1206 00:31:48.443000 7077 .../api.py:882] failed (exitcode: 7) local_rank: 1 (pid: 7091) of binary: ...

-> a RankExited with its pid, marked root cause (the reducers take the global rank from the pid's hello).
"""

from __future__ import annotations

import re
from datetime import datetime

from neurondesk.core.events.run_events import RankExited

from ._common import ERROR, Out

_SECTION = re.compile(r"^\s*(Failures|Root Cause \(first observed failure\)):\s*$")
_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK = re.compile(r"^(\d{1,7})(?: \(local_rank: (\d{1,7})\))?")
_EXIT = re.compile(r"^(-?\d{1,4})(?: \(pid: (\d{1,10})\))?")
_SIGNAL = re.compile(r"Signal (\d{1,3}) \((SIG[A-Z0-9]+)\)")
_AGENT = re.compile(r"\] failed \(exitcode: (-?\d{1,4})\) local_rank: (\d{1,7}) \(pid: (\d{1,10})\) of binary")


class TorchElasticParser:
    def __init__(self) -> None:
        self._root = False  # inside the Root Cause section
        self._fields: dict[str, str] | None = None
        self._in_report = False

    def feed(self, s: str, t: float, out: Out, key: str = "") -> str | None:
        agent = _AGENT.search(s) if "] failed (exitcode" in s else None
        if agent is not None:
            code, local = int(agent.group(1)), int(agent.group(2))
            out.append(RankExited(t=t, rank=local, local_rank=local, exit_code=code, pid=int(agent.group(3)),
                                  signal=_signal_name(code), root_cause=True))
            return None
        m = _SECTION.match(s)
        if m:
            self._end(t, out)
            self._in_report, self._root = True, m.group(1).startswith("Root")
            return ERROR
        if not self._in_report:
            return None
        if re.match(r"^\[\d+\]:\s*$", s):
            self._end(t, out)
            self._fields = {}
            return ERROR
        f = _FIELD.match(s)
        if f and self._fields is not None:
            self._fields[f.group(1)] = f.group(2).strip()
            if f.group(1) == "traceback":
                self._end(t, out)
            return ERROR
        if s.startswith(("=", "-")):
            self._end(t, out)
            if s.startswith("="):
                self._in_report = False
            return ERROR
        return None

    def flush(self, t: float) -> list:
        out: list = []
        self._end(t, out)
        self._in_report = False
        return out

    def _end(self, t: float, out: Out) -> None:
        fields, self._fields = self._fields, None
        if not fields or "rank" not in fields:
            return
        rank, exit_ = _RANK.match(fields["rank"]), _EXIT.match(fields.get("exitcode", ""))
        if rank is None:
            return
        signal = _SIGNAL.search(fields.get("traceback", ""))
        out.append(RankExited(
            t=min(t, _when(fields.get("time", "")) or t), rank=int(rank.group(1)),
            local_rank=int(rank.group(2)) if rank.group(2) else None,
            exit_code=int(exit_.group(1)) if exit_ else None,
            pid=int(exit_.group(2)) if exit_ and exit_.group(2) else None,
            signal=signal.group(2) if signal else None, host=fields.get("host", "")[:200],
            root_cause=self._root))


def _when(text: str) -> float | None:
    """torchrun's ``time`` field (the local time, to the second): a second may be cut, never added."""
    try:
        return datetime.strptime(text, "%Y-%m-%d_%H:%M:%S").timestamp()
    except ValueError:
        return None


def _signal_name(code: int) -> str | None:
    """A negative exit code is the signal that ended the process (-9: SIGKILL)."""
    if code >= 0:
        return None
    import signal

    try:
        return signal.Signals(-code).name
    except ValueError:
        return None
