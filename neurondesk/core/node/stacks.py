"""Python stacks of a job's ranks, read and compared. Pure: text in, words out.

Two sources: ``py-spy dump --json`` (where it is installed and allowed to ptrace) and the dump
faulthandler writes on SIGUSR2 (the probe registers it; stdlib format: "Current thread 0x...
(most recent call first):" then "  File "x.py", line N in f"). A rank "stands" at the innermost
frame of its main thread. For a hung job the rank that stands somewhere else than the others is
the odd one: the one outside the majority's place, or, when there is no majority (two ranks), the
ones standing in their own code while the others wait inside a library (torch: a collective, the
autograd engine).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass

_FH_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)")
_FH_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.+)$')
LIBRARY_PARTS = ("site-packages/", "dist-packages/", "/lib/python3", "/_neurondesk_probe/")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    def words(self) -> str:
        return f"{self.function} at {self.file.rsplit('/', 1)[-1]}:{self.line}"

    @property
    def in_library(self) -> bool:
        return any(p in self.file for p in LIBRARY_PARTS)


@dataclass(frozen=True)
class ThreadStack:
    name: str
    frames: tuple[Frame, ...]  # innermost first
    main: bool = False


@dataclass(frozen=True)
class RankStacks:
    rank: int | None
    pid: int
    source: str  # "py-spy" | "faulthandler" | "none"
    threads: tuple[ThreadStack, ...] = ()
    text: str = ""  # the dump as read (or why there is none)

    @property
    def _main_frames(self) -> tuple[Frame, ...]:
        """The main thread's frames (the last thread listed when none is marked main)."""
        main = next((t for t in self.threads if t.main), self.threads[-1] if self.threads else None)
        return main.frames if main is not None else ()

    @property
    def at(self) -> Frame | None:
        """Where the rank stands: its main thread's innermost frame."""
        frames = self._main_frames
        return frames[0] if frames else None

    @property
    def user_at(self) -> Frame | None:
        """Its main thread's innermost frame in the program's own code (not a library's)."""
        return next((f for f in self._main_frames if not f.in_library), None)


def parse_faulthandler(text: str) -> tuple[ThreadStack, ...]:
    """faulthandler's dump; the main thread is the oldest, listed last."""
    threads: list[tuple[str, list[Frame]]] = []
    for line in text.splitlines():
        m = _FH_THREAD.match(line)
        if m:
            threads.append((m.group(2), []))
            continue
        f = _FH_FRAME.match(line)
        if f and threads:
            threads[-1][1].append(Frame(f.group(1), int(f.group(2)), f.group(3).strip()))
    return tuple(ThreadStack(name, tuple(frames), main=i == len(threads) - 1) for i, (name, frames) in enumerate(threads))


def parse_py_spy(text: str) -> tuple[ThreadStack, ...]:
    """``py-spy dump --json``'s threads; the main thread is the one named MainThread."""
    try:
        data = json.loads(text)
    except ValueError:
        return ()
    out = []
    for t in data if isinstance(data, list) else []:
        frames = tuple(Frame(str(f.get("filename") or "?"), int(f.get("line") or 0), str(f.get("name") or "?"))
                       for f in t.get("frames") or [] if isinstance(f, dict))
        out.append(ThreadStack(str(t.get("thread_name") or t.get("thread_id")), frames,
                               main=t.get("thread_name") == "MainThread"))
    return tuple(out)


def odd_ranks(ranks: list[RankStacks]) -> list[RankStacks]:
    """The ranks that stand somewhere else than the others (empty: all stand in one place, or
    nothing tells them apart)."""
    placed = [r for r in ranks if r.at is not None]
    if len(placed) < 2:
        return []
    counts = Counter(r.at for r in placed)
    if len(counts) == 1:
        return []
    (top, n), *rest = counts.most_common()
    if rest and n > rest[0][1]:  # a majority place: the others are odd
        return [r for r in placed if r.at != top]
    waiting = [r for r in placed if r.at.in_library]
    own = [r for r in placed if not r.at.in_library]
    return own if waiting and own else []


def verdict(ranks: list[RankStacks]) -> str:
    """One line: where the ranks stand, and which one stands elsewhere."""
    placed = [r for r in ranks if r.at is not None]
    if not placed:
        return "no stack could be read from any rank"
    odd = odd_ranks(placed)
    if not odd:
        places = {r.at for r in placed}
        if len(places) == 1:
            return f"every rank stands at {placed[0].at.words()}"
        return "the ranks stand in different places: " + "; ".join(f"{_who(r)} at {r.at.words()}" for r in placed)
    others = [r for r in placed if r not in odd]
    where = "; ".join(f"{_who(r)} stands at {(r.user_at or r.at).words()}" for r in odd)
    rest = others[0].at.words() if len({r.at for r in others}) == 1 else "several places"
    return f"{where}, while the other rank{'s' if len(others) > 1 else ''} wait{'' if len(others) > 1 else 's'} at {rest}"


def _who(r: RankStacks) -> str:
    return f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}"
