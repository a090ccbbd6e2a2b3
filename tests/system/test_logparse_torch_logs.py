"""TORCH_LOGS="recompiles,graph_breaks": verbatim torch 2.9 samples and a real run."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import time

import pytest

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events.run_events import DynamoRecompile, GraphBreak, Notice, OutputLine

HAS_TORCH = importlib.util.find_spec("torch") is not None

# Captured with torch 2.9.0 (CPU), TORCH_LOGS="recompiles,graph_breaks", torch.compile(backend="eager").
RECOMPILE_29 = """\
V1130 08:50:33.006000 4155 torch/_dynamo/guards.py:4181] [0/1] [__recompiles] Recompiling function forward in /tmp/lp/recomp.py:3
V1130 08:50:33.006000 4155 torch/_dynamo/guards.py:4181] [0/1] [__recompiles]     triggered by the following guard failure(s):
V1130 08:50:33.006000 4155 torch/_dynamo/guards.py:4181] [0/1] [__recompiles]     - 0/0: tensor 'x' size mismatch at index 1. expected 512, actual 497
W1130 08:50:33.190000 4155 torch/utils/cpp_extension.py:117] [0/1] No CUDA runtime is found, using CUDA_HOME='/usr/local'
"""
RECOMPILE_MANY_29 = """\
V1130 08:50:48.995000 4289 torch/_dynamo/guards.py:4181] [0/4] [__recompiles] Recompiling function forward in /tmp/lp/recomp2.py:3
V1130 08:50:48.995000 4289 torch/_dynamo/guards.py:4181] [0/4] [__recompiles]     triggered by the following guard failure(s):
V1130 08:50:48.995000 4289 torch/_dynamo/guards.py:4181] [0/4] [__recompiles]     - 0/3: scale == 2.0                                             # return (x * scale).sum(dim=1)  # lp/recomp2.py:5 in forward
V1130 08:50:48.995000 4289 torch/_dynamo/guards.py:4181] [0/4] [__recompiles]     - 0/1: tensor 'x' size mismatch at index 1. expected 497, actual 300
V1130 08:50:48.995000 4289 torch/_dynamo/guards.py:4181] [0/4] [__recompiles]     - 0/0: tensor 'x' size mismatch at index 1. expected 512, actual 300
"""
LIMIT_29 = """\
W1130 08:50:49.092000 4289 torch/_dynamo/convert_frame.py:1358] [1/2] torch._dynamo hit config.recompile_limit (2)
W1130 08:50:49.092000 4289 torch/_dynamo/convert_frame.py:1358] [1/2]    function: 'lim' (/tmp/lp/recomp2.py:13)
W1130 08:50:49.092000 4289 torch/_dynamo/convert_frame.py:1358] [1/2]    last reason: 1/1: tensor 'x' size mismatch at index 0. expected 2, actual 3
W1130 08:50:49.092000 4289 torch/_dynamo/convert_frame.py:1358] [1/2] To log all recompilation reasons, use TORCH_LOGS="recompiles".
"""
GRAPH_BREAK_29 = """\
W1130 08:50:43.061000 4155 torch/_dynamo/variables/tensor.py:1048] [1/0] Graph break from `Tensor.item()`, consider setting:
W1130 08:50:43.061000 4155 torch/_dynamo/variables/tensor.py:1048] [1/0]     torch._dynamo.config.capture_scalar_outputs = True
W1130 08:50:43.061000 4155 torch/_dynamo/variables/tensor.py:1048] [1/0] Graph break: from user code at:
W1130 08:50:43.061000 4155 torch/_dynamo/variables/tensor.py:1048] [1/0]   File "/tmp/lp/recomp.py", line 13, in step
W1130 08:50:43.061000 4155 torch/_dynamo/variables/tensor.py:1048] [1/0]     print("value", y.sum().item())
V1130 08:50:43.062000 4155 torch/_dynamo/symbolic_convert.py:611] [1/0] [__graph_breaks] Graph break in user code at /tmp/lp/recomp.py:13
V1130 08:50:43.062000 4155 torch/_dynamo/symbolic_convert.py:611] [1/0] [__graph_breaks] Graph Break Reason: Unsupported Tensor.item() call with capture_scalar_outputs=False
V1130 08:50:43.062000 4155 torch/_dynamo/symbolic_convert.py:611] [1/0] [__graph_breaks]   Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.
V1130 08:50:43.062000 4155 torch/_dynamo/symbolic_convert.py:611] [1/0] [__graph_breaks] User code traceback:
V1130 08:50:43.062000 4155 torch/_dynamo/symbolic_convert.py:611] [1/0] [__graph_breaks]   File "/tmp/lp/recomp.py", line 16, in <module>
V1130 08:50:43.099000 4155 torch/_dynamo/symbolic_convert.py:618] [2/0] [__graph_breaks] Graph break (user stack suppressed due to duplicate graph break) in user code at /tmp/lp/recomp.py:13
V1130 08:50:43.099000 4155 torch/_dynamo/symbolic_convert.py:618] [2/0] [__graph_breaks] Graph Break Reason: Failed to trace builtin operator
V1130 08:50:43.099000 4155 torch/_dynamo/symbolic_convert.py:618] [2/0] [__graph_breaks]   Explanation: Dynamo does not know how to trace builtin operator `print` with argument types ['str', 'float'] (has_kwargs False)
"""


# Captured with torch 2.13.0 (CPU), TORCH_LOGS="graph_breaks", a `print` inside a compiled function: the first
# reason line is generic; what broke, the explanation, hints and registry id come on the lines after it.
_P13 = "V1206 00:46:47.362000 24305 torch/_dynamo/symbolic_convert.py:5124] [0/0] [__graph_breaks] "
GRAPH_BREAK_213 = "\n".join(_P13 + line for line in (
    "Graph break in user code at /w/gb.py:4",
    "Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):",
    "",
    "Failed to trace builtin operator",
    "  Explanation: Dynamo does not know how to trace builtin operator `print` with argument types ['str'] "
    "(has_kwargs False)",
    "  Hint: Avoid calling builtin `print` with argument types ['str']. Consider using an equivalent alternative "
    "function/method to `print`.",
    "  Hint: If you are attempting to call a logging function (e.g. `print`), you can try adding it to "
    "`torch._dynamo.config.reorderable_logging_functions`.",
    "  Hint: Please report an issue to PyTorch.",
    "",
    "  Developer debug context: builtin print [<class 'torch._dynamo.variables.constant.ConstantVariable'>] False",
    "",
    " For more details about this graph break, please visit: "
    "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html",
    "",
    "User code traceback:",
    '  File "/w/gb.py", line 7, in <module>',
    "    g(torch.randn(3))",
    '  File "/w/gb.py", line 4, in f',
    '    print("hi")',
    "",
)) + "\nhi\n" + "V1206 00:46:47.560000 24305 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] Recompiling function f in /w/gb.py:2"


def parse(text: str, flush: bool = True):
    p = OutputParser()
    events = []
    for i, line in enumerate(text.splitlines()):
        events += p.feed("stderr", line, float(i))
    if flush:
        events += p.flush(1e6)
    assert p.problems == 0
    return events


def of(events, cls):
    return [e for e in events if isinstance(e, cls)]


def test_recompile_with_guard_failure():
    events = parse(RECOMPILE_29, flush=False)
    (r,) = of(events, DynamoRecompile)
    assert r.reason == "tensor 'x' size mismatch at index 1. expected 512, actual 497"
    assert (r.function, r.location, r.pid) == ("forward", "/tmp/lp/recomp.py:3", 4155)
    assert r.t == 2.0  # emitted on the guard line, not held until the next record
    assert [e.tag for e in of(events, OutputLine)] == ["compile", "compile", "compile", None]


def test_recompile_reason_is_the_latest_entry_without_its_source_comment():
    (r,) = of(parse(RECOMPILE_MANY_29), DynamoRecompile)
    assert r.reason == "scale == 2.0"


def test_recompile_limit_notice():
    (n,) = of(parse(LIMIT_29), Notice)
    assert n.level == "warn" and n.source == "dynamo"
    assert n.message == ("torch._dynamo hit config.recompile_limit (2); function: 'lim' (/tmp/lp/recomp2.py:13); "
                         "last reason: 1/1: tensor 'x' size mismatch at index 0. expected 2, actual 3")


def test_graph_breaks_including_the_deduplicated_form():
    events = parse(GRAPH_BREAK_29)
    breaks = of(events, GraphBreak)
    assert [(b.reason, b.location, b.pid) for b in breaks] == [
        ("Unsupported Tensor.item() call with capture_scalar_outputs=False", "/tmp/lp/recomp.py:13", 4155),
        ("Failed to trace builtin operator", "/tmp/lp/recomp.py:13", 4155),
    ]
    assert all(e.tag == "compile" for e in of(events, OutputLine))


def test_torch_213_graph_break_names_what_broke_not_its_generic_first_line():
    """torch >= 2.10: the break's reason is the line after the generic one; the explanation, the hints
    (not "report an issue") and the registry id go with it; the record ends where another begins."""
    events = parse(GRAPH_BREAK_213, flush=False)
    (gb,) = of(events, GraphBreak)
    assert (gb.reason, gb.location, gb.pid, gb.registry_id) == (
        "Failed to trace builtin operator", "/w/gb.py:4", 24305, "gb0059")
    assert gb.explanation.startswith("Dynamo does not know how to trace builtin operator `print`")
    assert [h[:30] for h in gb.hints] == ["Avoid calling builtin `print` ", "If you are attempting to call "]
    assert gb.t >= 19.0  # read to the record's last line (19) before it is emitted
    assert of(parse(GRAPH_BREAK_213), DynamoRecompile)[0].function == "f"


def test_torch_29_graph_break_keeps_its_reason_and_gains_the_explanation():
    first, second = of(parse(GRAPH_BREAK_29), GraphBreak)
    assert first.explanation == "Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False."
    assert second.explanation.startswith("Dynamo does not know how to trace builtin operator `print`")
    assert first.registry_id is None and first.hints == []


def test_two_ranks_interleaved_do_not_mix():
    a = "V1130 08:50:33.006000 100 torch/_dynamo/guards.py:4181] [0/1] [__recompiles] "
    b = "V1130 08:50:33.006000 200 torch/_dynamo/guards.py:4181] [0/1] [__recompiles] "
    text = "\n".join([
        a + "Recompiling function forward in /w/m.py:3",
        b + "Recompiling function forward in /w/m.py:3",
        a + "    triggered by the following guard failure(s):",
        b + "    triggered by the following guard failure(s):",
        b + "    - 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 6",
        a + "    - 0/0: tensor 'x' size mismatch at index 1. expected 512, actual 497",
    ])
    rs = of(parse(text), DynamoRecompile)
    assert {(r.pid, r.reason) for r in rs} == {
        (200, "tensor 'x' size mismatch at index 0. expected 8, actual 6"),
        (100, "tensor 'x' size mismatch at index 1. expected 512, actual 497"),
    }


OLDER_FORMATS = (
    # torch 2.1: only the first line of a record carries the logging prefix; no "N/M:" entry prefix
    "[2023-10-01 10:00:00,000] torch._dynamo.guards.__recompiles: [DEBUG] Recompiling function fwd in /w/a.py:7",
    "    triggered by the following guard failure(s):",
    "    - tensor 'L['x']' stride mismatch at index 0. expected 4, actual 1",
    # torch 2.0: the reason on the header line
    "Recompiling function g in /w/b.py:2",
    "triggered by the following guard failure: ___check_type_id(L['y'], 94)",
    # torch <= 2.4 graph break
    "Graph break: call_method TensorVariable() item [] {} from user code at:",
    '  File "/w/c.py", line 21, in step',
)


def test_older_formats():
    text = "\n".join(OLDER_FORMATS)
    events = parse(text)
    assert [(r.function, r.reason) for r in of(events, DynamoRecompile)] == [
        ("fwd", "tensor 'L['x']' stride mismatch at index 0. expected 4, actual 1"),
        ("g", "___check_type_id(L['y'], 94)"),
    ]
    (gb,) = of(events, GraphBreak)
    assert gb.reason == "call_method TensorVariable() item [] {}" and gb.location == "/w/c.py:21"


def test_record_cut_off_is_flushed_with_unknown_reason():
    events = parse("V1130 08:50:33.006000 7 torch/_dynamo/guards.py:4181] [0/1] [__recompiles] Recompiling "
                   "function forward in /w/m.py:3")
    (r,) = of(events, DynamoRecompile)
    assert r.reason.startswith("unknown") and r.function == "forward"
    events = parse("V1130 08:50:43.062000 7 torch/_dynamo/symbolic_convert.py:611] [1/0] [__graph_breaks] Graph "
                   "break in user code at /w/m.py:13")
    (gb,) = of(events, GraphBreak)
    assert gb.reason == "unknown" and gb.location == "/w/m.py:13"


# ---------------------------------------------------------------- real torch output

SCRIPT = textwrap.dedent("""\
    import torch

    @torch.compile(backend="eager", dynamic=False)
    def forward(x):
        return (x * 2).sum(dim=1)

    for n in (512, 497):
        forward(torch.randn(4, n))

    @torch.compile(backend="eager")
    def step(x):
        y = x * 2
        v = y.sum().item()
        return y + v

    step(torch.randn(8))

    @torch.compile(backend="eager")
    def talk(x):
        y = x.cos()
        print("y computed")
        return y + 1

    talk(torch.randn(8))
    print("step 1 loss 2.5000", flush=True)
""")


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    if not HAS_TORCH:
        pytest.skip("torch is not importable in this interpreter; the real TORCH_LOGS test needs it "
                    "(`make test` installs torch into .venv)")
    script = tmp_path_factory.mktemp("torchlogs") / "model.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TORCH_LOGS="recompiles,graph_breaks", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240,
                       check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    parser = OutputParser()
    events = []
    for stream, text in (("stdout", p.stdout), ("stderr", p.stderr)):
        for line in text.splitlines():
            events += parser.feed(stream, line, time.time())
    events += parser.flush(time.time())
    return script, events, parser


def test_real_torch_recompile(real_run):
    script, events, parser = real_run
    (r,) = of(events, DynamoRecompile)
    assert r.function == "forward" and r.location == f"{script}:3"
    assert r.reason == "tensor 'x' size mismatch at index 1. expected 512, actual 497"
    assert r.pid is not None and parser.problems == 0


def test_real_torch_graph_breaks(real_run):
    script, events, _ = real_run
    breaks = {b.location: b.reason for b in of(events, GraphBreak)}
    assert "Tensor.item()" in breaks[f"{script}:13"]
    assert "print" in breaks[f"{script}:21"] or "builtin" in breaks[f"{script}:21"]


def test_real_torch_output_also_yields_the_loss(real_run):
    _, events, _ = real_run
    from neurondesk.core.events.run_events import LossReported

    assert [(e.value, e.step) for e in of(events, LossReported)] == [(2.5, 1)]
