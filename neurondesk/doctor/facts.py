"""What doctor reads from the machine: device files, the kernel module, neuron-ls, system packages,
the workload interpreter's versions (asked in a subprocess, with a timeout), the OS release.

``root`` stands for ``/`` (tests give a fake one; NEURONDESK_DOCTOR_ROOT on the command line), so
``/dev``, ``/sys``, ``/proc``, ``/etc/os-release`` and ``/opt/aws/neuron/bin`` are read under it.
Tools (neuron-ls, dpkg-query, rpm, python) are looked up on ``path`` (default: PATH).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.collectors.devices import NEURON_BIN_DIR, find_neuron_tool
from neurondesk.collectors.devices.neuron_ls import (
    NeuronInventory,
    NeuronLsError,
    parse_json,
    run_neuron_ls,
)

SYSTEM_PACKAGES = ("aws-neuronx-dkms", "aws-neuronx-runtime-lib", "aws-neuronx-collectives", "aws-neuronx-tools")
PYTHON_PACKAGES = ("torch", "torch-neuronx", "torch-xla", "neuronx-cc", "libneuronxla")
MAX_TOOL_OUTPUT = 1 << 20

# Run by the workload's interpreter: versions from package metadata only (nothing is imported, so
# a broken torch cannot hang or crash the question). Old interpreters answer too (no f-strings).
VERSIONS_SNIPPET = r"""
import json, sys, platform
names = NAMES
out = {"python": platform.python_version(), "executable": sys.executable, "packages": {}}
try:
    from importlib.metadata import version, PackageNotFoundError
except ImportError:
    version = None
for n in names:
    v = None
    try:
        if version is not None:
            try:
                v = version(n)
            except PackageNotFoundError:
                try:
                    v = version(n.replace("-", "_"))
                except PackageNotFoundError:
                    v = None
        else:
            import pkg_resources
            v = pkg_resources.get_distribution(n).version
    except Exception:
        v = None
    out["packages"][n] = v
sys.stdout.write("neurondesk-versions: " + json.dumps(out) + "\n")
""".replace("NAMES", repr(list(PYTHON_PACKAGES)))


@dataclass
class NeuronLsFacts:
    found: str | None  # the binary, or None
    inventory: NeuronInventory | None = None
    how: str = ""  # "--output-format json" | "--json-output" | "table"
    reason: str | None = None


@dataclass
class InterpreterFacts:
    asked: str  # what was given (--python or "python")
    path: str | None  # resolved
    python: str | None = None
    packages: dict[str, str | None] = field(default_factory=dict)
    error: str | None = None


@dataclass
class PackageFacts:
    manager: str | None  # "dpkg" | "rpm" | None
    versions: dict[str, str | None] = field(default_factory=dict)
    error: str | None = None


def under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def device_files(root: Path) -> list[str]:
    d = under(root, "/dev")
    try:
        names = sorted(n for n in os.listdir(d) if n.startswith("neuron") and n[6:].isdigit())
    except OSError:
        return []
    return [f"/dev/{n}" for n in sorted(names, key=lambda n: int(n[6:]))]


def module_state(root: Path) -> tuple[bool, str | None, str]:
    """(loaded, driver version or None, how it was seen)."""
    sysmod = under(root, "/sys/module/neuron")
    version = None
    try:
        version = (sysmod / "version").read_text("utf-8", errors="replace").strip()[:64] or None
    except OSError:
        pass
    if sysmod.is_dir():
        return True, version, "/sys/module/neuron"
    try:
        with open(under(root, "/proc/modules"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.split(" ", 1)[0] == "neuron":
                    return True, version, "/proc/modules (lsmod)"
    except OSError:
        pass
    return False, None, "neither /sys/module/neuron nor a 'neuron' line in /proc/modules (lsmod)"


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = subprocess.run(argv, capture_output=True, timeout=timeout, check=False, env=env,
                          stdin=subprocess.DEVNULL)
    out, err = (b[:MAX_TOOL_OUTPUT].decode("utf-8", errors="replace") for b in (proc.stdout, proc.stderr))
    return proc.returncode, out, err


def neuron_ls(root: Path, path: str | None, timeout: float = 20.0) -> NeuronLsFacts:
    """Neuron 2.34's ``--output-format json`` first, then the collector's ``--json-output`` and table."""
    exe = find_neuron_tool("neuron-ls", path, str(under(root, NEURON_BIN_DIR)))
    if exe is None:
        return NeuronLsFacts(None, reason="neuron-ls not found on PATH or in /opt/aws/neuron/bin")
    try:
        rc, out, _err = _run([exe, "--output-format", "json"], timeout)
        if rc == 0 and out.strip():
            try:
                inv = parse_json(out)
                if inv.devices:
                    return NeuronLsFacts(exe, inv, "--output-format json")
            except NeuronLsError:
                pass  # an older neuron-ls: its usage text, not JSON
    except (OSError, subprocess.SubprocessError) as e:
        return NeuronLsFacts(exe, reason=f"neuron-ls could not be run: {e}")
    result = run_neuron_ls(exe, timeout=timeout)
    how = "" if result.inventory is None else {"json": "--json-output", "output-format-json": "--output-format json"
                                               }.get(result.inventory.source, "table")
    return NeuronLsFacts(exe, result.inventory, how, result.reason)


def system_packages(path: str | None, timeout: float = 20.0) -> PackageFacts:
    dpkg = shutil.which("dpkg-query", path=path)
    rpm = shutil.which("rpm", path=path)
    try:
        if dpkg:
            rc, out, err = _run([dpkg, "-W", "-f", "${Package}\t${db:Status-Abbrev}\t${Version}\n",
                                 *SYSTEM_PACKAGES], timeout)
            versions: dict[str, str | None] = dict.fromkeys(SYSTEM_PACKAGES)
            for line in out.splitlines():
                parts = line.split("\t")
                if len(parts) == 3 and parts[0] in versions and parts[1].startswith("i") and parts[2].strip():
                    versions[parts[0]] = parts[2].strip()
            return PackageFacts("dpkg", versions)
        if rpm:
            rc, out, err = _run([rpm, "-q", "--qf", "%{NAME}\t%{VERSION}\n", *SYSTEM_PACKAGES], timeout)
            versions = dict.fromkeys(SYSTEM_PACKAGES)
            for line in out.splitlines():
                parts = line.split("\t")
                if len(parts) == 2 and parts[0] in versions:
                    versions[parts[0]] = parts[1].strip() or None
            return PackageFacts("rpm", versions)
    except subprocess.TimeoutExpired:
        return PackageFacts("dpkg" if dpkg else "rpm", error=f"the package manager did not answer within {timeout:g} s")
    except (OSError, subprocess.SubprocessError) as e:
        return PackageFacts("dpkg" if dpkg else "rpm", error=f"the package manager could not be run: {e}")
    return PackageFacts(None, error="neither dpkg-query nor rpm on PATH")


def interpreter(python: str | None, path: str | None, timeout: float = 30.0,
                env: Mapping[str, str] | None = None) -> InterpreterFacts:
    asked = python or "python"
    resolved = shutil.which(asked, path=path) if os.sep not in asked else (asked if os.access(asked, os.X_OK) else None)
    if resolved is None:
        where = "on PATH" if os.sep not in asked else "(not an executable file)"
        return InterpreterFacts(asked, None, error=f"{asked} {where}: no interpreter to ask; give the workload's "
                                                   "with --python PATH (e.g. ~/venv/bin/python)")
    env = {k: v for k, v in (os.environ if env is None else env).items() if k not in ("PYTHONSTARTUP", "PYTHONINSPECT")}
    try:
        rc, out, err = _run([resolved, "-c", VERSIONS_SNIPPET], timeout, env)
    except subprocess.TimeoutExpired:
        return InterpreterFacts(asked, resolved, error=f"{resolved} did not answer within {timeout:g} s when asked "
                                "its package versions (a hung interpreter or sitecustomize, or a slow filesystem); "
                                f"try `{resolved} -c pass` yourself")
    except OSError as e:
        return InterpreterFacts(asked, resolved, error=f"{resolved} could not be started ({e.strerror or e})")
    for line in out.splitlines():
        if line.startswith("neurondesk-versions: "):
            try:
                data = json.loads(line.split(": ", 1)[1])
                pkgs = data.get("packages") if isinstance(data, dict) else None
                if not isinstance(pkgs, dict):
                    raise ValueError("no packages")
                return InterpreterFacts(asked, resolved, str(data.get("python") or "") or None,
                                        {k: (str(v)[:64] if v is not None else None) for k, v in pkgs.items()
                                         if k in PYTHON_PACKAGES})
            except ValueError:
                break
    detail = " ".join((err or out).split())[:200] or f"exit status {rc}"
    return InterpreterFacts(asked, resolved, error=f"{resolved} did not say its versions ({detail}); is it a "
                                                   "Python interpreter?")


def os_release(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = under(root, p).read_text("utf-8", errors="replace")[:65536]
        except OSError:
            continue
        for line in text.splitlines():
            k, sep, v = line.partition("=")
            if sep and k.strip().isidentifier():
                out[k.strip()] = v.strip().strip('"').strip("'")
        return out
    return out


def dmi_product(root: Path) -> str | None:
    try:
        text = under(root, "/sys/devices/virtual/dmi/id/product_name").read_text("utf-8", errors="replace")
    except OSError:
        return None
    text = text.strip()[:64]
    return text or None
