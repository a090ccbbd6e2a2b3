"""The machine a benchmark ran on, in the words its results file keeps (run as a script from
benchmarks/, a benchmark imports this from beside it)."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or what platform says where there is none."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def machine() -> str:
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, {cpu_model()}, "
            f"Python {platform.python_version()}")
