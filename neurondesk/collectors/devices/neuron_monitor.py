"""neuron-monitor: our config, the NDJSON report parser, and the restarting reader.

One report per line (NEURON-FORMATS.md §2). Every runtime lists every core, with zeros for the
cores it does not own, so per-core values come from the owning runtime and are never summed.
A line that is not a report becomes a ParseProblem; nothing here raises on input.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from neurondesk.collectors.devices import NEURON_BIN_DIR, find_neuron_tool
from neurondesk.collectors.devices.neuron_ls import as_int
from neurondesk.collectors.devices.supervisor import RestartingProcess
from neurondesk.core.events.device_events import (
    LoadedModel,
    NeuronCoreSample,
    NeuronHardware,
    NeuronRuntimeSample,
    NeuronSample,
)
from neurondesk.core.events.run_events import Event, Notice, ParseProblem

SOURCE = "neuron-monitor"
RUNTIME_METRICS = ("neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage", "execution_stats")
SYSTEM_METRICS = ("vcpu_usage", "memory_info", "neuron_hw_counters")
TOP_LEVEL_KEYS = ("neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info")
MAX_RAW_KEPT = 64 * 1024  # a ParseProblem keeps at most this much of a garbage line
NOT_FOUND = "neuron-monitor not found on PATH or in /opt/aws/neuron/bin"


# ---------------------------------------------------------------- config and tagging


def generate_config(tag_filter: str = ".*", period: str = "1s") -> dict[str, Any]:
    """Every runtime and system group at one period, so every report carries every group."""
    return {
        "period": period,
        "neuron_runtimes": [
            {"tag_filter": tag_filter, "metrics": [{"type": m} for m in RUNTIME_METRICS]},
        ],
        "system_metrics": [{"type": m} for m in SYSTEM_METRICS],
    }


def process_tag(run_id: str) -> str:
    """A NEURON_PROCESS_TAG for a run: letters, digits, '-', '_' and '.', at most 255 chars."""
    return ("neurondesk-" + re.sub(r"[^A-Za-z0-9_.-]", "-", run_id))[:255]


def workload_env(tag: str) -> dict[str, str]:
    """Environment additions for the workload so neuron-monitor reports it under ``tag``."""
    return {"NEURON_PROCESS_TAG": tag}


def tag_filter_for(tag: str) -> str:
    """A tag_filter regex matching exactly ``tag`` (Go RE2 accepts Python's escapes)."""
    return f"^{re.escape(tag)}$"


# ---------------------------------------------------------------- report parsing


def _obj(d: Any, key: str) -> dict[str, Any]:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _ints(d: dict[str, Any]) -> dict[str, int]:
    return {k: int(v) for k, v in d.items() if _num(v) is not None}


def _percentiles(v: Any) -> dict[str, float | None] | None:
    return {k: _num(x) for k, x in v.items()} if isinstance(v, dict) else None


def _v3d(v: Any) -> dict[str, float] | None:
    """trn2 per-physical-core utilisation: {"nc_v3.0": {...}} (SDK doc) or {"nc_v3": {"0": ...}}."""
    if not isinstance(v, dict):
        return None
    out: dict[str, float] = {}
    for key, val in v.items():
        if isinstance(val, dict) and "." in key:
            util = _num(val.get("neuroncore_utilization"))
            if util is not None:
                out[key.rsplit(".", 1)[1]] = util
        elif isinstance(val, dict):
            for sub, inner in val.items():
                util = _num(inner.get("neuroncore_utilization") if isinstance(inner, dict) else inner)
                if util is not None:
                    out[str(sub)] = util
    return out or None


def _core_flops(counters: dict[str, Any]) -> float | None:
    """Per-core FLOP/s: ``effective_flops`` (runtimes 2.30+), else the older ``flops``; a report
    carrying both means ``effective_flops``."""
    effective = _num(counters.get("effective_flops"))
    return effective if effective is not None else _num(counters.get("flops"))


def _core_key(core: str) -> tuple[int, int | str]:
    """Sort key and id of a core: global indices are numeric strings ("0".."127")."""
    n = as_int(core)
    return (n, n) if n is not None else (1 << 30, core)


def _runtime(rt: dict[str, Any], errors: list[str], cores: dict[str, list[dict[str, Any]]]) -> NeuronRuntimeSample:
    pid = as_int(rt.get("pid"))
    tag = str(rt.get("neuron_runtime_tag") or (pid if pid is not None else ""))
    label = f"runtime {tag}" if tag == str(pid) else f"runtime {tag} (pid {pid})"
    report = _obj(rt, "report")
    if isinstance(rt.get("error"), str) and rt["error"]:
        errors.append(f"{label}: {rt['error']}")
    for group, body in report.items():
        if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]:
            errors.append(f"{label} {group}: {body['error']}")

    counters = _obj(_obj(report, "neuroncore_counters"), "neuroncores_in_use")
    mem = _obj(report, "memory_used")
    used = _obj(mem, "neuron_runtime_used_bytes")
    core_mem = _obj(_obj(used, "usage_breakdown"), "neuroncore_memory_usage")
    models = [m for m in _list(mem.get("loaded_models")) if isinstance(m, dict)]
    model_cores: set[str] = set()
    model_rows = []
    for m in models:
        subgraphs = [sg for sg in _obj(m, "subgraphs").values() if isinstance(sg, dict)]
        idx = sorted({i for i in (as_int(sg.get("neuroncore_index")) for sg in subgraphs) if i is not None})
        model_cores.update(str(i) for i in idx)
        model_rows.append(
            LoadedModel(
                model_id=as_int(m.get("model_id")),
                name=str(m.get("name", "")),
                is_running=m.get("is_running") is True,
                cores=idx,
            )
        )
    for core in set(counters) | set(core_mem):
        c, m = _obj(counters, core), _obj(core_mem, core)
        memory = _ints(m)
        flops = _core_flops(c)
        cores.setdefault(str(core), []).append(
            {
                "utilization": _num(c.get("neuroncore_utilization")) or 0.0,
                "flops": int(flops) if flops is not None else None,
                "memory": memory,
                "memory_total": sum(memory.values()),
                "owner_pid": pid,
                "owner_tag": tag,
                "v3d": _v3d(c.get("v3d")),
                "_has_model": str(core) in model_cores,
            }
        )

    stats = _obj(report, "execution_stats")
    latency = _obj(stats, "latency_stats")
    vcpu = _obj(_obj(report, "neuron_runtime_vcpu_usage"), "vcpu_usage")
    return NeuronRuntimeSample(
        pid=pid,
        tag=tag,
        error=str(rt["error"]) if rt.get("error") else None,
        period=_num(stats.get("period")),
        executions=_ints(_obj(stats, "execution_summary")),
        errors_by_class=_ints(_obj(stats, "error_summary")),
        total_latency=_percentiles(latency.get("total_latency")),
        device_latency=_percentiles(latency.get("device_latency")),
        vcpu_user=_num(vcpu.get("user")),
        vcpu_system=_num(vcpu.get("system")),
        host_memory=as_int(used.get("host")),
        device_memory=as_int(used.get("neuron_device")),
        host_breakdown=_ints(_obj(_obj(used, "usage_breakdown"), "host")),
        loaded_models=model_rows,
    )


def _owner(core: int | str, candidates: list[dict[str, Any]]) -> NeuronCoreSample:
    """The runtime that owns a core: a loaded model there, else the most memory, else the busiest."""
    best = max(candidates, key=lambda c: (c["_has_model"], c["memory_total"], c["utilization"]))
    used = best["_has_model"] or best["memory_total"] or best["utilization"] or best["flops"]
    return NeuronCoreSample(
        core=core,
        utilization=best["utilization"],
        flops=best["flops"],
        memory=best["memory"],
        memory_total=best["memory_total"],
        owner_pid=best["owner_pid"] if used else None,  # nobody uses it
        owner_tag=best["owner_tag"] if used else None,
        v3d=best["v3d"],
    )


def _sample(report: dict[str, Any], raw: str, t: float) -> NeuronSample:
    errors: list[str] = []
    per_core: dict[str, list[dict[str, Any]]] = {}
    runtimes = []
    for rt in _list(report.get("neuron_runtime_data")):
        if isinstance(rt, dict):
            runtimes.append(_runtime(rt, errors, per_core))
        else:
            errors.append("neuron_runtime_data entry is not an object")
    cores = [_owner(_core_key(k)[1], per_core[k]) for k in sorted(per_core, key=_core_key)]
    errors_by_class: dict[str, int] = {}
    for r in runtimes:
        for k, v in r.errors_by_class.items():
            errors_by_class[k] = errors_by_class.get(k, 0) + v

    system = _obj(report, "system_data")
    for name, body in [
        *system.items(),
        *((k, report.get(k)) for k in TOP_LEVEL_KEYS[2:]),
        ("neuron_k8s_info", report.get("neuron_k8s_info")),
    ]:
        if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]:
            errors.append(f"{name}: {body['error']}")
    vcpu = _obj(system, "vcpu_usage")
    busy = {}
    for cpu, usage in _obj(vcpu, "usage_data").items():
        idle = _num(usage.get("idle")) if isinstance(usage, dict) else None
        if idle is not None:
            busy[str(cpu)] = round(100.0 - idle, 3)
    meminfo = _obj(system, "memory_info")
    hw = _obj(report, "neuron_hardware_info")
    instance_type = _obj(report, "instance_info").get("instance_type")
    return NeuronSample(
        t=t,
        raw=raw,
        cores=cores,
        runtimes=runtimes,
        executions_completed=sum(r.executions.get("completed", 0) for r in runtimes),
        errors_by_class=errors_by_class,
        host_vcpu={k: float(v) for k, v in _obj(vcpu, "average_usage").items() if _num(v) is not None},
        host_vcpu_busy=busy,
        host_memory_total=as_int(meminfo.get("memory_total_bytes")),
        host_memory_used=as_int(meminfo.get("memory_used_bytes")),
        swap_total=as_int(meminfo.get("swap_total_bytes")),
        swap_used=as_int(meminfo.get("swap_used_bytes")),
        ecc=[
            _ints(d)
            for d in _list(_obj(system, "neuron_hw_counters").get("neuron_devices"))
            if isinstance(d, dict)
        ],
        instance_type=instance_type if isinstance(instance_type, str) and instance_type else None,
        hardware={k: v for k, v in hw.items() if k != "error" and isinstance(v, str | int | float)},
        group_errors=errors,
        hardware_info=_hardware(hw),
    )


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _hardware(hw: dict[str, Any]) -> NeuronHardware | None:
    """``neuron_hardware_info`` as a record; None when it says nothing (absent, or only an error)."""
    info = NeuronHardware(
        device_type=_text(hw.get("neuron_device_type")),
        device_version=_text(hw.get("neuron_device_version")),
        core_version=_text(hw.get("neuroncore_version")),
        device_count=as_int(hw.get("neuron_device_count")),
        device_memory_bytes=as_int(hw.get("neuron_device_memory_size")),
        cores_per_device=as_int(hw.get("neuroncore_per_device_count")),
        logical_nc_config=as_int(hw.get("logical_neuroncore_config")),
    )
    return None if info == NeuronHardware() else info


def _problem(raw: str, error: str, t: float) -> ParseProblem:
    if len(raw) > MAX_RAW_KEPT:
        error = f"{error} (line of {len(raw)} characters, first {MAX_RAW_KEPT} kept)"
        raw = raw[:MAX_RAW_KEPT]
    return ParseProblem(t=t, source=SOURCE, raw=raw, error=error)


def parse_report(line: str | bytes, t: float) -> NeuronSample | ParseProblem | None:
    """One stream line -> a sample, a ParseProblem, or None for a blank line. Never raises."""
    if isinstance(line, bytes):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            return _problem(line.decode("utf-8", "backslashreplace").rstrip("\r\n"), f"not UTF-8 ({e})", t)
    else:
        text = line
    text = text.rstrip("\r\n")
    if not text.strip():
        return None
    try:
        report = json.loads(text)
    except (ValueError, RecursionError) as e:
        return _problem(text, f"not JSON ({e})" if isinstance(e, ValueError) else "JSON nested too deeply", t)
    if not isinstance(report, dict) or not any(k in report for k in TOP_LEVEL_KEYS):
        return _problem(text, "JSON but not a neuron-monitor report", t)
    try:
        return _sample(report, text, t)
    except Exception as e:  # noqa: BLE001 - a shape no version printed: keep the line, go on
        return _problem(text, f"unexpected report shape ({type(e).__name__}: {e})", t)


# ---------------------------------------------------------------- what a report says to a person


class ReportNotices:
    """What a person should see from a stream of reports, once each: a group ``error`` string that
    the previous report did not carry, and ECC counts that are new or changed (per device)."""

    def __init__(self) -> None:
        self._errors: set[str] = set()
        self._ecc: dict[tuple[int, str], int] = {}

    def messages(self, s: NeuronSample) -> list[str]:
        new = [m for m in dict.fromkeys(s.group_errors) if m not in self._errors]
        self._errors = set(s.group_errors)
        return new + self._ecc_messages(s.ecc)

    def _ecc_messages(self, ecc: list[dict[str, int]]) -> list[str]:
        seen: dict[tuple[int, str], int] = {}
        out = []
        for pos, counters in enumerate(ecc):
            device = counters.get("neuron_device_index", pos)
            counts = {k: v for k, v in counters.items() if "ecc" in k and v > 0}
            changed = [f"{v} {k}" for k, v in counts.items() if self._ecc.get((device, k)) != v]
            seen.update({(device, k): v for k, v in counts.items()})
            if changed:
                out.append(f"Neuron device {device}: ECC events: {', '.join(changed)}")
        self._ecc = seen
        return out


# ---------------------------------------------------------------- the process


def replay_command(path: str | Path, delay: float = 1.0, exit_after: int | None = None) -> list[str]:
    """A command that prints a recorded stream at its own pace (for --neuron-monitor-replay)."""
    script = Path(__file__).with_name("replay_stream.py")
    cmd = [sys.executable, str(script), str(path), "--delay", str(delay)]
    return cmd + (["--exit-after", str(exit_after)] if exit_after is not None else [])


class NeuronMonitorProcess:
    """neuron-monitor (or an injected command) as a subprocess; every line becomes an event for
    ``on_event`` (NeuronSample or ParseProblem), and a Notice whenever it dies and is restarted."""

    def __init__(
        self,
        on_event: Callable[[Event], None],
        command: Sequence[str] | None = None,
        *,
        tag_filter: str = ".*",
        period: str = "1s",
        search_path: str | None = None,
        bin_dir: str = NEURON_BIN_DIR,
        clock: Callable[[], float] = time.time,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        stable_after_s: float = 60.0,
        restart_on_clean_exit: bool = True,
        max_restarts: int | None = None,
    ) -> None:
        self._on_event = on_event
        self._command = list(command) if command is not None else None
        self._config = generate_config(tag_filter, period)
        self._where = (search_path, bin_dir)
        self._clock = clock
        self._options = {
            "backoff_initial": backoff_initial,
            "backoff_max": backoff_max,
            "stable_after_s": stable_after_s,
            "restart_on_clean_exit": restart_on_clean_exit,
            "max_restarts": max_restarts,
        }
        self._config_dir: str | None = None
        self._proc: RestartingProcess | None = None
        self.lines = 0
        self.samples = 0
        self.problems = 0
        self._report_notices = ReportNotices()

    @property
    def supervisor(self) -> RestartingProcess | None:
        return self._proc

    def start(self) -> str | None:
        """Start reading; returns why it could not start (neuron-monitor missing), else None."""
        if self._proc is not None:
            raise RuntimeError("NeuronMonitorProcess.start() called twice")
        command = self._command
        if command is None:
            exe = find_neuron_tool("neuron-monitor", *self._where)
            if exe is None:
                self._on_event(Notice(t=self._clock(), level="warn", message=NOT_FOUND, source=SOURCE))
                return NOT_FOUND
            self._config_dir = tempfile.mkdtemp(prefix="neurondesk-monitor-")
            config = Path(self._config_dir) / "neuron-monitor.json"
            config.write_text(json.dumps(self._config, indent=2))
            command = [exe, "-c", str(config)]
        self._proc = RestartingProcess(command, self._line, self._notice, name=SOURCE, **self._options)
        self._proc.start()
        return None

    def stop(self, timeout: float = 5.0) -> None:
        if self._proc is not None:
            self._proc.stop(timeout)
        if self._config_dir is not None:
            shutil.rmtree(self._config_dir, ignore_errors=True)
            self._config_dir = None

    def _line(self, line: bytes) -> None:
        self.lines += 1
        event = parse_report(line, self._clock())
        if event is None:
            return
        if isinstance(event, ParseProblem):
            self.problems += 1
            self._on_event(event)
            return
        self.samples += 1
        self._on_event(event)
        for message in self._report_notices.messages(event):  # monitor errors, ECC events
            self._notice("warn", message)

    def _notice(self, level: str, message: str) -> None:
        self._on_event(Notice(t=self._clock(), level=level, message=message, source=SOURCE))
