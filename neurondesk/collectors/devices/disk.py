"""Free space of the filesystems a run writes to: the run folder's and the Neuron compile cache's
(where compile_cache.locate_cache finds it: --cache_dir in NEURON_CC_FLAGS, a file://
NEURON_COMPILE_CACHE_URL, else the default folder) and TorchNeuron's persistent NEFF cache's
(collectors/torchneuron.neff_cache_dir) and HLO cache's (TORCH_NEURONX_HLO_CACHE_DIR). One statvfs per path; two paths on one
filesystem give one reading that holds both, with the bytes of the run's own folders on it (a bounded walk:
what the run wrote, apart from other writers of a shared disk). The figures (growth, forecast) are
core/node/disk.py's."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from neurondesk.collectors.devices.compile_cache import locate_cache
from neurondesk.collectors.torchneuron import hlo_cache_dir, neff_cache_dir
from neurondesk.core.node.disk import DiskSample, FsReading

WALK_MAX = 5_000  # files stat'ed per sample and disk (every 5 s); past it the folders are not measured
# (a tutorial's NEFF cache holds a few hundred files; benchmarks/disk_sampler_walk.py: the cost at the bound)


def disk_locations(run_dir: Path | str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What of the run lives where: {"run folder": ..., "compile cache": ..., "NEFF cache": ..., "HLO cache": ...} (a
    remote cache, s3:// and the like, has no local disk to watch)."""
    out = {"run folder": str(run_dir)}
    cache = locate_cache(env)
    if not cache.remote:
        out["compile cache"] = cache.path
    env = os.environ if env is None else env
    neff = neff_cache_dir(env)
    if neff:
        out["NEFF cache"] = neff
    hlo = hlo_cache_dir(env)
    if hlo:
        out["HLO cache"] = hlo
    return out


def _existing(path: str) -> str:
    """The path, or its nearest folder that exists (a cache folder not made yet fills its parent's disk)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return str(p)


def folder_bytes(path: str, budget: list[int]) -> int | None:
    """The bytes the files under ``path`` take on disk (st_blocks), 0 for a folder not made yet; None when
    the walk would pass ``budget[0]`` files (it is spent as files are stat'ed) or the folder cannot be read."""
    if not os.path.isdir(path):
        return 0 if not os.path.exists(path) else None
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        budget[0] -= len(files)
        if budget[0] < 0:
            return None
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue  # removed meanwhile
    return total


class DiskSampler:
    def __init__(self, locations: Mapping[str, str], walk_max: int = WALK_MAX) -> None:
        self.locations = dict(locations)
        self.walk_max = walk_max
        self.too_big: set[int] = set()  # filesystems whose folders passed the bound: not walked again (caches grow)

    def _own_bytes(self, dev: int, paths: list[str]) -> int | None:
        """The run's folders on one filesystem together (a folder inside another counted once)."""
        if dev in self.too_big:
            return None
        budget = [self.walk_max]
        roots = [p for p in paths if not any(p != q and Path(p).is_relative_to(q) for q in paths)]
        sizes = [folder_bytes(p, budget) for p in dict.fromkeys(roots)]
        if budget[0] < 0:
            self.too_big.add(dev)
        return None if any(n is None for n in sizes) else sum(sizes)

    def sample(self, t: float | None = None) -> DiskSample:
        t = time.time() if t is None else t
        by_dev: dict[int, FsReading] = {}
        paths: dict[int, list[str]] = {}
        errors = []
        for label, path in self.locations.items():
            at = _existing(path)
            try:
                st = os.statvfs(at)
                dev = os.stat(at).st_dev
            except OSError as exc:
                errors.append(f"{label} {path}: {exc.strerror or exc}")
                continue
            paths.setdefault(dev, []).append(os.path.abspath(path))
            if dev in by_dev:
                r = by_dev[dev]
                by_dev[dev] = FsReading([*r.holds, label], r.path, r.free_bytes, r.total_bytes, r.device)
                continue
            by_dev[dev] = FsReading([label], path, st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize, dev)
        readings = [FsReading(r.holds, r.path, r.free_bytes, r.total_bytes, r.device, self._own_bytes(dev, paths[dev]))
                    for dev, r in by_dev.items()]
        return DiskSample(t=t, filesystems=readings, errors=errors)
