"""TorchNeuron's failure lines read (issue 44 item 6), pure: each line as documented (or as
torch-neuronx's published source writes it; collectors/logparse/neuron_faults.py cites which) is
one NeuronFault of its kind with its detail; the lines that only look alike are none; each kind
is one diagnostic with its fix; the gate fails on each, and the two names of the kinds agree."""

from __future__ import annotations

import pytest

from neurondesk.collectors.logparse import OutputParser
from neurondesk.collectors.logparse.neuron_faults import fault_of
from neurondesk.core.events.run_events import OutputLine
from neurondesk.core.findings.diagnostics import diagnostics
from neurondesk.core.findings.neuron_errors import TORCHNEURON_KINDS
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.checks import GATED_DIAGNOSTICS, Thresholds, evaluate
from neurondesk.core.summary.types import load_summary

EMOD = ("torch._dynamo.exc.BackendCompilerFailed: backend='neuron' raised: RuntimeError: [NCC_EMOD025] Dynamic shape "
        "is not supported: instruction 'add.3' has shape 'f32[s0,128]'. The Neuron compiler requires all tensor "
        "dimensions to be statically sized.")
LINES = [
    (EMOD, "dynamic-shape", "instruction 'add.3' has shape 'f32[s0,128]'"),
    ("ERROR 2026-11-02 NCC_EMOD025 in module jit_forward", "dynamic-shape", None),
    ("[Neuron] [WARNING] [backend.cpp:88] torch.compile mode 'reduce-overhead' is not supported by the neuron backend; "
     "falling back to 'default'", "mode-ignored", "reduce-overhead"),
    ("Falling back to original GraphModule execution", "graph-fallback", None),
    ("WARNING:torch_neuronx:Falling back to original GraphModule execution", "graph-fallback", None),
    ("DEBUG:root:No implementation could handle operation aten::_unique2. Falling back on CPU", "cpu-fallback",
     "aten::_unique2"),
]
NOT_FAULTS = [
    "config: mode=max-autotune",  # a mode named, no fallback
    "falling back to default settings",
    "Falling back on CPU",  # no op named
    "dynamic shapes are fine here",
    "CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. Operation aten::x failed",
]


@pytest.mark.parametrize(("line", "kind", "detail"), LINES)
def test_each_documented_line_is_its_fault_with_its_detail(line: str, kind: str, detail: str | None) -> None:
    f = fault_of(line, 5.0)
    assert f is not None and (f.fault, f.detail, f.t) == (kind, detail, 5.0)


@pytest.mark.parametrize("line", NOT_FAULTS)
def test_lines_that_only_look_alike_are_no_fault(line: str) -> None:
    assert fault_of(line, 1.0) is None


def _state(lines: list[str]) -> RunState:
    parser, state = OutputParser(), RunState()
    events = [e for i, line in enumerate(lines) for e in parser.feed("stderr", line, 10.0 + i)]
    for e in events + parser.flush(99.0):
        state.apply(e)
    return state


def test_each_kind_is_one_diagnostic_with_its_fix_and_fails_the_gate() -> None:
    lines = [line for line, _, _ in LINES] + ["DEBUG:root:No implementation could handle operation aten::nonzero. "
                                              "Falling back on CPU"] * 3
    found = {d.kind: d.message for d in diagnostics(_state(lines)) if d.kind in TORCHNEURON_KINDS}
    assert "NCC_EMOD025 (instruction 'add.3' has shape 'f32[s0,128]')" in found["dynamic-shape"]
    assert "2 eager op(s) fell back to the CPU (aten::_unique2, aten::nonzero)" in found["cpu-fallback"]
    assert "mode 'reduce-overhead' ignored" in found["mode-ignored"]
    assert "2 torch.compile graph run(s) fell back to eager" in found["graph-fallback"]
    assert len(found) == 4
    summary = {"summary_version": 2, "steps": 5, "steps_requested": 5, "warmup_steps": 2,
               "diagnostics": [{"kind": k, "message": m} for k, m in found.items()]}
    failed = evaluate(load_summary(summary), Thresholds())
    assert len(failed) == 4 and all(f.startswith("TorchNeuron: ") for f in failed)
    assert evaluate(load_summary({**summary, "diagnostics": []}), Thresholds()) == []


def test_the_gate_knows_every_torchneuron_kind() -> None:
    assert set(TORCHNEURON_KINDS) <= GATED_DIAGNOSTICS


def test_a_warning_line_stays_no_error_while_the_compiler_rejection_is_one() -> None:
    parser = OutputParser()
    tags = {line: next(e.tag for e in parser.feed("stderr", line, 1.0) if isinstance(e, OutputLine))
            for line, _, _ in LINES[:4]}
    assert tags[LINES[0][0]] == "error"
    assert tags[LINES[2][0]] is None and tags[LINES[3][0]] is None
