"""``--tensorboard DIR``: TensorBoard event files, written with tensorboard's own writer.

Scalars per frame under ``neurondesk/`` (frames.scalars: step time, samples/s, tokens/s, data wait, loss,
cost so far, compile in progress ...), at the job's step; each compile as a line of text
(``neurondesk/compiles``: its cause, the line it came from, how long); at the end, the run's params and
tags as hparams whose metrics are the final scalars. The file is ``events.out.tfevents.*.neurondesk`` in
DIR itself: DIR may be the folder the script's own SummaryWriter writes to, and the curves are then
one run's, side by side. Flushed after every batch: ``tensorboard --logdir DIR`` shows the run live.
tensorboard's own writer and protos only (no TensorFlow, no torch in the recorder). Scalars are float32, as
TensorBoard's own writer makes them (its fast loader, the default ``tensorboard``, reads no other kind).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.plugins.text.summary_v2 import text_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from neurondesk.sinks.frames import PREFIX, Frame, RunEnd, RunInfo, scalars
from neurondesk.sinks.redact import secret_values

COMPILES_TAG = PREFIX + "compiles"
SUFFIX = ".neurondesk"


class TensorBoardSink:
    name = "tensorboard"
    def __init__(self, folder: str | Path, env: dict[str, str] | None = None) -> None:
        self.folder = Path(folder)
        self.secrets = secret_values({**os.environ, **(env or {})})  # HF_TOKEN ...: never in the event file
        self.where = str(folder)
        self._writer: EventFileWriter | None = None

    def open(self, info: RunInfo) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(self.folder), max_queue_size=1000, flush_secs=5, filename_suffix=SUFFIX)
        self._add(_summary([text_pb(PREFIX + "run", _table({"run_id": info.run_id, **info.params}))]), 0, time.time())

    def write(self, frames: list[Frame]) -> None:
        for frame in frames:
            values = [scalar_pb(tag, value) for tag, value in scalars(frame).items()]
            self._add(_summary(values), frame.step, frame.t)
            for c in frame.compiles:
                self._add(_summary([text_pb(COMPILES_TAG, c.text())]), c.step if c.step is not None else frame.step,
                          c.t)
        self._writer.flush()

    def close(self, end: RunEnd) -> str:
        hparams = {**end.info.params, **{f"tag.{k}": v for k, v in end.info.tags.items()}}
        for summary in hparams_summaries(hparams, list(scalars(end.frame)), end.exit_code == 0):
            self._add(summary, end.frame.step, end.frame.t)
        self._writer.close()
        return f"tensorboard --logdir {self.folder}"

    def _add(self, summary: summary_pb2.Summary, step: int, t: float) -> None:
        self._writer.add_event(event_pb2.Event(wall_time=t, step=step, summary=summary))


def _summary(values: list[summary_pb2.Summary]) -> summary_pb2.Summary:
    return summary_pb2.Summary(value=[v for s in values for v in s.value])


def _table(d: dict[str, str]) -> str:
    rows = "\n".join(f"| {k} | {str(v).replace('|', '/')} |" for k, v in d.items())
    return f"| | |\n|---|---|\n{rows}"


def _plugin(content: plugin_data_pb2.HParamsPluginData, tag: str) -> summary_pb2.Summary:
    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
        plugin_name=metadata.PLUGIN_NAME, content=content.SerializeToString()))
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=meta)])


def hparams_summaries(hparams: dict[str, str], metric_tags: list[str], ok: bool) -> list[summary_pb2.Summary]:
    """The HParams plugin's experiment, session start and session end (the protos its own writers
    make; its summary module needs TensorFlow). The metrics are the run's own scalars, by tag."""
    version = metadata.PLUGIN_DATA_VERSION
    start = plugin_data_pb2.SessionStartInfo()
    for k, v in hparams.items():
        start.hparams[k].string_value = v
    infos = [api_pb2.HParamInfo(name=k, type=api_pb2.DataType.Value("DATA_TYPE_STRING")) for k in hparams]
    experiment = api_pb2.Experiment(hparam_infos=infos,
                                    metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=t)) for t in metric_tags])
    status = api_pb2.Status.Value("STATUS_SUCCESS" if ok else "STATUS_FAILURE")
    return [_plugin(plugin_data_pb2.HParamsPluginData(experiment=experiment, version=version), metadata.EXPERIMENT_TAG),
            _plugin(plugin_data_pb2.HParamsPluginData(session_start_info=start, version=version),
                    metadata.SESSION_START_INFO_TAG),
            _plugin(plugin_data_pb2.HParamsPluginData(session_end_info=plugin_data_pb2.SessionEndInfo(status=status),
                                                      version=version), metadata.SESSION_END_INFO_TAG)]
