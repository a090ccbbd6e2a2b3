"""What a run is started with. Crosses from the command line to the recorder process as JSON
(the workload's environment travels as the recorder's own environment, never on disk)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path


@dataclass
class RunOptions:
    instance_type: str | None = None
    price_per_hour: float | None = None
    price_source: str | None = None
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
    metrics_addr: str | None = None  # serve OpenMetrics on [HOST:]PORT (recorder/metrics_http.py)
    job_id: str = ""  # the metrics' job_id label
    node: str | None = None  # the metrics' node label (default: the host name)

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
        return o
