"""summary.md's rows for summary.json's ``neuron`` section (core/summary/neuron_summary.py): memory peaks
per category, the HBM headroom, the runtime's allocation logs, a Neuron Explorer capture and the
TorchNeuron compile split. Text only, from the summary's values."""

from __future__ import annotations

from neurondesk.core.reduce.compile.graph_stats import split_times_words
from neurondesk.core.summary.neuron_summary import NeuronSection
from neurondesk.core.summary.types import Summary
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean

LABEL = {"tensors": "tensors", "constants": "constants", "model_code": "model code",
         "model_shared_scratchpad": "shared scratchpad", "runtime_memory": "runtime", "dma_buffers": "DMA buffers"}


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _peaks(peaks: dict) -> str:
    return ", ".join(f"{LABEL.get(k, k)} {_bytes(v)}" for k, v in peaks.items() if v) or "none"


def neuron_rows(s: Summary) -> list[tuple[str, str]]:
    n = s.neuron or NeuronSection()
    rows: list[tuple[str, str]] = []
    if n.memory_peak_bytes:
        rows.append(("Neuron memory peak per core", _peaks(n.memory_peak_bytes)))
    if n.host_memory_peak_bytes:
        rows.append(("Neuron host memory peak", _peaks(n.host_memory_peak_bytes)))
    room = n.hbm_headroom
    if room:
        rows.append(("HBM headroom", f"{_bytes(room.free_bytes)} ({fmt.pct(room.free_fraction)}) on "
                                     f"nc{room.core} at its peak of {_bytes(room.peak_bytes)} / "
                                     f"{_bytes(room.capacity_bytes)}"))
    if n.memory_logs:
        rows.append(("Neuron allocation log", clean(", ".join(n.memory_logs))))
    p = n.profile
    if p:
        text = f"{p.folder}; open it with `{p.open_command}`"
        if p.torch_profiler_at:
            text += f" (torch.profiler is on too at {p.torch_profiler_at}: the two conflict)"
        rows.append(("Neuron Explorer capture", clean(text)))
    return rows


def compile_split_lines(s: Summary) -> list[str]:
    """'- compile 3, rank 0: FX passes 1.20 s · lowering 0.80 s · Neuron compile 41.30 s (graph g)'."""
    out = []
    for x in s.neuron.compile_splits if s.neuron is not None else []:
        times = split_times_words(x.fx_passes_s, x.lower_s, x.compile_s)
        who = f", rank {x.rank}" if x.rank is not None else ""
        graph = f" (graph {clean(x.graph_id)})" if x.graph_id else ""
        out.append(f"- compile {x.compile}{who}: {times}{graph}")
    return out
