"""Only the recorder's own loop reads its RunState (exporter/snapshot.py: there is no lock; the thread that
reduces is the one that reads, and every other thread gets frozen copies). A real recorder in this
process records a real workload with its telemetry on, metrics served and scraped from another thread
while it runs, a TensorBoard sink and a hang alert posted to a webhook: every read of the state, on
whatever thread, is noted; none is on another thread than the recorder's loop."""

from __future__ import annotations

import http.server
import sys
import threading
import urllib.request

import pytest
from prometheus_harness import free_port

from neurondesk.core.reduce.state import RunState
from neurondesk.recorder.options import RunOptions
from neurondesk.recorder.recorder import Recorder
from neurondesk.store.rundir import RunPaths

WORKLOAD = "import time\nfor i in range(30):\n    print(f'step {i}', flush=True)\n    time.sleep(0.05)\ntime.sleep(2.5)\n"


class WatchedState(RunState):
    """A RunState that notes the thread of every attribute read."""

    def __init__(self) -> None:
        object.__setattr__(self, "_readers", set())
        super().__init__()

    def __getattribute__(self, name: str):
        if name != "_readers":
            object.__getattribute__(self, "_readers").add(threading.get_ident())
        return object.__getattribute__(self, name)


class Hook(http.server.BaseHTTPRequestHandler):
    posts: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        Hook.posts.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_no_thread_but_the_recorders_loop_reads_its_state(tmp_path):
    pytest.importorskip("tensorboard")
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    port = free_port()
    options = RunOptions(run_root=tmp_path / "root", metrics_addr=f"127.0.0.1:{port}", metrics_grace_s=0.0,
                         tensorboard=str(tmp_path / "tb"), hang_after_s=1.0,
                         notify_url=f"http://127.0.0.1:{hook.server_address[1]}/hook")
    paths = RunPaths(tmp_path / "run")
    paths.dir.mkdir()
    rec = Recorder([sys.executable, "-c", WORKLOAD], options, paths)
    rec.state = rec.intake.state = WatchedState()
    stop = threading.Event()
    scrapes: list[int] = []

    def scrape() -> None:
        while not stop.is_set():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    scrapes.append(len(r.read()))
            except OSError:
                pass
            stop.wait(0.1)

    scraper = threading.Thread(target=scrape, daemon=True)
    try:
        rec.start()
        scraper.start()
        assert rec.run() == 0
    finally:
        stop.set()
        if rec.metrics is not None:
            rec.metrics.close()
        hook.shutdown()
    loop = threading.get_ident()
    readers = rec.state._readers
    assert scrapes and Hook.posts  # served while it ran, and the hang was posted from the webhook's thread
    others = {t.name for t in threading.enumerate() if t.ident in readers - {loop}}
    assert readers == {loop}, f"threads other than the recorder's loop read the state: {others or readers - {loop}}"
