"""What a run is started with. Crosses from the command line to the recorder process as JSON
(the workload's environment travels as the recorder's own environment, never on disk)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from neurondesk.core.rules.checks import Thresholds


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

    def to_json(self) -> str:
        d = asdict(self)
        d.pop("env")
        for key in ("run_dir", "run_root"):
            d[key] = None if d[key] is None else str(d[key])
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> RunOptions:
        d = json.loads(text)
        names = {f.name for f in fields(cls)} - {"env"}
        o = cls(**{k: v for k, v in d.items() if k in names})
        o.run_dir = None if o.run_dir is None else Path(o.run_dir)
        o.run_root = None if o.run_root is None else Path(o.run_root)
        o.checks = None if o.checks is None else Thresholds(**o.checks)
        return o
