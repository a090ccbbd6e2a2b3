"""``--mlflow URI``: one MLflow run per neurondesk run, through MlflowClient.

URI: every tracking URI MLflow takes (sinks/uris.py: ``http(s)://``, ``databricks``, ``file:DIR``,
``sqlite:///FILE``, or a local folder: MLflow's own SQLite store there, ``FOLDER/mlflow.db``, artifacts in
``FOLDER/artifacts``; ``mlflow ui --backend-store-uri sqlite:///FOLDER/mlflow.db`` shows it), or none:
``MLFLOW_TRACKING_URI``. A server's credentials are MLflow's own variables (``MLFLOW_TRACKING_USERNAME`` /
``MLFLOW_TRACKING_PASSWORD``, ``MLFLOW_TRACKING_TOKEN``), read by MLflow in the recorder's process; they, the
URL's user info and its query never show in what the sink says (``secrets``, sinks/redact.py).
The run: ``MLFLOW_RUN_ID`` in the workload's environment (the script's own run, e.g. started by a
launcher) is attached to and left open; else a run named after the neurondesk run is created in
``MLFLOW_EXPERIMENT_NAME`` (default ``neurondesk``) and ended FINISHED or FAILED by the exit status.
Metrics ``neurondesk/...`` at the job's step, batched (``log_batch``, 1,000 a call); params
``neurondesk.*`` (how it was started); tags (job, node, instance type, device, versions); at the end
summary.json, summary.md, report.html and compiles.md as artifacts under ``neurondesk/``.
A slow server costs the recorder nothing (SinkRunner); each request is bounded: unless the recorder's
environment says otherwise, 10 s a request and 2 retries (MLFLOW_HTTP_REQUEST_* are set after the
workload started, never in its environment).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from neurondesk.sinks.frames import Frame, RunEnd, RunInfo, scalars
from neurondesk.sinks.redact import secret_values
from neurondesk.sinks.uris import ALLOW_FILE_STORE, mlflow_target

EXPERIMENT = "neurondesk"
BATCH = 1000  # MLflow's log_batch limit (metrics + params + tags)
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
               "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}


class MlflowSink:
    name = "mlflow"

    def __init__(self, uri: str, env: dict[str, str]) -> None:
        """SinkError (one line) for a URI MLflow does not take as a tracking URI."""
        self.target = mlflow_target(uri, env)
        self.uri, self.where = self.target.uri, self.target.shown
        self.secrets = secret_values({**os.environ, **env}, [uri, self.target.uri])
        self.attach = env.get("MLFLOW_RUN_ID") or None
        self.experiment = env.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
        self.run_id: str | None = None
        self._client = None
        self._params: set[str] = set()

    def open(self, info: RunInfo) -> None:
        for key, value in HTTP_BOUNDS.items():
            os.environ.setdefault(key, value)
        if self.target.file_store:  # the user named MLflow's file store: MLflow >= 3.13 opens it only so
            os.environ.setdefault(ALLOW_FILE_STORE, "true")
        from mlflow import MlflowClient  # a second of imports: in the sink's thread, once

        if self.target.store is not None:
            self.target.store.mkdir(parents=True, exist_ok=True)
        client = MlflowClient(tracking_uri=self.uri)
        if self.attach:
            self.run_id = client.get_run(self.attach).info.run_id
        else:
            self.run_id = client.create_run(self._experiment_id(client), run_name=info.run_id or None).info.run_id
        self._client = client
        self._log_info(info)

    def _experiment_id(self, client) -> str:
        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            return found.experiment_id
        where = None if self.target.artifacts is None else self.target.artifacts.as_uri()
        return client.create_experiment(self.experiment, artifact_location=where)

    def _log_info(self, info: RunInfo) -> None:
        from mlflow.entities import Param, RunTag

        new = {f"neurondesk.{k}": v for k, v in info.params.items() if f"neurondesk.{k}" not in self._params}
        tags = [RunTag(k if k.startswith("neurondesk.") else f"neurondesk.{k}", v) for k, v in info.tags.items()]
        self._client.log_batch(self.run_id, params=[Param(k, v) for k, v in new.items()], tags=tags)
        self._params |= set(new)

    def write(self, frames: list[Frame]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(key, value, int(f.t * 1000), f.step) for f in frames for key, value in scalars(f).items()]
        for i in range(0, len(metrics), BATCH):
            self._client.log_batch(self.run_id, metrics=metrics[i:i + BATCH])

    def close(self, end: RunEnd) -> str:
        self._log_info(end.info)
        files = {**end.artifacts, "compiles.md": "\n".join(f"- {c.text()}" for c in end.compiles) + "\n"}
        with tempfile.TemporaryDirectory(prefix="neurondesk-mlflow-") as tmp:
            for name, text in files.items():
                (Path(tmp) / name).write_text(text)
            self._client.log_artifacts(self.run_id, tmp, artifact_path="neurondesk")
        if not self.attach:
            status = "FINISHED" if end.exit_code == 0 else "FAILED"
            self._client.set_terminated(self.run_id, status, end_time=int(time.time() * 1000))
        return f"MLflow run {self.run_id} ({'attached' if self.attach else self.experiment}): {self.target.look}"
