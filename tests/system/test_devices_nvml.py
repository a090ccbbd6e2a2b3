"""NVML. Without an NVIDIA driver the "not available" paths run for real (the real pynvml without
libnvidia-ml, and pynvml missing); with one, the real readings are checked against nvidia-smi. The
field mapping is also checked on a tiny fake object at the mapping-function level."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from neurondesk.collectors.devices.nvml import NvmlSampler, gpu_processes, gpu_record, read_gpus
from neurondesk.core.events.device_events import GpuProcess, GpuReading, GpuSample


def _driver_loads() -> bool:
    """Whether this machine's NVIDIA driver library loads, asked without pynvml."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_driver_loads(), reason="an NVIDIA driver is here: test_nvml_reads_the_real_gpus runs instead")
def test_nvml_not_available_is_a_reason_not_an_exception() -> None:
    sampler = NvmlSampler()  # the real pynvml (a dependency), without libnvidia-ml
    reason = sampler.open()
    assert reason is not None and reason.startswith("NVML not available: ")
    assert len(reason) > len("NVML not available: ")
    s = sampler.sample([1], t=5.0)
    assert s == GpuSample(t=5.0, error=reason)
    sampler.close()  # closing a sampler that never opened is harmless
    assert read_gpus() == (None, reason)


@pytest.mark.skipif(not _driver_loads(), reason="no NVIDIA driver here: the not-available path runs instead")
def test_nvml_reads_the_real_gpus() -> None:
    """On a machine with a GPU, the real path: every GPU nvidia-smi lists, with what NVML says."""
    sample, reason = read_gpus(t=5.0)
    assert reason is None and sample is not None and sample.error is None
    assert sample.driver
    listed = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"],
                            capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    assert len(sample.gpus) == len(listed) >= 1
    for g, line in zip(sample.gpus, listed, strict=True):
        index, uuid, name, mem_mib = (x.strip() for x in line.split(","))
        assert (g.index, g.uuid, g.name, g.error) == (int(index), uuid, name, None)
        assert abs(g.memory_total - (int(mem_mib) << 20)) < 1 << 20  # nvidia-smi rounds to MiB
        assert g.memory_used is not None and 0 <= g.memory_used <= g.memory_total
        assert g.temperature_c is not None and g.util_gpu is not None
    with NvmlSampler() as sampler:  # the sampler the recorder runs, for this process only
        s = sampler.sample([os.getpid()], t=6.0)
    assert s.error is None and len(s.gpus) == len(listed) and s.processes == []  # this test holds no GPU memory


def test_nvml_package_missing_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    sample, reason = read_gpus()
    assert sample is None
    assert reason == "NVML not available: nvidia-ml-py (pynvml) is not installed"


class _NotSupported(Exception):
    pass


def test_nvml_mapping_with_fake_handle_no_gpu_here() -> None:
    def not_supported(*_a):
        raise _NotSupported("Not Supported")

    procs = [
        SimpleNamespace(pid=100, usedGpuMemory=2 * 2**30),
        SimpleNamespace(pid=101, usedGpuMemory=None),
        SimpleNamespace(pid=102, usedGpuMemory=2**64 - 1),  # NVML_VALUE_NOT_AVAILABLE
        SimpleNamespace(pid=999, usedGpuMemory=1),  # not ours
    ]
    fake = SimpleNamespace(
        NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",  # older pynvml returns bytes
        nvmlDeviceGetUUID=lambda h: "GPU-1234",
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=80 * 2**30, used=3 * 2**30, free=77 * 2**30),
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=87, memory=40),
        nvmlDeviceGetPowerUsage=lambda h: 312_500,  # milliwatts
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        nvmlDeviceGetTemperature=not_supported,
        nvmlDeviceGetComputeRunningProcesses=lambda h: procs,
        nvmlDeviceGetGraphicsRunningProcesses=lambda h: [procs[0]],  # same pid listed twice
    )
    rec = gpu_record(fake, "h0", 3)
    assert rec == GpuReading(
        index=3, name="NVIDIA H100 80GB HBM3", uuid="GPU-1234",
        memory_total=80 * 2**30, memory_used=3 * 2**30, util_gpu=87.0, util_memory=40.0,
        power_w=312.5, power_limit_w=700.0, temperature_c=None,
    )  # fmt: skip
    assert gpu_processes(fake, "h0", 3, {100, 101, 102}) == [
        GpuProcess(pid=100, gpu=3, used_memory=2 * 2**30),
        GpuProcess(pid=101, gpu=3, used_memory=None),
        GpuProcess(pid=102, gpu=3, used_memory=None),
    ]
    assert [p.pid for p in gpu_processes(fake, "h0", 3, None)] == [100, 101, 102, 999]
    del fake.nvmlDeviceGetGraphicsRunningProcesses  # an older binding without it
    fake.nvmlDeviceGetComputeRunningProcesses = not_supported
    assert gpu_processes(fake, "h0", 3, None) == []
