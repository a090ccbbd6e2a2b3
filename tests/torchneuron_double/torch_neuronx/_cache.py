"""The NEFF cache: in memory, then on disk (``TORCH_NEURONX_NEFF_CACHE_DIR``, default
/tmp/neff_cache; ``TORCH_NEURONX_NEFF_DISABLE_CACHE=1``: memory only). A NEFF the cache lacks is
compiled (here: a sleep), counted and timed in the metrics, stored, and logged at level 2."""

from __future__ import annotations

import hashlib
import os
import time

from . import _log, metrics

COMPILE_S = float(os.environ.get("TORCHNEURON_DOUBLE_COMPILE_S", "0.01"))
_memory: set[str] = set()
COMPILED: list[float] = []  # the double's own truth: each NEFF compiled (its seconds), metrics on or off


def _cache_dir() -> str | None:
    if os.environ.get("TORCH_NEURONX_NEFF_DISABLE_CACHE") == "1":
        return None
    folder = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or "/tmp/neff_cache"
    try:
        os.makedirs(folder, exist_ok=True)
        return folder
    except OSError as exc:
        _log.log(1, f"Failed to initialize persistent cache backend, continuing without persistent caching error= {exc}")
        return None


CACHE_DIR = _cache_dir()


def key_of(what: str) -> str:
    return hashlib.sha256(what.encode()).hexdigest()[:40]


def _path(key: str) -> str:
    return os.path.join(CACHE_DIR, key[:2], key[2:4], key + ".neff")


def neff_for(what: str) -> None:
    """Make sure the NEFF of ``what`` (an op and its shapes, or a graph) is loaded: from memory,
    from disk, or compiled now."""
    key = key_of(what)
    if key in _memory:
        metrics.counter("CompilationCache.InMemoryHits")
        return
    metrics.counter("CompilationCache.InMemoryMisses")
    if CACHE_DIR is not None:
        if os.path.exists(_path(key)):
            metrics.counter("CompilationCache.PersistentHits")
            _log.log(2, f"[NEFF_CACHE] Cache HIT for key: {key}")
            _memory.add(key)
            return
        metrics.counter("CompilationCache.PersistentMisses")
        _log.log(2, f"[NEFF_CACHE] Cache MISS for key: {key}")
    compile_neff(key)


def compile_neff(key: str) -> float:
    start = time.perf_counter()
    time.sleep(COMPILE_S)  # neuronx-cc
    took = time.perf_counter() - start
    COMPILED.append(took)
    metrics.counter("CompilationCache.TotalCompilations")
    metrics.timed("CompilationCache.CompilationTime", took * 1e9)
    _memory.add(key)
    if CACHE_DIR is not None:
        path = _path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"NEFF " + key.encode())
        _log.log(2, f"[NEFF_CACHE] Storing NEFF for key: {key}")
    return took
