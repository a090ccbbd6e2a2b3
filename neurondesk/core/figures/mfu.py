"""Model FLOPs utilisation (MFU) and hardware FLOPs utilisation (HFU) of a run. Pure.

MFU = model FLOP/s ÷ the dense peak FLOP/s of the hardware the run used.

- Model FLOP/s: ``config["model_flops_per_step"]`` (a workload that counted its step once, e.g. with
  ``torch.utils.flop_counter.FlopCounterMode``) × steady steps/s × processes; otherwise
  6 × ``config["param_count"]`` × steady tokens/s (forward + backward of a dense transformer; the
  attention score term and the embedding lookup are not counted apart).
- Peak: per-chip **dense** BF16 TFLOPS (FP8 for an fp8 run) from the price table's chip rows
  (shared/PRICING.md §2b; never the sparse figure) × the instance's accelerators: the whole
  instance, which is what the hourly price buys. An fp32 run is measured against the BF16 peak
  (the Neuron compiler casts matmuls to BF16 by default; on a GPU it is an upper bound), and the
  note says so. A CPU run (eager or XLA on the CPU) has no peak: MFU is None and the note says why.
- HFU = neuron-monitor's per-core ``flops`` (mean over the samples taken in steady state, see
  RunState.hw_flops_sum) ÷ the same peak. Only Neuron reports hardware FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.node.prices import PriceTable, bundled_price_table
from neurondesk.core.reduce.state import RunState

# GPU name fragments -> chip key in the price table; the longer names first ("l40s" before "l4").
CUDA_CHIPS = (("h200", "h200"), ("h100", "h100"), ("a100", "a100"), ("a10g", "a10g"),
              ("l40s", "l40s"), ("l4", "l4"))
PEAK_KINDS = ("neuron", "cuda")


@dataclass(frozen=True)
class Peak:
    flops_per_s: float | None
    what: str  # "1 × trainium 190 TFLOPS dense bf16 (trn1.2xlarge)" or why there is none


@dataclass(frozen=True)
class MfuResult:
    mfu: float | None
    hfu: float | None
    note: str
    model_flops_per_s: float | None
    hardware_flops_per_s: float | None
    peak_flops_per_s: float | None


def _dtype(precision: str | None) -> str:
    return "fp8" if precision and "fp8" in precision.lower() else "bf16"


def cuda_chip(device_name: str | None) -> str | None:
    name = (device_name or "").lower()
    return next((chip for frag, chip in CUDA_CHIPS if frag in name), None)


def resolve_peak(device_kind: str | None, device_name: str | None, instance_type: str | None,
                 precision: str | None, processes: int, table: PriceTable) -> Peak:
    """The dense peak FLOP/s of what the run used, or None with the reason."""
    it = instance_type.strip().lower() if instance_type else None
    if device_kind not in PEAK_KINDS:
        if device_kind is None:
            return Peak(None, "device unknown (no training step was seen)")
        priced = f"; it was priced as {it}, but it ran on {device_kind}" if it else ""
        return Peak(None, f"no peak FLOPS for a {device_kind} run (MFU needs a Neuron or CUDA device){priced}")
    row = table.instances.get(it) if it else None
    if device_kind == "neuron":
        if row is None or row.kind != "neuron":
            return Peak(None, f"Neuron instance type {'unknown' if it is None else repr(it) + ' not in the table'}: "
                              "pass --instance-type to know the peak")
        chip_key, count, where = row.chip, row.accelerators, it
    else:
        chip_key = cuda_chip(device_name)
        if row is not None and row.kind == "cuda" and chip_key in (None, row.chip):
            chip_key, count, where = row.chip, row.accelerators, it
        elif chip_key is not None:
            count, where = max(1, processes), f"{max(1, processes)} GPU(s) used, instance type unknown"
        else:
            return Peak(None, f"GPU {device_name or '?'} is not in the peak table")
    chip = table.chips.get(chip_key)
    dtype = _dtype(precision)
    tflops = None if chip is None else (chip.fp8_dense_tflops if dtype == "fp8" else chip.bf16_dense_tflops)
    if tflops is None:
        return Peak(None, f"no dense {dtype} peak for chip {chip_key!r}")
    what = f"{count} × {chip_key} {tflops:g} TFLOPS dense {dtype} ({where})"
    if precision and precision.startswith("fp32"):
        what += "; an fp32 run, measured against the bf16 peak"
    return Peak(count * tflops * 1e12, what)


def model_flops_per_s(config: dict, tokens_per_s: float | None, steps_per_s: float | None,
                      processes: int) -> tuple[float | None, str]:
    """(model FLOP/s, how it was counted) or (None, why not)."""
    per_step = config.get("model_flops_per_step")
    if isinstance(per_step, int | float) and not isinstance(per_step, bool) and per_step > 0:
        if not steps_per_s:
            return None, "no steady step yet"
        return per_step * steps_per_s * max(1, processes), f"model FLOPs per step {per_step:.4g} (counted by the workload)"
    n = config.get("param_count")
    if not (isinstance(n, int | float) and not isinstance(n, bool) and n > 0):
        return None, "the workload declared neither param_count nor model_flops_per_step"
    if not tokens_per_s:
        return None, "no steady tokens/s"
    return 6.0 * n * tokens_per_s, f"6 × {int(n):,} params × tokens/s"


def mfu_for_state(state: RunState, table: PriceTable | None = None) -> MfuResult:
    table = table or bundled_price_table()  # chip peaks: constant data
    world = state.world
    total = state.steady_total_s
    steps_per_s = len(state.steady_times) / total if total > 0 else None
    model, how = model_flops_per_s(state.config, state.steady_tokens_per_s, steps_per_s, world)
    hw = state.hw_flops_sum / state.hw_flops_samples if state.hw_flops_samples else None
    instance = state.instance_type or (state.neuron.instance_type if state.neuron else None)
    peak = resolve_peak(state.device_kind, state.device_name, instance, state.precision or
                        state.config.get("precision"), world, table)
    if peak.flops_per_s is None:
        return MfuResult(None, None, peak.what, model, hw, None)
    mfu = None if model is None else model / peak.flops_per_s
    hfu = None if hw is None else hw / peak.flops_per_s
    note = f"{how} ÷ {peak.what}" if model is not None else f"{how}; peak {peak.what}"
    if hw is not None:
        note += f"; HFU: neuron-monitor flops, mean of {state.hw_flops_samples} steady samples"
    return MfuResult(mfu, hfu, note, model, hw, peak.flops_per_s)
