"""PT_XLA_DEBUG analysis blocks and ``pt-xla-profiler:`` lines (NEURON-FORMATS §5.2-§5.5).

``parse_debug_block_text`` is the whole-text entry point (the probe reads PT_XLA_DEBUG_FILE);
``PtXlaDebugParser`` is the line-by-line one used on the workload's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from neurondesk.core.events.run_events import CompileFinished, CompileStarted, Notice, ParseProblem

from ._common import COMPILE, ERROR, Out, clip, is_library_path, small_int

SOURCE = "pt-xla-debug"

_PREFIX = re.compile(r"(Unexpected Execution|Post Compilation|Compilation|Execution) Analysis: ")
_KIND = {"Compilation": "compile", "Execution": "execute", "Unexpected Execution": "execute",
         "Post Compilation": "post-compile"}
_FRAME = re.compile(r"^(.+?) \((.+):(\d+)\)$")
_SIZE = re.compile(r"^(.+? size): (\S+)\s*GB$")
_HASH = re.compile(r"Computation hash: ([0-9a-fA-F]+)")
_COUNT = re.compile(r"count=(\d+)")

# §5.3, both spellings (mark_step up to torch-xla 2.7, torch_xla.sync from 2.8). Checked in order.
_CATEGORIES = (
    ("loader", ("parallel loader",)),
    ("profiler", ("profiler StepTrace",)),
    ("dynamo", ("dynamo",)),
    ("compile-fn", ("torch_xla.compile",)),
    ("value-access", ("access tensor value",)),
    ("user-sync", ("user mark_step", "user torch_xla.sync", "user `torch_xla.sync")),
)
# Block.category -> CompileFinished.trigger (the event vocabulary calls an explicit sync "sync").
TRIGGERS = {"user-sync": "sync"}


def cause_category(cause: str | None) -> str | None:
    """value-access | user-sync | loader | dynamo | compile-fn | profiler, or None when unknown."""
    if not cause:
        return None
    for category, needles in _CATEGORIES:
        if any(n in cause for n in needles):
            return category
    return None


@dataclass
class Block:
    """One analysis block, between its two ``====`` rules."""

    kind: str  # "compile" | "execute" | "post-compile"
    unexpected: bool = False  # "Unexpected Execution Analysis" (inside a torch_xla.compile'd function)
    cause: str | None = None
    category: str | None = None
    graph_hash: str | None = None
    graph_name: str | None = None
    n_inputs: int | None = None
    n_outputs: int | None = None
    frames: list[str] = field(default_factory=list)  # "func (file:line)", innermost first
    frames_elided: bool = False  # more frames than PT_XLA_DEBUG_MAX_FRAME
    user_frame: str | None = None  # first frame outside torch / torch_xla / site-packages
    location: str | None = None  # that frame as "file:line"
    sizes_gb: dict[str, float | None] = field(default_factory=dict)  # post-compile; None = "Unknown"
    computation_hash: str | None = None  # post-compile, torch-xla 2.7+
    complete: bool = False  # both rules seen

    @property
    def trigger(self) -> str | None:
        return TRIGGERS.get(self.category, self.category) if self.category else None


class _Open:
    __slots__ = ("block", "content", "section")

    def __init__(self, block: Block) -> None:
        self.block = block
        self.section = ""
        self.content = False


class BlockAssembler:
    """Groups prefixed lines into blocks. ``feed`` -> (what the line was, blocks finished by it)."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}
        self._computation_hash: str | None = None

    def feed(self, line: str) -> tuple[str | None, list[Block]]:
        m = _PREFIX.search(line) if "Analysis: " in line else None
        if m is None:
            h = _HASH.search(line) if "Computation hash:" in line else None
            if h is None:
                return None, []
            self._computation_hash = h.group(1)
            return "hash", []
        prefix = m.group(1)
        what = "unexpected" if prefix == "Unexpected Execution" else _KIND[prefix]
        done: list[Block] = []
        body = line[m.end():].strip()
        st = self._open.get(prefix)
        if body.startswith("====="):
            if st is None:
                self._start(prefix, done)
            elif st.content:
                st.block.complete = True
                done.append(self._finish(prefix))
            return what, done
        if st is None:  # the opening rule was lost (a cut-off read, interleaved output)
            st = self._start(prefix, done)
        if body in ("Compilation Cause", "Execution Cause"):
            if st.block.cause is not None or st.section:  # a new block whose rules we missed
                done.append(self._finish(prefix))
                st = self._start(prefix, done)
            st.section = "cause"
        elif body.startswith("Graph Info:"):
            st.section = "info"
        elif body.startswith("Python Frame Triggered Execution:"):
            st.section = "frames"
        elif body and not body.startswith("-----"):
            self._content(st, body)
        st.content = True
        return what, done

    def flush(self) -> list[Block]:
        return [self._finish(p) for p in list(self._open)]

    def _start(self, prefix: str, done: list[Block]) -> _Open:
        if prefix != "Unexpected Execution":  # blocks of one thread do not nest: close a dangling one
            done.extend(self._finish(p) for p in list(self._open) if p != "Unexpected Execution")
        block = Block(kind=_KIND[prefix], unexpected=prefix == "Unexpected Execution")
        if block.kind == "post-compile":
            block.computation_hash, self._computation_hash = self._computation_hash, None
        st = self._open[prefix] = _Open(block)
        return st

    def _content(self, st: _Open, body: str) -> None:
        b = st.block
        if st.section == "cause":
            b.cause = body if b.cause is None else f"{b.cause} {body}"
        elif st.section == "info":
            name, _, value = body.partition(":")
            value = value.strip()
            if name == "Graph Hash":
                b.graph_hash = value or None
            elif name == "Graph Name":
                b.graph_name = value or None
            elif name == "Number of Graph Inputs" and small_int(value) is not None:
                b.n_inputs = small_int(value)
            elif name == "Number of Graph Outputs" and small_int(value) is not None:
                b.n_outputs = small_int(value)
        elif st.section == "frames":
            if body.startswith("...."):
                b.frames_elided = True
            else:
                b.frames.append(body)
        elif b.kind == "post-compile":
            m = _SIZE.match(body)
            if m:
                try:
                    b.sizes_gb[m.group(1)] = float(m.group(2))
                except ValueError:  # "Unknown " when the plugin gives no memory stats
                    b.sizes_gb[m.group(1)] = None

    def _finish(self, prefix: str) -> Block:
        b = self._open.pop(prefix).block
        b.category = cause_category(b.cause)
        for frame in b.frames:
            m = _FRAME.match(frame)
            if m and not is_library_path(m.group(2)):
                b.user_frame, b.location = frame, f"{m.group(2)}:{m.group(3)}"
                break
        return b


def parse_debug_block_text(text: str) -> list[Block]:
    """All analysis blocks in a piece of PT_XLA_DEBUG output, in order; a cut-off last block included."""
    asm = BlockAssembler()
    blocks: list[Block] = []
    for line in text.splitlines():
        blocks.extend(asm.feed(line)[1])
    blocks.extend(asm.flush())
    return blocks


class PtXlaDebugParser:
    """Compile blocks become CompileStarted, then CompileFinished once the compile is seen to end
    (the post-compilation output, or failing that the next execution block)."""

    def __init__(self) -> None:
        self._asm = BlockAssembler()
        self._pending: list[tuple[float, Block]] = []
        self._unlowered: dict[str, object] | None = None  # exit-time "Unlowered Op" entry being read
        self._said: dict[str, str] = {}  # the analysis repeats at every step: say each thing once

    def feed(self, s: str, t: float, out: Out, key: str = "") -> str | None:
        if "pt-xla-profiler" in s:
            return self._profiler(s, t, out)
        if "Analysis: " not in s and "Computation hash:" not in s:
            return None
        what, blocks = self._asm.feed(s)
        if what is None:
            return None
        for b in blocks:
            self._on_block(b, t, out)
        if what in ("hash", "post-compile", "execute") and self._pending:
            self._end_compiles(t, out, measured=True)
        if what == "unexpected":
            return ERROR
        return None if what == "execute" else COMPILE

    def _on_block(self, b: Block, t: float, out: Out) -> None:
        if b.kind != "post-compile" and b.cause is None and b.graph_hash is None:
            out.append(ParseProblem(t=t, source=SOURCE, raw=f"{b.kind} analysis block",
                                    error="PT_XLA_DEBUG block without cause or graph hash "
                                          "(cut off?); skipped"))
            return
        if b.kind == "compile":
            if self._pending:
                self._end_compiles(t, out, measured=False)
            self._pending.append((t, b))
            out.append(CompileStarted(t=t, source=SOURCE, graph_hash=b.graph_hash))
        elif b.unexpected:
            out.append(Notice(t=t, level="warn", source=SOURCE,
                              message=f"unexpected execution inside a compiled function ({b.cause}) "
                                      f"at {b.location or '?'}"))

    def _end_compiles(self, t: float, out: Out, measured: bool) -> None:
        for started, b in self._pending:
            trigger = b.trigger
            out.append(CompileFinished(
                t=t, source=SOURCE, duration_s=max(0.0, t - started) if measured and b.complete else None,
                graph_hash=b.graph_hash, trigger=trigger, location=b.location, reason=b.cause,
                point=f"{trigger}@{b.location}" if trigger and b.location else None, frames=list(b.frames),
            ))
        self._pending.clear()

    def _profiler(self, s: str, t: float, out: Out) -> str | None:
        msg = s.split("pt-xla-profiler:", 1)[-1].strip()
        if "too frequent:" in msg or "too slow:" in msg:
            key = msg.split(":", 1)[0]  # "CompileTime too frequent"
            self._say(key, key, msg.split(". Please open", 1)[0], t, out)
        elif msg.startswith("Op(s) not lowered:"):
            ops = msg.split("Please open", 1)[0].rstrip(" ,")
            self._say("not lowered", ops, ops, t, out)
        elif msg.startswith("FRAME (count="):
            self._emit_unlowered(t, out)
            m = _COUNT.search(msg)
            self._unlowered = {"count": small_int(m.group(1)) if m else None, "op": None, "where": None}
        elif self._unlowered is not None:
            if msg.startswith("Unlowered Op:"):
                self._unlowered["op"] = msg.split(":", 1)[1].strip().strip('"')
            elif msg.startswith("====="):
                self._emit_unlowered(t, out)
            elif self._unlowered["where"] is None:
                m = _FRAME.match(msg)
                if m and not is_library_path(m.group(2)):
                    self._unlowered["where"] = f"{m.group(2)}:{m.group(3)}"
        return None

    def _say(self, key: str, value: str, message: str, t: float, out: Out) -> None:
        if self._said.get(key) != value:
            self._said[key] = value
            out.append(Notice(t=t, level="warn", source="pt-xla-profiler", message=clip(message)))

    def _emit_unlowered(self, t: float, out: Out) -> None:
        u, self._unlowered = self._unlowered, None
        if u is None or u["op"] is None:
            return
        what = "host read of a device value" if "_local_scalar_dense" in str(u["op"]) else "CPU fallback"
        out.append(Notice(t=t, level="warn", source="pt-xla-profiler",
                          message=f"{what}: {u['op']} ran {u['count']} times at {u['where'] or '?'}"))

    def flush(self, t: float) -> Out:
        out: Out = []
        for b in self._asm.flush():
            self._on_block(b, t, out)
        if self._pending:
            self._end_compiles(t, out, measured=False)
        self._emit_unlowered(t, out)
        return out
