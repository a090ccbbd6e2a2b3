"""One small seam over xla / cuda / cpu: device, end-of-step sync, wait, compile counter."""

from __future__ import annotations

import sys

import torch


def _xla_importable() -> bool:
    try:
        import torch_xla  # noqa: F401
    except Exception:  # ImportError, or a broken install raising at import time
        return False
    return True


class Backend:
    def __init__(self, requested: str = "auto") -> None:
        kind = requested
        if kind == "auto":
            kind = "xla" if _xla_importable() else "cuda" if torch.cuda.is_available() else "cpu"
        self.kind = kind
        if kind == "xla":
            import torch_xla
            import torch_xla.core.xla_model as xm

            self.torch_xla, self.xm = torch_xla, xm
            self.device = torch_xla.device()
            self.hw = xm.xla_device_hw(self.device)  # 'CPU', 'TPU', 'NEURON', ...
        elif kind == "cuda":
            self.device = torch.device("cuda")
            self.hw = torch.cuda.get_device_name()
        else:
            self.device = torch.device("cpu")
            self.hw = "CPU"

    def sync(self) -> None:
        """End-of-step graph cut: launches the pending XLA graph (async); no-op elsewhere."""
        if self.kind == "xla":
            self.torch_xla.sync()

    def wait(self) -> None:
        """Block until the device is idle (only at timing-window boundaries)."""
        if self.kind == "xla":
            self.xm.wait_device_ops()
        elif self.kind == "cuda":
            torch.cuda.synchronize()

    def compile_count(self) -> int:
        """Graphs compiled so far: XLA uncached compiles plus dynamo graphs (if torch.compile ran)."""
        n = 0
        if self.kind == "xla":
            import torch_xla.debug.metrics as met

            n += met.counter_value("UncachedCompile") or 0
        if "torch._dynamo" in sys.modules:
            from torch._dynamo.utils import counters

            n += counters["stats"]["unique_graphs"]
        return n
