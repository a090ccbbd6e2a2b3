"""The compiles as the views show them: the records and their counts, the compile open now and for how
long (``open_compile``: the header's and the panels' timer), graph executions per step and where a step is split, TorchNeuron's split of each compile, and the
advice (core/findings/advice.py), costed at most every ADVISE_EVERY_S while the run goes on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from neurondesk.core.findings.advice import advise
from neurondesk.core.reduce.compile.compiles import CompileRecord
from neurondesk.core.reduce.state import RunState

ADVISE_EVERY_S = 30.0  # live, the advice is costed again at most this often (it reads the whole step history)
SPLITS_SHOWN = 4  # TorchNeuron's splits said under one compile


@dataclass(frozen=True)
class OpenCompile:
    """The compile running now: its number once it ends, and how long it has run."""

    number: int
    since_t: float
    open_s: float


@dataclass(frozen=True)
class Advised:
    """The advice, and what it was costed on (to know when to cost it again)."""

    advice: tuple[dict, ...]
    compiles: int
    at: float
    finished: bool


@dataclass(frozen=True)
class CompilesView:
    key: tuple = field(repr=False)  # what the section is built from: the same key, the same section
    records: tuple[CompileRecord, ...]  # copies (CompileRecord.snapshot): the reducer's own change on
    counted: int  # compiles in the totals
    held: int  # listed records whose time another compile holds (TorchNeuron's graph_stats rows)
    total_s: float
    first_s: float | None
    after_warmup: int
    failed: int
    errors: int
    first_error: str | None  # "NCC_EVRF007 the compiler ..." (100 characters at most)
    graphs_per_step: str  # "graphs per step: 2 — split by item at train.py:40 (×12)"
    graph_breaks: int
    warmup_steps: int
    splits: Mapping[int, tuple[str, ...]]  # compile index -> TorchNeuron's words for its graph_stats rows
    split_rows: int  # graph_stats rows read (the splits are rebuilt only when this changes)
    advised: Advised


def open_compile(state: RunState, now: float) -> OpenCompile | None:
    since = state.open_compile_since()
    if since is None:
        return None
    return OpenCompile(len(state.compiles) + 1, since, now - since)


def graphs_per_step_words(state: RunState) -> str:
    """Executions per step, and where a step is split when it runs several graphs."""
    steps = state.parts.steps
    per = steps.executions_per_step
    if per is None:
        return "graphs per step: —"
    text = f"graphs per step: {per}"
    if steps.split_points:
        top = max(steps.split_points.values(), key=lambda p: p.count)
        where = top.location.rsplit("/", 1)[-1] if top.location else "?"
        text += f" — split by {top.trigger} at {where} (×{top.count})"
        if len(steps.split_points) > 1:
            text += f" +{len(steps.split_points) - 1} more"
    return text


def first_error_words(state: RunState) -> str | None:
    if not state.errors:
        return None
    e = state.errors[0]
    return f"{e.code or e.source} {' '.join(e.message.removeprefix(f'[{e.code}]').split())}"[:100]


def _key(state: RunState, now: float) -> tuple:
    """What the compiles section shows may have changed: a compile, a late cache verdict, the split
    points, graph_stats rows, the end, or the open compile's timer moved a second."""
    since = state.open_compile_since()
    steps = state.parts.steps
    return (len(state.compiles), since, None if since is None else int(now - since), len(state.errors),
            tuple((c.cache, c.cause, c.reason, c.graph_hash) for c in state.compiles[-3:]),
            steps.executions_per_step, sum(p.count for p in steps.split_points.values()),
            len(state.parts.compiles.graph_breaks), state.warmup_steps, state.finished,
            state.parts.telemetry.graph_stats.rows)


def _advised(state: RunState, now: float, last: Advised | None) -> Advised:
    """core.advice on the state: once the compiles changed, at most every ADVISE_EVERY_S while the run
    goes on (the bucket search reads every step's shape), and once more at the end."""
    if last is not None and last.finished == state.finished and (
            last.compiles == len(state.compiles) or now - last.at < ADVISE_EVERY_S):
        return last
    return Advised(tuple(a.as_dict() for a in advise(state)), len(state.compiles), now, state.finished)


def _splits(state: RunState) -> dict[int, tuple[str, ...]]:
    by_compile = state.parts.telemetry.graph_stats.by_compile
    return {index: tuple(s.words() for s in splits[:SPLITS_SHOWN]) for index, splits in by_compile.items()}


def compiles_view(state: RunState, now: float, previous: CompilesView | None = None) -> CompilesView:
    """The section; ``previous`` (the last frame's) is kept whole while its key holds."""
    key = _key(state, now)
    if previous is not None and previous.key == key:
        return previous
    comp = state.parts.compiles
    rows = state.parts.telemetry.graph_stats.rows
    reuse_splits = previous is not None and previous.split_rows == rows
    return CompilesView(
        key=key, records=tuple(c.snapshot() for c in state.compiles), counted=comp.compile_count,
        held=max(0, len(state.compiles) - comp.compile_count), total_s=comp.compile_total_s,
        first_s=comp.first_compile_s, after_warmup=comp.recompiles_after_warmup,
        failed=sum(not c.ok for c in state.compiles), errors=len(state.errors), first_error=first_error_words(state),
        graphs_per_step=graphs_per_step_words(state),
        graph_breaks=len(comp.graph_breaks), warmup_steps=state.warmup_steps,
        splits=previous.splits if reuse_splits else _splits(state), split_rows=rows,
        advised=_advised(state, now, previous.advised if previous is not None else None))
