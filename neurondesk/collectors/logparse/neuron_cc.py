"""Neuron compile-wrapper, persistent-cache, parallel-compile and runtime lines (NEURON-FORMATS §4).

Matching keys on the message fragments, never on the tag: the tag has been ``NCC_WRAPPER``,
``NEURON_CC_WRAPPER``/``NEURON_CACHE`` and ``[INFO]:`` across releases.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from neurondesk.core.events.run_events import CompileFinished, CompileStarted, LogError, Notice

from ._common import COMPILE, ERROR, ERROR_CODE, NOISE, Out, clip, small_int
from .neuron_faults import WARNINGS, fault_of
from .neuron_runtime import RuntimeLog

SOURCE = "neuron-log"

_MODULE = re.compile(r"MODULE_[0-9a-fA-F]+(?:\+[0-9a-fA-F]{8})?")
# "2025-11-18 10:02:19.000671:  41872  INFO ||NEURON_CACHE||: ", "...: INFO ||NCC_WRAPPER||: ",
# "...: 41872 [INFO]: " -> pid (absent in early 2.x) and the message after the header.
_WRAPPER_HEAD = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+:\s+(?:(\d+)\s+)?(?:\[?([A-Z]+)\]?:?\s+)?(?:\|\|\w+\|\|:\s*)?"
)
_STATUS = re.compile(r"Compiler status (\w+)")
_FAILED = re.compile(r"Failed compilation with \[(.*?)\]: (.*)")
_ISO_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s*")
_REMAINING = re.compile(
    r"Current remaining items are (\d+), locked are (\d+), failed are (\d+), done are (\d+), total is (\d+)"
)
_TOTAL = re.compile(r"Total (graphs|successful compilations|failed compilations): (\d+)")
# Export and inference tools (optimum-neuron, neuronx-cc called directly) print one block per graph:
# "***** Compiling unet *****", dots, "Compiler status PASS", "[Compilation Time] 41.27 seconds.";
# after the last block, "[Total compilation Time] 612.90 seconds." (a check, not a compile).
_BLOCK_START = re.compile(r"\*{3,}\s*Compiling\s+(\S.*?)\s*\*{3,}")
_BLOCK_TIME = re.compile(r"\[Compilation Time\]\s*(\d+(?:\.\d*)?)\s*s")
_BLOCKS_TOTAL = re.compile(r"\[Total compilation Time\]\s*(\d+(?:\.\d*)?)\s*s")
# neuronx-cc's own log: ISO form, or the pre-2023 "MM/DD/YYYY HH:MM:SS AM" form.
_CC_LOG = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|\d\d/\d\d/\d{4} \d\d:\d\d:\d\d [AP]M)"
    r" ([A-Z]+) (\d+) \[[\w.\-]+\]: ?(.*)$"
)
_NOISE = (
    "NET/OFI Failed to initialize",
    "aws-ofi-nccl initialization failed",
    "OFI plugin initNet() failed",
    "Use PJRT C-API",
    "object(s) leaked, improper teardown",
)
@dataclass
class _Block:
    """A named compile block of an export tool, open until its time (or failure) is printed."""

    name: str
    start: float
    passed: bool = False
    error: str | None = None  # the compiler's own ERROR line inside the block, if it printed one
    wrapped: bool = False  # the wrapper's own compile lines came inside it: those are the compiles


def _module(text: str) -> str | None:
    m = _MODULE.search(text)
    return m.group(0) if m else None


def _head(line: str) -> tuple[int | None, str]:
    m = _WRAPPER_HEAD.match(line)
    if m is None:
        return None, line.strip()
    return small_int(m.group(1)), line[m.end():].strip()


def parallel_line(s: str, t: float, out: Out) -> str | None:
    """neuron_parallel_compile's progress, totals and failures (no state: each line says all)."""
    m = _REMAINING.search(s)
    if m:
        remaining, locked, failed, done, total = m.groups()
        out.append(Notice(t=t, level="warn" if small_int(failed) else "info", source="neuron-parallel-compile",
                          message=f"parallel compile: {done}/{total} done, {remaining} remaining, "
                                  f"{locked} locked, {failed} failed"))
        return COMPILE
    m = _TOTAL.search(s)
    if m:
        bad = m.group(1) == "failed compilations" and m.group(2) != "0"
        out.append(Notice(t=t, level="warn" if bad else "info", source="neuron-parallel-compile",
                          message=f"parallel compile: total {m.group(1)}: {m.group(2)}"))
        return ERROR if bad else COMPILE
    if "Extracting graphs" in s:
        out.append(Notice(t=t, level="info", source="neuron-parallel-compile",
                          message=f"graph {_module(s) or '?'} extracted for parallel compile "
                                  "(not compiled)"))
        return COMPILE
    if "exited with error" in s or ("sub-process" in s and "got exception" in s):
        _, msg = _head(s)
        out.append(LogError(t=t, source="neuron-parallel-compile", message=clip(msg)))
        return ERROR
    if "||" in s and ("NEURON_" in s or "NCC_WRAPPER" in s or "PARALLEL_COMPILE" in s):
        return ERROR if " ERROR " in s[:80] else COMPILE
    return None



def total_check(seen: float, total: float, t: float) -> Notice:
    """The tool's total compile time against the blocks seen: the rest was not seen as a compile."""
    off = abs(seen - total) > max(1.0, 0.02 * total)
    note = "; the rest was not seen as a compile" if off else ""
    return Notice(t=t, level="warn" if off else "info", source="neuron-compile",
                  message=f"compile check: blocks seen add up to {seen:.2f} s, the tool's total is {total:.2f} s{note}")


class NeuronCCParser:
    def __init__(self) -> None:
        self._open: dict[str, tuple[float, int | None]] = {}  # compiles started, by MODULE hash
        self._passed: deque[str] = deque(maxlen=64)  # closed by a bare "Compiler status PASS"
        self._failed: deque[str] = deque(maxlen=64)
        self._lookup: dict[int | None, float] = {}  # pid -> arrival of its last "Compile cache path"
        self._anon = 0
        self._block: _Block | None = None
        self._blocks_s: list[float] = []  # durations of the blocks since the last total line
        # module -> pid of a "Got a cached failed neff" line, awaiting its " Failed compilation
        # with [...]" continuation (which quotes the stored failure: not a compile of its own)
        self._cached_failed: dict[str | None, int | None] = {}
        self._echo_next = False  # the warnings module echoes the source line after a warning
        self._runtime = RuntimeLog()

    def feed(self, s: str, t: float, out: Out, key: str = "") -> str | None:
        fault = fault_of(s, t)  # what a Neuron failure means (out of memory, version skew), beside its error
        tag = self._feed(s, t, out)
        if fault is not None:
            out.append(fault)
            return tag if fault.fault in WARNINGS else (tag or ERROR)
        return tag

    def _feed(self, s: str, t: float, out: Out) -> str | None:
        if self._echo_next or self._runtime.mem_dump:
            echo, dump = self._echo_next, self._runtime.mem_dump
            self._echo_next = self._runtime.mem_dump = False
            if echo and s[:1].isspace() and s.strip():
                return NOISE
            if dump and s.lstrip().startswith("* "):
                self._runtime.mem_dump = True
                return ERROR
        if ("MODULE_" in s or "ompil" in s or "neff" in s or "NEURON" in s or "PARALLEL" in s or "NCC_" in s
                or "Total " in s or "remaining items" in s or "sub-process" in s):
            tag = self._wrapper(s, t, out)
            if tag:
                return tag
        if "TDRV" in s or "NRT" in s or "NMGR" in s or "ENC:" in s or "HAL:" in s or "FATAL-RT" in s:
            tag = self._runtime.line(s, t, out)
            if tag:
                return tag
        if "]:" in s and (s[:1].isdigit()):
            m = _CC_LOG.match(s)
            if m:
                return self._cc_log(m, t, out)
        if (s.startswith("..") or "run_backend_driver" in s) and (
            s.strip().lstrip(".") in ("", "Completed run_backend_driver.")
        ):
            return COMPILE
        return self._noise(s)

    # ---------------------------------------------------------------- wrapper / cache
    def _wrapper(self, s: str, t: float, out: Out) -> str | None:
        if "****" in s or "Time]" in s:
            tag = self._block_line(s, t, out)
            if tag:
                return tag
        if "Call compiler with cmd" in s:
            pid, _ = _head(s)
            if self._block is not None:
                self._block.wrapped = True
            key = _module(s)
            self._lookup.pop(pid, None)
            for seen in (self._failed, self._passed):  # a recompile of a known graph (a retry) starts afresh
                if key in seen:
                    seen.remove(key)
            self._cached_failed.pop(key, None)
            if key is None:  # the command was cut off before the module name
                self._anon += 1
                self._open[f"?{self._anon}"] = (t, pid)
            else:
                self._open[key] = (t, pid)
            out.append(CompileStarted(t=t, source=SOURCE, pid=pid, graph_hash=key))
            return COMPILE
        if "Compiler status" in s:
            m = _STATUS.search(s)
            if not self._open and self._block is not None:
                return self._block_status(self._block, m is not None and m.group(1) == "PASS", s, t, out)
            if m is None or m.group(1) != "PASS":
                return ERROR  # "Failed compilation with" carries the details and closes it
            key = next(iter(self._open), None)  # no hash on this line: the oldest open compile
            if key is not None:
                self._close(key, t, out)
                self._passed.append(key)
            return COMPILE
        if "Compilation Successfully Completed" in s:
            pid, _ = _head(s)
            key = _module(s)
            if key in self._open:
                self._close(key, t, out)
            elif key not in self._passed:  # newest wrappers may not print "Call compiler"
                out.append(CompileFinished(t=t, source=SOURCE, pid=pid, graph_hash=key, cache="miss"))
            return COMPILE
        if "Using a cached neff" in s:
            pid, _ = _head(s)
            started = self._lookup.pop(pid, None)
            duration = t - started if started is not None else None
            out.append(CompileFinished(t=t, source=SOURCE, pid=pid, graph_hash=_module(s), cache="hit",
                                       duration_s=duration))
            return COMPILE
        if "Compile cache path" in s:
            pid, _ = _head(s)
            self._lookup[pid] = t
            return COMPILE
        if "cached failed neff" in s or "compilation error for this graph in the previous run" in s:
            pid, msg = _head(s)
            key = _module(s)
            out.append(CompileFinished(t=t, source=SOURCE, pid=pid, graph_hash=key, cache="failed",
                                       ok=False, duration_s=0.0, error=clip(msg)))
            out.append(LogError(t=t, source="neuron-cc", message=clip(msg), pid=pid))
            if len(self._cached_failed) >= 64:
                self._cached_failed.clear()
            self._cached_failed[key] = pid
            if key is not None:
                self._failed.append(key)  # a traceback quoting it again is not another failure
            return ERROR
        if "Failed compilation with" in s:
            return self._failure(s, t, out)
        if "Compilation failed for" in s:  # "... after N retries" (one third-party source)
            pid, msg = _head(s)
            key = _module(s)
            if key is not None and key in self._failed:
                return ERROR
            self._fail(key, pid, t, msg, None, out)
            return ERROR
        return parallel_line(s, t, out)

    # ---------------------------------------------------------------- named blocks (export tools)
    def _block_line(self, s: str, t: float, out: Out) -> str | None:
        m = _BLOCK_START.search(s)
        if m:
            self._end_block(t, out)
            self._block = _Block(name=clip(m.group(1), 200), start=t)
            out.append(CompileStarted(t=t, source=SOURCE))
            return COMPILE
        m = _BLOCK_TIME.search(s)
        if m and self._block is not None:
            self._end_block(t, out, float(m.group(1)))
            return COMPILE
        m = _BLOCKS_TOTAL.search(s)
        if m:
            self._end_block(t, out)
            out.append(total_check(sum(self._blocks_s), float(m.group(1)), t))
            self._blocks_s = []
            return COMPILE
        return None

    def _block_status(self, block: _Block, passed: bool, s: str, t: float, out: Out) -> str:
        if passed:
            block.passed = True
            return COMPILE
        if block.error is None:  # the compiler said nothing else: this line is the error
            block.error = clip(s.strip())
            out.append(LogError(t=t, source="neuronx-cc", message=f"{block.name}: {block.error}"))
        self._end_block(t, out)
        return ERROR

    def _end_block(self, t: float, out: Out, printed_s: float | None = None) -> None:
        """Report the open block (if any) as one compile; ``printed_s``: the time the tool printed."""
        block, self._block = self._block, None
        if block is None:
            return
        failed = block.error is not None and not block.passed
        duration = printed_s if printed_s is not None else max(0.0, t - block.start)
        if not failed:
            self._blocks_s.append(duration)
        if block.wrapped:  # the wrapper's own lines inside it were the compiles
            return
        out.append(CompileFinished(t=t, source=SOURCE, name=block.name, duration_s=duration, ok=not failed,
                                   error=block.error if failed else None))

    def _failure(self, s: str, t: float, out: Out) -> str:
        pid, _ = _head(s)
        m = _FAILED.search(s)
        argv, msg = (m.group(1), m.group(2)) if m else (s, s)
        key = _module(argv)
        msg = _ISO_TS.sub("", msg.strip())
        code = ERROR_CODE.search(msg)
        if key in self._cached_failed:  # the stored failure, quoted under its cached-failure line
            pid = self._cached_failed.pop(key)
            out.append(LogError(t=t, source="neuron-cc", message=clip(msg), code=code.group(1) if code else None,
                                pid=pid, detail=[clip(msg)], continues=True))
            return ERROR
        if key is not None and key in self._failed:
            return ERROR  # the same failure quoted again (an exception message, another rank)
        self._fail(key, pid, t, msg, code.group(1) if code else None, out)
        return ERROR

    def _fail(self, key: str | None, pid: int | None, t: float, msg: str, code: str | None, out: Out) -> None:
        msg = clip(msg)
        if key is not None and key in self._open:
            self._close(key, t, out, error=msg)
        else:
            out.append(CompileFinished(t=t, source=SOURCE, pid=pid, graph_hash=key, cache="miss", ok=False,
                                       error=msg))
        if key is not None:
            self._failed.append(key)
        out.append(LogError(t=t, source="neuron-cc", message=msg, code=code, pid=pid))

    def _close(self, key: str, t: float, out: Out, error: str | None = None) -> None:
        started, pid = self._open.pop(key)
        out.append(CompileFinished(
            t=t, source=SOURCE, pid=pid, graph_hash=None if key.startswith("?") else key,
            duration_s=max(0.0, t - started), cache="miss", ok=error is None, error=error,
        ))

    # ---------------------------------------------------------------- runtime and compiler logs
    def _cc_log(self, m: re.Match[str], t: float, out: Out) -> str:
        level, msg = m.group(1), m.group(3).strip()
        if level not in ("ERROR", "FATAL", "CRITICAL"):
            return COMPILE
        code = ERROR_CODE.search(msg)
        if "Error message:" in msg:
            detail = msg.split("Error message:", 1)[1].strip()
            msg = f"internal compiler error: {detail}"
        elif not code:
            return ERROR
        out.append(LogError(t=t, source="neuronx-cc", message=clip(msg), code=code.group(1) if code else None))
        if self._block is not None and self._block.error is None:
            self._block.error = clip(msg)  # the block's failure, already reported
        return ERROR

    def _noise(self, s: str) -> str | None:
        if "Warning: Use torch_xla.device" in s:
            self._echo_next = True
            return NOISE
        if ("OFI" in s or "PJRT" in s or "leaked" in s) and any(n in s for n in _NOISE):
            return NOISE
        if "torch/distributed/run.py" in s:  # torchrun's OMP_NUM_THREADS banner
            rest = s.rstrip()
            if "OMP_NUM_THREADS" in rest or rest.endswith(("]", "*****")):
                return NOISE
        return None

    def flush(self, t: float) -> Out:
        out: Out = []
        for key in list(self._open):
            self._close(key, t, out, error="output ended before the compiler reported a result")
        if self._block is not None and not self._block.passed and self._block.error is None:
            self._block.error = "output ended before the compiler reported a result"
        self._end_block(t, out)
        self._runtime.flush(t, out)
        self._lookup.clear()
        return out
