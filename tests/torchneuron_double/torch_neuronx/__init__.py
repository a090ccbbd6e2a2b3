"""A TorchNeuron double, for tests only: on the CPU, under torch 2.13, it plays the signals
torch-neuronx (TorchNeuron, the native ``neuron`` device of Neuron 2.30+) documents, so that
neurondesk's TorchNeuron adapter (neurondesk/collectors/torchneuron.py and the probe's
torchneuron.py) is exercised by a real process. Nothing here is a capture: no Trainium here.

It follows these pages of the AWS Neuron documentation (the ``latest`` docs as stored, read for
Neuron 2.33-2.34):

- "TorchNeuron environment variables" (torch/reference/env-vars, date-modified 2026-10-14):
  ``TORCH_NEURONX_NEFF_CACHE_DIR`` (the persistent NEFF cache), ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION``,
  the logging and metrics variables ``TORCH_NEURONX_LOG_LEVEL`` (0 error, 1 warning (the default),
  2 info, 3 debug), ``TORCH_NEURONX_LOG_FILE`` and ``TORCH_NEURONX_METRICS_ENABLED``, as issue 44 quotes them;
- "torch.compile backend reference" (torch/compile/reference-torch-compile, 2026-10-14):
  ``torch.compile(backend="neuron")``, ``torch_neuronx.get_dynamo_metrics()``, ``dynamic=True`` rejected;
- "What are Neuron Compiler artifacts?" (compiler/about-compiler-artifacts, 2026-11-16): eager mode
  lowers each op to StableHLO and compiles it into a NEFF, kept in memory and in the persistent
  NEFF cache; a new shape is a new compile;
- issue 44's quotes of the logging and metrics pages: ``[NEFF_CACHE] Cache MISS for key: K``,
  ``Cache HIT for key: K``, ``Storing NEFF for key: K`` at level 2, the ``CompilationCache.*``
  counters and the ``CompilationCache.CompilationTime`` metric, ``torch._dynamo.utils.counters["neuron"]``.

What it does: importing it names PrivateUse1 ``neuron`` (a Python backend: torch 2.13's
``_setup_privateuseone_for_python_backend``), registers ``torch.neuron``, and makes ``.to("neuron")``
and ``device="neuron"`` give tensors of device ``neuron:0`` (a wrapper around a CPU tensor). Every
ATen op on them is looked up in a NEFF cache by op and shapes: in memory, then on disk; a miss
"compiles" (sleeps ``TORCHNEURON_DOUBLE_COMPILE_S``, default 0.01 s), counts and times the compile
in the metrics, stores the NEFF and logs the three lines. Knobs for the bad-input tests:
``TORCHNEURON_DOUBLE_DYNAMO_METRICS`` = ``raise`` | ``other-fields``; ``TORCHNEURON_DOUBLE_WARN``: a
warning logged at import; ``TORCHNEURON_DOUBLE_CORES`` (default 2): the NeuronCores it says it has.

TorchNeuron's failures (issue 44 item 6), each as the pages above (and the compiler's error code
page compiler/error-codes/EMOD025, "Supported PyTorch APIs and operators"
torch/reference/api/supported-operators of 2026-11-06) tell it:
``torch.compile(..., dynamic=True)`` is rejected during compilation with the compiler's
``[NCC_EMOD025] Dynamic shape is not supported: instruction '<name>' has shape '<shape>'. ...``;
a ``mode`` other than 'default' logs a warning (level 1; its words are the double's, the pages give
none) and compiles as default; ``TORCHNEURON_DOUBLE_GRAPH_FAIL=1``: each compiled graph fails on the
device, and with ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0`` runs eagerly after torch-neuronx's
``Execution failed: <error>`` / ``Falling back to original GraphModule execution`` (Python logging,
as its published source), otherwise the error is raised (1, the default);
``TORCHNEURON_DOUBLE_CPU_FALLBACK=aten.nonzero,...``: those eager ops run on the CPU, logged at
Python's DEBUG level as ``No implementation could handle operation aten::nonzero. Falling back on
CPU`` and listed by ``get_fallback_ops()`` (torch-neuronx's op tracking, as published with its source).
"""

from __future__ import annotations

import torch  # noqa: F401 - torch first, as torch-neuronx does

__version__ = "2.13.3.0+double"

from . import _log, _tensor, memory, metrics, neuron  # noqa: E402
from ._dynamo_backend import get_dynamo_metrics, reset_dynamo_metrics  # noqa: E402

__all__ = ["device_count", "get_dynamo_metrics", "get_fallback_ops", "memory", "metrics", "reset_dynamo_metrics",
           "synchronize"]

_tensor.install(neuron)
memory.install_accelerator()
_log.startup_warning()


def device_count() -> int:
    return neuron.device_count()


def get_fallback_ops() -> list[str]:
    """The eager ops run on the CPU so far."""
    return list(_tensor.FALLBACK_OPS)


def current_device() -> int:
    return 0


def synchronize(device=None) -> None:
    """Waits for the ops handed to the pipeline (TORCHNEURON_DOUBLE_PIPELINE=async); else nothing runs
    asynchronously here."""
    from . import _cache

    _cache.synchronize()
