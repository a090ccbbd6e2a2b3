"""One doctor pass: gather the facts, turn each into a Check."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.collectors.devices import human_bytes
from neurondesk.collectors.devices.compile_cache import locate_cache, scan_cache
from neurondesk.collectors.devices.neuron_ls import parse_id_list
from neurondesk.doctor import facts as F
from neurondesk.doctor import tables as T
from neurondesk.doctor import torchneuron as TN
from neurondesk.doctor.check import Check
from neurondesk.doctor.paths import training_path

ROOT_ENV = "NEURONDESK_DOCTOR_ROOT"  # a fake / for /dev, /sys, /proc, /etc (tests)
MIN_FREE_BYTES = 20 * 10**9


@dataclass
class Options:
    python: str | None = None
    instance_type: str | None = None
    script: list[str] = field(default_factory=list)
    root: Path = Path("/")
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    path: str | None = None  # where tools are looked up (default: env's PATH)
    run_root: Path | None = None
    timeout: float = 30.0
    min_free_bytes: int = MIN_FREE_BYTES
    imds: Callable[[], str | None] | None = None  # the instance type from the metadata service, or None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kw) -> Options:
        env = dict(os.environ if env is None else env)
        root = Path(env[ROOT_ENV]) if env.get(ROOT_ENV) else Path("/")
        return cls(root=root, env=env, path=env.get("PATH"), **kw)


def _default_imds(env: Mapping[str, str]) -> str | None:
    from neurondesk.clients.imds import detect_instance

    return detect_instance(env=env).instance_type


# ---------------------------------------------------------------- devices


def _devices(o: Options, ls: F.NeuronLsFacts) -> list[Check]:
    out = []
    files = F.device_files(o.root)
    loaded, driver, how = F.module_state(o.root)
    if files:
        out.append(Check("devices", "device files", "ok", f"{len(files)}: {', '.join(files[:4])}"
                         + (" ..." if len(files) > 4 else "")))
    elif loaded:
        out.append(Check("devices", "device files", "fail", "the neuron module is loaded but there is no /dev/neuron*",
                         "a container without the devices: run it with --device=/dev/neuron0 (each one); "
                         "on the host: `sudo modprobe -r neuron && sudo modprobe neuron`"))
    else:
        out.append(Check("devices", "device files", "fail",
                         "No Neuron device: no /dev/neuron* and the neuron kernel module is not loaded",
                         "on a trn/inf instance the driver is not loaded: install aws-neuronx-dkms, then "
                         "`sudo modprobe neuron` (or reboot after a kernel update); on any other machine there "
                         "is no Neuron device to train on"))
    if loaded:
        out.append(Check("devices", "kernel module", "ok", f"neuron loaded ({how})"
                         + (f", driver {driver}" if driver else "")))
    else:
        out.append(Check("devices", "kernel module", "fail", f"the neuron module is not loaded: {how}",
                         "`sudo modprobe neuron`; if that fails, `sudo apt-get install --reinstall aws-neuronx-dkms` "
                         "(it builds against the running kernel's headers) and reboot"))
    if ls.found is None:
        out.append(Check("devices", "neuron-ls", "fail" if files or loaded else "skip", ls.reason or "not found",
                         "install aws-neuronx-tools (it holds neuron-ls and neuron-monitor)"))
    elif ls.inventory is None:
        out.append(Check("devices", "neuron-ls", "fail", f"{ls.found}: {ls.reason}",
                         "no device listed: the driver is not loaded → `sudo modprobe neuron`, or reboot"))
    elif not ls.inventory.devices:
        out.append(Check("devices", "neuron-ls", "fail", f"{ls.found} ({ls.how}) lists no device",
                         "the driver sees no device: reboot; on a container, pass the /dev/neuron* devices in"))
    else:
        inv = ls.inventory
        cores = sum(d.nc_count for d in inv.devices)
        per = sorted({d.nc_count for d in inv.devices})
        out.append(Check("devices", "neuron-ls", "ok",
                         f"{len(inv.devices)} device(s), {cores} NeuronCores ({'/'.join(map(str, per))} per device)"
                         f", read with {ls.how}"
                         + (f", logical NeuronCore config {inv.logical_nc_config}" if inv.logical_nc_config else "")))
    return out


# ---------------------------------------------------------------- packages


def _packages(pk: F.PackageFacts, py: F.InterpreterFacts, neuron_here: bool) -> list[Check]:
    out = []
    if pk.manager is None or pk.error:
        out.append(Check("packages", "system packages", "skip" if pk.manager is None else "warn",
                         pk.error or "no package manager", "check with your distribution's package tool"))
    else:
        have = {k: v for k, v in pk.versions.items() if v}
        missing = [k for k in F.SYSTEM_PACKAGES if k not in have]
        found = ", ".join(f"{k} {v}" for k, v in have.items()) or "none of " + ", ".join(F.SYSTEM_PACKAGES)
        essential = [m for m in missing if m in ("aws-neuronx-dkms", "aws-neuronx-runtime-lib")]
        status = "ok" if not missing else ("fail" if essential and neuron_here else "warn")
        out.append(Check("packages", f"system packages ({pk.manager})", status,
                         found + (f"; not installed: {', '.join(missing)}" if missing and have else ""),
                         "" if not missing else
                         f"install {' '.join(missing)} from the Neuron apt/yum repository (the setup guide for "
                         "your OS)"))
    if py.error:
        out.append(Check("packages", "workload interpreter", "fail", py.error,
                         "neurondesk asks the interpreter your script runs with; give it with --python"))
        return out
    pk_py = py.packages
    have = {k: v for k, v in pk_py.items() if v}
    found = ", ".join(f"{k} {v}" for k, v in have.items()) or "none of " + ", ".join(F.PYTHON_PACKAGES)
    if not pk_py.get("torch"):
        status, todo = "fail", f"install torch (and torch-neuronx) into {py.path}'s environment"
    elif not pk_py.get("torch-neuronx"):
        status = "fail" if neuron_here else "warn"
        todo = ("install torch-neuronx matching your torch (see `neurondesk doctor --tables`); without it the "
                "script cannot reach a NeuronCore")
    else:
        status, todo = "ok", ""
    out.append(Check("packages", "workload interpreter", status, f"{py.path}: Python {py.python}; {found}", todo))
    return out


# ---------------------------------------------------------------- compatibility


def _compatibility(pk: F.PackageFacts, py: F.InterpreterFacts, driver_sys: str | None, family: str | None,
                   osr: dict[str, str]) -> list[Check]:
    out = []
    driver = pk.versions.get("aws-neuronx-dkms") or driver_sys
    runtime = pk.versions.get("aws-neuronx-runtime-lib")
    if driver and runtime:
        need = T.runtime_needed_by_driver(driver)
        rt = T.major_minor(runtime)
        if need is None:
            newest = T.newest_driver()
            out.append(Check("compatibility", "driver ↔ runtime", "skip",
                             f"driver {driver} is not in the bundled table (newest there: "
                             f"{T.dotted(newest) if newest else '?'}; `neurondesk doctor --tables`)"))
        elif rt is not None and rt < need[0]:
            out.append(Check("compatibility", "driver ↔ runtime", "fail",
                             f"driver {driver} needs runtime {T.dotted(need[0])} or later (as in Neuron {need[1]}); "
                             f"runtime {runtime} is older, so nrt_init() fails",
                             "upgrade aws-neuronx-runtime-lib (and aws-neuronx-collectives) to the same Neuron "
                             "release as the driver"))
        else:
            out.append(Check("compatibility", "driver ↔ runtime", "ok",
                             f"driver {driver}, runtime {runtime} (driver needs {T.dotted(need[0])}+)"))
    else:
        out.append(Check("compatibility", "driver ↔ runtime", "skip",
                         "driver or runtime version unknown (not installed, or no package manager)"))
    pkgs = py.packages if not py.error else {}
    tnx, torch, txla = pkgs.get("torch-neuronx"), pkgs.get("torch"), pkgs.get("torch-xla")
    fam = T.torch_neuronx_family(tnx) if tnx else None
    if not tnx or fam is None:
        out.append(Check("compatibility", "torch ↔ torch-neuronx", "skip",
                         "torch-neuronx not installed in the workload's interpreter" if not tnx
                         else f"torch-neuronx {tnx}: version not understood"))
        return out
    want = T.version_tuple(fam["torch"])
    have = T.version_tuple(torch)
    if have is None:
        out.append(Check("compatibility", "torch ↔ torch-neuronx", "fail",
                         f"torch-neuronx {tnx} needs torch {fam['torch']}; torch is not installed",
                         f"pip install torch=={fam['torch']}"))
    elif have[:3] != want[:3]:
        out.append(Check("compatibility", "torch ↔ torch-neuronx", "fail",
                         f"torch-neuronx {tnx} ({fam['kind']} family {fam['family']}) needs torch {fam['torch']}; "
                         f"torch is {torch}: `import torch_neuronx` fails",
                         f"pip install torch=={fam['torch']}, or the torch-neuronx family made for torch {torch}"))
    else:
        out.append(Check("compatibility", "torch ↔ torch-neuronx", "ok",
                         f"torch {torch} with torch-neuronx {tnx} ({fam['kind']})"))
    if fam["kind"] == "xla":
        if not txla:
            out.append(Check("compatibility", "torch-xla", "fail",
                             f"torch-neuronx {tnx} is the XLA-based family: it needs torch-xla {fam['torch_xla']}; "
                             "torch-xla is not installed", f"pip install torch-xla=={fam['torch_xla']}.*"))
        elif T.major_minor(txla) != T.major_minor(fam["torch_xla"]):
            out.append(Check("compatibility", "torch-xla", "fail",
                             f"torch-xla {txla} with torch-neuronx {tnx}: it needs torch-xla {fam['torch_xla']}",
                             f"pip install torch-xla=={fam['torch_xla']}.*"))
        else:
            out.append(Check("compatibility", "torch-xla", "ok", f"torch-xla {txla}"))
    else:
        if family and family not in fam["instances"]:
            out.append(Check("compatibility", "TorchNeuron on this instance", "fail",
                             f"torch-neuronx {tnx} is TorchNeuron (native), which runs on "
                             f"{'/'.join(fam['instances'])} only; this is {family}",
                             f"on {family} use the XLA family (torch-neuronx 2.9.0.2.x with torch-xla)"))
        pyv = T.major_minor(py.python)
        if pyv and f"{pyv[0]}.{pyv[1]}" not in fam["python"]:
            out.append(Check("compatibility", "Python version", "fail",
                             f"Python {py.python}; TorchNeuron {fam['family']}.* supports {', '.join(fam['python'])}",
                             "make a venv with one of those Pythons"))
        elif pyv:
            out.append(Check("compatibility", "Python version", "ok", f"Python {py.python}"))
        if osr.get("ID") == "ubuntu" and osr.get("VERSION_ID") not in fam["ubuntu_wheels"]:
            out.append(Check("compatibility", "OS release", "warn",
                             f"Ubuntu {osr.get('VERSION_ID')}: TorchNeuron wheels are built for Ubuntu "
                             f"{', '.join(fam['ubuntu_wheels'])}", "use a DLAMI or container of those releases"))
        elif osr:
            out.append(Check("compatibility", "OS release", "ok" if osr.get("ID") == "ubuntu" else "warn",
                             osr.get("PRETTY_NAME") or osr.get("ID", "?"),
                             "" if osr.get("ID") == "ubuntu" else "TorchNeuron wheels are built for Ubuntu"))
    return out


# ---------------------------------------------------------------- instance


def _instance(o: Options, ls: F.NeuronLsFacts) -> tuple[list[Check], str | None]:
    itype, source = o.instance_type, "--instance-type"
    if not itype and ls.inventory is not None and ls.inventory.instance_type:
        itype, source = ls.inventory.instance_type, "neuron-ls"
    if not itype:
        itype = (o.imds or (lambda: _default_imds(o.env)))()
        source = "instance metadata"
    if not itype:
        product = F.dmi_product(o.root)
        if product and re.fullmatch(r"[a-z0-9-]+\.[a-z0-9-]+", product):
            itype, source = product, "DMI product name"
    if not itype:
        return [Check("instance", "instance type", "skip",
                      "unknown: not given, neuron-ls and the metadata service did not say",
                      "give --instance-type (e.g. trn1.2xlarge) to check what it supports")], None
    family = T.family_of(itype)
    row = T.instance_family(family)
    if row is None:
        return [Check("instance", "instance type", "warn", f"{itype} (from {source}): not a Trainium or Inferentia "
                      "instance", "train on trn1, trn2 or trn3 (inf2 for inference)")], family
    if not row["paths"]:
        return [Check("instance", "instance type", "warn", f"{itype} (from {source}): {row['note']}",
                      "train on trn1, trn2 or trn3")], family
    return [Check("instance", "instance type", "ok", f"{itype} (from {source}), {row['chip']}: {row['note']}")], family


def _cores_check(ls: F.NeuronLsFacts, family: str | None) -> list[Check]:
    row = T.instance_family(family)
    if ls.inventory is None or not ls.inventory.devices or row is None or not row.get("cores_per_device"):
        return []
    expect = row["cores_per_device"]
    bad = [d for d in ls.inventory.devices
           if (d.physical_nc_count or d.nc_count * (d.logical_nc_config or ls.inventory.logical_nc_config or 1))
           != expect]
    if bad:
        return [Check("devices", "cores per device", "warn",
                      f"{len(bad)} device(s) report {bad[0].nc_count} NeuronCores; {family} has {expect} per device",
                      "a device may be held back by the driver: `neuron-ls`, dmesg | grep -i neuron")]
    return [Check("devices", "cores per device", "ok", f"{expect} per device, as {family} has")]


# ---------------------------------------------------------------- disk


def _existing(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _disk(o: Options, torchneuron: bool = False) -> list[Check]:
    """The compile cache's, the run folders' and /tmp's free space; on TorchNeuron the NEFF cache's in place
    of the XLA path's compile cache (which TorchNeuron does not write)."""
    from neurondesk.store.rundir import default_run_root

    loc = locate_cache(o.env)
    first = ("NEFF cache", TN.neff_cache_path(o.env), None) if torchneuron else ("compile cache", loc.path, loc)
    places = [first, ("run folders", str(o.run_root or default_run_root(o.env)), None),
              ("/tmp", o.env.get("TMPDIR") or "/tmp", None)]
    move = ("TORCH_NEURONX_NEFF_CACHE_DIR=..." if torchneuron else "NEURON_CC_FLAGS=--cache_dir=...")
    out, seen = [], {}
    for label, path, cache in places:
        if cache is not None and cache.remote:
            out.append(Check("disk", label, "ok", f"{path} (remote, from {cache.source}): not scanned"))
            continue
        where = _existing(Path(path))
        try:
            usage = shutil.disk_usage(where)
            dev = os.stat(where).st_dev
        except OSError as e:
            out.append(Check("disk", label, "warn", f"{path}: cannot read ({e.strerror or e})"))
            continue
        extra = TN.cache_words(path) if label == "NEFF cache" else ""
        if cache is not None:
            scan = scan_cache(loc)
            extra = (f"; cache {human_bytes(scan.size_bytes)}, {sum(scan.entries.values())} entries"
                     + (f", {scan.entries.get('failed', 0)} failed" if scan.entries.get("failed") else "")
                     if scan.exists else "; no cache yet")
        same = f" (same filesystem as {seen[dev]})" if dev in seen else ""
        seen.setdefault(dev, label)
        free = human_bytes(usage.free)
        if usage.free < o.min_free_bytes:
            out.append(Check("disk", label, "warn", f"{path}: {free} free{same}{extra}; under {o.min_free_bytes / 1e9:g} GB",
                             "compiles write hundreds of MB per graph: free space, or move the cache "
                             f"({move}) and runs (NEURONDESK_HOME) to a bigger disk"))
        else:
            out.append(Check("disk", label, "ok", f"{path}: {free} free{same}{extra}"))
    return out


# ---------------------------------------------------------------- environment


def _environment(o: Options, ls: F.NeuronLsFacts, torchneuron: bool = False) -> list[Check]:
    """The XLA path's variables; on TorchNeuron its own instead (doctor/torchneuron.py), the cores either way."""
    env = o.env
    out = TN.environment(env) if torchneuron else []
    for name in ("XLA_USE_BF16", "XLA_DOWNCAST_BF16") if not torchneuron else ():
        if env.get(name, "").strip() not in ("", "0"):
            out.append(Check("environment", name, "warn",
                             f"{name}={env[name]}: every float32 tensor is bfloat16 on the device (the precision "
                             "changes; losses and metrics differ from a GPU float32 run)",
                             "keep it only if you mean bf16; torch.autocast is the narrower tool "
                             "(it is deprecated in newer torch-xla)"))
    if env.get("NEURON_CC_FLAGS"):
        out.append(Check("environment", "NEURON_CC_FLAGS", "ok", env["NEURON_CC_FLAGS"][:300]))
    if not torchneuron and env.get("NEURON_PARALLEL_COMPILE", "").strip().lower() in ("1", "true", "yes"):
        out.append(Check("environment", "NEURON_PARALLEL_COMPILE", "warn",
                         f"NEURON_PARALLEL_COMPILE={env['NEURON_PARALLEL_COMPILE']}: graphs are only extracted and "
                         "compiled; the run's numbers (loss, outputs) are not real",
                         "unset it for training (neuron_parallel_compile sets it for its own pass)"))
    vis = env.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if vis:
        ids = parse_id_list(vis)
        have = {i for d in (ls.inventory.devices if ls.inventory else []) for i in d.core_ids}
        if not ids:
            out.append(Check("environment", "NEURON_RT_VISIBLE_CORES", "fail", f"{vis!r} is not a core list",
                             "use '0-1' or '0,1'"))
        elif have and not set(ids) <= have:
            out.append(Check("environment", "NEURON_RT_VISIBLE_CORES", "fail",
                             f"{vis} names cores {sorted(set(ids) - have)[:8]} that do not exist here "
                             f"(cores {min(have)}-{max(have)})", "name only existing cores"))
        else:
            out.append(Check("environment", "NEURON_RT_VISIBLE_CORES", "ok" if have else "skip",
                             f"{vis}: {len(ids)} core(s)" + ("" if have else "; no cores listed to compare with")))
    pj = env.get("PJRT_DEVICE", "").strip()
    if pj and pj.upper() != "NEURON" and not torchneuron:
        out.append(Check("environment", "PJRT_DEVICE", "warn" if ls.inventory and ls.inventory.devices else "ok",
                         f"PJRT_DEVICE={pj}: torch-xla runs on {pj}, not on a NeuronCore",
                         "unset it (or NEURON) to train on Neuron"))
    if not out:
        out.append(Check("environment", "variables", "ok", "none of XLA_USE_BF16, XLA_DOWNCAST_BF16, NEURON_CC_FLAGS, "
                         "NEURON_PARALLEL_COMPILE, NEURON_RT_VISIBLE_CORES, PJRT_DEVICE is set"))
    return out


# ---------------------------------------------------------------- script


def _script(paths: list[str]) -> list[Check]:
    from neurondesk.lint import lint_paths

    report = lint_paths(paths)
    out = [Check("script", "lint", "warn", p.message) for p in report.problems]
    for f in report.findings:
        status = "warn" if f.severity in ("error", "warning") else "ok"
        out.append(Check("script", f"{f.path}:{f.line}", status, f"[{f.severity}] {f.message}", f.fix))
    if not report.findings and not report.problems:
        out.append(Check("script", "lint", "ok", f"{report.files} file(s): none of the recompile or graph-break "
                         "patterns lint knows"))
    return out


def run_doctor(o: Options) -> list[Check]:
    ls = F.neuron_ls(o.root, o.path)
    pk = F.system_packages(o.path)
    py = F.interpreter(o.python, o.path, o.timeout, o.env)  # the workload's own environment
    loaded, driver_sys, _ = F.module_state(o.root)
    neuron_here = bool(F.device_files(o.root)) or loaded
    checks = _devices(o, ls)
    inst, family = _instance(o, ls)
    checks += _cores_check(ls, family)
    checks += _packages(pk, py, neuron_here)
    checks += _compatibility(pk, py, driver_sys, family, F.os_release(o.root))
    checks.append(training_path(pk, py, family))
    checks += inst
    torchneuron = TN.on_torchneuron(py, family)  # the training path: its cache folder and its variables
    checks += _disk(o, torchneuron)
    checks += _environment(o, ls, torchneuron)
    if o.script:
        checks += _script(o.script)
    return checks
