"""TorchNeuron, the recorder's half of its one adapter (the probe's half:
probe/bootstrap/_neurondesk_probe/backends/torchneuron.py): the workload's TorchNeuron variables, and its
log file read as it grows.

Every TorchNeuron name neurondesk uses, and where it was read (the AWS Neuron documentation as
stored here, its ``latest`` pages; the Neuron release each was current for):

| name | what it is | read from |
|---|---|---|
| ``torch_neuronx``, the ``neuron`` device, ``torch_neuronx.device_count()``, ``torch_neuronx.__version__`` | TorchNeuron (torch-neuronx 2.13.x / 2.14.x on torch 2.13 / 2.14), its NeuronCores | TorchNeuron release notes, Neuron 2.33.0 (doctor/compat.json); "torch.compile backend reference" (torch/compile/reference-torch-compile, date-modified 2026-10-14: Neuron 2.33) |
| ``TORCH_NEURONX_LOG_LEVEL``, ``TORCH_NEURONX_LOG_FILE`` | the log's level (0 error, 1 warning, 2 info, 3 debug) and its file | "TorchNeuron environment variables" (torch/reference/env-vars, 2026-10-14: Neuron 2.33), its logging section as issue 44 quotes it |
| ``[NEFF_CACHE] Cache MISS for key: K``, ``Cache HIT for key: K``, ``Storing NEFF for key: K`` | the NEFF cache's lines, at level 2 | TorchNeuron logging, as issue 44 quotes it (Neuron 2.33-2.34); the lines' ``[Neuron] [INFO] [file:line]`` prefix is not in what we read: the parser needs none |
| ``TORCH_NEURONX_METRICS_ENABLED``, ``CompilationCache.TotalCompilations``, ``.InMemoryHits``, ``.InMemoryMisses``, ``.PersistentHits``, ``.PersistentMisses``, ``CompilationCache.CompilationTime`` | TorchNeuron's metrics (off by default) | "TorchNeuron environment variables" (metrics section), issue 44's quotes of the metrics page (Neuron 2.33-2.34) |
| ``torch_neuronx.metrics.is_enabled()``, ``get_counter_value(name)``, ``get_metric_data(name)`` (``accumulator``, in nanoseconds as torch_xla's) | how a process reads them (the probe checks all three exist; without them, or with collection off, the log's MISS lines count the compiles) | torch-neuronx's source: ``torch_neuronx/metrics.py``; the unit (nanoseconds) and ``samples`` ``{timestamp_ns, value}``: ``csrc/core/NeuronBindings.cpp`` ``_neuron_metric_data``, ``csrc/core/metrics/NeuronMetrics.h`` ``TORCH_NEURONX_TIME_METRIC`` (docs/torchneuron.md) |
| ``TORCH_NEURONX_NEFF_CACHE_DIR`` (default ``/tmp/neff_cache``), ``TORCH_NEURONX_NEFF_DISABLE_CACHE`` or ``TORCH_NEURONX_DISABLE_NEFF_CACHE`` (either turns it off), ``TORCH_NEURONX_HLO_CACHE_DIR`` | the persistent NEFF cache, its off switch in both spellings (torch_neuronx/utils.py : is_neff_cache_disabled reads the second), the HLO cache | "What are Neuron Compiler artifacts?" (compiler/about-compiler-artifacts, 2026-11-16: Neuron 2.34) names the variable; the default is torch-neuronx's own, not in the pages we read |
| ``torch.compile(backend="neuron")``, ``torch_neuronx.get_dynamo_metrics()`` (graph_id, graph_name, model_name, has_collectives, graph_node_count, timestamp, torch_neuronx_fx_passes_us / _lower_us / _compile_us), ``torch._dynamo.utils.counters["neuron"]["compiled_graphs"]`` | its torch.compile graphs; get_dynamo_metrics synchronizes, so it is read at the end of a dynamo compile and at exit, never per step | "torch.compile backend reference" (2026-10-14: Neuron 2.33); the fields: the metrics documentation of Neuron 2.33-2.34 as issue 27 quotes it (collectors/devices/graph_stats.py) |
| ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION`` | a torch.compile graph that fails to compile raises (1, the default) or runs eagerly (0) | "TorchNeuron environment variables" (2026-10-14); named in the graph-fallback finding (collectors/logparse/neuron_faults.py reads the failures) |

What the launcher sets, only where the user set nothing (``torchneuron_environment``):
``TORCH_NEURONX_METRICS_ENABLED=1``; ``TORCH_NEURONX_LOG_FILE=<run folder>/torchneuron.log`` with
``TORCH_NEURONX_LOG_LEVEL`` at least 2, so the NEFF cache lines go to that file, not to the script's
stdout. The lines the user would have seen at their own level (1 unless set: warnings and errors)
are passed on to their streams (``NeffLogTail``: warnings and errors to stderr, info and debug to
stdout), so their output is what they print alone; a user's own log file is read, never written.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.collectors.logparse.neuron_faults import fault_of
from neurondesk.collectors.output_tail import MAX_LINE, cut_mark
from neurondesk.collectors.relay_link import open_output
from neurondesk.core.events.neff_events import NeffCacheLog
from neurondesk.core.events.run_events import Event, Notice, ParseProblem
from neurondesk.store.own_files import FileId, create_new
from neurondesk.store.rundir import TORCHNEURON_LOG

LOG_FILE = TORCHNEURON_LOG  # in the run folder (store/rundir.py moves it aside with --force)
DEFAULT_LEVEL = 1  # TorchNeuron's own default: warnings and errors
NEFF_LEVEL = 2  # the level its NEFF cache lines are written at
READ_MAX = 1 << 20  # bytes taken from the log per read
KEYS_KEPT = 100_000  # distinct keys counted; past that, counted no more (bounded memory)
MAX_FILES = 4  # log files read at once (a rotated one and its successors)
HOLD_POLLS = 4  # reads a relayed line waits for the user's stream to end its line, then goes anyway
# torch-neuronx's csrc/core/NeuronLogging.h : NeuronLogger::log writes "[Neuron] [LEVEL] [file:line] message",
# TORCH_NEURONX_NEFF_CACHE_HIT / _MISS / _STORE the three lines below at INFO (2); the file is opened
# once (std::ofstream, ios::app) and held: renamed or deleted, TorchNeuron writes on into it
NEFF_LINE = re.compile(r"\[NEFF_CACHE\]\s*(Cache MISS|Cache HIT|Storing NEFF) for key:\s*(\S+)")
LEVEL = re.compile(r"\[(ERROR|WARNING|WARN|INFO|DEBUG)\]")
LEVELS = {"ERROR": 0, "WARNING": 1, "WARN": 1, "INFO": 2, "DEBUG": 3}
COUNTED = {"Cache MISS": "misses", "Cache HIT": "hits", "Storing NEFF": "stores"}


DEFAULT_NEFF_CACHE = "/tmp/neff_cache"  # TORCH_NEURONX_NEFF_CACHE_DIR's default (torch-neuronx's own)


# both spellings turn the persistent cache off: torch_neuronx/utils.py : is_neff_cache_disabled reads
# TORCH_NEURONX_DISABLE_NEFF_CACHE ("1", "true", "yes", any case); the env-vars page and earlier
# releases say TORCH_NEURONX_NEFF_DISABLE_CACHE (docs/torchneuron.md, issue 52 item 4)
CACHE_SWITCHES = ("TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE")
SWITCH_ON = ("1", "true", "yes")  # a switch's values that turn it on (any case)
HLO_CACHE = "TORCH_NEURONX_HLO_CACHE_DIR"  # the HLO cache folder (torch-neuronx's source; no default read)


def neff_cache_off(env: Mapping[str, str]) -> bool:
    """Either spelling of the switch set to 1 / true / yes."""
    return any(env.get(name, "").strip().lower() in SWITCH_ON for name in CACHE_SWITCHES)


def neff_cache_dir(env: Mapping[str, str]) -> str | None:
    """The persistent NEFF cache folder a workload with this environment writes to, for the disk
    forecast: TORCH_NEURONX_NEFF_CACHE_DIR when set; else its default when it exists (a machine that
    ran TorchNeuron before); None when either spelling of the switch is on (memory only) or neither."""
    if neff_cache_off(env):
        return None
    given = env.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    if given:
        return given
    return DEFAULT_NEFF_CACHE if os.path.isdir(DEFAULT_NEFF_CACHE) else None


def hlo_cache_dir(env: Mapping[str, str]) -> str | None:
    """TORCH_NEURONX_HLO_CACHE_DIR when set (the disk forecast watches it beside the NEFF cache)."""
    return env.get(HLO_CACHE) or None


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


@dataclass
class LogPlan:
    """Where TorchNeuron's log goes, and which of its lines reach the user's streams."""

    path: Path | None  # the file to read (None: none)
    ours: bool  # the run folder's file (its lines the user would have seen are passed on)
    user_level: int  # the level the user would have run at
    cache_dir: str  # the persistent NEFF cache
    notes: list[str] = field(default_factory=list)
    start: tuple[int, int, int] | None = None  # (st_dev, st_ino, size) of the user's file at the run's start


def torchneuron_environment(base: dict[str, str], run_dir: Path) -> tuple[dict[str, str], LogPlan]:
    """The variables to add to the workload's environment, and the plan for its log."""
    extra: dict[str, str] = {}
    if "TORCH_NEURONX_METRICS_ENABLED" not in base:
        extra["TORCH_NEURONX_METRICS_ENABLED"] = "1"
    elif base["TORCH_NEURONX_METRICS_ENABLED"].strip().lower() not in ("1", "true", "yes"):
        pass  # theirs, left alone: the probe says once that NEFF compiles are not counted
    cache_dir = base.get("TORCH_NEURONX_NEFF_CACHE_DIR") or DEFAULT_NEFF_CACHE
    level = _int(base.get("TORCH_NEURONX_LOG_LEVEL"), DEFAULT_LEVEL)
    if base.get("TORCH_NEURONX_LOG_FILE"):
        path = Path(base["TORCH_NEURONX_LOG_FILE"])
        plan = LogPlan(path, False, level, cache_dir)
        try:
            st = os.stat(path, follow_symlinks=False)  # opens nothing: a FIFO's writer never sees us
        except OSError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            plan.path = None
            plan.notes.append(f"TORCH_NEURONX_LOG_FILE set by you ({path}) is {_file_kind(st.st_mode)}, not a "
                              "regular file: neurondesk does not open it (reading it could block or break "
                              "TorchNeuron's writes), so its NEFF cache lines are not read here")
        elif st is not None:  # earlier runs' lines are not this run's: read from where it ends now
            plan.start = (st.st_dev, st.st_ino, st.st_size)
        if plan.path is None:
            pass
        elif not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
            plan.notes.append(f"TORCH_NEURONX_LOG_FILE set by you ({path}) is in a folder that cannot be written: "
                              "TorchNeuron cannot write its log there (it writes to the console instead), so its "
                              "NEFF cache lines are not read; NEFF compiles come from its metrics")
        elif level < NEFF_LEVEL:
            plan.notes.append(f"TORCH_NEURONX_LOG_FILE set by you ({path}) at TORCH_NEURONX_LOG_LEVEL {level}: "
                              "TorchNeuron writes its NEFF cache lines at level 2, so they are not in it: "
                              "NEFF compiles and cache hits come from its metrics alone")
        return extra, plan
    path = run_dir / LOG_FILE
    try:
        fd, _ = create_new(path, os.O_WRONLY | os.O_APPEND, "TorchNeuron's log file")  # private (0600), ours
        os.close(fd)
    except OSError as exc:  # a file planted there, a read-only folder: TorchNeuron's log left alone
        return extra, LogPlan(None, False, level, cache_dir, [
            f"TorchNeuron's log file {path} could not be made ({exc}): its NEFF cache lines are not read"])
    extra["TORCH_NEURONX_LOG_FILE"] = str(path)
    extra["TORCH_NEURONX_LOG_LEVEL"] = str(max(level, NEFF_LEVEL))
    return extra, LogPlan(path, True, level, cache_dir)


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))
    return next((words for test, words in kinds if test(mode)), "a special file")


def parse_line(text: str) -> tuple[str | None, int | None, str | None]:
    """(what it counts: "misses" / "hits" / "stores" or None, its level or None, the key or None)."""
    m = LEVEL.search(text)
    level = LEVELS[m.group(1)] if m else None
    n = NEFF_LINE.search(text)
    if n is None:
        return None, level, None
    return COUNTED[n.group(1)], level, n.group(2)


@dataclass
class _LogFile:
    fd: int
    ident: tuple[int, int]  # (st_dev, st_ino)
    pos: int = 0  # the offset read up to
    rest: bytes = b""  # a line its writer has not ended yet (at most MAX_LINE bytes)
    cut: int = 0  # bytes of the line in progress past MAX_LINE, counted, not kept


class NeffLogTail:
    """TorchNeuron's log file, read as it grows: a line it is still writing waits for its end; a
    deleted file is read on through the open descriptor (TorchNeuron writes on into it); when a new
    file appears at the path (rotated), both are read: the writer may write on into either."""

    def __init__(self, plan: LogPlan, outputs: dict[str, Path], file_ids: dict[str, FileId]) -> None:
        self.plan = plan
        self.outputs, self.file_ids = outputs, file_ids
        self.files: list[_LogFile] = []  # the last one is the file at the path
        self.keys: set[str] = set()
        self.said: set[str] = set()  # notices given once
        self.held: list[tuple[str, bytes]] = []  # lines to pass on, waiting for a line end
        self.held_polls = 0
        self.lost_relay = 0

    def poll(self, t: float, final: bool = False) -> list[Event]:
        out: list[Event] = []
        if self.plan.path is None:
            return out
        counts = {"misses": 0, "hits": 0, "stores": 0}
        ends: list[int] = []
        read = False
        try:
            self._follow(t, out)
            for f in self.files:
                self._truncated(f, t, out)
                while True:  # bounded pieces; at the end, every piece (none held whole)
                    data = os.read(f.fd, READ_MAX)
                    if data:
                        read = True
                        self._lines(f, data, t, counts, ends if f is self.files[-1] else [], out)
                    if not (final and len(data) == READ_MAX):
                        break
                if final:
                    self._line_end(f, t, out)
        except OSError as exc:
            self._once(out, t, "read", f"TorchNeuron's log {self.plan.path} could not be read ({exc}); "
                                        "NEFF compiles still come from its metrics")
        relayed = self._relay(final)
        if final and not self.files and not self.plan.ours and not self.plan.notes and "special" not in self.said:
            self._once(out, t, "never", f"TORCH_NEURONX_LOG_FILE {self.plan.path} (set by you) was never written: "
                                        "TorchNeuron's NEFF cache lines were not read (NEFF compiles come from its "
                                        "metrics)")
        if any(counts.values()) or relayed or read:
            out.append(NeffCacheLog(t=t, path=str(self.plan.path), relayed=relayed, keys=len(self.keys),
                                    miss_ends=ends, read_to=self.files[-1].pos if self.files else None, **counts))
        return out

    def _once(self, out: list[Event], t: float, what: str, message: str, level: str = "warn") -> None:
        if what not in self.said:
            self.said.add(what)
            out.append(Notice(t=t, level=level, source="torchneuron", message=message))

    def _follow(self, t: float, out: list[Event]) -> None:
        """The file at the path: opened when it appears (a file there at the run's start from where it
        ended then); deleted or replaced, said once; anything but a regular file never opened."""
        try:
            st = os.stat(self.plan.path, follow_symlinks=False)
        except FileNotFoundError:
            if self.files:
                self._once(out, t, "deleted", f"TorchNeuron's log {self.plan.path} was deleted while the run went "
                                              "on; read on from the open file (TorchNeuron writes on into it)")
            return
        if self.files and (st.st_dev, st.st_ino) == self.files[-1].ident:
            return
        if not stat.S_ISREG(st.st_mode):  # a FIFO or a device in its place: never opened, never waited on
            self._once(out, t, "special", f"TorchNeuron's log {self.plan.path} is {_file_kind(st.st_mode)}, not a "
                                          "regular file: neurondesk does not open it, so its NEFF cache lines are "
                                          "not read")
            return
        if self.files and os.fstat(self.files[-1].fd).st_nlink == 0:  # replaced after it was deleted
            self._once(out, t, "deleted", f"TorchNeuron's log {self.plan.path} was deleted while the run went "
                                          "on; read on from the open file (TorchNeuron writes on into it)")
        fd = os.open(self.plan.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file")
        f = _LogFile(fd, (st.st_dev, st.st_ino))
        start = self.plan.start
        if not self.files and start is not None and start[:2] == f.ident and st.st_size >= start[2]:
            f.pos = os.lseek(fd, start[2], os.SEEK_SET)  # the lines of earlier runs are not read
        if self.files:
            self._once(out, t, "rotated", f"TorchNeuron's log {self.plan.path} was replaced by a new file "
                                          "(rotated): both are read on")
        self.files.append(f)
        while len(self.files) > MAX_FILES:  # the oldest, read to its end, closed
            old = self.files.pop(0)
            os.close(old.fd)

    def _truncated(self, f: _LogFile, t: float, out: list[Event]) -> None:
        """A file now shorter than what was read was truncated (copytruncate rotation, ``: > log``):
        said once, and read again from its start."""
        if os.fstat(f.fd).st_size < f.pos:
            self._once(out, t, "truncated", f"TorchNeuron's log {self.plan.path} was truncated while the run went "
                                            "on: reading restarts at its start (lines between the last read and "
                                            "the truncation are lost)")
            f.pos = os.lseek(f.fd, 0, os.SEEK_SET)
            f.rest, f.cut = b"", 0

    def _lines(self, f: _LogFile, data: bytes, t: float, counts: dict[str, int], ends: list[int],
               out: list[Event]) -> None:
        """The piece's whole lines counted (a MISS line's end offset kept); the line in progress held
        up to MAX_LINE bytes, the rest of it counted and cut, as output lines are."""
        start, at = f.pos, 0
        f.pos += len(data)
        lines = data.split(b"\n")
        last = lines.pop()
        for piece in lines:
            at += len(piece) + 1
            room = max(0, MAX_LINE - len(f.rest))
            raw, cut = f.rest + piece[:room], f.cut + max(0, len(piece) - room)
            f.rest, f.cut = b"", 0
            if self._line(raw, cut, t, counts, out) == "misses":
                ends.append(start + at)
        room = max(0, MAX_LINE - len(f.rest))
        f.cut += max(0, len(last) - room)
        f.rest += last[:room]

    def _line_end(self, f: _LogFile, t: float, out: list[Event]) -> None:
        """At the end, a line its writer never ended: kept raw, never counted."""
        if f.rest or f.cut:
            out.append(ParseProblem(t=t, source="torchneuron", raw=f.rest.decode("utf-8", "replace")[:2000],
                                    error="TorchNeuron's log ended in the middle of a line (cut in half): not counted"))
            f.rest, f.cut = b"", 0

    def _line(self, raw: bytes, cut: int, t: float, counts: dict[str, int], out: list[Event]) -> str | None:
        """One line: counted, passed on (ours), or read for a failure; what it counted."""
        text = raw.decode("utf-8", "replace")
        what, level, key = parse_line(text)
        if what is not None:
            counts[what] += 1
            if key is not None and len(self.keys) < KEYS_KEPT:
                self.keys.add(key)
        if cut:
            raw += cut_mark(cut).encode()
        if not self._pass_on(raw, level) and what is None:
            # a failure told in a line not passed on (a passed-on line is read from the stream it goes to)
            fault = fault_of(text, t)
            if fault is not None:
                out.append(fault)
        return what

    def _pass_on(self, raw: bytes, level: int | None) -> bool:
        """A line the user would have seen at their own level, to their stream (ours only)."""
        if not self.plan.ours or level is None or level > self.plan.user_level:
            return False
        self.held.append(("stderr" if level <= 1 else "stdout", raw + b"\n"))
        return True

    def _relay(self, final: bool) -> int:
        """The held lines, appended to the user's stdout.log / stderr.log where that stream is at a
        line end (after HOLD_POLLS reads, or at the end, anyway). Never raises: a disk that fails
        loses the line (counted), never the training's output."""
        if not self.held:
            return 0
        self.held_polls += 1
        sent = 0
        for stream in ("stdout", "stderr"):
            lines = [data for s, data in self.held if s == stream]
            if not lines:
                continue
            path = self.outputs.get(stream)
            if path is None:
                continue
            if not (final or self.held_polls >= HOLD_POLLS or _ends_line(path)):
                return 0
            try:
                fd = open_output(path, self.file_ids.get(stream))
                try:
                    os.write(fd, b"".join(lines))
                finally:
                    os.close(fd)
                sent += len(lines)
            except OSError:
                self.lost_relay += len(lines)
        self.held, self.held_polls = [], 0
        return sent

    def close(self) -> None:
        """The files closed; ours removed when TorchNeuron never wrote to it (a run without it)."""
        for f in self.files:
            os.close(f.fd)
        self.files = []
        if self.plan.ours and self.plan.path is not None:
            try:
                if os.stat(self.plan.path, follow_symlinks=False).st_size == 0:
                    os.unlink(self.plan.path)
            except OSError:
                pass


def _ends_line(path: Path) -> bool:
    """The file is empty or its last byte ends a line."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return True
            f.seek(size - 1)
            return f.read(1) == b"\n"
    except OSError:
        return True
