"""Every event kind, in one place.

A kind is known because it is listed here, not because some module happened to be imported:
reading a journal with only ``neurondesk.store`` imported knows ``host_sample`` as well as
``step``. A new event type is added to its module and to ``EVENT_CLASSES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from neurondesk.core.events import attempt_events as att
from neurondesk.core.events import checkpoint_events as ckpt
from neurondesk.core.events import device_events as dev
from neurondesk.core.events import neff_events as neff
from neurondesk.core.events import price_events as price
from neurondesk.core.events import run_events as ev

EVENT_CLASSES: tuple[type[ev.Event], ...] = (
    # the run and its processes (launcher, probe)
    ev.RunStarted,
    price.PriceResolved,  # the price the recorder resolved (journals before it: RunStarted's)
    ev.ProcessAttached,
    ev.ProcessFailed,
    ev.RankExited,
    att.StepResumed,  # where a restarted process's step count begins (core/reduce/attempts.py)
    ev.CollectiveBlocked,
    ev.DeviceSeen,
    ev.WorkloadConfig,
    ev.RunFinished,
    # steps and compiles (probe, log parsers)
    ev.StepEnded,
    ev.StepBatch,
    ev.EvalPhase,
    ev.EvalProgress,
    ev.GraphExecuted,
    ev.CompileStarted,
    ev.CompileFinished,
    ev.DynamoRecompile,
    ev.GraphBreak,
    ev.LossReported,
    ev.ThroughputReported,
    ev.ProbeDropped,
    ckpt.CheckpointOp,  # checkpoint saves and loads (probe)
    ckpt.LongCollective,  # a torch.distributed call past 20 ms: another rank's wait for a save (probe)
    # TorchNeuron's NEFF compiles and cache (probe, collectors/torchneuron.py)
    neff.NeffCompiles,
    neff.NeffCacheTotals,
    neff.NeffCacheLog,
    neff.NeuronDeviceMemory,  # TorchNeuron's device memory statistics (probe)
    neff.NeffLogMark,
    # the workload's output and neurondesk's own messages
    ev.OutputLine,
    ev.LogError,
    ev.ParseProblem,
    ev.Notice,
    # device and host telemetry (collectors/devices)
    dev.DeviceInventory,
    dev.NeuronSample,
    dev.GpuSample,
    dev.HostSample,
    dev.ProcessTreeSample,
    dev.CgroupMemory,
    dev.CacheScan,
    dev.NeuronGraphStat,
    dev.NeuronFault,
    dev.NeuronProfileCapture,
    dev.NodeHealthSample,
    # the disks (collectors/devices/disk.py) and output the relay could not store
    dev.DiskSample,
    ev.OutputNotStored,
)


def _by_kind() -> dict[str, type[ev.Event]]:
    out: dict[str, type[ev.Event]] = {}
    for cls in EVENT_CLASSES:
        if not cls.kind or cls.kind in out:
            raise RuntimeError(f"event kind {cls.kind!r} of {cls.__name__} is empty or listed twice")
        out[cls.kind] = cls
    return out


EVENT_TYPES: Mapping[str, type[ev.Event]] = MappingProxyType(_by_kind())
