"""One finding per kind of Neuron failure the output told (core/reduce/neuron_faults.py), in words
a user acts on: device out of memory, the compiler killed by the host's OOM killer, version skew."""

from __future__ import annotations

from neurondesk.core.reduce.neuron_faults import NeuronFaults
from neurondesk.core.reduce.state import RunState

DEVICE_OOM_FIX = ("try a smaller batch or sequence length, gradient accumulation to keep the effective batch, "
                  "another logical-core configuration (NEURON_LOGICAL_NC_CONFIG; at LNC=1 on trn2 two cores share "
                  "one HBM), or a larger instance")
COMPILER_OOM_FIX = ("the host ran out of memory while compiling: compile fewer graphs at once (fewer parallel "
                    "compiles or ranks compiling together), a smaller batch or sequence length (a smaller graph), "
                    "gradient accumulation, or an instance with more host memory")
SKEW_FIX = "run `neurondesk doctor` to see which installed Neuron packages disagree and what to install"
KINDS = ("device-oom", "compiler-oom", "version-skew")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _device_oom(state: RunState, faults: NeuronFaults) -> str:
    found = faults.by_kind["device-oom"]
    alloc = next((f for f in found if f.size), None)
    if alloc is not None:
        what = f"failed to allocate {alloc.size}" + (f" of {alloc.usage}" if alloc.usage else "")
        if alloc.device is not None:
            what += f" on ND {alloc.device}:NC {alloc.core}"
    else:
        what = next((f.line for f in found if "status=4" in f.line or "Allocation Failure" in f.line),
                    "an allocation failed")
    text = f"device out of memory: {what}"
    room = state.parts.telemetry.hbm_headroom()
    if room is not None:
        text += (f" (neuron-monitor saw nc{room.core} peak at {_gib(room.peak_bytes)} of "
                 f"{_gib(room.capacity_bytes)})")
    text += f"; {DEVICE_OOM_FIX}"
    if faults.mem_logs:
        text += f"; the runtime's allocation log: {', '.join(faults.mem_logs)}"
    return text


def _compiler_oom(faults: NeuronFaults) -> str:
    lines = [f.line for f in faults.by_kind["compiler-oom"]]
    how = "F137" if any("F137" in x for x in lines) else "exit -9 (SIGKILL)"
    return f"the compiler (neuronx-cc) was killed by the host's out-of-memory killer ({how}); {COMPILER_OOM_FIX}"


def _version_skew(faults: NeuronFaults) -> str:
    seen: list[str] = []
    for f in faults.by_kind["version-skew"]:
        if f.mismatch and f.mismatch not in seen:
            seen.append(f.mismatch)
    return f"Neuron version mismatch: {'; '.join(seen[:3]) or 'see the errors'}; {SKEW_FIX}"


def neuron_fault_findings(state: RunState) -> list[tuple[str, str]]:
    """(kind, message) for each kind of Neuron failure seen, in a fixed order; none when none."""
    faults = state.parts.telemetry.faults
    out = []
    for kind in KINDS:
        if not faults.by_kind.get(kind):
            continue
        if kind == "device-oom":
            out.append((kind, _device_oom(state, faults)))
        elif kind == "compiler-oom":
            out.append((kind, _compiler_oom(faults)))
        else:
            out.append((kind, _version_skew(faults)))
    return out
