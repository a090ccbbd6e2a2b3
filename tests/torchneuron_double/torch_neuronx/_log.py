"""TorchNeuron's log, as the double writes it: ``TORCH_NEURONX_LOG_LEVEL`` (0 error .. 3 debug,
default 1) and ``TORCH_NEURONX_LOG_FILE``: with a file, every line at or below the level goes
there (appended, flushed); without one, or when the file cannot be opened, warnings and errors go
to stderr and info and debug lines to stdout."""

from __future__ import annotations

import os
import sys

LEVELS = ("ERROR", "WARNING", "INFO", "DEBUG")


def _level() -> int:
    try:
        return max(0, min(3, int(os.environ.get("TORCH_NEURONX_LOG_LEVEL", "1"))))
    except ValueError:
        return 1


def _open_file():
    path = os.environ.get("TORCH_NEURONX_LOG_FILE")
    if not path:
        return None
    try:
        return open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for the process's life
    except OSError:
        return None  # as torch-neuronx does: the console instead


LEVEL = _level()
FILE = _open_file()


def log(level: int, message: str) -> None:
    if level > LEVEL:
        return
    line = f"[Neuron] [{LEVELS[level]}] [double.cpp:{level}] {message} \n"
    if FILE is not None:
        FILE.write(line)
        FILE.flush()
    else:
        stream = sys.stderr if level <= 1 else sys.stdout
        stream.write(line)
        stream.flush()


def startup_warning() -> None:
    text = os.environ.get("TORCHNEURON_DOUBLE_WARN")
    if text:
        log(1, text)
