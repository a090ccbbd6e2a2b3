"""lint on the script's own backend (issue 50 item 6): a value read under a once-only condition is not
"every step", and each finding's cost and fix are said in the script's backend's terms — torch_xla
(a graph break, `xm.add_step_closure`), a torch.compile'd function (a graph break), TorchNeuron eager
and other eager devices (a host sync, no `xm`). The fragments are in the style of tests/data/lint/corpus
(the TorchNeuron tutorial-shaped loop is corpus/torchneuron_tutorial.py); lint reads source only, so
no Neuron device is needed."""

from __future__ import annotations

import textwrap

import pytest
from conftest import DATA

from neurondesk.lint import lint_paths, lint_source

TUTORIAL = DATA / "lint" / "corpus" / "torchneuron_tutorial.py"

HEADS = {
    "torchneuron": 'import torch\nimport torch_neuronx\nmodel = M().to("neuron")\n',
    "xla": "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\nmodel = M().to(xm.xla_device())\n",
    "cuda": 'import torch\nmodel = M().to("cuda")\n',
}
LOOP = """\
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for {counter}, (x, y) in enumerate(loader):
    loss = model(x).mean()
    loss.backward()
    opt.step()
    {sync}
    if {test}:
        first = loss.item()
    else:
        every = loss.item()
"""


def findings(head: str, test: str = "it == 0", counter: str = "it") -> list:
    sync = "xm.mark_step()" if head == "xla" else "pass"
    return lint_source(HEADS[head] + LOOP.format(test=test, counter=counter, sync=sync))


@pytest.mark.parametrize("test, counter", [("it == 0", "it"), ("step == 0", "step"), ("epoch == start", "step"),
                                           ("step + 1 == total_steps", "step"), ("it == 0 or it == last", "it")])
def test_a_read_under_a_once_only_condition_is_not_every_step(test: str, counter: str) -> None:
    body, orelse = sorted((f for f in findings("torchneuron", test, counter) if f.rule == "item"),
                          key=lambda f: f.line)
    assert body.severity == "info"
    assert f"only when `{test}` (not every step)" in body.message and "every step," not in body.message
    assert "nothing to change" in body.fix
    # the `else:` of the same test runs on every other step
    assert orelse.severity == "warning" and orelse.message.endswith(", every step")


def test_a_string_compare_or_a_modulo_is_not_once_only() -> None:
    mode = [f for f in findings("cuda", "mode == 'train'") if f.rule == "item"]
    assert [f.severity for f in mode] == ["warning", "warning"]
    every = [f for f in findings("cuda", "it % 10 == 0") if f.rule == "item"]
    assert every[0].message.endswith("every 10 steps") and every[0].severity == "info"


def test_a_helper_called_only_on_the_first_step_is_once_only() -> None:
    src = HEADS["torchneuron"] + textwrap.dedent("""\
        def log_first(loss):
            print(loss.item())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for it, x in enumerate(loader):
            loss = model(x).mean()
            loss.backward()
            opt.step()
            if it == 0:
                log_first(loss)
        """)
    (f,) = lint_source(src)
    assert (f.line, f.rule, f.severity) == (5, "item", "info") and "only when `it == 0`" in f.message


def test_torchneuron_eager_reads_are_host_syncs_with_no_xla_advice() -> None:
    for f in findings("torchneuron", test="loss > 2"):
        assert "host sync" in f.message and "Neuron device" in f.message, f
        for words in ("graph break", "xm.", "add_step_closure", "mark_step"):
            assert words not in f.message and words not in f.fix, (words, f)


def test_torch_xla_reads_keep_the_graph_break_and_step_closure_advice() -> None:
    every = [f for f in findings("xla", test="loss > 2") if f.rule == "item"]
    assert all("a graph break and a sync" in f.message and "xm.add_step_closure" in f.fix for f in every)
    (branch,) = [f for f in findings("xla", test="loss > 2") if f.rule == "tensor-branch"]
    assert "a graph break" in branch.message


def test_a_cuda_eager_script_gets_no_xm_advice() -> None:
    for f in findings("cuda", test="loss > 2"):
        assert "host sync" in f.message and "Neuron" not in f.message
        assert "xm." not in f.fix and "add_step_closure" not in f.fix and "graph break" not in f.message


def test_a_read_inside_a_compiled_function_is_a_graph_break() -> None:
    src = 'import torch\nmodel = M().to("cuda")\n' + textwrap.dedent("""\
        def train_step(x):
            loss = model(x).mean()
            loss.backward()
            v = loss.item()
            return loss
        step_fn = torch.compile(train_step)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            loss = step_fn(x)
            opt.step()
            print(loss.item())
        """)
    got = {f.line: f for f in lint_source(src) if f.rule == "item"}
    assert set(got) == {6, 13}
    assert "graph break in the compiled function" in got[6].message and "splits the compiled graph" in got[6].fix
    assert "xm." not in got[6].fix
    # outside the compiled function, the same read is a host sync
    assert "host sync" in got[13].message and "graph break" not in got[13].message


def test_the_tutorial_shaped_torchneuron_loop_in_its_own_terms() -> None:
    report = lint_paths([str(TUTORIAL)])
    got = [(f.line, f.rule, f.severity) for f in report.findings]
    assert got == [(38, "item", "info"), (40, "item", "info")]
    first, line = report.findings
    assert "only when `it == 0`" in first.message and line.message.endswith("every 5 steps")
    for f in report.findings:
        assert "host sync" in f.message and "xm" not in f.fix and "graph break" not in f.message
