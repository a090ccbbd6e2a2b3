"""Seeing the disk fill before it is full: the forecast math (core/node/disk.py, pure), the warnings
once per episode, the words every view shows, and one real run whose run folder is on a small
tmpfs that a second process fills at a steady pace."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, base_env
from hypothesis import given, settings
from hypothesis import strategies as st
from test_output_relay import _mount, _umount
from test_recorder_lifecycle import wait_until

from neurondesk.collectors import torchneuron
from neurondesk.collectors.devices.disk import DiskSampler, disk_locations
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.device_events import DiskSample, FsReading
from neurondesk.core.events.neff_events import NeffCacheLog, NeffCompiles
from neurondesk.core.node.disk import (
    DiskWarnings,
    duration_words,
    full_in_s,
    growth_rate,
    output_notice,
    size_words,
)
from neurondesk.core.reduce.disk import DiskReducer
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.view.run_view import view_of
from neurondesk.reports.summary_writer import to_markdown
from neurondesk.store.journal import read_journal
from neurondesk.views.headless import status_line

GB = 10**9


def _sample(t: float, free: int, total: int = 100 * GB, holds=("run folder",), path="/runs", device=7,
            own: int | None = None) -> DiskSample:
    """``own``: the run's folders' bytes on the disk (None: not measured)."""
    return DiskSample(t=t, filesystems=[FsReading(list(holds), path, free, total, device, own)])


# ---------------------------------------------------------------- the math


def test_growth_rate_is_the_least_squares_slope_of_free_space():
    # 1 MB/s used, with noise that cancels: +-200 kB around the line
    pts = [(float(t), 50 * GB - t * 10**6 + (200_000 if t % 2 else -200_000)) for t in range(0, 61, 5)]
    rate = growth_rate(pts)
    assert rate == pytest.approx(1e6, rel=0.02)
    few = {"min_span_s": 10, "min_samples": 3}  # the line itself, on three points
    assert growth_rate([(0.0, 10), (5.0, 10), (20.0, 10)], **few) == 0  # flat: not filling
    assert growth_rate([(0.0, 100), (10.0, 200), (20.0, 300)], **few) == pytest.approx(-10.0)  # being freed


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.5, 30.0), st.integers(-5 * 10**9, 5 * 10**9)), min_size=3, max_size=150),
       st.integers(10**9, 10**13))
def test_growth_rate_equals_a_least_squares_fit(steps, base):
    """Against numpy's polyfit over the same window, for any spacing and any jumps in free space."""
    import numpy as np

    t, pts = 1.7e9, []
    for dt, change in steps:
        t += dt
        pts.append((t, base + change))
    rate = growth_rate(pts, window_s=600, min_span_s=0, min_samples=3)
    window = [(x, y) for x, y in pts if pts[-1][0] - x <= 600]
    if len(window) < 3:
        assert rate is None
        return
    ts = np.array([x for x, _ in window]) - window[0][0]
    expected = -np.polyfit(ts, np.array([float(y) for _, y in window]), 1)[0]
    assert rate == pytest.approx(expected, rel=1e-6, abs=1e-3)


def test_growth_rate_needs_enough_samples_over_enough_time():
    """A forecast from 10 s of a shared disk is noise (issue 50 item 7): 10 samples over a minute at least."""
    assert growth_rate([]) is None
    assert growth_rate([(0.0, 100), (20.0, 50)]) is None  # two samples are not enough
    assert growth_rate([(0.0, 100), (5.0, 90), (10.0, 80)]) is None  # 10 s: too short a span
    assert growth_rate([(float(t), 1000 - 2 * t) for t in range(0, 50, 1)]) is None  # 50 samples, 49 s: too short
    assert growth_rate([(float(t), 1000 - 2 * t) for t in range(0, 61, 20)]) is None  # a minute, 4 samples: too few
    assert growth_rate([(float(t), 1000 - 2 * t) for t in range(0, 61, 6)]) == pytest.approx(2.0)  # 11 over 60 s


def test_only_the_recent_window_counts():
    # a burst long ago (10 GB in the first minute), then 1 kB/s for 20 minutes
    pts = [(0.0, 90 * GB), (30.0, 85 * GB), (60.0, 80 * GB)]
    pts += [(60.0 + s, 80 * GB - s * 1000) for s in range(10, 1201, 10)]
    assert growth_rate(pts, window_s=600) == pytest.approx(1000, rel=1e-6)
    assert growth_rate(pts, window_s=1e9) > 5000  # with the burst in the window, much faster


def test_full_in_is_free_space_over_the_rate():
    assert full_in_s(7800 * 10**6, 10**6) == 7800  # 7.8 GB at 1 MB/s: 2 h 10 min
    assert duration_words(7800) == "2 h 10 min"
    assert full_in_s(10**9, 0.0) is None and full_in_s(10**9, -5.0) is None and full_in_s(10**9, None) is None
    assert full_in_s(-3, 10.0) == 0.0  # already past full (root's reserve): full now


@pytest.mark.parametrize("seconds, words", [(0, "under a minute"), (59.9, "under a minute"), (60, "1 min"),
                                            (3599, "59 min"), (3600, "1 h"), (7800, "2 h 10 min"),
                                            (47 * 3600 + 59 * 60, "47 h 59 min"), (48 * 3600, "2 days"),
                                            (3 * 86400 + 4 * 3600 + 59, "3 days 4 h")])
def test_duration_words(seconds, words):
    assert duration_words(seconds) == words


def test_size_words_are_decimal_as_disks_are_sold():
    assert [size_words(n) for n in (0, 999, 1000, 4_200_000, 1_300_000_000, 2.5e13)] == \
        ["0 B", "999 B", "1.0 kB", "4.2 MB", "1.3 GB", "25.0 TB"]


# ---------------------------------------------------------------- the reducer and its warnings


def test_a_disk_filling_in_two_hours_warns_once_and_the_summary_carries_the_figures():
    state = RunState()
    warner = DiskWarnings()
    said = []
    free = 60 * GB  # 60% free, 1 MB/s: full in 16 h 39 min
    for i in range(13):
        state.apply(_sample(1000.0 + 5 * i, free - i * 5 * 10**6))
        said += warner.check(state.parts.disk.filesystems())
    fs = state.parts.disk.filesystems()[0]
    assert fs.growth_bytes_per_s == pytest.approx(1e6)
    assert fs.full_in_s == pytest.approx((free - 60 * 10**6) / 1e6)
    assert said == [] and fs.warning() is None  # 16 h away, 60% free: no warning
    assert status_line(view_of(state, 1060.0)).count("disk full in about 16 h") == 1  # under a day: shown

    # now 7.8 GB free of 50 GB (16%) at the same pace: full in 2 h 10 min
    state2, warner2, said2 = RunState(), DiskWarnings(), []
    for i in range(13):
        state2.apply(_sample(1000.0 + 5 * i, 7800 * 10**6 + (12 - i) * 5 * 10**6, total=50 * GB))
        said2 += warner2.check(state2.parts.disk.filesystems())
    assert said2 == ["the disk holding the run folder (/runs) has 7.8 GB free (16%): disk full in about "
                     "2 h 10 min at this rate (+60.0 MB/min)"]
    assert "disk full in about 2 h 10 min (run folder)" in status_line(view_of(state2, 1060.0))
    figures = run_summary(state2, 1060.0).as_dict()["disk"]["filesystems"]
    assert figures == [{"holds": ["run folder"], "path": "/runs", "free_bytes": 7800 * 10**6, "total_bytes": 50 * GB,
                        "free_share": 0.156, "growth_bytes_per_s": 1e6, "full_in_s": 7800.0,
                        "full_in": "2 h 10 min", "compile_burst_bytes": 0, "other_burst_bytes": 0,
                        "unattributed_burst_bytes": 0, "warning": said2[0],
                        "words": "disk run folder: 7.8 GB free of 50.0 GB (16%), +60.0 MB/min, full in about "
                                 "2 h 10 min at this rate"}]
    md = to_markdown(run_summary(state2, 1060.0))
    assert "## Disks\n\n- disk run folder: 7.8 GB free of 50.0 GB (16%), +60.0 MB/min, full in about 2 h 10 min " \
           "at this rate (`/runs`)\n" in md


def test_a_low_disk_warns_at_once_and_again_when_its_forecast_comes():
    r, warner, said = DiskReducer(), DiskWarnings(), []
    for i in range(13):  # 8 GB free of 100 GB, 1 MB/s
        r.on_disk_sample(_sample(5.0 * i, 8 * GB - i * 5 * 10**6))
        said.append(warner.check(r.filesystems()))
    assert said[0] == ["the disk holding the run folder (/runs) has 8.0 GB free (8%)"]  # no rate yet
    assert all(x == [] for x in said[1:12])  # under a minute of samples: still no rate
    assert said[12] == ["the disk holding the run folder (/runs) has 7.9 GB free (8%): disk full in about "
                        "2 h 12 min at this rate (+60.0 MB/min)"]  # 7.94 GB at 1 MB/s


def test_a_warning_comes_once_per_episode_not_once_per_sample():
    warner = DiskWarnings()
    r = DiskReducer()
    out = []
    frees = [50, 9, 9, 8, 10.5, 11, 13, 13, 9]  # % free; samples far apart (no growth rate, no forecast)
    for i, pct in enumerate(frees):
        r.on_disk_sample(_sample(1000.0 * i, int(pct * GB)))
        out.append(len(warner.check(r.filesystems())))
    # warns at 9%; 10.5% and 11% are still inside the episode (clears at 12%); 13% ends it; 9% again
    assert out == [0, 1, 0, 0, 0, 0, 0, 0, 1]


def test_run_folder_and_cache_on_one_filesystem_are_one_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(torchneuron, "DEFAULT_NEFF_CACHE", str(tmp_path / "no-neff-cache"))  # no TorchNeuron here
    cache = tmp_path / "cache"  # not made yet: its nearest existing folder's disk is the one
    sample = DiskSampler(disk_locations(tmp_path / "run", {"NEURON_CC_FLAGS": f"--cache_dir={cache}"})).sample(5.0)
    assert [f.holds for f in sample.filesystems] == [["run folder", "compile cache"]]
    assert sample.filesystems[0].total_bytes > 0 and sample.t == 5.0 and sample.errors == []
    assert disk_locations("/r", {"NEURON_COMPILE_CACHE_URL": "file:///mnt/c"}) == \
        {"run folder": "/r", "compile cache": "/mnt/c"}
    assert disk_locations("/r", {"NEURON_COMPILE_CACHE_URL": "s3://bucket/c"}) == {"run folder": "/r"}
    assert disk_locations("/r", {})["compile cache"] == "/var/tmp/neuron-compile-cache"


def test_samples_out_of_order_are_skipped_and_memory_stays_bounded():
    r = DiskReducer()
    for i in range(5000):
        r.on_disk_sample(_sample(float(i), 50 * GB - i * 1000))
    r.on_disk_sample(_sample(10.0, 1))  # late and out of order: not a new latest reading
    fs = r.filesystems()[0]
    assert fs.free_bytes == 50 * GB - 4999 * 1000 and fs.growth_bytes_per_s == pytest.approx(1000)
    assert len(r._fs["dev:7"].samples) <= 512


def test_output_not_stored_words_and_notices():
    r = DiskReducer()
    first = ev.OutputNotStored(t=100.0, stream="stdout", lost_bytes=0, pending_bytes=5000,
                               reason="disk full (ENOSPC)", first_t=99.0)
    level, text = output_notice(None, first, "/runs/r/stdout.log")
    assert level == "error" and text.startswith("the workload's stdout cannot be stored in /runs/r/stdout.log: "
                                                "disk full (ENOSPC) at ")
    r.on_output_not_stored(first)
    assert "5.0 kB held in memory" in r.output_not_stored_words()
    later = ev.OutputNotStored(t=200.0, stream="stdout", lost_bytes=4_200_000, reason="disk full (ENOSPC)",
                               first_t=99.0, storing=True)
    assert output_notice(first, later, "/x")[0] == "info" and "4.2 MB of it were not stored" in \
        output_notice(first, later, "/x")[1]
    assert output_notice(later, later, "/x") is None  # no change: nothing to say
    r.on_output_not_stored(later)
    words = r.output_not_stored_words()
    assert words.startswith("4.2 MB of the workload's output were not stored: disk full (ENOSPC) at ")
    assert words.endswith("(stdout 4.2 MB; writes succeed again)")
    assert r.status_words() == ["output not stored: 4.2 MB"]
    # held bytes count as lost once the relay's last word says they stayed unwritten
    r.on_output_not_stored(ev.OutputNotStored(t=300.0, stream="stderr", lost_bytes=0, pending_bytes=800,
                                              reason="read-only filesystem (EROFS)", first_t=250.0, final=True))
    assert r.output_lost_bytes == 4_200_800


# ---------------------------------------------------------------- a real run


FILLER = r"""
import os, sys, time
path, chunk, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "wb", buffering=0) as f:
    for _ in range(total // chunk):
        f.write(b"\0" * chunk)
        time.sleep(0.25)
"""


def test_a_real_run_on_a_filling_disk_says_when_it_will_be_full(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    _mount(["mount", "-t", "tmpfs", "-o", "size=200m,mode=0700", "tmpfs", str(mnt)], "a tmpfs")
    filler = subprocess.Popen([sys.executable, "-c", FILLER, str(mnt / "filler"), str(1 << 20), str(150 << 20)])
    try:
        run_dir = mnt / "run"
        # the workload: steps until the journal shows the forecast in a notice (a file the test makes)
        go = tmp_path / "go"
        code = (f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    print('tick', flush=True)\n"
                "    time.sleep(0.2)\n")
        env = base_env(tmp_path / "home")
        env["NEURON_CC_FLAGS"] = f"--cache_dir={mnt / 'cache'}"
        p = subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
                              "--", sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=env, cwd=REPO)

        def warned() -> list[str]:
            try:
                events = read_journal(run_dir / "events.jsonl")[0]
            except OSError:
                return []
            return [e.message for e in events if e.kind == "notice" and e.source == "disk"]
        said = wait_until(warned, 240, "a disk notice")
        go.touch()
        _, err = p.communicate(timeout=120)
    finally:
        filler.kill()
        filler.wait()
        if "p" in locals() and p.poll() is None:
            p.kill()
        summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else None
        _umount(mnt)
    assert p.returncode == 0, err
    # ~4 MB/s into 200 MiB: full within a minute or two, far under 6 h
    assert said[0].startswith(f"the disk holding the run folder and the compile cache ({run_dir}) has ")
    assert ": disk full in about " in said[0] and "at this rate (+" in said[0]
    fs = summary["disk"]["filesystems"]
    assert [f["holds"] for f in fs] == [["run folder", "compile cache"]]
    assert fs[0]["total_bytes"] == 200 << 20
    assert 1e6 < fs[0]["growth_bytes_per_s"] < 8e6  # 1 MiB every 0.25 s at most, slower on a busy machine
    assert fs[0]["full_in_s"] is not None and fs[0]["full_in_s"] < 6 * 3600
    assert said[0] in summary["notices"]
    assert "disk full in about" in err  # the headless status line said it too


def test_the_console_devices_panel_shows_the_forecast_and_output_not_stored(tmp_path):
    """The real console (App.run_test) on a replayed journal holding disk samples and relay totals."""
    import asyncio

    from neurondesk.sources.replay import ReplaySource
    from neurondesk.store.journal import JournalWriter
    from neurondesk.views.console.app import ConsoleApp
    from neurondesk.views.console.panel import Line

    run = tmp_path / "run"
    run.mkdir()
    w = JournalWriter(run / "events.jsonl")
    w.write(ev.RunStarted(t=1000.0, run_id="run", command=["train.py"]))
    for i in range(13):
        w.write(_sample(1000.0 + 5 * i, 7800 * 10**6 + (12 - i) * 5 * 10**6, total=50 * GB,
                        holds=("run folder", "compile cache")))
    w.write(ev.OutputNotStored(t=1061.0, stream="stdout", lost_bytes=4_200_000, reason="disk full (ENOSPC)",
                               first_t=1030.0, storing=True))
    w.close()

    async def go():
        app = ConsoleApp(ReplaySource(run, speed=0), frozen=True, poll_s=0.25)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            return app.query_one("#devices-text", Line).text.plain

    devices = " ".join(x.strip() for x in asyncio.run(go()).splitlines())  # wrapped to the panel's width
    assert ("disk run folder and the compile cache: 7.8 GB free of 50.0 GB (16%), +60.0 MB/min, full in about "
            "2 h 10 min at this rate") in devices
    assert "4.2 MB of the workload's output were not stored: disk full (ENOSPC) at " in devices


def test_the_metrics_endpoint_serves_free_space_forecast_and_output_not_stored():
    from prometheus_client import CollectorRegistry
    from prometheus_client.openmetrics.exposition import generate_latest
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from neurondesk.exporter.endpoint import RunCollector
    from neurondesk.exporter.snapshot import Snapshotter

    state = RunState()
    state.apply(ev.RunStarted(t=999.0, run_id="r1", command=["train.py"]))
    for i in range(13):
        state.apply(_sample(1000.0 + 5 * i, 7800 * 10**6 + (12 - i) * 5 * 10**6, total=50 * GB,
                            holds=("run folder", "compile cache")))
    state.apply(ev.OutputNotStored(t=1061.0, stream="stdout", lost_bytes=4_200_000, reason="disk full (ENOSPC)",
                                   first_t=1030.0, storing=True))
    collector = RunCollector()
    collector.snapshot = Snapshotter("job-7", "node-a").take(state, 1061.0)
    registry = CollectorRegistry()
    registry.register(collector)
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    labels = {"job_id": "job-7", "node": "node-a", "run_id": "r1", "holds": "run folder+compile cache"}
    for name, value in (("neurondesk_disk_free_bytes", 7800 * 10**6), ("neurondesk_disk_size_bytes", 50 * GB),
                        ("neurondesk_disk_full_in_seconds", 7800.0)):
        [sample] = families[name].samples
        assert (sample.labels, sample.value) == (labels, pytest.approx(value)), name
    [lost] = families["neurondesk_output_not_stored_bytes"].samples
    assert lost.name == "neurondesk_output_not_stored_bytes_total" and lost.value == 4_200_000


def test_the_forecast_is_from_the_steady_writes_and_a_compile_burst_is_said_apart():
    # a torch.compile run: Inductor's cache writes 1.2 GB in the first 6 s, while the compile runs; then
    # the journal and outputs write 1 MB/s. The forecast is the steady 1 MB/s, never the burst's 200 MB/s.
    state = RunState()
    state.apply(ev.CompileStarted(t=1000.5, source="dynamo", pid=9))
    free, own = 50 * GB, 10**6
    state.apply(_sample(1000.0, free, own=own))
    for t in (1002.0, 1004.0, 1006.0):
        free, own = free - 400_000_000, own + 400_000_000  # the cache is the run's folder: its growth
        state.apply(_sample(t, free, own=own))
    state.apply(ev.CompileFinished(t=1005.5, source="dynamo", pid=9, duration_s=5.0))
    for t in range(1008, 1070, 2):
        free, own = free - 2_000_000, own + 2_000_000
        state.apply(_sample(float(t), free, own=own))
    (fs,) = state.parts.disk.filesystems()
    assert fs.growth_bytes_per_s == pytest.approx(1e6, rel=0.05)
    assert fs.full_in_s == pytest.approx(fs.free_bytes / 1e6, rel=0.05)
    assert fs.burst_bytes == 1_200_000_000  # the samples of (1000, 1006]: a compile ran in each interval
    assert "1.2 GB written during the compiles (their caches), left out of the forecast" in fs.words()
    assert fs.as_dict()["compile_burst_bytes"] == fs.burst_bytes
    plain = RunState()  # the same samples with no compile: the burst is growth like any other
    for e in (_sample(1000.0, 50 * GB), _sample(1070.0, 50 * GB - 1_262_000_000)):
        plain.apply(e)
    assert "compiles" not in plain.parts.disk.filesystems()[0].words()


def test_torchneurons_neff_cache_folder_is_watched_where_the_workload_writes_it(tmp_path, monkeypatch):
    default = tmp_path / "neff_cache"
    monkeypatch.setattr(torchneuron, "DEFAULT_NEFF_CACHE", str(default))
    env = {"NEURON_COMPILE_CACHE_URL": "s3://bucket/c"}
    assert disk_locations("/r", env) == {"run folder": "/r"}  # no TorchNeuron ran here: no NEFF cache
    default.mkdir()
    assert disk_locations("/r", env) == {"run folder": "/r", "NEFF cache": str(default)}  # its default, once made
    given = {**env, "TORCH_NEURONX_NEFF_CACHE_DIR": "/mnt/neff"}
    assert disk_locations("/r", given) == {"run folder": "/r", "NEFF cache": "/mnt/neff"}
    assert disk_locations("/r", {**given, "TORCH_NEURONX_NEFF_DISABLE_CACHE": "1"}) == {"run folder": "/r"}
    sample = DiskSampler(disk_locations(tmp_path / "run", {**env, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "n")})).sample(1.0)
    assert [f.holds for f in sample.filesystems] == [["run folder", "NEFF cache"]]  # one disk, both said


def test_torchneuron_eager_neff_compiles_are_a_burst_said_apart_from_the_forecast():
    # an eager TorchNeuron run: its NEFFs are stored in the persistent NEFF cache during the first
    # steps (the log's Storing lines, read every 0.25 s; the step's compiles reported at its end),
    # 150 MB a second; then the steady writes, 1 MB/s. The forecast is the 1 MB/s.
    state = RunState()
    free, own = 50 * GB, 0
    state.apply(_sample(1000.0, free, holds=("run folder", "NEFF cache"), own=own))
    for t in (1002.0, 1004.0, 1006.0):
        state.apply(NeffCacheLog(t=t - 1.0, path="/r/torchneuron.log", misses=40, stores=40))
        state.apply(NeffCacheLog(t=t - 0.75, path="/r/torchneuron.log"))  # a read with nothing new
        free, own = free - 300_000_000, own + 300_000_000
        state.apply(_sample(t, free, holds=("run folder", "NEFF cache"), own=own))
    state.apply(NeffCompiles(t=1006.0, pid=4, step=0, count=120, duration_s=5.5))  # at the step's end
    for t in range(1008, 1070, 2):
        free, own = free - 2_000_000, own + 2_000_000
        state.apply(_sample(float(t), free, holds=("run folder", "NEFF cache"), own=own))
    (fs,) = state.parts.disk.filesystems()
    assert fs.burst_bytes == 900_000_000
    assert fs.growth_bytes_per_s == pytest.approx(1e6, rel=0.05)
    assert "900.0 MB written during the compiles (their caches), left out of the forecast" in fs.words()
    assert fs.words().startswith("disk run folder and the NEFF cache: ")
    # the same writes with log reads that stored nothing: growth like any other
    plain = RunState()
    plain.apply(_sample(1000.0, 50 * GB))
    plain.apply(NeffCacheLog(t=1001.0, path="/r/torchneuron.log", hits=40))
    plain.apply(_sample(1002.0, 50 * GB - 300_000_000))
    assert plain.parts.disk.filesystems()[0].burst_bytes == 0


def test_a_compile_still_running_keeps_its_writes_out_of_the_forecast():
    disk = DiskReducer()
    disk.on_disk_sample(_sample(0.0, 50 * GB, own=0))
    disk.on_compile_started(ev.CompileStarted(t=1.0, source="probe", pid=3))
    for t in range(5, 60, 5):  # 20 MB/s, all while compiling, into the run's compile cache
        disk.on_disk_sample(_sample(float(t), 50 * GB - t * 20_000_000, own=t * 20_000_000))
    (fs,) = disk.filesystems()
    assert fs.growth_bytes_per_s is None and fs.full_in_s is None and fs.burst_bytes == 55 * 20_000_000
