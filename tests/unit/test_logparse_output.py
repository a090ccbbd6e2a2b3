"""OutputParser as a whole: always the OutputLine, never an exception, garbage counted."""

from __future__ import annotations

import random

import pytest
from conftest import FIXTURES

from neurondesk.collectors.logparse import OutputParser, parse_metrics_report
from neurondesk.collectors.logparse.metrics_report import parse_value
from neurondesk.core.events.codec import event_from_dict, event_to_dict
from neurondesk.core.events.run_events import (
    CompileFinished,
    LogError,
    LossReported,
    OutputLine,
    ParseProblem,
)


def test_every_line_gives_its_output_line_first():
    p = OutputParser()
    out = p.feed("stdout", "step 1 loss 2.0\n", 5.0)
    assert isinstance(out[0], OutputLine) and out[0].text == "step 1 loss 2.0" and out[0].stream == "stdout"
    assert isinstance(out[1], LossReported) and out[1].t == 5.0
    out = p.feed("stderr", "a\r\nstep 2 loss 1.0\r\n\nb", 6.0)
    assert [e.text for e in out if isinstance(e, OutputLine)] == ["a", "step 2 loss 1.0", "", "b"]
    assert [e.value for e in out if isinstance(e, LossReported)] == [1.0]
    assert p.lines == 5 and p.problems == 0


@pytest.mark.parametrize("line,tag", [
    ("Compiler status PASS", "compile"),
    ("Traceback (most recent call last):", "error"),
    ("nrtucode: internal error: 2 object(s) leaked, improper teardown", "noise"),
    ("hello", None),
])
def test_tags(line, tag):
    assert OutputParser().feed("stderr", line, 0.0)[0].tag == tag


def test_invalid_utf8_is_replaced_and_counted():
    p = OutputParser()
    text = b"step 7 loss 2.5 \xff\xfe garbage".decode("utf-8", "surrogateescape")
    out = p.feed("stdout", text, 1.0)
    line = out[0]
    assert line.text == "step 7 loss 2.5 \ufffd\ufffd garbage"
    line.text.encode("utf-8")  # the journal can write it
    assert [e.value for e in out if isinstance(e, LossReported)] == [2.5]
    (prob,) = [e for e in out if isinstance(e, ParseProblem)]
    assert "UTF-8" in prob.error and p.problems == 1


def test_lone_surrogates_and_replacement_characters():
    p = OutputParser()
    out = p.feed("stdout", "x\ud800y", 1.0)  # not from surrogateescape at all
    out[0].text.encode("utf-8")
    assert p.problems == 1
    out = p.feed("stdout", "already \ufffd replaced", 2.0)  # decoded with errors="replace" upstream
    assert out[0].text == "already \ufffd replaced" and len(out) == 1 and p.problems == 1


def test_megabyte_line_kept_whole_parsed_in_part():
    p = OutputParser()
    big = "loss 3.5 " + "x" * 1_000_000
    out = p.feed("stdout", big, 1.0)
    assert out[0].text == big
    assert [e.value for e in out if isinstance(e, LossReported)] == [3.5]
    (prob,) = [e for e in out if isinstance(e, ParseProblem)]
    assert "1000009 characters" in prob.error and len(prob.raw) < 1000


@pytest.mark.parametrize("bad", [None, 42, ["a list"]])
def test_not_a_string_is_a_problem_not_a_crash(bad):
    p = OutputParser()
    out = p.feed("stdout", bad, 1.0)
    assert [type(e) for e in out] == [ParseProblem] and p.problems == 1


def test_bytes_are_decoded_and_bad_bytes_flagged():
    p = OutputParser()
    out = p.feed("stdout", b"step 2 loss 1.25\n", 1.0)
    assert out[0].text == "step 2 loss 1.25" and out[1].value == 1.25 and p.problems == 0
    out = p.feed("stdout", b"\x80oops", 2.0)
    assert out[0].text == "\ufffdoops" and p.problems == 1


def test_a_parser_bug_costs_the_meaning_not_the_line(monkeypatch):
    p = OutputParser()

    def boom(*args):
        raise ZeroDivisionError("bug")

    neuron = next(parser for parser, _ in p.chain if type(parser).__name__ == "NeuronCCParser")
    monkeypatch.setattr(neuron, "feed", boom)
    out = p.feed("stderr", "Compiler status PASS", 1.0)
    assert isinstance(out[0], OutputLine) and out[0].text == "Compiler status PASS"
    (prob,) = [e for e in out if isinstance(e, ParseProblem)]
    assert prob.source == "NeuronCCParser" and "ZeroDivisionError" in prob.error and p.problems == 1
    assert isinstance(p.feed("stderr", "next", 2.0)[0], OutputLine)


def test_binary_garbage_never_raises_and_every_event_round_trips():
    rng = random.Random(1234)
    p = OutputParser()
    lines = 0
    for _ in range(300):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 400)))
        text = blob.decode("utf-8", "surrogateescape")
        out = p.feed(rng.choice(["stdout", "stderr"]), text, 1.0)
        outs = [e for e in out if isinstance(e, OutputLine)]
        lines += len(outs)
        assert outs and isinstance(out[0], OutputLine)
        for e in out:
            assert event_from_dict(event_to_dict(e)) == e
            if isinstance(e, OutputLine):
                e.text.encode("utf-8")
    p.flush(2.0)
    assert p.lines == lines


def test_fixture_lines_cut_at_random_points_never_raise():
    rng = random.Random(7)
    lines = (FIXTURES / "torch-neuronx-train.log").read_text().splitlines()
    for _ in range(5):
        p = OutputParser()
        problems = 0
        for i, line in enumerate(lines):
            cut = line[: rng.randrange(len(line) + 1)] if rng.random() < 0.3 else line
            if rng.random() < 0.05:
                continue  # dropped lines: lost opening/closing rules, lost end lines
            out = p.feed("stderr", cut, float(i))
            assert isinstance(out[0], OutputLine) and out[0].text == cut
            problems += sum(isinstance(e, ParseProblem) for e in out)
        tail = p.flush(1e9)
        assert not any(isinstance(e, OutputLine) for e in tail)
        assert p.problems == problems + sum(isinstance(e, ParseProblem) for e in tail)


def test_flush_empties_the_state():
    p = OutputParser()
    p.feed("stderr", "2024-08-15 14:01:02.000011:  1320  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: "
                     "neuronx-cc compile model.MODULE_1+00875417.hlo_module.pb", 1.0)
    p.feed("stderr", "Traceback (most recent call last):", 1.0)
    first = p.flush(2.0)
    assert [type(e) for e in first] == [CompileFinished, LogError]
    assert p.flush(3.0) == []


def test_fixture_metrics_report_parses_and_yields_no_false_events():
    text = (FIXTURES / "torch-xla-metrics-report.txt").read_text()
    r = parse_metrics_report(text)
    ct = r.metrics["CompileTime"]
    assert ct.total_samples == 4 and ct.unit == "s" and ct.accumulator == pytest.approx(210.11)
    assert ct.percentiles["50%"] == pytest.approx(88.96) and ct.percentiles["99%"] == pytest.approx(94.71)
    assert r.metrics["OutboundData"].unit == "bytes"
    assert r.metrics["OutboundData"].accumulator == pytest.approx(498.16 * 2**20)
    assert r.metrics["TensorsGraphSize"].accumulator == 43671.0 and r.metrics["TensorsGraphSize"].unit is None
    assert r.counters["UncachedCompile"] == 4 and r.counters["aten::_local_scalar_dense"] == 8
    assert r.counters["xla::view_copy_symint"] == 2211
    p = OutputParser()
    events = [e for line in text.splitlines() for e in p.feed("stdout", line, 1.0)]
    assert all(isinstance(e, OutputLine) and e.tag is None for e in events)


@pytest.mark.parametrize("text,value,unit", [
    ("06m09s401ms746.001us", 369.401746001, "s"),
    ("186ms062.970us", 0.18606297, "s"),
    ("108.403us", 108.403e-6, "s"),
    ("01h02m03s", 3723.0, "s"),
    ("1.50GB", 1.5 * 2**30, "bytes"),
    ("9.00", 9.0, None),
])
def test_metric_values(text, value, unit):
    v, u = parse_value(text)
    assert v == pytest.approx(value) and u == unit


def test_old_transfer_metric_name_is_also_found_under_the_new_one():
    r = parse_metrics_report("Metric: TransferToServerTime\n  TotalSamples: 2\n  Accumulator: 003ms000.000us\n")
    assert r.metrics["TransferToDeviceTime"].accumulator == pytest.approx(0.003)


HUGE = "9" * 4400  # more digits than int() converts: what benchmarks/fuzz.py found the parsers choking on


@pytest.mark.parametrize("lines", [
    ["Compilation Analysis: ================================================================================",
     "Compilation Analysis: Graph Info:",
     f"Compilation Analysis:   Number of Graph Inputs: {HUGE}",
     "Compilation Analysis: ================================================================================"],
    [f"2025-11-18 10:02:19.000671:  {HUGE}  INFO ||NEURON_CACHE||: Compile cache path: /var/tmp/neuron-compile-cache"],
    [f"2026-Mar-03 09:12:44.501233 {HUGE}:{HUGE} ERROR  TDRV:dmem_alloc_internal   Failed to alloc DEVICE memory: 2"],
])
def test_a_number_of_thousands_of_digits_is_no_crash_of_a_parser(lines):
    parser = OutputParser()
    events = [e for i, line in enumerate(lines) for e in parser.feed("stderr", line, float(i))]
    events += parser.flush(9.0)
    crashes = [e for e in events if isinstance(e, ParseProblem) and ("Error(" in e.error or "failed:" in e.error)]
    assert crashes == []


def test_a_new_parser_is_a_row_in_the_chain(monkeypatch):
    # logparse.CHAIN is the registration: a LineParser planted there reads the lines its rule gives it
    import neurondesk.collectors.logparse as logparse

    seen: list[str] = []

    class CudaLog:
        def feed(self, s: str, t: float, out, key: str = "") -> str | None:
            seen.append(f"{key}:{s}")
            return "error" if "CUDA error" in s else None

        def flush(self, t: float):
            return []

    monkeypatch.setattr(logparse, "CHAIN", (*logparse.CHAIN[:1], (CudaLog, logparse.UNTAGGED), *logparse.CHAIN[1:]))
    p = logparse.OutputParser()
    tagged = p.feed("stderr", "[rank 3]: CUDA error: an illegal memory access", 1.0)[0]
    assert tagged.tag == "error" and seen == ["stderr|3:CUDA error: an illegal memory access"]
    p.feed("stderr", "Compiler status PASS", 2.0)  # the Neuron wrapper's line: CudaLog reads it too (untagged so far)
    assert seen[-1] == "stderr:Compiler status PASS"
