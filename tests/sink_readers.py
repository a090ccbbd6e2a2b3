"""What the sinks wrote, read back by each tool's own reader: TensorBoard's event accumulator, MLflow's
client, W&B's reader of offline run files (wandb.sdk.internal.datastore)."""

from __future__ import annotations

import json
from pathlib import Path


def as_tensorboard(value: float) -> float:
    """A figure as TensorBoard keeps it: a float32 (its own writers round so, its fast loader reads no other)."""
    import numpy as np

    return float(np.float32(value))


def tensorboard_run(folder: Path) -> dict:
    """{'scalars': {tag: [(step, value)]}, 'texts': {tag: [(step, text)]}, 'hparams': {name: value},
    'status': int | None}, as TensorBoard's own accumulator reads the folder."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(folder), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    scalars, texts = {}, {}
    for tag in acc.Tags()["tensors"]:
        meta = acc.SummaryMetadata(tag).plugin_data.plugin_name
        for e in acc.Tensors(tag):
            value = tensor_util.make_ndarray(e.tensor_proto)
            if meta == "text":
                texts.setdefault(tag, []).append((e.step, value.item().decode()))
            else:
                scalars.setdefault(tag, []).append((e.step, float(value)))
    hparams, status = {}, None
    try:
        hparams_content = acc.PluginTagToContent("hparams")
    except KeyError:  # none written yet (the run goes on)
        hparams_content = {}
    for content in hparams_content.values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        if data.HasField("session_start_info"):
            hparams = {k: v.string_value for k, v in data.session_start_info.hparams.items()}
        if data.HasField("session_end_info"):
            status = data.session_end_info.status
    return {"scalars": scalars, "texts": texts, "hparams": hparams, "status": status}


def wandb_offline_run(wandb_dir: Path) -> dict:
    """{'history': [{key: value}], 'summary': {key: value}, 'config': {key: value}, 'exit_code', 'files'} of
    the one offline run under ``wandb_dir`` (RUN_DIR/wandb), read with wandb's own record reader."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.internal import datastore

    runs = sorted(wandb_dir.glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1, runs
    store = datastore.DataStore()
    store.open_for_scan(str(runs[0]))
    history, summary, config, exit_code, run = [], {}, {}, None, None
    while (data := store.scan_data()) is not None:
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            for u in record.summary.update:
                summary["/".join(u.nested_key) or u.key] = json.loads(u.value_json)
        elif kind == "config":
            for u in record.config.update:
                config[u.key or "/".join(u.nested_key)] = json.loads(u.value_json)
        elif kind == "exit":
            exit_code = record.exit.exit_code
        elif kind == "run":
            run = record.run
    return {"history": history, "summary": summary, "config": config, "exit_code": exit_code, "run": run,
            "folder": runs[0].parent}


def mlflow_run(uri: str, run_id: str | None = None, experiment: str = "neurondesk") -> dict:
    """The one run (or ``run_id``) of ``experiment``: info, params, tags, last metrics, histories, artifacts."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    if run_id is None:
        exp = client.get_experiment_by_name(experiment)
        runs = client.search_runs([exp.experiment_id])
        assert len(runs) == 1, [r.info.run_id for r in runs]
        run_id = runs[0].info.run_id
    run = client.get_run(run_id)
    history = {key: [(m.step, m.value) for m in client.get_metric_history(run_id, key)] for key in run.data.metrics}
    artifacts = {Path(a.path).name for a in client.list_artifacts(run_id, "neurondesk")}
    return {"client": client, "run": run, "metrics": run.data.metrics, "history": history, "params": run.data.params,
            "tags": run.data.tags, "artifacts": artifacts, "run_id": run_id}
