"""The probe's per-backend parts: the device a run trains on (devices), torch_xla's lazy path (xla),
TorchNeuron's native `neuron` device (torchneuron) and torch.compile (dynamo). Stdlib only, like the
rest of the probe.

A backend (xla, torchneuron, dynamo) is one class, built with the probe, that says two things of itself:
  NAME     the Probe attribute it is (``probe.xla``): the other parts reach it there
  PATCHES  the modules whose import applies it: (module, the method of the backend the post-import
           finder calls with that module right after it executed, the hook turned off alone if it fails)
Both are read from BACKENDS below, so a new backend (a CUDA one, a TorchNeuron release of another
shape) is one module and one line there; tests/contracts/test_probe_backends.py holds the shape."""

from __future__ import annotations

from .dynamo import DynamoHooks
from .torchneuron import TorchNeuronHooks
from .xla import XlaHooks

BACKENDS = (XlaHooks, TorchNeuronHooks, DynamoHooks)
