"""The disk forecast on a shared disk (issue 50 item 7): no forecast from a few seconds of samples ("not
enough data yet" until 10 samples over a minute), and of the space used while compiles ran only the growth
of the run's own folders (run folder, compile caches: the sampler's bounded walk) is charged to the
compiles; the rest is said as other writes on the disk (the NEFF cache held 12 kB while 861 MB went)."""

from __future__ import annotations

import os

from neurondesk.collectors.devices.disk import DiskSampler
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.device_events import DiskSample, FsReading
from neurondesk.core.node.disk import MIN_SAMPLES, MIN_SPAN_S
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.view.run_view import view_of
from neurondesk.views.headless import status_line

GB, MB = 10**9, 10**6


def sample(t: float, free: int, own: int | None, holds=("run folder", "NEFF cache")) -> DiskSample:
    measured = () if own is None else (own,)  # None: a reading as journals before the field hold it
    return DiskSample(t=t, filesystems=[FsReading(list(holds), "/data", free, 100 * GB, 7, *measured)])


def test_ten_seconds_of_samples_give_no_forecast_and_say_so() -> None:
    state = RunState()
    free = 20 * GB
    for t in (0.0, 5.0, 10.0):  # +742.7 MB/min, 10 s of it
        state.apply(sample(1000.0 + t, int(free - t * 742.7 * MB / 60), own=None))
    (fs,) = state.parts.disk.filesystems()
    assert fs.growth_bytes_per_s is None and fs.full_in_s is None and fs.warning() is None
    assert fs.words().endswith(", not enough data yet for a forecast (3 samples over 10 s; it needs "
                               f"{MIN_SAMPLES} over 1 min)")
    assert "disk full" not in status_line(view_of(state, 1010.0))
    t = 10.0
    while t < MIN_SPAN_S:  # a minute of samples: now it forecasts
        t += 5.0
        state.apply(sample(1000.0 + t, int(free - t * 742.7 * MB / 60), own=None))
    (fs,) = state.parts.disk.filesystems()
    assert fs.full_in_s is not None and "full in about" in fs.words()


def test_only_the_run_folders_growth_is_charged_to_the_compiles_the_rest_is_other_writes() -> None:
    state = RunState()
    free, own = 50 * GB, 4_000
    state.apply(sample(1000.0, free, own))
    state.apply(ev.CompileStarted(t=1000.5, source="probe", pid=3))
    for t in (1002.0, 1004.0, 1006.0):  # another process writes 287 MB every 2 s; the NEFF cache 4 kB
        free, own = free - 287 * MB, own + 4_000
        state.apply(sample(t, free, own))
    state.apply(ev.CompileFinished(t=1005.5, source="probe", pid=3, duration_s=5.0))
    (fs,) = state.parts.disk.filesystems()
    assert (fs.burst_bytes, fs.other_burst_bytes, fs.unattributed_burst_bytes) == (12_000, 861 * MB - 12_000, 0)
    words = fs.words()
    assert "; 12.0 kB written during the compiles (their caches), 861.0 MB other writes on the disk meanwhile, " \
           "left out of the forecast" in words
    assert "861.0 MB written during the compiles" not in words
    disk = run_summary(state, 1006.0).as_dict()["disk"]["filesystems"][0]
    assert (disk["compile_burst_bytes"], disk["other_burst_bytes"]) == (12_000, 861 * MB - 12_000)


def test_where_the_folders_were_not_measured_whose_writes_is_said_unknown() -> None:
    """A journal from before the field, or a cache past the walk's bound: no guess either way."""
    state = RunState()
    state.apply(sample(1000.0, 50 * GB, None))
    state.apply(ev.CompileStarted(t=1000.5, source="probe", pid=3))
    state.apply(sample(1002.0, 50 * GB - 861 * MB, None))
    (fs,) = state.parts.disk.filesystems()
    assert fs.burst_bytes == 0 and fs.unattributed_burst_bytes == 861 * MB
    assert "861.0 MB written on the disk while compiles ran (the run's folders not measured: whose is not known)" \
        in fs.words()
    assert "during the compiles" not in fs.words()


def test_the_sampler_measures_the_runs_own_folders_not_the_rest_of_the_disk(tmp_path) -> None:
    run, cache, other = tmp_path / "run", tmp_path / "neff", tmp_path / "someone-else"
    for d in (run, cache, other):
        d.mkdir()
    (run / "events.jsonl").write_bytes(b"e" * 8192)
    (cache / "a.neff").write_bytes(b"n" * 16384)
    (other / "big.bin").write_bytes(b"x" * 1_000_000)  # another writer on the same disk
    sampler = DiskSampler({"run folder": str(run), "NEFF cache": str(cache)})
    (fs,) = sampler.sample(1.0).filesystems
    blocks = sum(os.lstat(p).st_blocks * 512 for p in (run / "events.jsonl", cache / "a.neff"))
    assert fs.holds == ["run folder", "NEFF cache"] and fs.own_bytes == blocks
    assert fs.own_bytes < 1_000_000
    nested = DiskSampler({"run folder": str(tmp_path), "NEFF cache": str(cache)}).sample(1.0).filesystems[0]
    assert nested.own_bytes == sum(os.lstat(p).st_blocks * 512 for p in tmp_path.rglob("*") if p.is_file())
    # past the walk's bound: not measured, not a guess
    for i in range(5):
        (cache / f"k{i}.neff").write_bytes(b"n")
    small = DiskSampler({"NEFF cache": str(cache)}, walk_max=3)
    assert small.sample(1.0).filesystems[0].own_bytes is None
    for p in cache.glob("k*.neff"):  # a cache that grew past the bound is not walked again every 5 s
        p.unlink()
    assert small.sample(2.0).filesystems[0].own_bytes is None
