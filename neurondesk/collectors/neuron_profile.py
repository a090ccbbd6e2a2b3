"""A Neuron Explorer capture of the run (``run --neuron-profile``): the Neuron Runtime's inspect
switches, documented in "Neuron Explorer Environment Variables": ``NEURON_RT_INSPECT_ENABLE=1``
(the master switch), ``NEURON_RT_INSPECT_SYSTEM_PROFILE=1`` (system-level runtime events) and
``NEURON_RT_INSPECT_OUTPUT_DIR`` (where the profile goes: here the run folder's ``neuron-profile/``),
opened with ``neuron-explorer view -d DIR`` ("Get started with Neuron Explorer"). The same page
warns not to use ``NEURON_RT_INSPECT_ENABLE=1`` and ``torch.profiler`` together ("They conflict"):
the workload's script is read for a use of torch.profiler, and a warning names its line.
A capture the user switched on themselves (their own NEURON_RT_INSPECT_ENABLE=1) is named too.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.core.events.device_events import NeuronProfileCapture
from neurondesk.store.input_files import open_regular_stream
from neurondesk.store.rundir import RunPaths

ENABLE, SYSTEM, OUTPUT_DIR = "NEURON_RT_INSPECT_ENABLE", "NEURON_RT_INSPECT_SYSTEM_PROFILE", "NEURON_RT_INSPECT_OUTPUT_DIR"
DEFAULT_OUTPUT = "./output"  # the runtime's default NEURON_RT_INSPECT_OUTPUT_DIR
MAX_SCRIPT_BYTES = 4 << 20
_TORCH_PROFILER = re.compile(r"\btorch\.profiler\b|\bfrom\s+torch\s+import\s+[^\n#]*\bprofiler\b|"
                             r"\btorch\.autograd\.profiler\b")


@dataclass
class ProfileSetup:
    env: dict[str, str] = field(default_factory=dict)  # added to the workload's environment
    event: NeuronProfileCapture | None = None
    warnings: list[str] = field(default_factory=list)


def open_command(folder: str) -> str:
    return f"neuron-explorer view -d {shlex.quote(folder)}"


def script_of(command: list[str], cwd: str | None) -> Path | None:
    """The Python script a command runs (``python train.py``, ``torchrun ... train.py``), if any."""
    for arg in command[1:] if command else []:
        if arg.endswith(".py") and not arg.startswith("-"):
            p = Path(arg)
            return p if p.is_absolute() else Path(cwd or os.getcwd()) / p
    if command and command[0].endswith(".py"):
        return Path(command[0]) if Path(command[0]).is_absolute() else Path(cwd or os.getcwd()) / command[0]
    return None


def torch_profiler_use(command: list[str], cwd: str | None) -> str | None:
    """"train.py:42" where the script first uses torch.profiler; None when it does not (or the
    script cannot be read: then nothing is claimed)."""
    script = script_of(command, cwd)
    if script is None:
        return None
    try:
        with open_regular_stream(script, "the workload's script") as f:
            text = f.read(MAX_SCRIPT_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    for no, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0]
        if _TORCH_PROFILER.search(code):
            return f"{script.name}:{no}"
    return None


def _private_folder(run_dir: Path) -> Path | None:
    folder = RunPaths(run_dir).neuron_profile  # --force moves it aside with the run
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return None
    except OSError:
        return None
    return folder


def profile_setup(base: dict[str, str], run_dir: Path, requested: bool, command: list[str], cwd: str | None,
                  t: float) -> ProfileSetup:
    """What ``--neuron-profile`` (``requested``) or the user's own NEURON_RT_INSPECT_ENABLE=1 adds:
    the environment, the event naming the capture folder and how to open it, and the warnings."""
    out = ProfileSetup()
    user_on = base.get(ENABLE, "").strip() == "1"
    if not requested and not user_on:
        return out
    if requested:
        folder = _private_folder(run_dir)
        if folder is None:
            out.warnings.append(f"--neuron-profile: cannot make {RunPaths(run_dir).neuron_profile} (a file or link is in the "
                                "way): no Neuron Explorer capture")
            return out
        where = str(folder)
        out.env = {ENABLE: "1", SYSTEM: "1", OUTPUT_DIR: where}
        replaced = [v for v in (ENABLE, SYSTEM, OUTPUT_DIR) if v in base and base[v] != out.env[v]]
        if replaced:
            out.warnings.append(f"--neuron-profile replaces your {', '.join(replaced)} (the capture goes to {where})")
    else:
        where = base.get(OUTPUT_DIR) or DEFAULT_OUTPUT
        if not os.path.isabs(where):
            where = os.path.normpath(os.path.join(cwd or os.getcwd(), where))
    at = torch_profiler_use(command, cwd)
    if at is not None:
        out.warnings.append(f"Neuron Explorer capture (NEURON_RT_INSPECT_ENABLE=1) and torch.profiler at {at} are "
                            "both on: the Neuron docs say they conflict; use one or the other "
                            "(drop --neuron-profile, or the torch.profiler block)")
    out.event = NeuronProfileCapture(t=t, folder=where, open_command=open_command(where), requested=requested,
                                     torch_profiler_at=at)
    return out
