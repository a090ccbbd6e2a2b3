"""Log parsers: the workload's stdout/stderr lines -> typed events.

``OutputParser().feed(stream, text, t)`` returns, for each line, its ``OutputLine`` (tagged
"compile" / "error" / "noise" / None) followed by whatever the line meant: compiles from the
Neuron wrapper and PT_XLA_DEBUG, dynamo recompiles and graph breaks, losses, config, errors.
It never raises; what it cannot handle becomes a counted ``ParseProblem``.
"""

from __future__ import annotations

import re
from typing import Protocol

from neurondesk.core.events.run_events import Event, OutputLine, ParseProblem

from ._common import TAG_RANK, Out, clip
from .metrics_report import MetricsReport, parse_metrics_report
from .neuron_cc import NeuronCCParser
from .neuron_runtime import runtime_code
from .progress import ProgressParser, parse_loss
from .pt_xla_debug import Block, PtXlaDebugParser, cause_category, parse_debug_block_text
from .torch_logs import TorchLogsParser
from .torchelastic import TorchElasticParser
from .traceback import TracebackParser

__all__ = [
    "Block",
    "MetricsReport",
    "OutputParser",
    "cause_category",
    "parse_debug_block_text",
    "parse_loss",
    "parse_metrics_report",
    "runtime_code",
]

MAX_PARSED_CHARS = 16384  # the parsers look at this much of a line; the OutputLine keeps all of it
_RANK = re.compile(r"^\[(?:rank|default)\s?(\d+)\]:\s?")  # torchrun --tee / --local-ranks-filter


def _valid_text(text: str) -> str | None:
    """``text`` with undecodable bytes (surrogate escapes) turned into U+FFFD; None if it had none."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


class LineParser(Protocol):
    """A parser of the workload's output, one line at a time. ``feed``: the line (``s``, at most
    MAX_PARSED_CHARS, a torchrun rank prefix taken off), its time, where what it meant goes, and ``key`` (the
    stream and that rank: a parser that follows a block over several lines keeps one per writer); it returns
    the line's tag ("compile", "error", "noise") or None. ``flush``: what is still open when the output ends."""

    def feed(self, s: str, t: float, out: Out, key: str = "") -> str | None: ...

    def flush(self, t: float) -> Out: ...


ALWAYS, UNTAGGED = "always", "untagged"
# Every line goes through the chain in this order: (parser, when it reads the line). ALWAYS: every line;
# UNTAGGED: a line no parser before it has tagged (a PT_XLA_DEBUG line is nobody else's; a tagged line is
# no progress line). A new parser (a new runtime's log) is a module with a LineParser and a row here.
CHAIN: tuple[tuple[type[LineParser], str], ...] = (
    (PtXlaDebugParser, ALWAYS),
    (NeuronCCParser, UNTAGGED),
    (TorchLogsParser, UNTAGGED),
    (TracebackParser, ALWAYS),
    (TorchElasticParser, ALWAYS),
    (ProgressParser, UNTAGGED),
)


def _higher(tag: str | None, other: str | None) -> str | None:
    if other is None or (tag is not None and TAG_RANK[other] <= TAG_RANK[tag]):
        return tag
    return other


class OutputParser:
    def __init__(self) -> None:
        self.chain: tuple[tuple[LineParser, str], ...] = tuple((parser(), when) for parser, when in CHAIN)
        self.lines = 0
        self.problems = 0

    def feed(self, stream: str, text: str, t: float) -> list[Event]:
        out: list[Event] = []
        try:
            if isinstance(text, bytes | bytearray):  # undecodable bytes are flagged per line below
                text = bytes(text).decode("utf-8", "surrogateescape")
            text = text.removesuffix("\n")
            lines = text.split("\n") if "\n" in text else [text]
        except Exception as exc:  # noqa: BLE001 - not a str at all
            self._problem(out, t, "output", repr(text), f"cannot read line: {exc!r}")
            self._count(out)
            return out
        for line in lines:
            self._line(stream, line.removesuffix("\r"), t, out)
        return out

    def flush(self, t: float) -> list[Event]:
        out: list[Event] = []
        for parser, _ in self.chain:
            try:
                out.extend(parser.flush(t))
            except Exception as exc:  # noqa: BLE001
                self._problem(out, t, type(parser).__name__, "", f"flush failed: {exc!r}")
        self._count(out)
        return out

    def _line(self, stream: str, line: str, t: float, out: list[Event]) -> None:
        self.lines += 1
        found: list[Event] = []
        if not line.isascii():
            fixed = _valid_text(line)
            if fixed is not None:
                line = fixed
                self._problem(found, t, "output", line,
                              "line is not valid UTF-8; undecodable bytes were replaced by U+FFFD")
        s = line
        if len(s) > MAX_PARSED_CHARS and "\r" in s[-MAX_PARSED_CHARS:]:
            # a bar redrawn in place (tqdm): what the terminal shows, and the parsers read, is its end
            s = s[-MAX_PARSED_CHARS:]
        elif len(s) > MAX_PARSED_CHARS:
            s = s[:MAX_PARSED_CHARS]
            self._problem(found, t, "output", s, f"line of {len(line)} characters; only the first "
                                                 f"{MAX_PARSED_CHARS} were parsed (the line is kept whole)")
        key = stream
        if s[:1] == "[":
            m = _RANK.match(s)
            if m:
                key, s = f"{stream}|{m.group(1)}", s[m.end():]
        tag = None
        stage = None
        try:  # one try for the chain: a parser bug costs that line's meaning, never the line
            for stage, when in self.chain:
                if when == ALWAYS or tag is None:
                    tag = _higher(tag, stage.feed(s, t, found, key))
        except Exception as exc:  # noqa: BLE001
            self._problem(found, t, type(stage).__name__, s, repr(exc))
        out.append(OutputLine(t=t, stream=stream, text=line, tag=tag))
        if found:
            self._count(found)
            out.extend(found)

    def _count(self, events: list[Event]) -> None:
        self.problems += sum(isinstance(e, ParseProblem) for e in events)

    @staticmethod
    def _problem(out: list[Event], t: float, source: str, raw: str, error: str) -> None:
        out.append(ParseProblem(t=t, source=source, raw=clip(raw, 500), error=error))
