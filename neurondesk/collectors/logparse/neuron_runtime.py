"""The Neuron runtime's ERROR/FATAL lines (libnrt, NEURON-FORMATS §4): one error per burst of a
process's lines, the HBM context line an OOM is about, and a short class for each failure."""

from __future__ import annotations

import re

from neurondesk.core.events.run_events import LogError

from ._common import ERROR, Out, clip, small_int

# libnrt: "2023-Jan-09 20:27:41.0593 15042:15042 ERROR  NRT:nrt_allocate_neuron_cores   <message>";
# containers pad pid:tid to a fixed width ("...44.501233    87:87    ERROR  TDRV:...").
# A message can be glued to the function name ("...bundle_instanceFailed to add ...").
_RUNTIME = re.compile(
    r"^(\d{4})-([A-Z][a-z]{2})-(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?)\s+(\d+):\d+\s+([A-Z]+)\s+([A-Z]+):"
    r"(\w+?)(?:\s+|(?<=[a-z0-9])(?=[A-Z][a-z]+(?:\s|$))|(?!\w))(.*)$"
)
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                       "Nov", "Dec"))}
# A runtime failure prints its consequences (memory dump notice, ring and queue set-up, the NEFF
# load) as ERROR lines of the same process right after it: they belong to that error.
BURST_S = 2.0
_BURSTS_KEEP = 256
_RUNTIME_CODES = (
    ("version-skew", ("compatibility id", "undefined symbol: nrt_", "NEFF version mismatch",
                      "Unsupported hardware operator code")),
    ("compiler-oom", ("[F137]", "forcibly killed")),
    ("device-oom", ("Failed to alloc", "Allocation Failure", "NRT_RESOURCE", "RESOURCE_EXHAUSTED")),
    ("cores-busy", ("NeuronCore(s) not available", "nrt_allocate_neuron_cores")),
    ("driver", ("Neuron Driver", "aws-neuron-dkms")),
    ("exec-timeout", ("execution timeout", "inference timeout")),
    ("collectives", ("collective",)),
)



def runtime_code(message: str) -> str | None:
    """A short class for a Neuron runtime failure: device-oom, cores-busy, driver, exec-timeout ..."""
    for code, needles in _RUNTIME_CODES:
        if any(n in message for n in needles):
            return code
    return None


def _printed_s(m: re.Match[str]) -> float:
    """The runtime line's own time as seconds on a scale good for differences of a few seconds
    (months count 31 days: a burst across a month's last midnight is not grouped)."""
    year, month, day, hh, mm, ss = m.group(1, 2, 3, 4, 5, 6)
    days = (small_int(year) or 0) * 372 + _MONTHS.get(month, 0) * 31 + (small_int(day) or 0)
    return days * 86400.0 + (small_int(hh) or 0) * 3600 + (small_int(mm) or 0) * 60 + float(ss)


CONTEXT_FUNCS = ("print_lnc_hbm_details",)  # "LNC size is 1. Neuron Cores using this HBM: NC 4 and NC 5"



class RuntimeLog:
    """The Neuron runtime's ERROR/FATAL lines: one error per burst (a pid's lines within BURST_S of
    the one that opened it are its detail), and the memory dump that follows a device OOM."""

    def __init__(self) -> None:
        self.mem_dump = False  # tab-indented "* total: ..." lines after a device OOM
        self._bursts: dict[int, float] = {}  # pid -> printed time of the error that opened its burst
        # pid -> (printed time, text) of a line that explains the failure printed right after it
        # (the HBM an OOM is about): it becomes that error's first detail line, not the error
        self._context: dict[int | None, tuple[float, str]] = {}

    def line(self, s: str, t: float, out: Out) -> str | None:
        m = _RUNTIME.match(s)
        if m is None:
            if "FATAL-RT-UNDEFINED-STATE" in s:
                out.append(LogError(t=t, source="neuron-runtime", message=clip(s.strip()),
                                    code=runtime_code(s) or "exec-timeout"))
                return ERROR
            return None
        pid, level, mod, func, msg = small_int(m.group(7)), m.group(8), m.group(9), m.group(10), m.group(11).strip()
        if level not in ("ERROR", "FATAL"):
            return None
        self.mem_dump = True
        if msg.startswith("* "):
            return ERROR
        code = runtime_code(f"{func} {msg}")
        text = clip(f"{mod}:{func} {msg}")
        printed = _printed_s(m)
        opened = self._bursts.get(pid)
        if opened is not None and 0.0 <= printed - opened <= BURST_S:
            out.append(LogError(t=t, source="neuron-runtime", message=text, code=code, pid=pid, detail=[text],
                                continues=True))
            return ERROR
        context = self._context.pop(pid, None)
        if func in CONTEXT_FUNCS:
            if context is not None:  # an older one that no failure followed stands alone
                out.append(LogError(t=t, source="neuron-runtime", message=context[1], pid=pid))
            if len(self._context) < _BURSTS_KEEP:
                self._context[pid] = (printed, text)
            else:
                out.append(LogError(t=t, source="neuron-runtime", message=text, pid=pid))
            return ERROR
        if context is not None and not 0.0 <= printed - context[0] <= BURST_S:
            out.append(LogError(t=t, source="neuron-runtime", message=context[1], pid=pid))
            context = None
        if len(self._bursts) >= _BURSTS_KEEP:
            self._bursts.clear()
        self._bursts[pid] = printed
        out.append(LogError(t=t, source="neuron-runtime", message=text, code=code, pid=pid,
                            detail=[context[1]] if context else []))
        return ERROR

    def flush(self, t: float, out: Out) -> None:
        """Context lines no failure followed: errors of their own."""
        for pid, (_, text) in list(self._context.items()):
            out.append(LogError(t=t, source="neuron-runtime", message=text, pid=pid))
        self._context.clear()
