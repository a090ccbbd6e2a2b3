"""``torch.neuron``: the device module torch-neuronx registers."""

from __future__ import annotations

import os


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def device_count() -> int:
    try:
        return max(1, int(os.environ.get("TORCHNEURON_DOUBLE_CORES", "2")))
    except ValueError:
        return 2


def current_device() -> int:
    return 0


def _is_in_bad_fork() -> bool:
    return False


def manual_seed_all(seed: int) -> None:
    pass


def synchronize(device=None) -> None:
    pass


def get_dynamo_metrics():
    from ._dynamo_backend import get_dynamo_metrics as real

    return real()
