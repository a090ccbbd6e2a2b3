"""PT_XLA_DEBUG analysis blocks and pt-xla-profiler lines (NEURON-FORMATS §5)."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from neurondesk.collectors.logparse import OutputParser, cause_category, parse_debug_block_text
from neurondesk.core.events.run_events import (
    CompileFinished,
    CompileStarted,
    Notice,
    OutputLine,
    ParseProblem,
)

TRAIN_LOG = FIXTURES / "torch-neuronx-train.log"
RULE = "=" * 80
DASH = "-" * 80
SITE = "/usr/lib/python3/dist-packages"


def block(prefix: str, cause: str, graph_hash: str, frames: list[str], name: str | None = None,
          elided: bool = False, header: str = "Compilation Cause") -> list[str]:
    body = [RULE, header, f"  {cause}", "Graph Info: "]
    if name:
        body.append(f"  Graph Name: {name}")
    body += [f"  Graph Hash: {graph_hash}", "  Number of Graph Inputs: 12", "  Number of Graph Outputs: 3",
             "Python Frame Triggered Execution: "]
    body += [f"  {f}" for f in frames] + (["  .........."] if elided else []) + [DASH, RULE]
    return [""] + [prefix + line for line in body]


def feed_all(lines: list[str], step: float = 1.0, flush: bool = True):
    p = OutputParser()
    events, t = [], 0.0
    for line in lines:
        t += step
        events += p.feed("stderr", line, t)
    if flush:
        events += p.flush(t + step)
    return p, events


def of(events, cls):
    return [e for e in events if isinstance(e, cls)]


# ---------------------------------------------------------------- §5.3 cause table, both spellings


@pytest.mark.parametrize("cause,category", [
    ("dynamo is executing a compiled program", "dynamo"),
    ("mark_step in parallel loader at step end", "loader"),
    ("torch_xla.sync in parallel loader at step end", "loader"),
    ("`torch_xla.sync()` in parallel loader at step end", "loader"),  # the HEAD doc's spelling
    ("mark_step when exiting a profiler StepTrace region", "profiler"),
    ("torch_xla.sync when exiting a profiler StepTrace region", "profiler"),
    ("mark_step when dynamo processing input graphs", "dynamo"),
    ("torch_xla.sync when dynamo processing input graphs", "dynamo"),
    ("torch_xla.compile", "compile-fn"),
    ("torch_xla.compile clear the pending graph prior calling the target function", "compile-fn"),
    ("user mark_step", "user-sync"),
    ("user torch_xla.sync", "user-sync"),
    ("dynamo is compiling a FX graph to HLO", "dynamo"),
    ("most likely user code trying to access tensor value before mark_step", "value-access"),
    ("most likely user code trying to access tensor value before torch_xla.sync", "value-access"),
    ("something a future torch-xla prints", None),
    ("", None),
])
def test_cause_categories(cause, category):
    assert cause_category(cause) == category


# ---------------------------------------------------------------- whole-text parsing (the probe's side)


def test_fixture_blocks_from_text():
    blocks = parse_debug_block_text(TRAIN_LOG.read_text())
    kinds = [b.kind for b in blocks]
    assert kinds.count("compile") == 4 and kinds.count("execute") == 7 and kinds.count("post-compile") == 4
    assert all(b.complete for b in blocks)
    compiles = [b for b in blocks if b.kind == "compile"]
    assert [b.category for b in compiles] == ["loader", "loader", "value-access", "user-sync"]
    assert [b.location for b in compiles] == ["/home/ubuntu/train.py:88", "/home/ubuntu/train.py:88",
                                              "/home/ubuntu/train.py:79", "/home/ubuntu/train.py:112"]
    c = compiles[2]
    assert c.cause == "most likely user code trying to access tensor value before torch_xla.sync"
    assert c.graph_hash == "51e7a0c3d9f84b26a1c0e7d53b98f4a2" and (c.n_inputs, c.n_outputs) == (216, 202)
    assert c.user_frame == "train_loop (/home/ubuntu/train.py:79)" and c.trigger == "value-access"
    assert compiles[3].trigger == "sync"  # the event vocabulary's name for an explicit sync
    assert compiles[0].frames[0] == ("sync (/opt/aws_neuronx_venv_pytorch_2_8/lib/python3.10/site-packages/"
                                     "torch_xla/torch_xla.py:87)")
    posts = [b for b in blocks if b.kind == "post-compile"]
    assert posts[0].computation_hash == "b81f4c09e7d2a3561c0f9e84d2a7b6c3"
    assert posts[0].sizes_gb["Graph input size"] is None and len(posts[0].sizes_gb) == 5


def test_older_spelling_graph_name_sizes_and_elided_frames():
    text = "\n".join(
        block("Compilation Analysis: ", "mark_step when exiting a profiler StepTrace region", "ab" * 16,
              [f"step_trace_exit ({SITE}/torch_xla/debug/profiler.py:170)", "fit (/srv/job/trainer.py:40)"],
              name="train_step", elided=True)
        + ["", "Computation hash: 0123456789abcdef0123456789abcdef", "",
           "Post Compilation Analysis: " + RULE,
           "Post Compilation Analysis: Graph input size: 1.250000 GB",
           "Post Compilation Analysis: Compiled program size: Unknown  GB",
           "Post Compilation Analysis: " + DASH, "Post Compilation Analysis: " + RULE]
    )
    compile_block, post = parse_debug_block_text(text)
    assert compile_block.category == "profiler" and compile_block.graph_name == "train_step"
    assert compile_block.frames_elided and compile_block.location == "/srv/job/trainer.py:40"
    assert post.sizes_gb == {"Graph input size": 1.25, "Compiled program size": None}
    assert post.computation_hash == "0123456789abcdef0123456789abcdef"


def test_cut_off_text_keeps_the_partial_block():
    lines = block("Execution Analysis: ", "user mark_step", "cd" * 16, ["loop (/a/b.py:3)"],
                  header="Execution Cause")
    head = "\n".join(lines[:6])  # a 1 MiB read can end anywhere
    (b,) = parse_debug_block_text(head)
    assert b.kind == "execute" and b.cause == "user mark_step" and b.graph_hash == "cd" * 16
    assert not b.complete and b.frames == []
    tail = "\n".join(lines[4:])  # and start anywhere: no opening rule, no cause
    (t,) = parse_debug_block_text(tail)
    assert t.graph_hash == "cd" * 16 and t.location == "/a/b.py:3" and t.cause is None


def test_lost_closing_rule_does_not_merge_two_blocks():
    first = block("Compilation Analysis: ", "user mark_step", "11" * 16, ["a (/x/a.py:1)"])[:-1]  # no closer
    second = block("Compilation Analysis: ", "torch_xla.compile", "22" * 16, ["b (/x/b.py:2)"])
    blocks = parse_debug_block_text("\n".join(first + second))
    assert [(b.graph_hash, b.category, b.location) for b in blocks] == [
        ("11" * 16, "user-sync", "/x/a.py:1"), ("22" * 16, "compile-fn", "/x/b.py:2")]


def test_user_frame_skips_torch_and_installed_packages():
    frames = [f"sync ({SITE}/torch_xla/torch_xla.py:87)",
              "wrapper (/home/u/.venv/lib/python3.11/site-packages/accelerate/utils.py:10)",
              "forward (/opt/torch/nn/modules/module.py:5)",
              "train (/home/u/proj/train.py:77)"]
    (b,) = parse_debug_block_text("\n".join(block("Compilation Analysis: ", "user mark_step", "aa", frames)))
    assert b.user_frame == "train (/home/u/proj/train.py:77)" and b.location == "/home/u/proj/train.py:77"


# ---------------------------------------------------------------- as stream events


def test_compile_block_then_post_compile_gives_a_timed_compile_event():
    lines = block("Compilation Analysis: ", "most likely user code trying to access tensor value before mark_step",
                  "ef" * 16, [f"item ({SITE}/torch/_tensor.py:1)", "train_loop (/w/train.py:79)"])
    lines += ["2025-11-18 10:04:02.000912:  41872  INFO ||NEURON_CACHE||: Compile cache path: /var/tmp/c",
              "", "Computation hash: 0f6b2d93a8e4c1577d3e9b02a6c8f1d4", "", "Post Compilation Analysis: " + RULE]
    p, events = feed_all(lines, step=2.0)
    (start,) = of(events, CompileStarted)
    (fin,) = of(events, CompileFinished)
    assert start.source == fin.source == "pt-xla-debug" and start.graph_hash == fin.graph_hash == "ef" * 16
    assert fin.trigger == "value-access" and fin.location == "/w/train.py:79"
    assert fin.point == "value-access@/w/train.py:79"
    assert fin.reason.startswith("most likely user code") and len(fin.frames) == 2
    assert fin.duration_s == 6.0  # from the closing rule to the "Computation hash" line
    assert fin.cache is None and p.problems == 0
    out = [e for e in events if isinstance(e, OutputLine)]
    assert all(e.tag == "compile" for e in out if "Analysis" in e.text or "Computation hash" in e.text)


def test_without_post_compile_output_the_execution_block_ends_the_compile():
    lines = block("Compilation Analysis: ", "user mark_step", "12" * 16, ["f (/w/t.py:5)"])
    lines += block("Execution Analysis: ", "user mark_step", "12" * 16, ["f (/w/t.py:5)"], header="Execution Cause")
    _, events = feed_all(lines)
    (fin,) = of(events, CompileFinished)
    assert fin.trigger == "sync" and fin.duration_s == 2.0  # closing rule (t=11) -> first execution line (t=13)
    assert [e.tag for e in events if isinstance(e, OutputLine) and e.text.startswith("Execution")] == [None] * 11


def test_compile_seen_to_start_but_never_to_end_is_flushed_untimed():
    _, events = feed_all(block("Compilation Analysis: ", "torch_xla.compile", "34" * 16, ["g (/w/t.py:9)"]))
    (fin,) = of(events, CompileFinished)
    assert fin.trigger == "compile-fn" and fin.duration_s is None


def test_unexpected_execution_is_a_warning():
    lines = block("Unexpected Execution Analysis: ", "user mark_step", "56" * 16, ["h (/w/t.py:12)"],
                  header="Execution Cause")
    _, events = feed_all(lines)
    (note,) = of(events, Notice)
    assert note.level == "warn" and "/w/t.py:12" in note.message
    assert not of(events, CompileStarted)
    assert {e.tag for e in events if isinstance(e, OutputLine) and e.text} == {"error"}


def test_block_with_nothing_usable_is_a_parse_problem():
    p, events = feed_all(["Compilation Analysis: " + RULE, "Compilation Analysis: " + DASH,
                          "Compilation Analysis: " + RULE])
    assert len(of(events, ParseProblem)) == 1 and p.problems == 1
    assert not of(events, CompileStarted)


def test_profiler_lines():
    _, events = feed_all([
        "pt-xla-profiler: CompileTime too frequent: 21 counts during 11 steps",
        "pt-xla-profiler: CompileTime too frequent: 22 counts during 12 steps",  # printed at every step
        "pt-xla-profiler: TransferFromDeviceTime too frequent: 40 counts during 20 steps",
        ("pt-xla-profiler: CompileTime too slow: longest instance took 06m09s401ms746.001us. Please open a GitHub "
        "issue with the graph dump for our team to optimize."),
        ("pt-xla-profiler: Op(s) not lowered: aten::_ctc_loss, aten::nonzero,  Please open a GitHub issue with the "
        "above op lowering requests."),
        "WARNING:pt-xla-profiler:pt-xla-profiler: " + RULE,
        "pt-xla-profiler: Unlowered Op usage summary (more of these ops, lower performance)",
        "pt-xla-profiler: FRAME (count=8):",
        'pt-xla-profiler: Unlowered Op: "_local_scalar_dense"',
        "pt-xla-profiler: Python Frames:",
        f"pt-xla-profiler:   item ({SITE}/torch/_tensor.py:40)",
        "pt-xla-profiler:   train_loop (/home/ubuntu/train.py:79)",
        "pt-xla-profiler: FRAME (count=2):",
        'pt-xla-profiler: Unlowered Op: "aten::nonzero"',
        "pt-xla-profiler: Python Frames:",
        "pt-xla-profiler:   mask (/home/ubuntu/model.py:12)",
        "pt-xla-profiler: " + RULE,
    ])
    msgs = [n.message for n in of(events, Notice)]
    assert msgs[:4] == [
        "CompileTime too frequent: 21 counts during 11 steps",
        "TransferFromDeviceTime too frequent: 40 counts during 20 steps",
        "CompileTime too slow: longest instance took 06m09s401ms746.001us",
        "Op(s) not lowered: aten::_ctc_loss, aten::nonzero",
    ]
    assert msgs[4:] == [
        "host read of a device value: _local_scalar_dense ran 8 times at /home/ubuntu/train.py:79",
        "CPU fallback: aten::nonzero ran 2 times at /home/ubuntu/model.py:12",
    ]
