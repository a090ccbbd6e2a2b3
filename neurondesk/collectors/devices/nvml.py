"""NVIDIA GPUs through NVML (nvidia-ml-py, imported as ``pynvml``), imported only when asked.

Absent package, absent driver, or any NVML failure gives the reason "NVML not available: ...",
never an exception. Each per-device query is guarded on its own: many GPUs answer
NotSupported for power or temperature, and that must not hide the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Self

from neurondesk.core.events.device_events import GpuProcess, GpuReading, GpuSample

_NOT_AVAILABLE_64 = 2**63  # NVML's "value not available" is 2**64-1


def _why(e: BaseException) -> str:
    return str(e) or type(e).__name__


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends: that field is None
        return None


def _text(v: Any) -> str | None:
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return v if isinstance(v, str) else None


def gpu_record(nvml: Any, handle: Any, index: int) -> GpuReading:
    """One GPU; fields the GPU will not tell are None."""
    mem = _try(nvml.nvmlDeviceGetMemoryInfo, handle)
    util = _try(nvml.nvmlDeviceGetUtilizationRates, handle)
    power = _try(nvml.nvmlDeviceGetPowerUsage, handle)  # milliwatts
    limit = _try(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)  # milliwatts
    temp = _try(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
    return GpuReading(
        index=index,
        name=_text(_try(nvml.nvmlDeviceGetName, handle)),
        uuid=_text(_try(nvml.nvmlDeviceGetUUID, handle)),
        memory_total=int(mem.total) if mem is not None else None,
        memory_used=int(mem.used) if mem is not None else None,
        util_gpu=float(util.gpu) if util is not None else None,
        util_memory=float(util.memory) if util is not None else None,
        power_w=power / 1000.0 if isinstance(power, int | float) else None,
        power_limit_w=limit / 1000.0 if isinstance(limit, int | float) else None,
        temperature_c=float(temp) if isinstance(temp, int | float) else None,
    )


def gpu_processes(nvml: Any, handle: Any, index: int, pids: set[int] | None) -> list[GpuProcess]:
    """Compute and graphics processes on one GPU, limited to ``pids`` when given."""
    seen: dict[int, GpuProcess] = {}
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        fn = getattr(nvml, getter, None)
        for p in (_try(fn, handle) if fn else None) or []:
            pid = getattr(p, "pid", None)
            if not isinstance(pid, int) or (pids is not None and pid not in pids):
                continue
            used = getattr(p, "usedGpuMemory", None)
            used = int(used) if isinstance(used, int) and used < _NOT_AVAILABLE_64 else None
            seen.setdefault(pid, GpuProcess(pid=pid, gpu=index, used_memory=used))
    return list(seen.values())


def _import_nvml() -> tuple[Any, str | None]:
    try:
        import pynvml  # provided by the nvidia-ml-py package
    except ImportError:
        return None, "NVML not available: nvidia-ml-py (pynvml) is not installed"
    except Exception as e:  # noqa: BLE001 - a broken install must read as "not available"
        return None, f"NVML not available: {_why(e)}"
    return pynvml, None


class NvmlSampler:
    """``open()`` once, ``sample()`` as often as wanted, ``close()``. ``module`` replaces pynvml."""

    def __init__(self, module: Any = None) -> None:
        self._nvml = module
        self._opened = False
        self.reason: str | None = None
        self.driver: str | None = None

    def open(self) -> str | None:
        """Initialise NVML; returns the reason it is not available, else None."""
        if self._nvml is None:
            self._nvml, self.reason = _import_nvml()
            if self.reason:
                return self.reason
        try:
            self._nvml.nvmlInit()
        except Exception as e:  # noqa: BLE001 - NVMLError (no driver, no library) or anything else
            self.reason = f"NVML not available: {_why(e)}"
            return self.reason
        self._opened = True
        self.driver = _text(_try(self._nvml.nvmlSystemGetDriverVersion))
        return None

    def close(self) -> None:
        if self._opened:
            _try(self._nvml.nvmlShutdown)
            self._opened = False

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sample(self, pids: Iterable[int] | None = None, t: float | None = None) -> GpuSample:
        """Every GPU, plus the memory each of ``pids`` holds (all processes when None)."""
        t = time.time() if t is None else t
        if not self._opened:
            return GpuSample(t=t, error=self.reason or "NVML not opened")
        nvml = self._nvml
        wanted = set(pids) if pids is not None else None
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as e:  # noqa: BLE001 - reported in the sample, never raised
            return GpuSample(t=t, driver=self.driver, error=f"NVML device count failed: {_why(e)}")
        gpus: list[GpuReading] = []
        procs: list[GpuProcess] = []
        for i in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
            except Exception as e:  # noqa: BLE001 - e.g. a GPU that fell off the bus
                gpus.append(GpuReading(index=i, error=_why(e)))
                continue
            gpus.append(gpu_record(nvml, handle, i))
            procs.extend(gpu_processes(nvml, handle, i, wanted))
        return GpuSample(t=t, gpus=gpus, driver=self.driver, processes=procs)


def read_gpus(module: Any = None, t: float | None = None) -> tuple[GpuSample | None, str | None]:
    """One-shot (for the inventory): (sample, None) or (None, reason)."""
    sampler = NvmlSampler(module)
    reason = sampler.open()
    if reason:
        return None, reason
    try:
        return sampler.sample(None, t), None
    finally:
        sampler.close()
