"""What a run is started with (``RunOptions``), and the ``LaunchSpec`` that carries it to the
recorder process: encoded once by the launcher (sources/launch.py) onto the recorder's stdin,
decoded and validated once by the recorder (recorder/__main__.py); never on disk or in argv.
The workload's environment travels in it (secrets taken out), not as the recorder's own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from neurondesk.core.rules.checks import Thresholds
from neurondesk.store.own_files import FileId


@dataclass
class RunOptions:
    instance_type: str | None = None
    price_per_hour: float | None = None
    price_source: str | None = None
    price_table: str | None = None  # the local price table the recorder prices with (None: the user's refreshed one)
    warmup_steps: int = 5
    target_loss: float | None = None
    samples_per_step: int | None = None
    tokens_per_step: int | None = None
    steps_requested: int | None = None
    run_dir: Path | None = None  # exact folder for this run
    force: bool = False  # a run_dir already holding a run: move its files into previous-TIME/ there
    run_root: Path | None = None  # folder holding runs (default: user data dir)
    cwd: str | None = None
    env: dict[str, str] | None = None  # the workload's environment (default: the recorder's)
    telemetry: bool = True
    neuron_monitor_replay: str | None = None  # a recorded neuron-monitor stream instead of the tool
    neuron_observer: str | None = None  # Neuron Observer's /metrics URL
    graph_stats: str | None = None  # folder of TorchNeuron graph_stats CSVs
    neuron_profile: bool = False  # capture a Neuron Explorer profile into the run folder
    metrics_addr: str | None = None  # serve OpenMetrics on [HOST:]PORT (exporter/endpoint.py)
    job_id: str | None = None  # --job (None: the launcher's, core/events/job_identity.py)
    node: str | None = None  # --node (None: SLURMD_NODENAME, else the host name)
    metrics_grace_s: float = 60.0  # --metrics-grace: the final figures served this long after the run
    budget_usd: float | None = None  # --budget-usd: warn at 80%, alert at 100% (core/figures/budget.py)
    budget_stop: bool = False  # --budget-stop: at 100% stop the workload as the console's `s` does
    hang_after_s: float | None = None  # --hang-after: no step this long (nothing compiling) is a hang
    notify: bool = False  # --notify: every alert journaled as a notice, for the viewer's bell
    notify_url: str | None = None  # --notify-url: POST each alert there (never written to disk)
    notify_compile_s: float = 60.0  # --notify-compile-s: a compile wall longer than this is an alert
    checks: Thresholds | None = None  # the --check thresholds: a failed check is an alert
    tensorboard: str | None = None  # --tensorboard DIR: event files (sinks/tensorboard_sink.py)
    mlflow: str | None = None  # --mlflow URI: a tracking server or a local folder (sinks/mlflow_sink.py)
    wandb: str | None = None  # --wandb PROJECT: a W&B run, offline unless logged in (sinks/wandb_sink.py)

    def __post_init__(self) -> None:
        # absolute from here on: the output relay runs in "/" and the recorder may start elsewhere,
        # so a relative --run-dir lost the workload's output (stdout.log, stderr.log stayed empty)
        for key in ("run_dir", "run_root"):
            value = getattr(self, key)
            if value is not None:
                setattr(self, key, Path(value).absolute())


@dataclass(frozen=True)
class LaunchSpec:
    """All the recorder process is told: what to run, in which folder, with which options."""

    command: list[str]
    run_dir: Path  # the run folder, made (or checked) by the launcher
    options: RunOptions  # its ``env``: the workload's environment
    lock: FileId | None = None  # the lock file the launcher made or checked: the recorder opens this one, no other

    def __post_init__(self) -> None:
        if not self.command or not self.command[0]:  # an empty argument after the program is the user's
            raise ValueError("the command is empty")
        if not self.run_dir.is_absolute():
            raise ValueError(f"the run folder {self.run_dir} is not an absolute path")


class LaunchSpecError(ValueError):
    """A launch spec the recorder cannot take; the message is one line saying why."""


def encode_spec(spec: LaunchSpec) -> bytes:
    """One JSON line."""
    return msgspec.json.encode(spec, enc_hook=_encode_path) + b"\n"


def decode_spec(line: bytes) -> LaunchSpec:
    """The launch spec of one JSON line, every field checked against its type (LaunchSpecError)."""
    try:
        return msgspec.json.decode(line, type=LaunchSpec, dec_hook=_decode_path)
    except msgspec.DecodeError as exc:  # a ValidationError too: the field is named ("at `$.options.warmup_steps`")
        raise LaunchSpecError(f"the launch spec on stdin is refused: {exc}") from None


def _encode_path(obj: Any) -> str:
    if isinstance(obj, Path):
        return str(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def _decode_path(kind: type, obj: Any) -> Path:
    if kind is Path and isinstance(obj, str):
        return Path(obj)
    raise TypeError(f"expected a path, got {type(obj).__name__}")  # msgspec: a ValidationError at its field
