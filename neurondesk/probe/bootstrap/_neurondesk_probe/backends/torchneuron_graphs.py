"""TorchNeuron's torch.compile graphs, the probe's reader (backends/torchneuron.py holds the rest of the
adapter): each record of ``torch_neuronx.get_dynamo_metrics()`` (which synchronises the device: read at the end
of a dynamo compile and at exit, never at a step) as a ``neuron_graph_stat`` message; cited in docs/torchneuron.md."""

from __future__ import annotations

import sys
import time

from .. import _state

GRAPH_FIELDS = (("graph_id", "graph_id"), ("graph_name", "graph_name"), ("model_name", "model_name"),
                ("has_collectives", "has_collectives"), ("node_count", "graph_node_count"))
GRAPH_TIMES = (("fx_passes_s", "torch_neuronx_fx_passes_us"), ("lower_s", "torch_neuronx_lower_us"),
               ("compile_s", "torch_neuronx_compile_us"))


def number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class GraphReads:
    """The graphs' records sent so far and their compile seconds (``graph_s``, which the eager NEFF
    groups leave out: the dynamo compiles hold them)."""

    def __init__(self, probe, hooks) -> None:
        self.probe, self.hooks = probe, hooks
        self.graph_s = 0.0  # compile seconds of the graphs get_dynamo_metrics reported so far
        self.count_read = 0  # compiled_graphs when get_dynamo_metrics was last read
        self.sent: dict[str, float | None] = {}  # graph_id -> its compile seconds as sent
        self.odd_said = False  # records without the documented fields: said once

    def after_dynamo_compile(self, point: str | None = None) -> None:
        """The end of a dynamo compile (dynamo.py; ``point``: its point, as its compile message says
        it): new graphs in counters["neuron"] are read from get_dynamo_metrics (which synchronizes:
        here, never per step); a record first sent now names that compile, the one that made it."""
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is None:
            return
        now = int(utils.counters["neuron"]["compiled_graphs"])
        if now != self.count_read:
            self.count_read = now
            self.read_graphs(point)

    def read_graphs(self, point: str | None = None) -> None:
        """Each record of get_dynamo_metrics not sent yet (or whose compile time was not known
        then), as a neuron_graph_stat message; fields a newer torch-neuronx renamed are None."""
        rank = _state.env_int("RANK")
        known = set(self.sent)  # graphs sent before this read: their compile was named then
        for i, row in enumerate(self.hooks.module.get_dynamo_metrics()):
            fields = {ours: getattr(row, theirs, None) for ours, theirs in GRAPH_FIELDS}
            graph_id = fields["graph_id"] if isinstance(fields["graph_id"], str) else None
            times = {ours: (None if number(getattr(row, theirs, None)) is None
                            else number(getattr(row, theirs)) / 1e6) for ours, theirs in GRAPH_TIMES}
            if graph_id is None and fields["node_count"] is None:  # not a record we know: not sent
                if not self.odd_said:
                    self.odd_said = True
                    self.probe.send({"kind": "notice", "level": "warn", "source": "torchneuron", "message": (
                        f"torch_neuronx.get_dynamo_metrics() returned a {type(row).__name__} without the documented "
                        "fields (graph_id, graph_name, graph_node_count, torch_neuronx_*_us): a newer torch-neuronx? "
                        "Its records are not read; the graph_stats table, where written, still is")})
                continue
            key = graph_id or f"row{i}"
            if key in self.sent and (self.sent[key] or times["compile_s"] is None):
                continue
            if times["compile_s"]:
                self.graph_s += times["compile_s"] - (self.sent.get(key) or 0.0)
            self.sent[key] = times["compile_s"] or None
            stamp = number(getattr(row, "timestamp", None))
            if stamp is None:
                try:
                    stamp = float(getattr(row, "timestamp", ""))
                except (TypeError, ValueError):
                    stamp = None
            self.probe.send({"kind": "neuron_graph_stat", "path": "get_dynamo_metrics", "row": i,
                             "rank": rank, "graph_id": graph_id,
                             "graph_name": fields["graph_name"] if isinstance(fields["graph_name"], str) else None,
                             "model_name": fields["model_name"] if isinstance(fields["model_name"], str) else None,
                             "has_collectives": fields["has_collectives"] if isinstance(fields["has_collectives"], bool) else None,
                             "node_count": fields["node_count"] if type(fields["node_count"]) is int else None,  # noqa: E721
                             "timestamp": stamp if stamp is not None else time.time(), **times,
                             "compile_point": None if key in known else point})
