"""One thread per telemetry source: a compile-cache walk that hangs does not hold back the 1 Hz
host and process-tree samples (real psutil, real threads; the cache walk is made to block)."""

from __future__ import annotations

import os
import queue
import threading
import time

import pytest

from neurondesk.collectors import telemetry as tm


@pytest.mark.slow  # seconds of waiting: make test runs it, make test-fast does not
def test_a_stuck_compile_cache_walk_does_not_delay_host_samples(tmp_path, monkeypatch):
    cache = tmp_path / "neuron-compile-cache"
    cache.mkdir()
    walking, release = threading.Event(), threading.Event()

    def stuck_rescan(last, where):
        walking.set()
        release.wait(120)  # a walk of a huge cache on a slow disk
        raise RuntimeError("released")

    monkeypatch.setattr(tm.builtin, "rescan", stuck_rescan)
    monkeypatch.setattr(tm.builtin, "locate_cache", lambda env: cache)
    monkeypatch.setattr(tm, "collect_inventory", lambda: {"neuron": None, "gpus": []})
    monkeypatch.setattr(tm, "inventory_event", lambda inv: None)
    events: queue.SimpleQueue = queue.SimpleQueue()
    t = tm.Telemetry(lambda e: e is not None and events.put(e), env={})
    t.start(os.getpid())
    try:
        assert walking.wait(60), "the cache walk never started"
        kinds: list[str] = []
        deadline = time.monotonic() + 60
        while kinds.count("host_sample") < 3:
            assert time.monotonic() < deadline, f"host samples stopped while the cache walk hung: {kinds}"
            kinds.append(events.get(timeout=60).kind)
        assert not release.is_set()  # all of them came while the walk was still stuck
        assert "process_tree" in kinds
    finally:
        release.set()
        t.stop()
