"""Neuron failures as people paste them (issue 27): device out of memory (the allocation line, the
allocation log it dumps, nrt_tensor_allocate status=4), the compiler killed by the host's OOM
killer (F137, exit -9) and version skew (runtime ↔ driver compatibility id, an undefined nrt_
symbol, a NEFF the runtime does not support). Each kind is one finding with what to do.

Fixtures in tests/data/neuron/sdk-2.34 (see its README: the runtime lines follow the Neuron
Runtime troubleshooting and device-memory pages; the F137 wording and the pasted traceback are
composed). The real run is a real neurondesk run of a script that prints a fixture to stderr."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES, neurondesk_run

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events import run_events as ev
from neurondesk.core.findings.diagnostics import diagnostics
from neurondesk.core.findings.neuron_errors import COMPILER_OOM_FIX, DEVICE_OOM_FIX, SKEW_FIX
from neurondesk.core.reduce.state import RunState

SDK = FIXTURES / "sdk-2.34"


def _feed(*paths: Path) -> tuple[list[ev.Event], RunState]:
    parser, state, events = OutputParser(), RunState(), []
    for path in paths:
        for i, line in enumerate(path.read_text().splitlines()):
            events += parser.feed("stderr", line, 100.0 + i)
    events += parser.flush(200.0)
    for e in events:
        state.apply(e)
    return events, state


def _faults(events: list[ev.Event]) -> list:
    return [e for e in events if e.kind == "neuron_fault"]


def test_device_oom_as_pasted_is_one_finding_with_size_core_log_and_what_to_do() -> None:
    events, state = _feed(SDK / "runtime-device-oom-as-pasted.log")
    faults = _faults(events)
    assert {f.fault for f in faults} == {"device-oom"}
    alloc = next(f for f in faults if f.size)
    assert (alloc.size, alloc.usage, alloc.device, alloc.core, alloc.pid) == ("172.000MB", "tensors", 0, 0, 51234)
    assert [f.mem_log for f in faults if f.mem_log] == ["/tmp/nrt_mem_log_device_0_6934a1f7.csv"]
    assert sum("status=4" in f.line for f in faults) == 2  # the runtime's line and the RuntimeError
    found = [d for d in diagnostics(state) if d.kind == "device-oom"]
    assert len(found) == 1
    assert found[0].message == ("device out of memory: failed to allocate 172.000MB of tensors on ND 0:NC 0; "
                                f"{DEVICE_OOM_FIX}; the runtime's allocation log: "
                                "/tmp/nrt_mem_log_device_0_6934a1f7.csv")
    for words in ("smaller batch or sequence", "gradient accumulation", "logical-core configuration",
                  "larger instance"):
        assert words in found[0].message


def test_an_oom_burst_of_two_ranks_lists_both_allocation_logs() -> None:
    _, state = _feed(FIXTURES / "runtime-device-oom-burst-two-ranks.log")
    assert state.parts.telemetry.faults.mem_logs == ["/tmp/nrt_mem_log_device_0_69a6a3b4.csv",
                                                     "/tmp/nrt_mem_log_device_1_69a6a3b5.csv"]
    (oom,) = [d for d in diagnostics(state) if d.kind == "device-oom"]
    assert oom.message.startswith("device out of memory: failed to allocate 2,097,152 bytes; ")
    assert oom.message.endswith("/tmp/nrt_mem_log_device_0_69a6a3b4.csv, /tmp/nrt_mem_log_device_1_69a6a3b5.csv")


def test_compiler_killed_by_the_oom_killer_is_one_finding() -> None:
    events, state = _feed(SDK / "compiler-oom-killed.log")
    lines = [f.line for f in _faults(events) if f.fault == "compiler-oom"]
    assert len(lines) == 3  # F137, Python's SIGKILL, the parallel compile's -9
    assert any("SIGKILL" in x for x in lines) and any("error code: -9" in x for x in lines)
    (finding,) = [d for d in diagnostics(state) if d.kind == "compiler-oom"]
    assert finding.message == ("the compiler (neuronx-cc) was killed by the host's out-of-memory killer (F137); "
                               + COMPILER_OOM_FIX)


def test_version_skew_names_each_mismatch_and_points_at_doctor() -> None:
    events, state = _feed(SDK / "runtime-version-skew.log")
    mismatches = [f.mismatch for f in _faults(events)]
    assert mismatches == [
        "the Neuron Runtime (compatibility id 9) is not compatible with the installed aws-neuron-dkms (the driver)",
        "undefined symbol nrt_tensor_copy: the Neuron Runtime library (libnrt) is older than the framework "
        "package that calls it",
        "the NEFF is version 2.0, this Neuron Runtime supports 1.1 (compiler newer than runtime)",
        "the NEFF uses hardware operator code 214, which this Neuron Runtime does not support",
    ]
    (finding,) = [d for d in diagnostics(state) if d.kind == "version-skew"]
    assert finding.message.startswith("Neuron version mismatch: the Neuron Runtime (compatibility id 9)")
    assert finding.message.endswith(SKEW_FIX) and "`neurondesk doctor`" in SKEW_FIX
    assert [e.code for e in state.errors][:1] == ["version-skew"]  # the runtime's error is classed as skew too


def test_ordinary_lines_and_other_errors_tell_no_fault() -> None:
    events, state = _feed(FIXTURES / "neuron-cc-failed-then-passed.log", FIXTURES / "torch-neuronx-train.log")
    assert _faults(events) == []
    assert not {"device-oom", "compiler-oom", "version-skew"} & {d.kind for d in diagnostics(state)}


def test_real_run_summary_names_the_oom_and_its_allocation_log(tmp_path: Path) -> None:
    script = tmp_path / "oom.py"
    script.write_text("import sys\n"
                      f"sys.stderr.write(open({str(SDK / 'runtime-device-oom-as-pasted.log')!r}).read())\n"
                      "sys.exit(1)\n")
    run = neurondesk_run(tmp_path, [], workload=script)
    assert run.returncode == 1, run.stderr[-2000:]
    found = [d for d in run.summary["diagnostics"] if d["kind"] == "device-oom"]
    assert len(found) == 1 and "/tmp/nrt_mem_log_device_0_6934a1f7.csv" in found[0]["message"]


def test_the_hbm_line_before_an_oom_is_its_detail_not_the_error() -> None:
    """The device-memory page prints `print_lnc_hbm_details` before `Failed to allocate`: the error
    is the allocation, the HBM line its first detail; a context line no failure follows stands alone."""
    _, state = _feed(SDK / "runtime-device-oom-as-pasted.log")
    first = state.errors[0]
    assert first.code == "device-oom" and first.message.startswith("TDRV:log_dev_mem Failed to allocate 172.000MB")
    assert first.detail[0] == "TDRV:print_lnc_hbm_details LNC size is 2. Neuron Cores using this HBM: NC 0"
    parser, lone = OutputParser(), RunState()
    for e in [*parser.feed("stderr", "2026-Nov-12 14:02:07.118402 51234:51234 ERROR  TDRV:print_lnc_hbm_details"
                                     "                   LNC size is 2. Neuron Cores using this HBM: NC 0", 1.0),
              *parser.flush(2.0)]:
        lone.apply(e)
    assert [e.message for e in lone.errors] == [
        "TDRV:print_lnc_hbm_details LNC size is 2. Neuron Cores using this HBM: NC 0"]
