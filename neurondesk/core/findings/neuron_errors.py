"""One finding per kind of Neuron failure the output told (core/reduce/neuron_faults.py), in words
a user acts on: device out of memory, the compiler killed by the host's OOM killer, version skew,
and TorchNeuron's (collectors/logparse/neuron_faults.py cites the pages): a dynamic shape the
compiler rejects (NCC_EMOD025, torch.compile's dynamic=True), a torch.compile mode ignored, a graph
that failed to compile run eagerly, eager ops run on the CPU."""

from __future__ import annotations

from neurondesk.core.reduce.neuron_faults import KEEP_PER_KIND as KEEP
from neurondesk.core.reduce.neuron_faults import NeuronFaults
from neurondesk.core.reduce.state import RunState

DEVICE_OOM_FIX = ("try a smaller batch or sequence length, gradient accumulation to keep the effective batch, "
                  "another logical-core configuration (NEURON_LOGICAL_NC_CONFIG; at LNC=1 on trn2 two cores share "
                  "one HBM), or a larger instance")
COMPILER_OOM_FIX = ("the host ran out of memory while compiling: compile fewer graphs at once (fewer parallel "
                    "compiles or ranks compiling together), a smaller batch or sequence length (a smaller graph), "
                    "gradient accumulation, or an instance with more host memory")
SKEW_FIX = "run `neurondesk doctor` to see which installed Neuron packages disagree and what to install"
DYNAMIC_FIX = ("give the compiler static shapes: drop dynamic=True from torch.compile(backend=\"neuron\") (or "
               "set dynamic=False; TorchNeuron rejects it and recompiles per new shape instead), and pad or bucket "
               "a dimension that varies (sequence length, last batch) to a few fixed sizes")
MODE_FIX = ("drop mode= from torch.compile(backend=\"neuron\"): only 'default' applies, the others have no effect "
            "on TorchNeuron")
GRAPH_FALLBACK_FIX = ("the graph ran eagerly, op by op: fix the compile error above it, and set "
                      "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1 (the default) so a graph that cannot compile fails "
                      "the run instead of running slowly")
CPU_FALLBACK_FIX = ("each runs on the host and copies its result back, every step: replace them with ops TorchNeuron "
                    "supports (its operator compatibility table), or set TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 "
                    "to raise where a Neuron implementation fails instead of falling back")
TORCHNEURON_KINDS = ("dynamic-shape", "graph-fallback", "cpu-fallback", "mode-ignored")
KINDS = ("device-oom", "compiler-oom", "version-skew", *TORCHNEURON_KINDS)


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


def _details(faults: NeuronFaults, kind: str, limit: int = 5) -> list[str]:
    seen: list[str] = []
    for f in faults.by_kind[kind]:
        if f.detail and f.detail not in seen:
            seen.append(f.detail)
    return seen[:limit]


def _torchneuron(kind: str, faults: NeuronFaults) -> str:
    n, details = faults.counts.get(kind, 0), _details(faults, kind)
    if kind == "dynamic-shape":
        what = f" ({details[0]})" if details else ""
        return f"TorchNeuron: the Neuron compiler rejected a dynamic shape, NCC_EMOD025{what}; {DYNAMIC_FIX}"
    if kind == "mode-ignored":
        return f"TorchNeuron: torch.compile mode '{details[0] if details else '?'}' ignored, 'default' used; {MODE_FIX}"
    if kind == "graph-fallback":
        return f"TorchNeuron: {n} torch.compile graph run(s) fell back to eager execution; {GRAPH_FALLBACK_FIX}"
    distinct = len(_details(faults, kind, limit=KEEP))
    ops = ", ".join(details) + (f" and {distinct - len(details)} more" if distinct > len(details) else "")
    return f"TorchNeuron: {distinct or n} eager op(s) fell back to the CPU ({ops or 'not named'}); {CPU_FALLBACK_FIX}"


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
        elif kind == "version-skew":
            out.append((kind, _version_skew(faults)))
        else:
            out.append((kind, _torchneuron(kind, faults)))
    return out
