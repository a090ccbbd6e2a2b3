"""Neuron outputs as pasted from trn1 / trn1n / trn2 / inf2 machines (issue 10): shapes the
documented formats do not show. Each test reads its own fixture in tests/data/neuron/."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events.run_events import CompileFinished, LogError, Notice, OutputLine


def feed_fixture(name: str, step: float = 0.01):
    """Every line of the fixture, ``step`` seconds apart; the parser's events, then its flush."""
    lines = (FIXTURES / name).read_text().splitlines()
    p = OutputParser()
    events = []
    for i, line in enumerate(lines):
        events += p.feed("stderr", line, 100.0 + i * step)
    events += p.flush(100.0 + len(lines) * step)
    assert p.problems == 0
    return lines, events


def tagged(events) -> dict[str, str | None]:
    return {e.text: e.tag for e in events if isinstance(e, OutputLine)}


def errors(events) -> list[LogError]:
    return [e for e in events if isinstance(e, LogError) and not e.continues]


def compiles(events) -> list[CompileFinished]:
    return [e for e in events if isinstance(e, CompileFinished)]


# ---------------------------------------------------------------- 1. padded pid:tid


def test_padded_pid_runtime_lines_are_errors():
    lines, events = feed_fixture("runtime-padded-pid-container.log", step=5.0)
    tags = tagged(events)
    assert [tags[ln] for ln in lines] == [None, "error", "error", None]
    oom, busy = errors(events)
    assert oom.code == "device-oom" and oom.pid == 87
    assert oom.message == "TDRV:dmem_alloc_internal Failed to alloc DEVICE memory: 2097152"
    assert busy.code == "cores-busy" and busy.pid == 112


# ---------------------------------------------------------------- 2. one failure, one error


def test_device_oom_burst_is_one_error_per_process_with_its_consequences_as_detail():
    lines, events = feed_fixture("runtime-device-oom-burst-two-ranks.log")
    assert all(tag == "error" for tag in tagged(events).values())
    first, other, later = errors(events)
    assert (first.pid, first.code) == (87, "device-oom")
    assert first.message == "TDRV:dmem_alloc_internal Failed to alloc DEVICE memory: 2097152"
    assert (other.pid, other.code) == (88, "device-oom")
    assert (later.pid, later.code) == (87, "exec-timeout")  # 35 s on: a failure of its own
    more = [e for e in events if isinstance(e, LogError) and e.continues]
    assert [e.pid for e in more] == [87, 87, 87, 87, 87, 87, 88, 88]
    glued = more[3].detail
    assert glued == ["TDRV:kbl_model_add_bundle_instance Failed to add bundle instance to model"]


def test_device_oom_burst_reduces_to_one_error_per_process():
    from neurondesk.core.reduce.log import LogReducer

    _, events = feed_fixture("runtime-device-oom-burst-two-ranks.log")
    log = LogReducer()
    for e in events:
        if isinstance(e, LogError):
            log.on_log_error(e)
    assert [(e.pid, e.code) for e in log.errors] == [(87, "device-oom"), (88, "device-oom"), (87, "exec-timeout")]
    assert log.errors[0].detail[0].startswith("TDRV:dml_dump Wrote nrt memory alloc debug info")
    assert log.errors[0].detail[-1] == "NRT:nrt_load Failed to load NEFF (status 4)"
    assert len(log.errors[0].detail) == 6 and len(log.errors[1].detail) == 2


def test_a_consequence_whose_first_error_was_not_seen_is_an_error_of_its_own():
    from neurondesk.core.reduce.log import LogReducer

    log = LogReducer()
    log.on_log_error(LogError(t=1.0, source="neuron-runtime", message="NRT:nrt_load x", pid=5, continues=True,
                              detail=["NRT:nrt_load x"]))
    assert len(log.errors) == 1 and not log.errors[0].continues


# ---------------------------------------------------------------- 3. a cached failure is one event


def test_cached_failed_neff_and_its_continuation_are_one_compile_and_one_error():
    lines, events = feed_fixture("cache-failed-neff-with-continuation.log")
    (fin,) = compiles(events)
    assert fin.cache == "failed" and not fin.ok and fin.graph_hash == "MODULE_9083126620417752139+e30acd3a"
    tags = tagged(events)
    assert [tags[ln] for ln in lines] == ["compile", "error", "error", None]
    (err,) = errors(events)
    assert err.pid == 5123 and "cached failed neff" in err.message
    (more,) = [e for e in events if isinstance(e, LogError) and e.continues]
    assert more.pid == 5123 and more.code == "NCC_EVRF009"
    assert more.detail == [more.message] and more.message.startswith("[NCC_EVRF009] Estimated peak HBM usage")

    from neurondesk.core.reduce.log import LogReducer

    log = LogReducer()
    for e in events:
        if isinstance(e, LogError):
            log.on_log_error(e)
    (one,) = log.errors
    assert one.code == "NCC_EVRF009" and one.detail == [more.message]


def test_cached_failure_quoted_again_by_a_traceback_is_not_another_compile():
    lines = (FIXTURES / "cache-failed-neff-with-continuation.log").read_text().splitlines()
    p = OutputParser()
    events = []
    for i, line in enumerate([*lines[:3], "RuntimeError:" + lines[2]]):
        events += p.feed("stderr", line, float(i))
    assert len(compiles(events)) == 1
    assert len(errors(events)) == 1 or all(e.source != "neuron-cc" for e in errors(events)[1:])


# ---------------------------------------------------------------- 4. compiles outside the wrapper


def test_export_tool_compile_blocks_are_compiles_with_name_status_and_printed_time():
    lines, events = feed_fixture("optimum-neuron-export-compile-blocks.log")
    assert [(c.name, c.duration_s, c.ok, c.source) for c in compiles(events)] == [
        ("text_encoder", 41.27, True, "neuron-log"),
        ("unet", 503.18, True, "neuron-log"),
        ("vae_decoder", 68.45, True, "neuron-log"),
    ]
    (check,) = [e for e in events if isinstance(e, Notice)]
    assert check.level == "info" and "612.90" in check.message
    tags = tagged(events)
    assert tags["[Total compilation Time] 612.90 seconds."] == "compile"
    assert tags["***** Compiling unet *****"] == "compile" and tags["Compiler status PASS"] == "compile"
    assert not errors(events)


def test_export_tool_total_that_does_not_add_up_is_a_warning():
    lines = (FIXTURES / "optimum-neuron-export-compile-blocks.log").read_text().splitlines()
    p = OutputParser()
    events = []
    for i, line in enumerate(lines[6:]):  # the text_encoder block was not seen
        events += p.feed("stdout", line, float(i))
    assert len(compiles(events)) == 2
    (check,) = [e for e in events if isinstance(e, Notice)]
    assert check.level == "warn" and "571.63 s" in check.message


def test_export_tool_blocks_reduce_to_compiles_even_when_a_probe_watches():
    from neurondesk.core.events.run_events import ProcessAttached, RunStarted
    from neurondesk.core.reduce.state import RunState

    _, events = feed_fixture("optimum-neuron-export-compile-blocks.log")
    state = RunState()
    state.apply(RunStarted(t=99.0, run_id="r", command=["optimum-cli"]))
    state.apply(ProcessAttached(t=99.5, pid=10))
    for e in events:
        state.apply(e)
    assert [(c.name, c.cause, c.ok) for c in state.compiles] == [
        ("text_encoder", "first", True), ("unet", "first", True), ("vae_decoder", "first", True)]
    assert state.compile_total_s == pytest.approx(612.9)


def test_a_block_around_wrapper_compiles_is_not_counted_twice():
    call = ("2026-03-01 09:00:00.000456: 777 [INFO]: Call compiler with cmd: neuronx-cc compile --framework=XLA "
            "/tmp/w/model.MODULE_5553611093427716432+d41d8cd9.hlo_module.pb --output /tmp/w/model.neff")
    p = OutputParser()
    events = []
    for t, line in [(0.0, "***** Compiling model *****"), (1.0, call), (30.0, "Compiler status PASS"),
                    (30.5, "[Compilation Time] 30.50 seconds."), (31.0, "[Total compilation Time] 30.50 seconds.")]:
        events += p.feed("stdout", line, t)
    (fin,) = compiles(events)
    assert fin.graph_hash == "MODULE_5553611093427716432+d41d8cd9" and fin.name is None
    assert [e.level for e in events if isinstance(e, Notice)] == ["info"]
    from neurondesk.core.reduce.state import RunState

    state = RunState()
    for e in events:
        state.apply(e)
    assert len(state.compiles) == 1 and not state.compile_open


# ---------------------------------------------------------------- 5. failures are visible


def _state(events):
    from neurondesk.core.events.run_events import RunStarted
    from neurondesk.core.reduce.state import RunState

    state = RunState()
    state.apply(RunStarted(t=99.0, run_id="r", command=["python", "train.py"]))
    for e in events:
        state.apply(e)
    return state


def test_a_failed_compile_has_a_status_and_is_not_the_first_compile():
    _, events = feed_fixture("neuron-cc-failed-then-passed.log", step=0.4)
    state = _state(events)
    assert [(c.status, c.cache) for c in state.compiles] == [("failed", "miss"), ("ok", "miss")]
    assert [c.cause for c in state.compiles] == ["first", "first"]
    assert state.compiles[0].duration_s == pytest.approx(0.4)
    assert state.first_compile_s == pytest.approx(0.8)  # the successful one (2 lines of 0.4 s)
    (err,) = state.errors
    assert err.code == "NCC_EVRF024"


def test_compiler_status_fail_of_a_direct_compile_is_a_failed_compile_and_one_error():
    lines, events = feed_fixture("neuronx-cc-direct-status-fail.log")
    state = _state(events)
    assert [(c.name, c.status) for c in state.compiles] == [("text_encoder", "ok"), ("vae_encoder", "failed")]
    assert state.compiles[1].error.startswith("[NCC_EXTP004] Number of instructions")
    assert [e.code for e in state.errors if e.source != "python"] == ["NCC_EXTP004"]  # python: the traceback
    assert tagged(events)["Compiler status FAIL"] == "error"


def test_cached_failure_status():
    _, events = feed_fixture("cache-failed-neff-with-continuation.log")
    (c,) = _state(events).compiles
    assert c.status == "cached failure" and c.as_dict()["status"] == "cached failure"


def test_summary_md_and_text_list_the_errors():
    from neurondesk.core.summary.build import run_summary
    from neurondesk.reports.summary_writer import to_markdown, to_text_table

    _, events = feed_fixture("neuron-cc-failed-then-passed.log", step=0.4)
    s = run_summary(_state(events), now=110.0)
    assert s.error_count == 1 and s.first_errors[0].code == "NCC_EVRF024"
    md = to_markdown(s)
    assert "| errors | 1: NCC_EVRF024 (neuron-cc): Output tensor" in md
    assert '## Errors\n\n- NCC_EVRF024 (neuron-cc): Output tensor "output0" is not used' in md
    assert "| status |" in md and "| failed |" in md
    text = to_text_table(s)
    assert "errors" in text and "NCC_EVRF024" in text


def test_compiler_status_fail_without_a_compiler_message_is_the_error():
    p = OutputParser()
    events = []
    for t, line in [(0.0, "***** Compiling unet *****"), (0.4, "Compiler status FAIL")]:
        events += p.feed("stdout", line, t)
    (fin,) = compiles(events)
    assert not fin.ok and fin.duration_s == 0.4 and fin.name == "unet"
    (err,) = errors(events)
    assert err.message == "unet: Compiler status FAIL"


# ---------------------------------------------------------------- malformed variants never raise


def test_malformed_variants_of_these_shapes_are_read_without_a_problem():
    p = OutputParser()
    events = []
    for i, line in enumerate([
        "***** Compiling  *****",
        "[Compilation Time] seconds.",
        "[Compilation Time] 99999999999999999999999999999999999999999 seconds.",
        "[Total compilation Time] . seconds.",
        "Compiler status",
        "2026-Xyz-03 09:12:44.501233    87:87    ERROR  TDRV:",
        "2026-Mar-99 99:99:99.9    87:87    ERROR  TDRV:dmem_alloc_internalFailed",
        " Failed compilation with [",
        "Got a cached failed neff at",
    ]):
        events += p.feed("stderr", line, float(i))
    events += p.flush(20.0)
    assert p.problems == 0


def test_a_retry_after_a_cached_failure_that_fails_again_is_a_compile_of_its_own():
    lines = (FIXTURES / "cache-failed-neff-with-continuation.log").read_text().splitlines()
    cached, failure = lines[1], lines[2].strip()
    call = ("2026-03-03 11:21:00.000001:  5123  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc "
            "compile --framework=XLA /tmp/w/model.MODULE_9083126620417752139+e30acd3a.hlo_module.pb")
    p = OutputParser()
    events = []
    for t, line in [(0.0, cached), (60.0, call), (70.0, "2026-03-03 11:21:10.000001:  5123  ERROR "
                                                         "||NEURON_CC_WRAPPER||: " + failure)]:
        events += p.feed("stderr", line, t)
    assert [(c.cache, c.duration_s) for c in compiles(events)] == [("failed", 0.0), ("miss", 10.0)]
