"""The Neuron persistent compile cache (NEURON-FORMATS.md §4.3): where, how big, what state.

Layout: <cache>/neuronxcc-<version>/MODULE_<hlo hash>+<flags hash>/{model.neff, model.done,
model.log, *.lock, ...}. An entry is done (model.done or a .neff), failed (model.log and no neff:
"poisoned", it blocks recompiles), locked (a .lock: compiling now, or a stale lock after a crash)
or empty. ``compare_scans`` is pure: it takes two scans and their times, never the clock.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from neurondesk.collectors.devices import human_bytes
from neurondesk.core.events.device_events import CacheScan

DEFAULT_CACHE_DIR = "/var/tmp/neuron-compile-cache"
STATES = ("done", "failed", "locked", "empty")
_VERSION_DIR = re.compile(r"^(?:USER_)?neuronx?cc-(.+)$")  # neuronxcc-2.21...; old USER_neuroncc-2.2...


@dataclass(frozen=True)
class CacheLocation:
    path: str
    source: str  # "NEURON_CC_FLAGS" | "NEURON_COMPILE_CACHE_URL" | "default" | "given"
    remote: bool = False  # s3:// etc.: reported, never scanned


def cache_dir_from_flags(flags: str) -> str | None:
    """The last ``--cache_dir=X`` (or ``--cache_dir X``) in NEURON_CC_FLAGS."""
    try:
        tokens = shlex.split(flags)
    except ValueError:  # an unbalanced quote: still find what we can
        tokens = flags.split()
    found = None
    for i, tok in enumerate(tokens):
        if tok.startswith("--cache_dir="):
            found = tok.split("=", 1)[1]
        elif tok == "--cache_dir" and i + 1 < len(tokens):
            found = tokens[i + 1]
    return found or None


def _location(url: str, source: str) -> CacheLocation:
    if url.startswith("file://"):
        return CacheLocation(url[len("file://") :], source)
    if "://" in url:
        return CacheLocation(url, source, remote=True)
    return CacheLocation(os.path.expanduser(url), source)


def locate_cache(env: Mapping[str, str] | None = None) -> CacheLocation:
    """--cache_dir in NEURON_CC_FLAGS beats NEURON_COMPILE_CACHE_URL beats the default."""
    env = os.environ if env is None else env
    from_flags = cache_dir_from_flags(env.get("NEURON_CC_FLAGS", ""))
    if from_flags:
        return _location(from_flags, "NEURON_CC_FLAGS")
    if env.get("NEURON_COMPILE_CACHE_URL"):
        return _location(env["NEURON_COMPILE_CACHE_URL"], "NEURON_COMPILE_CACHE_URL")
    return CacheLocation(DEFAULT_CACHE_DIR, "default")


def _state(names: set[str]) -> str:
    has_neff = any(n.endswith(".neff") for n in names)
    if "model.done" in names or has_neff:
        return "done"
    if "model.log" in names:
        return "failed"
    if any(n.endswith(".lock") for n in names):
        return "locked"
    return "empty"


def _existing_parent(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def scan_cache(
    location: CacheLocation | str | Path, t: float | None = None, *, min_free_ratio: float = 0.10
) -> CacheScan:
    """Walk the cache once: size, entries by state, compiler versions, free disk, warnings."""
    t = time.time() if t is None else t
    if not isinstance(location, CacheLocation):
        location = _location(str(location), "given")
    base = {"t": t, "path": location.path, "source": location.source, "remote": location.remote}
    if location.remote:
        return CacheScan(**base)
    root = Path(location.path)
    free = total = None
    warnings: list[str] = []
    try:
        usage = shutil.disk_usage(_existing_parent(root))
        free, total = usage.free, usage.total
        if total and free / total < min_free_ratio:
            warnings.append(
                f"only {human_bytes(free)} free ({free / total:.0%}) on the filesystem holding the "
                f"compile cache {root}: compiles fail when it fills"
            )
    except OSError:
        pass
    if not root.is_dir():
        return CacheScan(
            **base,
            free_bytes=free,
            disk_total_bytes=total,
            warnings=warnings,
            entries=dict.fromkeys(STATES, 0),
        )

    size, versions, unreadable = 0, set(), []
    entries: dict[tuple[str, str], set[str]] = {}
    for dirpath, _dirnames, filenames in os.walk(root, onerror=unreadable.append):
        rel = Path(dirpath).relative_to(root).parts
        if len(rel) >= 1 and (m := _VERSION_DIR.match(rel[0])):
            versions.add(m.group(1))
        key = (rel[0], rel[1]) if len(rel) >= 2 and rel[1].startswith("MODULE_") else None
        names = entries.setdefault(key, set()) if key else None
        for name in filenames:
            try:
                size += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue  # removed while we walked
            if names is not None:
                names.add(name)
    counts = dict.fromkeys(STATES, 0)
    for names in entries.values():
        counts[_state(names)] += 1
    return CacheScan(
        **base,
        exists=True,
        size_bytes=size,
        entries=counts,
        compiler_versions=sorted(versions),
        free_bytes=free,
        disk_total_bytes=total,
        warnings=warnings,
        error=f"{len(unreadable)} folder(s) could not be read, e.g. {unreadable[0]}" if unreadable else None,
    )


def compare_scans(
    before: CacheScan,
    after: CacheScan,
    *,
    entries_per_min: float = 5.0,
    min_new_entries: int = 3,
    fill_horizon_s: float = 3600.0,
) -> list[str]:
    """Warnings about growth between two scans of the same cache (pure; times from the scans)."""
    dt = after.t - before.t
    if before.path != after.path or dt <= 0 or not (before.exists and after.exists):
        return []
    out = []
    new = sum(after.entries.values()) - sum(before.entries.values())
    rate = new / (dt / 60.0)
    if new >= min_new_entries and rate >= entries_per_min:
        out.append(
            f"compile cache gained {new} entries in {dt:.0f} s ({rate:.1f}/min): the workload may be "
            "recompiling (shapes or graphs that change every step)"
        )
    grew = (after.size_bytes or 0) - (before.size_bytes or 0)
    if grew > 0 and after.free_bytes is not None:
        seconds_left = after.free_bytes / (grew / dt)
        if seconds_left < fill_horizon_s:
            out.append(
                f"compile cache grew {human_bytes(grew)} in {dt:.0f} s; at that rate the disk "
                f"({human_bytes(after.free_bytes)} free) is full in about {seconds_left / 60:.0f} min"
            )
    return out


def rescan(
    previous: CacheScan | None, location: CacheLocation | str | Path, t: float | None = None
) -> CacheScan:
    """``scan_cache`` plus the growth warnings against the previous scan."""
    scan = scan_cache(location, t)
    if previous is None:
        return scan
    growth = compare_scans(previous, scan)
    return dataclasses.replace(scan, warnings=[*scan.warnings, *growth]) if growth else scan
