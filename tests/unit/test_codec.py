"""The event codec: every kind in one registry, typed round trips, refusal of wrong field types,
and journals recorded before the typed device records still replay."""

from __future__ import annotations

import inspect
import json
import math
import subprocess
import sys

import pytest
from conftest import DATA, REPO

from neurondesk.core.events import attempt_events as att
from neurondesk.core.events import checkpoint_events as ckpt
from neurondesk.core.events import codec
from neurondesk.core.events import device_events as dev
from neurondesk.core.events import neff_events as nf
from neurondesk.core.events import price_events as price
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import EventDecodeError, decode_event_line, encode_event, event_from_dict
from neurondesk.core.events.registry import EVENT_CLASSES, EVENT_TYPES
from neurondesk.core.reduce.state import RunState
from neurondesk.store.journal import read_journal

# the event codec under the newest msgspec too (make test-latest)
pytestmark = pytest.mark.latest

JOURNALS = DATA / "journals"

SAMPLES: list[ev.Event] = [
    ev.RunStarted(t=1.0, run_id="r", command=["python", "t.py"], price_per_hour=1.34375, steps_requested=9),
    price.PriceResolved(t=1.05, instance_type="trn1.2xlarge", price_per_hour=1.34375,
                        source="bundled table: VAN-2601 (2026-01-21), us-east-1"),
    ev.ProcessAttached(t=1.1, pid=7, ppid=1, rank=0, argv=["t.py"], torch_version="2.9.0",
                       flight_recorder={"TORCH_FR_BUFFER_SIZE": "2000"}),
    ev.CollectiveBlocked(t=1.12, op="gloo:all_reduce", seq=412, group="default_pg", state="scheduled",
                         shapes="Float [4]", ranks=[0, 2], never_entered=[1], last=[411], words="n: ..."),
    ev.ProcessFailed(t=1.15, pid=7, error="RuntimeError: boom", step=3, traceback=["Traceback ...", "RuntimeError: boom"]),
    ev.RankExited(t=1.16, rank=2, local_rank=0, exit_code=-9, pid=8, signal="SIGKILL", host="trn-01", root_cause=True),
    att.StepResumed(t=1.17, pid=8, step=50),
    ev.DeviceSeen(t=1.2, pid=7, device_kind="xla-cpu", device_name="xla:0", precision="bf16"),
    ev.WorkloadConfig(t=1.3, values={"batch_size": 8, "lr": 0.001, "name": "demo", "nested": {"a": [1, 2]}}),
    ev.StepEnded(t=2.0, pid=7, step=0, duration_s=0.5, samples=8, tokens=512, executions=1,
                 input_shapes=[[8, 64]]),
    ev.StepBatch(t=2.02, pid=7, step=1, ts=[2.01, 2.02], duration_s=[0.01, 0.01], data_wait_s=[0.0, 0.001],
                 samples=[8, 8], presync_s=[0.002, 0.003], input_shapes=[[8, 64]]),
    ev.EvalPhase(t=2.05, pid=7, step=1, duration_s=0.25, batches=20, samples=640, compiles=1, executions=20),
    ev.EvalProgress(t=2.04, pid=7, step=1, batches=12, duration_s=1.0),
    ev.GraphExecuted(t=2.1, pid=7, step=1, trigger="value-access", location="t.py:9"),
    ev.CompileStarted(t=2.2, source="probe", pid=7, step=1),
    ev.CompileFinished(t=2.3, source="probe", duration_s=1.5, pid=7, step=1, frames=["t.py:9"],
                       input_shapes=[[8, 64]]),
    ev.DynamoRecompile(t=2.4, reason="tensor 'x' size mismatch at index 1", function="f", pid=7),
    ev.GraphBreak(t=2.5, reason="Tensor.item()", location="t.py:12"),
    ev.LossReported(t=2.6, value=2.5, step=3),
    ev.ThroughputReported(t=2.65, value=18.4, unit="samples/s", line="step: 10, loss: 5.76, rate: 18.4"),
    ev.ProbeDropped(t=2.7, pid=7, dropped=12, dropped_steps=4, steps=40),
    ev.OutputLine(t=2.8, stream="stderr", text="naïve ✓", tag="noise"),
    ev.LogError(t=2.9, source="python", message="RuntimeError: boom"),
    ev.ParseProblem(t=3.0, source="neuron-monitor", raw="{", error="not JSON"),
    ev.Notice(t=3.1, level="warn", message="probe fell behind"),
    ev.RunFinished(t=3.2, exit_code=1, signal="SIGINT", stderr_tail=["Traceback"]),
    dev.CgroupMemory(t=4.45, pid=9, path="/job-7", version=2, limit_bytes=64 << 20, limit_path="/job-7",
                     usage_bytes=1 << 20, peak_bytes=64 << 20, oom_kills=1, limit_hits=12, host_oom_kills=1, final=True),
    dev.DiskSample(t=4.6, filesystems=[dev.FsReading(holds=["run folder", "compile cache"], path="/runs/r",
                                                     free_bytes=5 << 30, total_bytes=100 << 30, device=2049)],
                   errors=["compile cache /x: Permission denied"]),
    nf.NeffCompiles(t=4.8, pid=9, step=20, count=17, duration_s=0.7, graphs=1, phase="train",
                    input_shapes=[[8, 16]], disk_hits=0, disk_misses=17),
    nf.NeffCacheTotals(t=4.9, pid=9, step=0, compiles=19, compile_s=0.2, memory_hits=500, memory_misses=19,
                       disk_hits=0, disk_misses=19, at_exit=True),
    nf.NeffCacheLog(t=5.0, path="/r/torchneuron.log", misses=17, stores=17, hits=2, relayed=1, keys=36,
                    miss_ends=[120, 240], read_to=300),
    nf.NeffLogMark(t=5.05, pid=9, step=20, size=300, phase="train", input_shapes=[[8, 16]]),
    nf.NeuronDeviceMemory(t=5.1, pid=9, step=20, device=0, allocated=1 << 20, allocated_peak=2 << 20, reserved=4 << 20,
                          reserved_peak=8 << 20, active=1 << 20, active_peak=2 << 20, alloc_retries=0, ooms=0,
                          capacity=24 << 30, source="torch_neuronx.memory"),
    ev.OutputNotStored(t=4.7, stream="stdout", lost_bytes=4_200_000, pending_bytes=12, reason="disk full (ENOSPC)",
                       first_t=4.65),
    ckpt.CheckpointOp(t=5.1, pid=9, op="save", api="dcp.async_save", duration_s=0.25, step=100, rank=1,
                      bytes=None, pending=True),
    ckpt.CheckpointOp(t=5.2, pid=9, op="save", api="torch.save", duration_s=0.5, step=100, rank=0, bytes=None,
                      ok=False, error="OSError: [Errno 28] No space left on device"),
    ckpt.LongCollective(t=5.3, pid=10, op="barrier", duration_s=0.97, step=100, rank=1),
    dev.DeviceInventory(t=4.0, neuron=dev.NeuronInventory(
        devices=[dev.NeuronDevice(index=0, nc_count=2, core_ids=[0, 1],
                                  processes=[dev.NeuronProcess(pid=9, command="python")])], source="json"),
        gpus=[dev.GpuReading(index=0, name="H100", util_gpu=50.0)], cpu=dev.CpuInfo(model="EPYC", logical_cores=8)),
    dev.NodeHealthSample(t=4.6, source="neuron-observer http://127.0.0.1:7001/metrics",
                         counters={"efa_retransmits": 412.0}, names={"efa_retransmits": ["neuron_efa_retrans_pkts"]}),
    dev.NeuronProfileCapture(t=4.07, folder="/r/neuron-profile", open_command="neuron-explorer view -d /r/neuron-profile",
                             torch_profiler_at="train.py:3"),
    dev.NeuronFault(t=4.06, fault="device-oom", line="Failed to allocate 172.000MB", pid=9, size="172.000MB",
                    usage="tensors", device=0, core=0, mem_log="/tmp/nrt_mem_log_device_0_1.csv"),
    dev.NeuronGraphStat(t=4.05, path="/r/metric_table_graph_stats_rank0.csv", row=1, rank=0, graph_id="3f2a",
                        graph_name="forward_graph_0", has_collectives=False, node_count=1834, timestamp=4.0,
                        fx_passes_s=1.2, lower_s=0.8, compile_s=41.3),
    dev.NeuronSample(t=4.1, raw="{}", cores=[dev.NeuronCoreSample(core=0, utilization=71.5, flops=10**13,
                                                                  memory={"tensors": 1 << 30}, owner_pid=9,
                                                                  v3d={"0": 70.0})],
                     runtimes=[dev.NeuronRuntimeSample(pid=9, total_latency={"p50": 0.1, "p99": None},
                                                       loaded_models=[dev.LoadedModel(model_id=1, cores=[0])])],
                     ecc=[{"mem_ecc_corrected": 1}], hardware={"neuron_device_type": "trainium"}),
    dev.GpuSample(t=4.2, gpus=[dev.GpuReading(index=0, power_w=300.5)], processes=[dev.GpuProcess(pid=9, gpu=0)]),
    dev.HostSample(t=4.3, cpu_percent=12.5, per_cpu_percent=[10.0, 15.0], memory_total=1 << 34),
    dev.ProcessTreeSample(t=4.4, root_pid=9, processes=[dev.ProcessInfo(pid=9, role="main", rss=1 << 20)],
                          compilers=[dev.CompilerProcess(pid=10, cmdline="neuronx-cc compile")]),
    dev.CacheScan(t=4.5, path="/var/tmp/neuron-compile-cache", exists=True, entries={"done": 3}),
]


def test_every_event_class_is_registered_once_and_every_sample_kind_is_covered():
    defined = {cls for mod in (ev, dev, price, nf, att, ckpt) for _, cls in inspect.getmembers(mod, inspect.isclass)
               if issubclass(cls, ev.Event) and cls is not ev.Event}
    assert set(EVENT_CLASSES) == defined
    assert len(EVENT_TYPES) == len(EVENT_CLASSES)
    assert {type(e) for e in SAMPLES} == defined
    with pytest.raises(TypeError):
        EVENT_TYPES["x"] = ev.Notice  # type: ignore[index]  # read-only: no registration by side effect


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.kind)
def test_round_trip_is_equal_and_kind_comes_first(event):
    line = encode_event(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.startswith(b'{"kind":"' + event.kind.encode() + b'",')
    assert decode_event_line(line) == event
    assert decode_event_line(line.decode()) == event  # text too (the slow path)
    assert event_from_dict(json.loads(line)) == event
    assert codec.event_to_dict(event)["kind"] == event.kind


def test_a_field_of_the_wrong_type_is_refused_with_the_field_named():
    good = {"kind": "step", "t": 1.0, "pid": 1, "step": 0, "duration_s": 0.1}
    assert isinstance(event_from_dict(good), ev.StepEnded)
    for key, bad, where in (("t", "abc", "$.t"), ("step", 1.5, "$.step"), ("pid", None, "$.pid"),
                            ("duration_s", True, "$.duration_s"), ("input_shapes", [["8"]], "$.input_shapes[0][0]")):
        d = dict(good, **{key: bad})
        with pytest.raises(EventDecodeError, match=r"step event: Expected .* at `\$") as info:
            event_from_dict(d)
        assert where in str(info.value)
        with pytest.raises(EventDecodeError, match=where.replace("$", r"\$").replace("[", r"\[")):
            decode_event_line(json.dumps(d).encode())  # same reason through the fast path's fallback


def test_nested_records_are_validated_too():
    d = codec.event_to_dict(SAMPLES[-5])  # the NeuronSample
    d["cores"][0]["utilization"] = "busy"
    with pytest.raises(EventDecodeError, match=r"cores\[0\]\.utilization"):
        event_from_dict(d)


def test_unknown_kind_missing_field_and_non_objects_are_refused():
    with pytest.raises(EventDecodeError, match="unknown event kind 'warp_drive'"):
        decode_event_line(b'{"kind":"warp_drive","t":1}')
    with pytest.raises(EventDecodeError, match="missing required field `pid`"):
        decode_event_line(b'{"kind":"step","t":1.0,"step":0,"duration_s":0.1}')
    with pytest.raises(EventDecodeError, match="expected a JSON object, got list"):
        decode_event_line(b"[1, 2]")
    with pytest.raises(EventDecodeError, match="no event kind"):
        decode_event_line(b'{"t": 1}')
    with pytest.raises(EventDecodeError, match="not JSON"):
        decode_event_line(b'{"kind": "step", "t": 3.0, "pi')


def test_nan_loss_and_undecodable_bytes_survive_the_journal():
    nan = ev.LossReported(t=1.0, value=math.nan)
    line = encode_event(nan)
    assert b"NaN" in line  # not null: a null loss would be refused on the way back
    back = decode_event_line(line)
    assert isinstance(back, ev.LossReported) and math.isnan(back.value)
    inf_config = ev.WorkloadConfig(t=1.0, values={"clip": math.inf})
    assert decode_event_line(encode_event(inf_config)) == inf_config
    text = ev.OutputLine(t=1.0, stream="stdout", text="bad byte \udcff here")
    line = encode_event(text)
    assert line.isascii() and decode_event_line(line) == text


def test_keys_a_kind_does_not_know_are_ignored_and_field_order_does_not_matter():
    line = b'{"t":5.0,"pid":1,"step":2,"duration_s":0.1,"kind":"step","added_later":{"x":1}}'
    assert decode_event_line(line) == ev.StepEnded(t=5.0, pid=1, step=2, duration_s=0.1)


def test_recorded_journals_replay_without_problems_into_typed_records():
    for folder in sorted(JOURNALS.iterdir()):
        events, problems = read_journal(folder / "events.jsonl")
        assert problems == [], folder.name
        trees = [e for e in events if isinstance(e, dev.ProcessTreeSample)]
        assert trees and all(isinstance(p, dev.ProcessInfo) for t in trees for p in t.processes)
        (inv,) = [e for e in events if isinstance(e, dev.DeviceInventory)]
        assert isinstance(inv.cpu, dev.CpuInfo) and inv.cpu.logical_cores
        state = RunState()
        for e in events:
            state.apply(e)
        assert state.reduce_errors == 0 and state.steps_done > 0, folder.name
        # what a recorded line decodes to, written again and read back, is the same event
        assert all(decode_event_line(encode_event(e)) == e for e in events)


def test_a_journal_reads_every_kind_with_only_the_store_imported(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(encode_event(e) for e in SAMPLES))
    code = ("import sys; from neurondesk.store.journal import read_journal\n"
            f"events, problems = read_journal({str(path)!r})\n"
            "print(len(events), [p.error for p in problems], 'neurondesk.core.reduce.state' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 1)[0] == str(len(SAMPLES))
    assert "[]" in out.stdout


@pytest.mark.parametrize(
    "line",
    [
        b'{"t":1.0,"kind":"step","pid":1,"step":0,"duration_s":0.1,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"t":1.0,"pid":"\\ud800x","step":1,"kind":"compile_started","source":"probe"}',
        '{"t":1.0,"kind":"step","pid":\udcff}',  # a str holding a lone surrogate, not JSON
    ],
    ids=["nested-too-deeply", "wrong-type-field-with-lone-surrogate", "str-with-lone-surrogate"],
)
def test_odd_lines_found_by_the_fuzzer_are_refused_not_raised(line):
    # found by benchmarks/fuzz.py: RecursionError and UnicodeEncodeError came out of the decoder
    with pytest.raises(EventDecodeError):
        decode_event_line(line)


def test_a_str_line_with_a_lone_surrogate_still_decodes():
    e = decode_event_line('{"kind":"output","t":1.0,"stream":"stdout","text":"a\udcffb"}')
    assert isinstance(e, ev.OutputLine) and e.text == "a\udcffb"
