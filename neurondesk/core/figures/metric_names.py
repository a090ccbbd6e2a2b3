"""The one table of the names a run's figures go out under. Pure.

Every output takes its names from here: the OpenMetrics exporter its series (neurondesk/exporter/),
the Prometheus reader its queries (clients/prometheus_api.py: ``series``), every sink its scalars
(neurondesk/sinks/frames.py: ``neurondesk/<key>``), and summary.json its ``figures`` keys (a
figure's ``key`` is its RunFigures field, core/figures/run_figures.py). How reports label and format
a figure is ``FIGURES``' (run_figures.py); what it is called outside is this table's.

A figure (``figure=True``) is read from the RunFigures of the moment; any other key is a count or
time the exporter's Snapshot or the sinks' Frame carries (``Snapshot.quantities``,
``Frame.quantities``). The exporter's labelled families (compiles by cause, ranks, cores, disks, the
job's series, health, step phases, memory creep) name themselves in their own modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import msgspec


class MetricName(msgspec.Struct, frozen=True, kw_only=True):
    key: str  # a RunFigures field (figure=True), else the snapshot's or frame's own quantity
    metric: str | None = None  # the OpenMetrics family (None: not exported)
    counter: bool = False  # a counter (its sample is <metric>_total), else a gauge
    help: str = ""
    sink: bool = False  # every sink writes it as neurondesk/<key>
    figure: bool = True

    @property
    def series(self) -> str | None:
        """The sample name Prometheus stores (and a query reads)."""
        if self.metric is None:
            return None
        return f"{self.metric}_total" if self.counter else self.metric


SINK_PREFIX = "neurondesk/"


def _figure(key: str, metric: str | None = None, help: str = "", counter: bool = False,
            sink: bool = True) -> MetricName:
    return MetricName(key=key, metric=metric, counter=counter, help=help, sink=sink)


def _own(key: str, metric: str | None = None, help: str = "", counter: bool = False,
         sink: bool = False) -> MetricName:
    return MetricName(key=key, metric=metric, counter=counter, help=help, sink=sink, figure=False)


METRIC_NAMES: tuple[MetricName, ...] = (
    # the run's figures (RunFigures fields: summary.json's "figures" keys)
    _figure("steps", "neurondesk_steps", "Steps the job has ended", counter=True),
    _figure("elapsed_s"),
    _figure("step_time_s", "neurondesk_figure_step_time_seconds",
            "The job's steady step time (slowest rank's median), seconds"),
    _figure("step_time_p90_s"),
    _figure("samples_per_s", "neurondesk_steady_samples_per_second", "Steady samples/s (job)"),
    _figure("tokens_per_s", "neurondesk_steady_tokens_per_second", "Steady tokens/s (job)"),
    _figure("steps_per_hour", "neurondesk_figure_steps_per_hour", "Steps an hour at the job's steady step time"),
    _figure("data_wait_fraction", "neurondesk_figure_data_wait_ratio", "Share of the step time spent waiting for data"),
    _figure("compile_count"),
    _figure("compile_total_s", "neurondesk_compile_seconds", "Time spent compiling", counter=True),
    _figure("recompiles_after_warmup", "neurondesk_recompiles_after_warmup", "Recompiles after warm-up", counter=True),
    _figure("compile_share", "neurondesk_figure_compile_share_ratio", "Compile seconds over wall seconds, capped at 1"),
    _figure("compile_share_of_cost", sink=False),  # compile_share itself while a price is known: no series of its own
    _figure("price_per_hour", "neurondesk_price_usd_per_hour", "Instance price", sink=False),  # a sink's run param
    _figure("total_usd", "neurondesk_cost_usd", "Cost of the run so far", counter=True),
    _figure("per_1k_steps_steady_usd", "neurondesk_figure_usd_per_1k_steps_steady",
            "What 1k more steps cost at the steady pace, USD"),
    _figure("per_1k_steps_all_in_usd", "neurondesk_figure_usd_per_1k_steps_all_in",
            "Cost so far over steps done, per 1k steps, USD"),
    _figure("per_million_tokens_usd", "neurondesk_figure_usd_per_million_tokens",
            "What 1M tokens cost at the steady pace, USD"),
    _figure("projected_usd", "neurondesk_figure_projected_usd",
            "Cost so far plus the remaining requested steps at the steady pace, USD"),
    _figure("mfu", "neurondesk_figure_mfu_ratio", "Model FLOPs utilisation against the dense peak"),
    _figure("hfu", "neurondesk_figure_hfu_ratio", "Hardware FLOPs utilisation against the dense peak"),
    _figure("model_flops_per_s", "neurondesk_figure_model_flops_per_second",
            "Model FLOP/s at the steady pace (a job's MFU sums them over its nodes)"),
    _figure("peak_flops_per_s", "neurondesk_figure_peak_flops_per_second",
            "Dense peak FLOP/s of the devices the run uses"),
    _figure("ttfi_s", "neurondesk_figure_ttfi_seconds",
            "Time to first iteration (TTFI): from the launch to the end of the first training step, seconds"),
    _figure("ttfi_cache", sink=False),  # words (cold / warm): no series, no scalar
    _figure("training_share", "neurondesk_figure_training_share_ratio",
            "Share of the wall time in the steps' own work (no compile, no data wait): what the bill bought"),
    _figure("checkpoint_saves", "neurondesk_checkpoint_saves", "Checkpoint saves (a save on several ranks at once: one)",
            counter=True),
    _figure("checkpoint_save_s", "neurondesk_checkpoint_save_seconds",
            "Job seconds spent in checkpoint saves (blocking time; several ranks at once counted once)", counter=True),
    _figure("checkpoint_load_s", "neurondesk_checkpoint_load_seconds", "Job seconds spent in checkpoint loads",
            counter=True),
    _figure("checkpoint_wait_s", "neurondesk_checkpoint_wait_seconds",
            "Job seconds the other ranks waited for checkpoint saves (each checkpoint's longest wait, summed)",
            counter=True),
    _figure("checkpoint_bytes", "neurondesk_checkpoint_written_bytes", "Bytes on disk after the checkpoint saves",
            counter=True),
    _figure("checkpoint_write_rate", "neurondesk_checkpoint_write_bytes_per_second",
            "Checkpoint bytes written a job second of saving"),
    _figure("checkpoint_failed", "neurondesk_checkpoint_failures", "Checkpoint saves and loads that raised",
            counter=True),
    _figure("checkpoint_last_step", "neurondesk_checkpoint_last_step", "The step of the last good checkpoint"),
    _figure("checkpoint_last_t", "neurondesk_checkpoint_last_timestamp_seconds",
            "When the last good checkpoint was written", sink=False),
    _figure("checkpoint_last", sink=False),  # words: no series, no scalar
    _figure("checkpoints", sink=False),  # words
    _figure("checkpoint_interval_s", sink=True),
    # what the run has seen at the moment (the Snapshot's and the Frame's own)
    _own("loss", "neurondesk_loss", "Last loss reported", sink=True),
    _own("last_step_time_s", sink=True),  # the last step's own duration, as recorded
    _own("compile_in_progress", "neurondesk_compile_in_progress", "1 while a compile runs", sink=True),
    _own("samples", "neurondesk_samples", "Samples of the steps ended (all ranks)", counter=True),
    _own("tokens", "neurondesk_tokens", "Tokens of the steps ended (all ranks)", counter=True),
    _own("data_wait_s", "neurondesk_data_wait_seconds", "Time the lead process waited for data", counter=True),
    _own("compile_started_t", "neurondesk_compile_started_timestamp_seconds",
         "Start of the compile in progress (absent when none)"),
    _own("executions_per_step", "neurondesk_graph_executions_per_step", "Graph executions per step"),
    _own("stragglers", "neurondesk_stragglers", "Ranks named stragglers"),
    _own("started_t", "neurondesk_run_start_timestamp_seconds", "Start of the run"),
    _own("taken_t", "neurondesk_last_update_timestamp_seconds", "When these figures were taken"),
)

BY_KEY: Mapping[str, MetricName] = MappingProxyType({m.key: m for m in METRIC_NAMES})
EXPORTED: tuple[MetricName, ...] = tuple(m for m in METRIC_NAMES if m.metric is not None)
SINK_SCALARS: tuple[MetricName, ...] = tuple(m for m in METRIC_NAMES if m.sink)


def series(key: str) -> str:
    """The Prometheus sample name of ``key`` (KeyError: not in the table, or not exported)."""
    name = BY_KEY[key].series
    if name is None:
        raise KeyError(f"{key!r} is not exported")
    return name
