"""Probe messages to typed events: odd lines become ParseProblems, never exceptions."""

from __future__ import annotations

import json

from neurondesk.collectors.probe_messages import decode_probe_line
from neurondesk.core.events import run_events as ev

BLOCK = """
Compilation Analysis: ================================================================================
Compilation Analysis: Compilation Cause
Compilation Analysis:   most likely user code trying to access tensor value before torch_xla.sync
Compilation Analysis: Graph Info: 
Compilation Analysis:   Graph Hash: 4e96de616eded805e04ee720abc6fa9b
Compilation Analysis:   Number of Graph Inputs: 62
Compilation Analysis:   Number of Graph Outputs: 1
Compilation Analysis: Python Frame Triggered Execution: 
Compilation Analysis:   wrapper (/x/neurondesk/probe/bootstrap/_neurondesk_probe/values.py:40)
Compilation Analysis:   wrapper (/x/neurondesk/probe/bootstrap/_neurondesk_probe.py:600)
Compilation Analysis:   train_loop (/home/u/train.py:88)
Compilation Analysis: --------------------------------------------------------------------------------
Compilation Analysis: ================================================================================
"""


def _line(d: dict) -> bytes:
    return (json.dumps(d) + "\n").encode()


def test_compile_message_is_enriched_from_its_debug_text_without_the_probe_frame():
    e = decode_probe_line(_line({"kind": "compile", "t": 5.0, "pid": 3, "source": "probe", "step": 2,
                                 "duration_s": 1.5, "trigger": "value-access", "debug_text": BLOCK}), 9.0)
    assert isinstance(e, ev.CompileFinished)
    assert e.t == 5.0 and e.step == 2 and e.duration_s == 1.5
    assert e.graph_hash == "4e96de616eded805e04ee720abc6fa9b"
    assert e.reason.startswith("most likely user code")
    assert e.frames == ["train_loop (/home/u/train.py:88)"]
    assert e.location == "/home/u/train.py:88"  # the probe gave none: the block's user frame


def test_missing_time_takes_the_arrival_time_and_unknown_keys_are_ignored():
    e = decode_probe_line(_line({"kind": "step", "pid": 1, "step": 0, "duration_s": 0.1, "future_key": 1}), 7.5)
    assert isinstance(e, ev.StepEnded) and e.t == 7.5


def test_garbage_lines_are_parse_problems():
    for raw in (b"\xff\xfe not json\n", b"[1, 2]\n", b'{"no": "kind"}\n', b'{"kind": "warp_drive", "t": 1}\n',
                b'{"kind": "step", "t": 1}\n', b'{"kind": "step", "t": 1, "pid"' + b"x" * 100000):
        e = decode_probe_line(raw, 3.0)
        assert isinstance(e, ev.ParseProblem), raw[:40]
        assert e.source == "probe" and e.t == 3.0 and len(e.raw) <= 2000


def test_a_field_of_the_wrong_type_is_refused_before_the_reducer():
    for msg, where in (({"kind": "step", "t": "abc", "pid": 1, "step": 0, "duration_s": 0.1}, "$.t"),
                       ({"kind": "step", "t": 1.0, "pid": 1, "step": "3", "duration_s": 0.1}, "$.step"),
                       ({"kind": "probe_dropped", "t": 1.0, "pid": 1, "dropped": "many"}, "$.dropped")):
        e = decode_probe_line(_line(msg), 3.0)
        assert isinstance(e, ev.ParseProblem), msg
        assert e.error.startswith("EventDecodeError: ") and where in e.error and e.raw.startswith("{")


def test_step_lines_as_the_probe_writes_them_and_drop_reports():
    line = (b'{"kind":"step","t":5.0,"step":3,"duration_s":0.02,"data_wait_s":0.001,"compiles":0,"samples":8,'
            b'"input_shapes":[[8,64]],"executions":1,"dropped_before":4,"pid":9}\n')
    assert decode_probe_line(line, 7.0) == ev.StepEnded(t=5.0, pid=9, step=3, duration_s=0.02, samples=8,
                                                        data_wait_s=0.001, executions=1, input_shapes=[[8, 64]])
    e = decode_probe_line(_line({"kind": "probe_dropped", "t": 6.0, "pid": 9, "dropped": 4, "dropped_steps": 3,
                                 "steps": 12}), 7.0)
    assert e == ev.ProbeDropped(t=6.0, pid=9, dropped=4, dropped_steps=3, steps=12)


def test_launcher_only_and_unknown_kinds_are_refused_naming_the_kind():
    for msg in ({"kind": "run_started", "t": 1.0, "run_id": "evil", "price_per_hour": 0.0},
                {"kind": "run_finished", "t": 1.0, "exit_code": 0},
                {"kind": "warp_drive", "t": 1.0}):
        raw = _line(msg)
        e = decode_probe_line(raw, 3.0)
        assert isinstance(e, ev.ParseProblem), msg
        assert repr(msg["kind"]) in e.error and "refused" in e.error
        assert e.raw == raw.decode().strip()


def test_every_kind_the_probe_sends_is_accepted():
    import re
    from pathlib import Path

    from neurondesk.collectors import probe_messages
    package = Path(probe_messages.__file__).parent.parent / "probe" / "bootstrap" / "_neurondesk_probe"
    src = "".join(p.read_text() for p in sorted(package.rglob("*.py")))
    sent = set(re.findall(r'"kind": "([a-z_]+)"', src)) | set(re.findall(r'\{"kind":"([a-z_]+)"', src))
    assert sent and sent <= probe_messages.PROBE_KINDS


def test_a_well_formed_run_started_is_refused_too():
    raw = _line({"kind": "run_started", "t": 1.0, "run_id": "evil", "command": ["x"], "price_per_hour": 0.0})
    e = decode_probe_line(raw, 3.0)
    assert isinstance(e, ev.ParseProblem) and "'run_started'" in e.error


def test_a_compile_whose_debug_text_is_not_text_is_decoded_without_it():
    # found by benchmarks/fuzz.py: a number as debug_text raised AttributeError out of the decoder
    e = decode_probe_line(_line({"kind": "compile", "t": 5.0, "pid": 3, "source": "probe", "step": 2,
                                 "duration_s": 1.5, "trigger": "sync", "debug_text": 1.5}), 9.0)
    assert isinstance(e, ev.CompileFinished) and e.graph_hash is None


def test_a_line_nested_too_deeply_is_a_parse_problem():
    e = decode_probe_line(b'{"kind":"step","t":1,"pid":1,"step":0,"duration_s":0.1,"compiles":'
                          + b"[" * 100_000 + b"]" * 100_000 + b"}\n", 9.0)
    assert isinstance(e, ev.ParseProblem) and "nested too deeply" in e.error
