"""The bundled compatibility tables (compat.json: each with its date and source) and the rules on them."""

from __future__ import annotations

import fnmatch
import json
import re
from functools import cache
from importlib import resources
from typing import Any


@cache
def load() -> dict[str, Any]:
    return json.loads(resources.files("neurondesk.doctor").joinpath("compat.json").read_text("utf-8"))


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """'2.29.0.0' -> (2, 29, 0, 0); '2.9.0+cu121' -> (2, 9, 0); '2.33.10.0-abc' -> (2, 33, 10, 0); None if no number."""
    if not text:
        return None
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split(".")[:8])


def major_minor(text: str | None) -> tuple[int, int] | None:
    v = version_tuple(text)
    return (v[0], v[1] if len(v) > 1 else 0) if v else None


def dotted(v: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in v)


def releases() -> list[dict[str, Any]]:
    return load()["releases"]["rows"]


def release_of(package: str, version: str | None) -> dict[str, Any] | None:
    """The release whose `package` has the same major.minor as `version` (the newest such)."""
    mm = major_minor(version)
    if mm is None:
        return None
    found = [r for r in releases() if major_minor(r.get(package)) == mm]
    return found[-1] if found else None


def runtime_needed_by_driver(driver: str | None) -> tuple[tuple[int, int], str] | None:
    """(oldest runtime major.minor, the release it comes from) for a driver version, or None when
    the driver is not in the table."""
    row = release_of("aws-neuronx-dkms", driver)
    if row is None:
        return None
    mm = major_minor(row["aws-neuronx-runtime-lib"])
    return (mm, row["release"]) if mm else None


def newest_driver() -> tuple[int, int] | None:
    mms = [major_minor(r.get("aws-neuronx-dkms")) for r in releases()]
    return max((m for m in mms if m), default=None)


def torch_neuronx_family(version: str | None) -> dict[str, Any] | None:
    """What a torch-neuronx version needs: {'kind': 'native'|'xla', 'torch': 'A.B.C', 'torch_xla': 'A.B'|None,
    'python': [...], 'ubuntu_wheels': [...], 'instances': [...]} or None for an unreadable version."""
    v = version_tuple(version)
    if v is None or len(v) < 4:
        return None
    table = load()["torch_neuronx"]
    for row in table["native"]:
        if v[:4] == version_tuple(row["family"]):
            return {"kind": "native", "family": row["family"], "torch": row["torch"], "torch_xla": None,
                    "python": row["python"], "ubuntu_wheels": row["ubuntu_wheels"], "instances": row["instances"]}
    return {"kind": "xla", "family": dotted(v[:4]), "torch": dotted(v[:3]), "torch_xla": dotted(v[:2]),
            "python": None, "ubuntu_wheels": None, "instances": None}


def neuron_release(runtime: str | None, torch_neuronx: str | None) -> tuple[str, str] | None:
    """(release, what told it) of this machine's Neuron: its runtime's major.minor in the releases table,
    else the release that shipped its XLA-family torch-neuronx (the first one); None when neither tells."""
    row = release_of("aws-neuronx-runtime-lib", runtime)
    if row is not None:
        return row["release"], f"runtime {runtime}"
    for r in releases():
        if torch_neuronx and r.get("torch-neuronx") and fnmatch.fnmatch(torch_neuronx, r["torch-neuronx"]):
            return r["release"], f"torch-neuronx {torch_neuronx}"
    return None


def family_of(instance_type: str | None) -> str | None:
    if not instance_type or "." not in instance_type:
        return None
    return instance_type.split(".", 1)[0].lower()


def instance_family(family: str | None) -> dict[str, Any] | None:
    return load()["instances"]["families"].get(family or "")


def table_list() -> list[dict[str, str]]:
    """Each table's title, date, source and what in it is assumed (for `doctor --tables`)."""
    data = load()
    out = []
    for key in ("releases", "driver_runtime", "torch_neuronx", "training_paths", "instances"):
        t = data[key]
        assumed = " ".join(t[k] for k in ("assumed", "native_assumed", "xla_assumed", "note") if t.get(k))
        out.append({"table": key, "title": t["title"], "checked": t["checked"], "source": t["source"],
                    "assumed": assumed})
    return out
