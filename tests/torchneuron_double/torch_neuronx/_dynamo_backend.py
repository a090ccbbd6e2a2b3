"""``torch.compile(backend="neuron")`` (registered through this folder's entry point, as the wheel
does) and its records: each graph it compiles (the forward, and the backward when there is one)
goes through the NEFF cache as a graph, is counted in ``counters["neuron"]["compiled_graphs"]`` and
kept as a record ``get_dynamo_metrics()`` returns (graph_id, graph_name, model_name,
has_collectives, graph_node_count, timestamp, torch_neuronx_fx_passes_us, torch_neuronx_lower_us,
torch_neuronx_compile_us). The graph runs eagerly (aot_autograd's partitioned graphs). At exit,
with ``TORCH_NEURONX_ENABLED_METRIC_TABLES=graph_stats``, the same records go to
``$TORCH_NEURONX_METRICS_DIR/metric_table_graph_stats_rank{RANK}.csv``, as torch-neuronx writes them.
``TORCHNEURON_DOUBLE_CALLS``: a file that gets a line at each get_dynamo_metrics() call."""

from __future__ import annotations

import atexit
import csv
import logging
import os
import time
from dataclasses import astuple, dataclass, fields

from . import _cache

_records: list = []


@dataclass
class NeuronCompilationMetrics:
    graph_id: str
    graph_name: str = ""
    model_name: str = ""
    has_collectives: bool = False
    graph_node_count: int = 0
    timestamp: str = ""
    torch_neuronx_fx_passes_us: int = 0
    torch_neuronx_lower_us: int = 0
    torch_neuronx_compile_us: int = 0


@dataclass
class NewerMetrics:
    """A newer torch-neuronx's record (TORCHNEURON_DOUBLE_DYNAMO_METRICS=other-fields): renamed fields."""

    id: str
    name: str = ""
    nodes: int = 0
    neff_compile_ms: float = 0.0


def _record(gm, kind: str, nth: int):
    from torch._dynamo.utils import counters

    code = gm.code if hasattr(gm, "code") else str(gm.graph)
    key = _cache.key_of(f"graph|{kind}|{code}")
    start = time.perf_counter()
    took = _cache.compile_neff(key)  # a graph's NEFF goes through the same compilation cache
    fx_us = int((time.perf_counter() - start - took) * 1e6)
    collectives = any("all_reduce" in str(n.target) for n in gm.graph.nodes)
    counters["neuron"]["compiled_graphs"] += 1
    if collectives:
        counters["neuron"]["graphs_with_collectives"] += 1
    _records.append(NeuronCompilationMetrics(
        graph_id=key, graph_name=f"model_0_{kind}_{nth}", model_name="model", has_collectives=collectives,
        graph_node_count=len(gm.graph.nodes), timestamp=f"{time.time():.6f}", torch_neuronx_fx_passes_us=fx_us,
        torch_neuronx_lower_us=200, torch_neuronx_compile_us=int(took * 1e6)))


_logger = logging.getLogger("torch_neuronx.neuron_dynamo_backend")
_modes_said: set = set()


def _dynamic_shape(gm) -> tuple[str, str] | None:
    """(node, shape) of the first node whose shape is symbolic under dynamic=True (which turns dynamo's
    assume_static_by_default off for the call), or None; a shape dynamo made dynamic by itself on a
    recompile is compiled as it comes, as TorchNeuron recompiles per new shape."""
    import torch
    import torch._dynamo.config

    if torch._dynamo.config.assume_static_by_default:
        return None
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        shape = getattr(value, "shape", None)
        if shape is not None and any(isinstance(d, torch.SymInt) for d in shape):
            return node.name, "f32[" + ",".join(str(d) for d in shape) + "]"
    return None


def _executed(graph):
    """The graph's run on the device: ``TORCHNEURON_DOUBLE_GRAPH_FAIL=1`` makes it fail, then it runs
    eagerly only when TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION is 0 (1, the default, raises)."""
    def run(*inputs):
        if os.environ.get("TORCHNEURON_DOUBLE_GRAPH_FAIL") == "1":
            error = RuntimeError("NRT: nrt_execute failed (status 1002)")
            if os.environ.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "1").lower() not in ("0", "false"):
                raise error
            _logger.error(f"Execution failed: {error}")
            _logger.warning("Falling back to original GraphModule execution")
        return graph.forward(*inputs)
    return run


def neuron_backend(gm, example_inputs, **kwargs):
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    from . import _log

    dynamic = _dynamic_shape(gm)
    if dynamic is not None:
        raise RuntimeError(f"[NCC_EMOD025] Dynamic shape is not supported: instruction '{dynamic[0]}' has shape "
                           f"'{dynamic[1]}'. The Neuron compiler requires all tensor dimensions to be statically sized.")
    mode = kwargs.get("mode")
    if mode and mode != "default" and mode not in _modes_said:
        _modes_said.add(mode)
        _log.log(1, f"torch.compile mode '{mode}' is not supported by the neuron backend; falling back to 'default'")
    nth = len(_records)

    def compiler(kind: str):
        def compile_graph(graph, inputs):
            _record(graph, kind, nth)
            return make_boxed_func(_executed(graph))
        return compile_graph

    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"))(gm, example_inputs)


def get_dynamo_metrics() -> list:
    calls = os.environ.get("TORCHNEURON_DOUBLE_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write("get_dynamo_metrics\n")
    mode = os.environ.get("TORCHNEURON_DOUBLE_DYNAMO_METRICS", "")
    if mode == "raise":
        raise RuntimeError("NRT: synchronize failed (status 1005)")
    if mode == "other-fields":
        return [NewerMetrics(id=r.graph_id, name=r.graph_name, nodes=r.graph_node_count,
                             neff_compile_ms=r.torch_neuronx_compile_us / 1000) for r in _records]
    return list(_records)


def reset_dynamo_metrics() -> None:
    _records.clear()


def _write_table() -> None:
    if "graph_stats" not in os.environ.get("TORCH_NEURONX_ENABLED_METRIC_TABLES", "").split(",") or not _records:
        return
    folder = os.environ.get("TORCH_NEURONX_METRICS_DIR", "/tmp")
    path = os.path.join(folder, f"metric_table_graph_stats_rank{os.environ.get('RANK', '0')}.csv")
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow([x.name for x in fields(NeuronCompilationMetrics)])
        out.writerows(astuple(r) for r in _records)


atexit.register(_write_table)
