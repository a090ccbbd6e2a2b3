"""doctor where TorchNeuron is the training path (issue 50 item 6): its persistent NEFF cache folder
(``TORCH_NEURONX_NEFF_CACHE_DIR``, default ``/tmp/neff_cache``: collectors/torchneuron.py) and its cache
switch under both spellings, and TorchNeuron's variables (``TORCH_NEURONX_*``, ``NEURON_RT_*``, the
metrics switch) in place of the XLA path's, which TorchNeuron does not read."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from neurondesk.collectors.devices import human_bytes
from neurondesk.collectors.torchneuron import (  # both spellings, and what turns one on, as the collector reads them
    CACHE_SWITCHES,
    DEFAULT_NEFF_CACHE,
    SWITCH_ON,
)
from neurondesk.doctor import facts as F
from neurondesk.doctor import tables as T
from neurondesk.doctor.check import Check

CACHE_DIR = "TORCH_NEURONX_NEFF_CACHE_DIR"
METRICS = "TORCH_NEURONX_METRICS_ENABLED"
XLA_ONLY = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16", "PJRT_DEVICE", "NEURON_PARALLEL_COMPILE")  # the XLA path's
PREFIXES = ("TORCH_NEURONX_", "NEURON_RT_")
SCAN_MAX = 100_000  # files looked at in the NEFF cache folder (a bounded walk)
SHOWN_MAX = 300  # characters of a variable's value shown


def on_torchneuron(py: F.InterpreterFacts, family: str | None = None) -> bool:
    """TorchNeuron is the training path, as training_path says it: the workload's interpreter has a native
    torch-neuronx; or it has none yet on an instance that runs TorchNeuron (trn2, trn3: where XLA training
    has ended, TorchNeuron is the way)."""
    tnx = (py.packages if not py.error else {}).get("torch-neuronx")
    if not tnx:
        row = T.instance_family(family)
        return not py.error and row is not None and "native" in row["paths"]
    fam = T.torch_neuronx_family(tnx)
    return fam is not None and fam["kind"] == "native"


def _on(value: str | None) -> bool | None:
    """A switch's value: True, False, or None when unset."""
    if value is None or not value.strip():
        return None
    return value.strip().lower() in SWITCH_ON


def neff_cache_path(env: Mapping[str, str]) -> str:
    return env.get(CACHE_DIR) or DEFAULT_NEFF_CACHE


def _scan(path: Path) -> tuple[int, int, bool]:
    """(bytes, .neff files, whole: False when the walk stopped at SCAN_MAX files)."""
    size = neffs = seen = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            seen += 1
            if seen > SCAN_MAX:
                return size, neffs, False
            try:
                size += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
            neffs += name.endswith(".neff")
    return size, neffs, True


def cache_words(path: str) -> str:
    """"; NEFF cache 12.0 KiB, 3 NEFFs" for the folder's contents, or "; no NEFF cache yet"."""
    p = Path(path)
    if not p.is_dir():
        return "; no NEFF cache yet (TorchNeuron makes it at its first compile)"
    size, neffs, whole = _scan(p)
    return f"; NEFF cache {human_bytes(size)}, {neffs} NEFF{'s' if neffs != 1 else ''}" + (
        "" if whole else f" (the first {SCAN_MAX:,} files)")


def cache_switch(env: Mapping[str, str]) -> list[Check]:
    """The cache switch, either spelling: off means every run compiles every NEFF anew."""
    said = {name: env[name] for name in CACHE_SWITCHES if env.get(name, "").strip()}
    values = {name: _on(v) for name, v in said.items()}
    if not said:
        return []
    shown = ", ".join(f"{k}={v[:40]}" for k, v in said.items())
    if len(set(values.values())) > 1:
        return [Check("environment", "NEFF cache switch", "warn", f"{shown}: the two spellings disagree",
                      f"set one of them ({' or '.join(CACHE_SWITCHES)}), or unset both to keep the cache")]
    if any(values.values()):
        return [Check("environment", "NEFF cache switch", "warn",
                      f"{shown}: the persistent NEFF cache is off (memory only): every run compiles every NEFF anew",
                      f"unset {' and '.join(said)} to keep compiled NEFFs between runs")]
    return [Check("environment", "NEFF cache switch", "ok", f"{shown}: the persistent NEFF cache is on")]


def environment(env: Mapping[str, str]) -> list[Check]:
    """TorchNeuron's variables as set, the metrics switch, the cache switch, and XLA-path variables left set."""
    out = []
    mine = sorted(k for k in env if k.startswith(PREFIXES) and k not in CACHE_SWITCHES)
    if mine:
        out.append(Check("environment", "TorchNeuron variables", "ok",
                         "; ".join(f"{k}={env[k][:SHOWN_MAX]}" for k in mine)))
    else:
        out.append(Check("environment", "TorchNeuron variables", "ok", "none of TORCH_NEURONX_*, NEURON_RT_* is set"))
    metrics = _on(env.get(METRICS))
    if metrics is False:
        out.append(Check("environment", METRICS, "warn",
                         f"{METRICS}={env[METRICS]}: TorchNeuron's metrics are off; neurondesk counts the NEFF "
                         "compiles from the NEFF cache log alone, and their seconds are unknown",
                         f"unset it (neurondesk sets {METRICS}=1 for its runs) or set it to 1"))
    else:
        out.append(Check("environment", METRICS, "ok", f"{METRICS}={env[METRICS]}" if metrics else
                         f"not set: neurondesk sets {METRICS}=1 for the runs it launches"))
    out += cache_switch(env)
    left = [k for k in XLA_ONLY if env.get(k, "").strip()]
    if left:
        out.append(Check("environment", "XLA-path variables", "warn",
                         f"{', '.join(f'{k}={env[k][:40]}' for k in left)}: variables of the XLA path, which "
                         "TorchNeuron does not read", "unset them (bf16 on TorchNeuron: torch.autocast or the "
                                                      "model's dtype)"))
    return out
