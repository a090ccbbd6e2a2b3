"""Neuron cc-wrapper / cache / parallel-compile / runtime lines (NEURON-FORMATS §4)."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events.run_events import CompileFinished, CompileStarted, LogError, Notice, OutputLine

TRAIN_LOG = FIXTURES / "torch-neuronx-train.log"

H1 = "MODULE_12338015013531573548+00875417"


def run(lines: list[tuple[float, str]], flush_at: float | None = None):
    p = OutputParser()
    events = []
    for t, line in lines:
        events += p.feed("stderr", line, t)
    if flush_at is not None:
        events += p.flush(flush_at)
    assert p.problems == 0
    return events


def of(events, cls, **match):
    return [e for e in events if isinstance(e, cls) and all(getattr(e, k) == v for k, v in match.items())]


def tags(events) -> list[str | None]:
    return [e.tag for e in events if isinstance(e, OutputLine)]


def neuron(events, cls):
    return [e for e in of(events, cls) if e.source == "neuron-log"]


# ---------------------------------------------------------------- the shipped fixture


def test_fixture_train_log_compiles_and_cache_hits():
    lines = TRAIN_LOG.read_text().splitlines()
    events = run([(float(i), line) for i, line in enumerate(lines)], flush_at=len(lines))
    started = neuron(events, CompileStarted)
    finished = neuron(events, CompileFinished)
    # graphs B, C and E are compiled by rank 0 (pid 41872); A, B, C, E are cache hits on rank 1
    assert [s.graph_hash for s in started] == [
        "MODULE_15920384471106358219+4a9f8c1e",
        "MODULE_4402918376541190035+4a9f8c1e",
        "MODULE_1150283740015298716+4a9f8c1e",
    ]
    assert all(s.pid == 41872 for s in started)
    misses = [f for f in finished if f.cache == "miss"]
    hits = [f for f in finished if f.cache == "hit"]
    assert [f.graph_hash for f in misses] == [s.graph_hash for s in started]
    assert all(f.ok and f.duration_s is not None and f.duration_s > 0 for f in misses)
    # the duration is measured from the 'Call compiler' line's arrival to 'Compiler status PASS'
    call_i = next(i for i, ln in enumerate(lines) if "MODULE_15920384471106358219" in ln and "Call compiler" in ln)
    pass_i = next(i for i, ln in enumerate(lines) if i > call_i and ln.startswith("Compiler status PASS"))
    assert misses[0].duration_s == pass_i - call_i
    assert len(hits) == 5
    assert hits[0].graph_hash == "MODULE_9467241703328671123+4a9f8c1e" and hits[0].pid == 41872
    assert {h.pid for h in hits[1:]} == {41873}
    assert not of(events, LogError)


def test_fixture_train_log_tags():
    lines = TRAIN_LOG.read_text().splitlines()
    p = OutputParser()
    tagged = {}
    for i, line in enumerate(lines):
        out = p.feed("stderr", line, float(i))
        assert isinstance(out[0], OutputLine) and out[0].text == line
        tagged[line] = out[0].tag
    assert tagged["Compiler status PASS"] == "compile"
    assert tagged["...............................Completed run_backend_driver."] == "compile"
    noise = [ln for ln, tag in tagged.items() if tag == "noise"]
    assert any("CCOM WARN NET/OFI Failed to initialize sendrecv protocol" in ln for ln in noise)
    assert any("aws-ofi-nccl initialization failed" in ln for ln in noise)
    assert any("Use PJRT C-API" in ln for ln in noise)
    assert any("DeprecationWarning: Use torch_xla.device instead" in ln for ln in noise)
    assert "  device = xm.xla_device()" in noise  # the source line the warnings module echoes
    assert all(tag is None for ln, tag in tagged.items() if ln.startswith("[rank 0] step"))
    assert "error" not in tagged.values()


# ---------------------------------------------------------------- the three prefix generations


CMD = ("neuronx-cc compile --framework=XLA /tmp/ubuntu/neuroncc_compile_workdir/1f/model.{h}.hlo_module.pb "
       "--output /tmp/ubuntu/neuroncc_compile_workdir/1f/model.{h}.neff --target=trn1 --verbose=35")


@pytest.mark.parametrize("head", [
    "2024-08-15 14:01:02.000011:  1320  INFO ||NEURON_CC_WRAPPER||: ",  # 2.x with pid
    "2023-02-01 10:00:00.000123: INFO ||NCC_WRAPPER||: ",  # early 2.x, no pid
    "2026-03-01 09:00:00.000456: 1320 [INFO]: ",  # newest
])
def test_compile_miss_is_timed_whatever_the_prefix(head):
    events = run([
        (100.0, head + "Call compiler with cmd: " + CMD.format(h=H1)),
        (101.0, "......"),
        (160.5, "Compiler status PASS"),
    ])
    (start,) = of(events, CompileStarted)
    (fin,) = of(events, CompileFinished)
    assert start.graph_hash == fin.graph_hash == H1
    assert start.source == fin.source == "neuron-log"
    assert fin.cache == "miss" and fin.ok and fin.duration_s == pytest.approx(60.5)
    assert start.pid == (None if "NCC_WRAPPER" in head else 1320)
    assert tags(events) == ["compile", "compile", "compile"]


def test_old_python_list_command_and_hlo_pb_input():
    cmd = ("['neuronx-cc', '--target=trn1', 'compile', '--framework', 'XLA', "
           "'/tmp/no-user/neuroncc_compile_workdir/ab/model.MODULE_5553611093427716432+d41d8cd9.hlo.pb', "
           "'--output', '/tmp/no-user/neuroncc_compile_workdir/ab/model.MODULE_5553611093427716432+d41d8cd9.neff', "
           "'--verbose=35']")
    events = run([
        (1.0, "2023-12-01 10:00:00.000123: INFO ||NCC_WRAPPER||: Call compiler with cmd: " + cmd),
        (9.0, "Compiler status PASS"),
    ])
    (fin,) = of(events, CompileFinished)
    assert fin.graph_hash == "MODULE_5553611093427716432+d41d8cd9" and fin.duration_s == 8.0


def test_newest_form_with_hex_module_and_completion_line_counts_once():
    h = "MODULE_56f0d314fda2b6e1e336+617f6939"
    events = run([
        (10.0, "2026-03-01 09:00:00.000456: 777 [INFO]: Call compiler with cmd: " + CMD.format(h=h)),
        (40.0, "Compiler status PASS"),
        (40.1, f"2026-03-01 09:00:30.000001: 777 [INFO]: Compilation Successfully Completed for model.{h}.hlo_module.pb"),
    ])
    (fin,) = of(events, CompileFinished)
    assert fin.graph_hash == h and fin.pid == 777 and fin.duration_s == 30.0


def test_completion_line_closes_the_right_compile_by_hash():
    h2 = "MODULE_7c055c4ac6e2851a63bb+7d89256e"
    head = "2026-03-01 09:00:00.000456: 777 [INFO]: "
    events = run([
        (0.0, head + "Call compiler with cmd: " + CMD.format(h=H1)),
        (5.0, head + "Call compiler with cmd: " + CMD.format(h=h2)),
        (20.0, head + f"Compilation Successfully Completed for model.{h2}.hlo_module.pb"),
        (50.0, head + f"Compilation Successfully Completed for model.{H1}.hlo_module.pb"),
    ])
    assert [(f.graph_hash, f.duration_s) for f in of(events, CompileFinished)] == [(h2, 15.0), (H1, 50.0)]


def test_completion_without_start_line_still_counts_as_a_compile():
    h = "MODULE_7c055c4ac6e2851a63bb+7d89256e"
    events = run([(3.0, (f"2026-03-01 09:00:00.000456: 9 [INFO]: Compilation Successfully Completed for "
                        f"model.{h}.hlo_module.pb"))])
    (fin,) = of(events, CompileFinished)
    assert fin.graph_hash == h and fin.cache == "miss" and fin.duration_s is None


@pytest.mark.parametrize("head", [
    "2025-11-18 10:02:19.000671:  41872  INFO ||NEURON_CC_WRAPPER||: ",
    "2026-03-01 09:00:00.000456: 41872 [INFO]: ",
])
def test_cache_hit(head):
    path = f"/var/tmp/neuron-compile-cache/neuronxcc-2.21.33363.0+82129205/{H1}/model.neff"
    events = run([
        (5.0, head.replace("NEURON_CC_WRAPPER", "NEURON_CACHE") + "Compile cache path: /var/tmp/neuron-compile-cache"),
        (5.25, head + f"Using a cached neff at {path}. Exiting with a successfully compiled graph."),
    ])
    (fin,) = of(events, CompileFinished)
    assert fin.cache == "hit" and fin.ok and fin.graph_hash == H1 and fin.pid == 41872
    assert fin.duration_s == pytest.approx(0.25)  # lookup time, from the cache-path line of that pid
    assert not of(events, CompileStarted)


def test_cache_hit_without_lookup_line_has_no_duration():
    events = run([(1.0, f"INFO ||NEURON_CC_WRAPPER||: Using a cached neff at /c/neuronxcc-2.8/{H1}/model.neff.")])
    assert of(events, CompileFinished)[0].duration_s is None


# ---------------------------------------------------------------- failures


FAILED = (
    "2024-08-15 14:01:20.000062:  1320  ERROR ||NEURON_CC_WRAPPER||: Failed compilation with ['neuronx-cc', "
    "'compile', '--target=trn1', '--framework=XLA', '/tmp/ubuntu/neuroncc_compile_workdir/9/model.{h}.hlo_module.pb', "
    "'--output', '/tmp/ubuntu/neuroncc_compile_workdir/9/model.{h}.neff', '--auto-cast', 'none', '--verbose=35']: "
    "2024-08-15T14:01:19Z {code} {msg}"
)


def test_failed_compilation_closes_the_compile_and_reports_the_code():
    events = run([
        (0.0, "2024-08-15 14:01:02.000011:  1320  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: "
              + CMD.format(h=H1)),
        (18.0, FAILED.format(h=H1, code="[NCC_EOOM002]", msg="The combined memory needed for the model's "
                             "activation tensors exceeds the high-bandwidth memory limit.")),
    ])
    (fin,) = of(events, CompileFinished)
    assert not fin.ok and fin.graph_hash == H1 and fin.duration_s == 18.0 and fin.cache == "miss"
    assert fin.error.startswith("[NCC_EOOM002] The combined memory")
    (err,) = of(events, LogError)
    assert err.code == "NCC_EOOM002" and err.source == "neuron-cc" and "high-bandwidth" in err.message
    assert tags(events)[-1] == "error"


@pytest.mark.parametrize("code,expected", [
    ("[TEN404] (aten__add_add.31237)", "TEN404"),
    ("[F134]", "F134"),
    ("[XTP002]", "XTP002"),
    ("[INTERNAL_ERROR] [NCC_ITEN406]", "NCC_ITEN406"),
    ("Estimated peak HBM usage (18.2GB) exceeds 16GB.", None),
])
def test_failed_compilation_code_forms(code, expected):
    events = run([(1.0, FAILED.format(h=H1, code=code, msg="Internal tensorizer error"))])
    assert of(events, LogError)[0].code == expected
    assert not of(events, CompileFinished)[0].ok


def test_the_same_failure_quoted_twice_is_reported_once():
    line = FAILED.format(h=H1, code="[TEN404]", msg="x")
    events = run([(1.0, line), (2.0, line)])
    assert len(of(events, LogError)) == 1 and len(of(events, CompileFinished)) == 1


def test_a_retried_compile_that_fails_again_is_reported_again():
    call = "2024-08-15 14:01:02.000011:  1320  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: " + CMD.format(h=H1)
    line = FAILED.format(h=H1, code="[TEN404]", msg="x")
    events = run([(1.0, call), (2.0, line), (10.0, call), (15.0, line)])
    assert [(f.ok, f.duration_s) for f in of(events, CompileFinished)] == [(False, 1.0), (False, 5.0)]
    assert len(of(events, LogError)) == 2


@pytest.mark.parametrize("line", [
    (f"2024-08-16 09:00:00.000001:  2000  INFO ||NEURON_CC_WRAPPER||: Got a cached failed neff at "
    f"/var/tmp/neuron-compile-cache/neuronxcc-2.14.227.0+2d4f85be/{H1}/model.neff. Will skip compilation, "
    f"please set --retry_failed_compilation for recompilation."),
    (f"2022-11-02 10:00:00.000001: ERROR ||NCC_WRAPPER||: There was a compilation error for this graph in the "
    f"previous run. Returning with the errored graph at /var/tmp/neuron-compile-cache/USER_neuroncc-2.2/{H1}/"
    f"model.neff To fix the error: ..."),
])
def test_cached_failure(line):
    events = run([(1.0, line)])
    (fin,) = of(events, CompileFinished)
    assert fin.cache == "failed" and not fin.ok and fin.graph_hash == H1
    assert tags(events) == ["error"]


def test_compile_still_open_at_the_end_is_reported_unfinished():
    events = run([(1.0, "2024-08-15 14:01:02.000011:  1320  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: "
                        + CMD.format(h=H1))], flush_at=31.0)
    (fin,) = of(events, CompileFinished)
    assert not fin.ok and fin.duration_s == 30.0 and "ended" in fin.error


def test_truncated_call_line_still_starts_a_compile():
    events = run([
        (1.0, "2024-08-15 14:01:02.000011:  1320  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc co"),
        (4.0, "Compiler status PASS"),
    ])
    assert of(events, CompileStarted)[0].graph_hash is None
    (fin,) = of(events, CompileFinished)
    assert fin.graph_hash is None and fin.duration_s == 3.0


# ---------------------------------------------------------------- neuron_parallel_compile


def test_parallel_compile_progress_notices():
    events = run([
        (1.0, ("2024-05-01 10:00:00.000001:  500  INFO ||NEURON_PARALLEL_COMPILE||: Running trial run (add option "
              "to terminate trial run early; also ignore trial run's generated outputs, i.e. loss, checkpoints)")),
        (2.0, (f"2024-05-01 10:00:01.000001:  500  INFO ||NEURON_CC_WRAPPER||: Extracting graphs (/var/tmp/c/"
              f"neuronxcc-2.13/{H1}/model.hlo.pb) for ahead-of-time parallel compilation. No compilation was done.")),
        (3.0, ("2024-05-01 10:00:02.000001:  500  INFO ||NEURON_CACHE||: Current remaining items are 5, locked are 2, "
              "failed are 0, done are 3, total is 10")),
        (4.0, ("2026-03-01 09:00:00.000456: 500 [INFO]: Current remaining items are 0, locked are 0, failed are 1, "
              "done are 9, total is 10")),
        (5.0, "INFO: Total graphs: 10"),
        (6.0, "INFO: Total successful compilations: 9"),
        (7.0, "INFO: Total failed compilations: 1"),
    ])
    notes = of(events, Notice)
    assert "graph MODULE_12338015013531573548+00875417 extracted" in notes[0].message
    assert notes[1].message == "parallel compile: 3/10 done, 5 remaining, 2 locked, 0 failed"
    assert notes[1].level == "info" and notes[2].level == "warn"  # one failed
    assert [n.message for n in notes[3:]] == [
        "parallel compile: total graphs: 10",
        "parallel compile: total successful compilations: 9",
        "parallel compile: total failed compilations: 1",
    ]
    assert notes[-1].level == "warn"
    assert not of(events, CompileFinished) and not of(events, CompileStarted)  # extraction is not a compile


def test_parallel_compile_host_oom_is_an_error():
    events = run([(1.0, ("2023-06-01 10:00:00.000001: ERROR ||PARALLEL_COMPILE||: parallel compilation with "
                        "neuronx-cc exited with error.Received error code: -9"))])
    (err,) = of(events, LogError)
    assert "Received error code: -9" in err.message and tags(events) == ["error"]


# ---------------------------------------------------------------- runtime and compiler logs


def test_runtime_device_oom_reported_once_with_its_dump_tagged():
    events = run([
        (1.0, ("2024-Nov-20 09:28:39.0955 12345:12400 ERROR  TDRV:dmem_alloc_internal   Failed to alloc DEVICE "
              "memory: 180355072")),
        (1.0, ("2024-Nov-20 09:28:39.0956 12345:12400 ERROR  TDRV:log_dev_mem   Failed to allocate 172.000MB "
              "(usage: tensors) on ND 0:NC 0, current utilization:")),
        (1.0, "\t* total: 15.855GB"),
        (1.0, "\t* tensors: 12.104GB"),
        (1.0, ("2024-Nov-20 09:28:39.0957 12345:12400 ERROR  TDRV:tensor_allocate   Failed to allocate 180355072 "
              "bytes on DEVICE for tensor UNKNOWN.")),
        (2.0, "step 3 loss 2.5"),
    ])
    (err,) = of(events, LogError, continues=False)
    assert err.code == "device-oom" and err.source == "neuron-runtime"
    assert err.message == "TDRV:dmem_alloc_internal Failed to alloc DEVICE memory: 180355072"
    assert [e.detail[0].split()[0] for e in of(events, LogError, continues=True)] == [
        "TDRV:log_dev_mem", "TDRV:tensor_allocate"]  # the same failure's consequences
    assert tags(events) == ["error"] * 5 + [None]


@pytest.mark.parametrize("line,code", [
    (("2023-Jan-09 20:27:41.0593 15042:15042 ERROR  NRT:nrt_allocate_neuron_cores   NeuronCore(s) not available - "
     "Requested:nc1-nc1 Available:0"), "cores-busy"),
    (("2023-Jan-09 20:27:41.059312 15042:15042 ERROR  NRT:nrt_init  Unable to determine Neuron Driver version. "
     "Please check aws-neuron-dkms package is installed."), "driver"),
    (("2023-Jan-09 20:27:41.0593 15042:15042 ERROR  TDRV:exec_request_process_errors  [ND 1][NC 0] execution "
     "timeout (30000 ms) on model /tmp/x.neff"), "exec-timeout"),
    (("2023-Jan-09 20:27:41.0593 15042:15042 ERROR  ENC:enc_init_comm  [rank 0] failed (2) to init a collective "
     "algorithm for provided replica group."), "collectives"),
])
def test_runtime_errors(line, code):
    events = run([(1.0, line)])
    (err,) = of(events, LogError)
    assert err.code == code and tags(events) == ["error"]


def test_runtime_info_lines_are_not_errors():
    events = run([(1.0, "2023-Jan-09 20:27:41.0593 15042:15042 INFO  NRT:nrt_init  Neuron runtime started")])
    assert not of(events, LogError) and tags(events) == [None]


def test_internal_compiler_error_banner():
    head = "2024-01-10T10:00:00Z ERROR 4242 [neuronx-cc]: "
    events = run([(1.0, head + "***************************************************************"),
                  (1.0, head + " An Internal Compiler Error has occurred"),
                  (1.0, head + "Error message:  list index out of range"),
                  (1.0, head + "Error class:    IndexError")])
    (err,) = of(events, LogError)
    assert err.source == "neuronx-cc" and err.message == "internal compiler error: list index out of range"
    assert tags(events) == ["error"] * 4


def test_old_compiler_log_form_warning_is_compile_not_error():
    events = run([(1.0, "02/17/2023 04:18:15 PM WARNING 57168 [StaticProfiler]: too many instructions")])
    assert tags(events) == ["compile"] and not of(events, LogError)


def test_noise_variants():
    events = run([
        (1.0, ("2025-Nov-18 10:02:14.0517 41872:41921 [0] int nccl_net_ofi_create_plugin(nccl_net_ofi_plugin_t**)"
              ":213 CCOM WARN NET/OFI Failed to initialize rdma protocol")),
        (1.0, "nrtucode: internal error: 3 object(s) leaked, improper teardown"),
        (1.0, "OFI plugin initNet() failed is EFA enabled?"),
        (1.0, "  this indented line follows no warning"),
    ])
    assert tags(events) == ["noise", "noise", "noise", None]
