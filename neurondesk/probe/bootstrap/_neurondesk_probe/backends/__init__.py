"""The probe's per-backend parts: the device a run trains on (devices), torch_xla's lazy path (xla),
TorchNeuron's native `neuron` device (torchneuron) and torch.compile (dynamo). Each is applied by
the post-import finder when its module is first imported; stdlib only, like the rest of the probe."""

from __future__ import annotations
