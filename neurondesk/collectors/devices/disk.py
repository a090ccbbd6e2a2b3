"""Free space of the filesystems a run writes to: the run folder's and the Neuron compile cache's
(where compile_cache.locate_cache finds it: --cache_dir in NEURON_CC_FLAGS, a file://
NEURON_COMPILE_CACHE_URL, else the default folder) and TorchNeuron's persistent NEFF cache's
(collectors/torchneuron.neff_cache_dir). One statvfs per path; two paths on one
filesystem give one reading that holds both. The figures (growth, forecast) are core/node/disk.py's."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from neurondesk.collectors.devices.compile_cache import locate_cache
from neurondesk.collectors.torchneuron import neff_cache_dir
from neurondesk.core.node.disk import DiskSample, FsReading


def disk_locations(run_dir: Path | str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What of the run lives where: {"run folder": ..., "compile cache": ..., "NEFF cache": ...} (a
    remote cache, s3:// and the like, has no local disk to watch)."""
    out = {"run folder": str(run_dir)}
    cache = locate_cache(env)
    if not cache.remote:
        out["compile cache"] = cache.path
    neff = neff_cache_dir(os.environ if env is None else env)
    if neff:
        out["NEFF cache"] = neff
    return out


def _existing(path: str) -> str:
    """The path, or its nearest folder that exists (a cache folder not made yet fills its parent's disk)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return str(p)


class DiskSampler:
    def __init__(self, locations: Mapping[str, str]) -> None:
        self.locations = dict(locations)

    def sample(self, t: float | None = None) -> DiskSample:
        t = time.time() if t is None else t
        by_dev: dict[int, FsReading] = {}
        errors = []
        for label, path in self.locations.items():
            at = _existing(path)
            try:
                st = os.statvfs(at)
                dev = os.stat(at).st_dev
            except OSError as exc:
                errors.append(f"{label} {path}: {exc.strerror or exc}")
                continue
            if dev in by_dev:
                r = by_dev[dev]
                by_dev[dev] = FsReading([*r.holds, label], r.path, r.free_bytes, r.total_bytes, r.device)
                continue
            by_dev[dev] = FsReading([label], path, st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize, dev)
        return DiskSample(t=t, filesystems=list(by_dev.values()), errors=errors)
