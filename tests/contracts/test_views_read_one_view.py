"""The views read one RunView per frame (core/view/run_view.py), built in core: no view reaches into the
reducers (``state.parts``), keeps a module-level cache, or runs lint; the console builds one view a
frame and every widget of the frame renders that one; a section whose inputs did not change is the last
frame's object, and the costly comparison of the ranks is made again only after a while.

The AST scan reads every module under neurondesk/views; it is shown catching each pattern on planted
sources first, so a scan that stopped looking would fail here too."""

from __future__ import annotations

import ast
import asyncio
import io
from pathlib import Path

import msgspec
import pytest
from conftest import REPO

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.findings.memory_creep import MemoryCreep
from neurondesk.core.reduce.state import Parts, RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.view import ranks_view
from neurondesk.core.view.run_view import view_of
from neurondesk.views.console import app as console_app
from neurondesk.views.headless import HeadlessPrinter

VIEWS = REPO / "neurondesk" / "views"
REDUCERS = set(Parts._fields)  # run, procs, steps, ... : RunState.parts' reducers
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add", "discard",
            "remove", "appendleft", "extendleft", "popleft", "__setitem__"}
CACHE_DECORATORS = {"cache", "lru_cache"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _reaches_into_reducers(tree: ast.AST) -> list[str]:
    """``x.parts.<reducer>``, ``<...state>.parts`` (``st.parts`` too), ``getattr(x, "parts")``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in REDUCERS and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "parts":
            found.append(f"line {node.lineno}: {_dotted(node)}")
        elif isinstance(node, ast.Attribute) and node.attr == "parts":
            base = _dotted(node.value).rsplit(".", 1)[-1].lower()
            if base.endswith("state") or base in ("st", "s"):
                found.append(f"line {node.lineno}: {_dotted(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "parts":
            found.append(f"line {node.lineno}: getattr(..., 'parts')")
    return sorted(set(found))


def _module_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign | ast.AugAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _module_caches(tree: ast.Module) -> list[str]:
    """A module-level binding a function writes into (``_MEMO[k] = v``, ``_MEMO.update(...)``,
    ``global``), or a function cached at module level (functools.cache / lru_cache)."""
    module = _module_names(tree)
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for d in fn.decorator_list:
            name = _dotted(d.func if isinstance(d, ast.Call) else d).rsplit(".", 1)[-1]
            if name in CACHE_DECORATORS:
                found.append(f"line {fn.lineno}: @{name} on {fn.name}")
        for node in ast.walk(fn):
            if isinstance(node, ast.Global):
                found.append(f"line {node.lineno}: global {', '.join(node.names)}")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AugAssign | ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in module:
                    found.append(f"line {node.lineno}: {t.value.id}[...] written in {fn.name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in module:
                found.append(f"line {node.lineno}: {node.func.value.id}.{node.func.attr}() in {fn.name}")
    return sorted(set(found))


def _runs_lint(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found += [f"line {node.lineno}: imports {m}" for m in mods if m == "neurondesk.lint"
                  or m.startswith("neurondesk.lint.")]
    return found


PLANTED = {
    "the old per-frame memo": ("_ONCE: dict = {}\n\ndef once(name, value):\n    _ONCE[name] = value\n",
                               _module_caches),
    "a memo filled by a method": ("SEEN = []\n\nclass P:\n    def f(self, x):\n        SEEN.append(x)\n", _module_caches),
    "a global": ("LAST = None\n\ndef f(x):\n    global LAST\n    LAST = x\n", _module_caches),
    "an lru_cache": ("import functools\n\n@functools.lru_cache(maxsize=8)\ndef f(x):\n    return x\n",
                     _module_caches),
    "a reducer reached": ("def f(state):\n    return state.parts.ranks.world\n", _reaches_into_reducers),
    "the parts of the app's state": ("def f(app):\n    p = app.source.state.parts\n    return p\n",
                                     _reaches_into_reducers),
    "parts by name": ("def f(st):\n    return getattr(st, 'parts')\n", _reaches_into_reducers),
    "lint run by a view": ("from neurondesk.lint.locate import annotate_memory\n", _runs_lint),
}


@pytest.mark.parametrize("what", sorted(PLANTED))
def test_the_scan_catches_each_pattern_on_a_planted_source(what):
    source, scan = PLANTED[what]
    assert scan(ast.parse(source)), what


def test_a_lookup_table_and_a_phase_split_are_not_caught():
    table = "STYLE = {'ok': 'green'}\n\ndef style(x):\n    return STYLE.get(x, '')\n"
    bars = "def shown(bars):\n    return [b for b in bars if b.parts]\n"  # StepBar.parts: a step's phases
    assert not _module_caches(ast.parse(table)) and not _reaches_into_reducers(ast.parse(bars))


@pytest.mark.parametrize("path", sorted(VIEWS.rglob("*.py")), ids=lambda p: str(p.relative_to(VIEWS)))
def test_no_view_reaches_into_the_reducers_caches_at_module_level_or_runs_lint(path):
    tree = ast.parse(path.read_text(), str(path))
    assert _reaches_into_reducers(tree) == [], "read the frame's RunView (core/view/run_view.py)"
    assert _module_caches(tree) == [], "a view keeps no module-level cache: core builds the view once per frame"
    assert _runs_lint(tree) == [], "the caller passes lint's findings in"


# ---------------------------------------------------------------------------- one view a frame
class FixedSource:
    live = False
    done = False
    label = "fixed"

    def __init__(self, state: RunState, now: float) -> None:
        self.state, self._now = state, now

    def poll(self) -> int:
        return 0

    def now(self) -> float:
        return self._now

    def stop(self) -> str:
        return "nothing to stop"


def _run(steps: int = 40, ranks: int = 1) -> RunState:
    st = RunState()
    st.apply(ev.RunStarted(t=1.0, run_id="one-view", command=["python", "x.py"], warmup_steps=3,
                           price_per_hour=1.0))
    for r in range(ranks):
        st.apply(ev.ProcessAttached(t=1.5, pid=100 + r, ppid=99, rank=r, local_rank=r, world_size=ranks))
    for i in range(steps):
        for r in range(ranks):
            st.apply(ev.StepEnded(t=2.0 + 0.1 * i, pid=100 + r, step=i, duration_s=0.1, samples=8,
                                  data_wait_s=0.001, presync_s=0.04 + 0.001 * r))
    return st


def test_a_frame_builds_one_view_and_every_panel_of_the_frame_renders_that_one(monkeypatch):
    built, given = [], []
    real_build = console_app.build_view

    def counting_build(*args, **kwargs):
        built.append(real_build(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(console_app, "build_view", counting_build)
    app = console_app.ConsoleApp(FixedSource(_run(), 6.0), frozen=True, poll_s=3600)

    async def go() -> list:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            built.clear()
            for panel in app.visible_panels():
                real = panel.update_view
                monkeypatch.setattr(panel, "update_view", lambda view, frame=0, real=real: (given.append(view),
                                                                                         real(view, frame))[1])
            app.poll_now()
            return app.visible_panels()

    panels = asyncio.run(go())
    assert len(built) == 1  # one view for the header and every panel of the frame
    assert len(given) == len(panels) > 3 and all(v is built[0] for v in given)


def test_a_section_is_the_last_frames_while_its_inputs_hold():
    st = _run()
    first = view_of(st, 6.0)
    again = view_of(st, 6.5, first)
    assert again.devices is first.devices and again.compiles is first.compiles
    assert again.figures.elapsed_s > first.figures.elapsed_s  # the figures are the new moment's
    st.apply(dev.HostSample(t=6.6, cpu_percent=50.0, per_cpu_percent=[50.0, 50.0], memory_total=8 << 30,
                            memory_used=2 << 30))
    sampled = view_of(st, 6.7, again)
    assert sampled.devices is not again.devices and sampled.devices.kind == "host"
    assert sampled.devices.host is not None and sampled.devices.host.used_fraction == 0.25


def test_the_ranks_are_compared_again_only_after_a_while_and_at_the_end():
    st = _run(ranks=4)
    first = view_of(st, 6.0)
    assert first.ranks.comparison is not None and len(first.ranks.comparison.rows) == 4
    soon = view_of(st, 6.0 + ranks_view.COMPARE_EVERY_S / 2, first)
    assert soon.ranks.comparison is first.ranks.comparison
    later = view_of(st, 6.0 + ranks_view.COMPARE_EVERY_S, soon)
    assert later.ranks.comparison is not first.ranks.comparison
    st.apply(ev.RunFinished(t=7.0, exit_code=0))
    ended = view_of(st, 7.0, later)
    assert ended.ranks.comparison is not later.ranks.comparison and ended.ranks.comparison.finished
    assert view_of(_run(), 6.0).ranks.comparison is None  # one process: nothing to compare


class EndedSource(FixedSource):
    done = True
    recorder_lost = False
    fallback = None
    final_summary = None
    run_dir = Path("/tmp/one-view-run")

    def summary(self):  # FollowSource.summary: the recorder's, else rebuilt by core
        return self.final_summary if self.final_summary is not None else run_summary(self.state)


def test_the_headless_end_says_where_lint_finds_a_creep_only_through_what_its_caller_passes():
    st = _run()
    st.apply(ev.RunFinished(t=7.0, exit_code=0))
    summary = run_summary(st)
    summary.memory_creep = msgspec.convert({"short": "memory creeps: rank 0 host RSS", "leaks": [], "series": 1,
                                            "words": "memory creeps: rank 0 host RSS +1.0 MiB a step"}, MemoryCreep)
    source = EndedSource(st, 7.0)
    source.final_summary = summary
    asked = []

    def locate(creep):
        asked.append(creep)
        return msgspec.structs.replace(creep, words=creep.words + " (lint: x.py:3)")

    said = {}
    for name, given in (("with", locate), ("without", None)):
        err = io.StringIO()
        HeadlessPrinter(source, out=io.StringIO(), err=err, locate_memory=given)._final()
        said[name] = err.getvalue()
    assert asked == [summary.memory_creep]
    assert "memory creeps: rank 0 host RSS +1.0 MiB a step (lint: x.py:3)" in said["with"]
    assert "memory creeps: rank 0 host RSS +1.0 MiB a step\n" in said["without"] and "lint" not in said["without"]
