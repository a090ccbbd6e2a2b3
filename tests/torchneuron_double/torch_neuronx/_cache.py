"""The NEFF cache: in memory, then on disk (``TORCH_NEURONX_NEFF_CACHE_DIR``, default
/tmp/neff_cache; ``TORCH_NEURONX_NEFF_DISABLE_CACHE`` or ``TORCH_NEURONX_DISABLE_NEFF_CACHE`` 1 / true /
yes: memory only, as torch_neuronx/utils.py ``is_neff_cache_disabled``). A NEFF the cache lacks is
compiled (here: a sleep), counted and timed in the metrics, stored, and logged at level 2. The
in-memory cache holds at most ``NEURON_COMPILATION_CACHE_MAX_ENTRIES`` NEFFs (unset: no bound here),
dropping the least recently used and counting ``CompilationCache.Evictions`` for each, as
csrc/core/compilation/CompilationCache.cpp ``CheckAndEvictIfNeeded`` does."""

from __future__ import annotations

import atexit
import hashlib
import os
import queue
import threading
import time
from collections import OrderedDict

from . import _log, metrics

COMPILE_S = float(os.environ.get("TORCHNEURON_DOUBLE_COMPILE_S", "0.01"))
_memory: OrderedDict[str, None] = OrderedDict()  # least recently used first
MAX_ENTRIES = int(os.environ.get("NEURON_COMPILATION_CACHE_MAX_ENTRIES") or 0)  # 0: no bound
COMPILED: list[float] = []  # the double's own truth: each NEFF compiled (its seconds), metrics on or off


def _cache_dir() -> str | None:
    if any(os.environ.get(name, "").lower() in ("1", "true", "yes")
           for name in ("TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE")):
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


# TORCHNEURON_DOUBLE_PIPELINE=async: eager ops go to a per-stream pipeline, as torch-neuronx's
# ``_submit_xla_task_to_pipeline`` (torch_neuronx/csrc/core/NeuronBindings.cpp) hands each op to
# ``SubmitOperationContext`` for asynchronous execution: the cache lookup and the compile
# (``CompilationCache::GetOrCompileNeff``, csrc/core/compilation/CompilationCache.cpp) happen on the
# stream's worker after the Python call returned, one after another; ``synchronize()`` waits for them.
PIPELINE = os.environ.get("TORCHNEURON_DOUBLE_PIPELINE", "") == "async"
_queue: queue.Queue = queue.Queue()


def _worker() -> None:
    while True:
        what = _queue.get()
        try:
            _neff_now(what)
        finally:
            _queue.task_done()


def synchronize() -> None:
    """Every op handed to the pipeline so far has its NEFF (a no-op without the pipeline)."""
    if PIPELINE:
        _queue.join()


if PIPELINE:
    threading.Thread(target=_worker, name="neuron-stream-0", daemon=True).start()
    atexit.register(synchronize)  # torch-neuronx synchronizes its streams at module destruction


def neff_for(what: str) -> None:
    """Make sure the NEFF of ``what`` (an op and its shapes, or a graph) is loaded: from memory,
    from disk, or compiled now (with the pipeline: on its worker, later)."""
    if PIPELINE:
        _queue.put(what)
    else:
        _neff_now(what)


def _neff_now(what: str) -> None:
    key = key_of(what)
    if key in _memory:
        _memory.move_to_end(key)
        metrics.counter("CompilationCache.InMemoryHits")
        return
    metrics.counter("CompilationCache.InMemoryMisses")
    if CACHE_DIR is not None:
        if os.path.exists(_path(key)):
            metrics.counter("CompilationCache.PersistentHits")
            _log.log(2, f"[NEFF_CACHE] Cache HIT for key: {key}")
            _keep(key)
            return
        metrics.counter("CompilationCache.PersistentMisses")
        _log.log(2, f"[NEFF_CACHE] Cache MISS for key: {key}")
    compile_neff(key)


def _keep(key: str) -> None:
    """Into the in-memory cache; past MAX_ENTRIES the least recently used NEFF is evicted."""
    _memory[key] = None
    while MAX_ENTRIES and len(_memory) > MAX_ENTRIES:
        _memory.popitem(last=False)
        metrics.counter("CompilationCache.Evictions")


def compile_neff(key: str) -> float:
    start = time.perf_counter()
    time.sleep(COMPILE_S)  # neuronx-cc
    took = time.perf_counter() - start
    COMPILED.append(took)
    metrics.counter("CompilationCache.TotalCompilations")
    metrics.timed("CompilationCache.CompilationTime", took * 1e9)
    _keep(key)
    if CACHE_DIR is not None:
        path = _path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"NEFF " + key.encode())
        _log.log(2, f"[NEFF_CACHE] Storing NEFF for key: {key}")
    return took
