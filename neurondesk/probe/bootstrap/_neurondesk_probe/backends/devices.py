"""The device and precision the workload trains on, said once: from the optimizer's parameters,
the model's (a loop with no optimizer), or an XLA sync before any optimizer (an inference loop)."""

from __future__ import annotations


class Devices:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.device_reported = False  # by the optimizer's parameters (device and precision)
        self.xla_device_reported = False  # by a sync before any optimizer (device only)
        self.autocast: str | None = None  # set by the forward watch at the first training forward

    def report_device(self, optimizer) -> None:
        self.device_reported = True
        param = None
        for group in optimizer.param_groups:
            if group["params"]:
                param = group["params"][0]
                break
        if param is not None:
            self.report_param_device(param)

    def report_module_device(self, mod) -> None:
        """The device of a loop with no optimizer: its model's first parameter's."""
        self.device_reported = True
        params = getattr(mod, "parameters", None)
        param = next(iter(params()), None) if callable(params) else None
        if param is not None:
            self.report_param_device(param)

    def report_param_device(self, param) -> None:
        dev = param.device
        kind, name = dev.type, str(dev)
        if kind == "xla":
            self.probe.clock.is_xla = True
            hw = "CPU"
            try:
                import torch_xla.runtime as xr

                hw = xr.device_type() or "CPU"
            except Exception:  # noqa: BLE001
                pass
            kind = "neuron" if hw.upper() == "NEURON" else ("xla-cpu" if hw.upper() == "CPU" else f"xla-{hw.lower()}")
            name = f"{dev} ({hw})"
        elif kind == "cuda":
            try:
                import torch

                name = torch.cuda.get_device_name(dev)
            except Exception:  # noqa: BLE001
                pass
        facts = {}
        if kind == "neuron" and self.probe.torchneuron.module is not None:  # TorchNeuron's native device
            facts = self.probe.torchneuron.device_facts()
            cores = f", {facts['cores']} NeuronCores" if facts.get("cores") else ""
            name = f"{dev} (TorchNeuron {facts.get('framework_version') or '?'}{cores})"
        dtype = str(param.dtype).replace("torch.", "")
        precision = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)
        if self.autocast and precision == "fp32":
            precision = f"{self.autocast}-autocast"
        self.probe.send({"kind": "device_seen", "device_kind": kind, "device_name": name, "precision": precision,
                         **facts})

    def report_xla_device(self) -> None:
        """The device seen from a sync, before any optimizer (an inference loop, or a setup sync
        before the optimizer exists): no precision yet; the optimizer's report adds it later."""
        self.xla_device_reported = True
        import torch_xla
        import torch_xla.runtime as xr

        hw = (xr.device_type() or "CPU").upper()
        kind = "neuron" if hw == "NEURON" else ("xla-cpu" if hw == "CPU" else f"xla-{hw.lower()}")
        self.probe.send({"kind": "device_seen", "device_kind": kind, "device_name": f"{torch_xla.device()} ({hw})",
                         "precision": None})

    @staticmethod
    def autocast_state(device_type: str) -> str:
        import torch

        try:
            if torch.is_autocast_enabled(device_type):
                dt = torch.get_autocast_dtype(device_type)
                return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dt, str(dt))
        except Exception:  # noqa: BLE001
            pass
        return ""
