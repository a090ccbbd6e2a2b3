"""Device and host telemetry: neuron-ls, neuron-monitor, NVML, psutil, the Neuron compile cache.

Nothing here imports Textual or torch. Parsers never raise on bad tool output: they return a
reason string or a ParseProblem event instead.
"""

from __future__ import annotations

import os
import shutil

NEURON_BIN_DIR = "/opt/aws/neuron/bin"


def find_neuron_tool(name: str, search_path: str | None = None, bin_dir: str = NEURON_BIN_DIR) -> str | None:
    """``name`` on PATH (or ``search_path``), else in /opt/aws/neuron/bin (often not on PATH
    under systemd or in containers), else None."""
    found = shutil.which(name, path=search_path)
    if found:
        return found
    candidate = os.path.join(bin_dir, name)
    return candidate if os.access(candidate, os.X_OK) else None


def human_bytes(n: float | None) -> str:
    """1536 -> '1.5 KiB'; None -> '?'."""
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
