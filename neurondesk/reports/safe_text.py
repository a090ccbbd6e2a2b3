"""Text from the workload and from tools, made safe to draw: the user's terminal belongs to the user.

A workload's output (and a tool's error message, a file name, a notice) may hold terminal control
sequences: OSC 52 clipboard writes, window-title changes, OSC 8 hyperlinks, DCS queries, screen
clears. Drawn as they are, they reach the terminal the console runs in. Everything shown in a panel
goes through here first:

  clean(s)            every control sequence and control character dropped (tab kept)
  clean(s, sgr=True)  the same, but SGR sequences (colour, bold ...) kept as they were
  (safe_text(s, style), a rich Text of clean(s, sgr=True), is views/console/rich_text.py)
  clean_lines(s)      text of many lines (a report, a table): each line as clean(line, sgr=True),
                      its line ends (LF, CRLF) kept
  CleanStream(f)      a text stream whose writes go through clean_lines: what a report command
                      prints (stdout and stderr); its `buffer` is the raw one underneath

Dropped: CSI sequences other than SGR (7-bit ESC [ and 8-bit 0x9B), OSC (ended by BEL or ST, or
unended: to the end of the text), DCS, SOS, PM, APC (ended by ST, or unended: to the end), other
ESC sequences, a lone ESC, C0 controls but tab, DEL, C1 controls. Line breaks (CR, LF, VT, FF)
become a space, so words on either side stay apart.
"""

from __future__ import annotations

import re

# Anything that needs work: C0 but tab, DEL, C1. Text without one is returned as it is (fast path).
_NEEDS_WORK = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_SGR = re.compile(r"\x1b\[[0-9;:]*m")
_TOKEN = re.compile(
    r"(?P<sgr>\x1b\[[0-9;:]*m)"
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI (an unended one: its parameters)
    r"|(?:\x1b\]|\x9d)[^\x07\x9c\x1b]*(?:\x07|\x9c|\x1b\\|\x1b|$)"  # OSC, to BEL / ST / the end
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x9c\x1b]*(?:\x9c|\x1b\\|\x1b|$)"  # DCS SOS PM APC, to ST
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # other escape sequences, a lone ESC
    r"|(?P<br>[\r\n\x0b\x0c])"
    r"|[\x00-\x08\x0e-\x1f\x7f-\x9f]"
)


def _sub(match: re.Match, keep_sgr: bool) -> str:
    if match.group("sgr") is not None:
        return match.group("sgr") if keep_sgr else ""
    if match.group("br") is not None:
        return " "
    return ""


def clean(s: str, sgr: bool = False) -> str:
    """`s` with every terminal control sequence and control character dropped (tab kept, line
    breaks made spaces); with `sgr`, SGR sequences are kept."""
    if not isinstance(s, str):
        s = str(s)
    if not _NEEDS_WORK.search(s):
        return s
    return _TOKEN.sub(lambda m: _sub(m, sgr), s)


_LINE_END = re.compile(r"(\r\n|\n)")


def clean_lines(s: str) -> str:
    """Each line of `s` as clean(line, sgr=True); LF and CRLF line ends kept (a lone CR, which
    would let a line draw over another, becomes a space)."""
    if not isinstance(s, str):
        s = str(s)
    if not _NEEDS_WORK.search(s.replace("\r\n", "").replace("\n", "")):
        return s
    parts = _LINE_END.split(s)  # text, end, text, end, ..., text
    return "".join(p if i % 2 else clean(p, sgr=True) for i, p in enumerate(parts))


class CleanStream:
    """A text stream (sys.stdout, sys.stderr) whose writes are made safe with clean_lines; every
    other attribute (flush, isatty, encoding, buffer ...) is the wrapped stream's."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, s: str) -> int:
        self._stream.write(clean_lines(s))
        return len(s)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def has_no_controls_but_sgr(s: str) -> bool:
    """What clean(s, sgr=True) promises: no ESC outside SGR sequences, no C0/C1 but tab."""
    return not _NEEDS_WORK.search(_SGR.sub("", s))
