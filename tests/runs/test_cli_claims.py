"""README claims run through the real CLI: Ctrl-C escalation (SIGINT, SIGTERM, SIGKILL; exit 128+N)
on a workload that ignores SIGINT and SIGTERM; the probe staying silent in forked DataLoader
workers; `neurondesk demo --headless`; `neurondesk devices`."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading

from conftest import REAL_RUN_TIMEOUT_S, REPO, TINY_MODEL, TRAIN, base_env, needs_xla, neurondesk_run

STUBBORN = """
import signal, sys, time
def said(name):
    return lambda *a: print(f"got {name}, carrying on", flush=True)
signal.signal(signal.SIGINT, said("SIGINT"))
signal.signal(signal.SIGTERM, said("SIGTERM"))
print("stubborn up", flush=True)
while True:
    time.sleep(0.05)
"""


class Lines:
    """The CLI's stdout, line by line, waited for by content (no sleeps)."""

    def __init__(self, stream) -> None:
        self.q: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def wait_for(self, text: str, timeout: float = 120) -> None:
        while True:
            line = self.q.get(timeout=timeout)
            assert line is not None, f"stdout ended before {text!r}"
            if text in line:
                return


def test_ctrl_c_escalates_sigint_sigterm_sigkill_and_exits_128_plus_n(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn1.2xlarge",
           "--run-dir", str(run_dir), "--", sys.executable, "-c", STUBBORN]
    p = subprocess.Popen(cmd, env=base_env(tmp_path), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        out = Lines(p.stdout)
        out.wait_for("stubborn up")
        p.send_signal(signal.SIGINT)  # first Ctrl-C: SIGINT to the workload, which carries on
        out.wait_for("got SIGINT, carrying on")
        p.send_signal(signal.SIGINT)  # second: SIGTERM, which it ignores too
        out.wait_for("got SIGTERM, carrying on")
        p.send_signal(signal.SIGINT)  # third: SIGKILL
        err = p.stderr.read()
        assert p.wait(timeout=120) == 128 + signal.SIGKILL, err[-2000:]
    finally:
        if p.poll() is None:
            p.kill()
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["finished"] is True and s["exit_signal"] == "SIGKILL" and s["exit_code"] == -signal.SIGKILL


@needs_xla
def test_forked_dataloader_workers_send_nothing(tmp_path):
    """Two forked DataLoader workers share the probe's socket: only the main process speaks."""
    run = neurondesk_run(tmp_path, ["--preset", "demo", *TINY_MODEL, "--steps", "8", "--num-workers", "2"])
    assert run.returncode == 0, run.stderr[-2000:]
    main_pid = next(e["pid"] for e in run.events if e["kind"] == "process_attached")
    workers = {p["pid"] for t in run.events if t["kind"] == "process_tree" for p in t["processes"]
               if p["role"] == "dataloader"}
    assert workers and main_pid not in workers  # the workers ran, and were seen
    attached = [e["pid"] for e in run.events if e["kind"] == "process_attached"]
    assert attached == [main_pid]
    assert {e["pid"] for e in run.events if e["kind"] == "step"} == {main_pid}
    assert not [e for e in run.events if e.get("pid") in workers]  # no event from a worker
    assert run.summary["steps"] == 8


def test_a_relative_run_dir_keeps_the_workloads_output(tmp_path):
    """`--run-dir run` (relative to where neurondesk is started): the workload's lines are in the run
    folder's logs and passed through. The output relay runs in "/", and this lost them all once."""
    script = "import sys; print('line to stdout'); print('line to stderr', file=sys.stderr)"
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1",
                        "--run-dir", "run", "--", sys.executable, "-c", script],
                       capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "run" / "stdout.log").read_text() == "line to stdout\n"
    assert (tmp_path / "run" / "stderr.log").read_text() == "line to stderr\n"
    assert "line to stdout" in p.stdout and "line to stderr" in p.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["exit_code"] == 0


@needs_xla
def test_demo_headless_runs_the_bundled_workload(tmp_path):
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "demo", "--headless", "--demo-steps", "20"],
                       capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path), cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    (run_dir,) = [d for d in (tmp_path / "runs").iterdir() if (d / "summary.json").exists()]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["steps"] == 20 and s["finished"] is True and s["exit_code"] == 0
    # the demo is priced as TorchNeuron's machine, a trn2, and says where its price is from
    assert s["cost"]["instance_type"] == "trn2.48xlarge" and s["cost"]["price_per_hour"] == 35.76
    assert s["cost"]["price_source"].startswith("demo: trn2.48xlarge at VAN-2511")
    assert s["device"]["kind"].startswith("xla")  # no TorchNeuron in this venv: the demo runs on XLA, as before
    assert any(c["cause"] == "first" for c in s["compiles"])
    assert str(TRAIN.name) in " ".join(s["command"])


def test_devices_json_on_this_machine_and_from_a_saved_listing(tmp_path):
    import os

    from conftest import FIXTURES

    def devices(*args):
        p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "devices", "--json", *args], capture_output=True,
                           text=True, timeout=120, env=base_env(tmp_path), cwd=REPO)
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout)

    here = devices()
    assert here["cpu"]["logical_cores"] == os.cpu_count()
    assert (here["neuron"] is None) == bool(here["neuron_reason"])  # no Neuron here: it says why
    listing = FIXTURES / "neuron-ls-trn1.32xlarge.json"
    raw = json.loads(listing.read_text())  # neuron-ls --json: one object per device
    read = devices("--from-file", str(listing))["neuron"]["devices"]
    assert [d["index"] for d in read] == [d["neuron_device"] for d in raw]
    assert [d["nc_count"] for d in read] == [d["nc_count"] for d in raw]
