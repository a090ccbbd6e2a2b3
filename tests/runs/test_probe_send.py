"""The probe's send path, with real sockets and real workload processes.

A recorder that dies must leave the training unharmed (even one that set SIGPIPE to SIG_DFL),
and a recorder that stops reading must hear, once it reads again, how much it missed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO
from step_messages import expand_steps

BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in this interpreter")

DROPPED_FIELDS = ["kind", "t", "pid", "dropped", "dropped_steps", "steps"]

# A training loop as small as they come, in phases of N:PAUSE (steps, seconds slept after each);
# between two phases it waits for the test on stdin.
WORKLOAD = textwrap.dedent("""
    import signal, sys, time
    if sys.argv[1] == "sigpipe-default":
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as some programs do: a broken pipe kills them
    import torch
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=0.1)
    steps = 0
    for k, phase in enumerate(sys.argv[2:]):
        if k:
            sys.stdin.readline()
        n, pause = phase.split(":")
        for i in range(int(n)):
            opt.step()
            steps += 1
            if float(pause):
                time.sleep(float(pause))
        print(f"workload: {steps} steps", flush=True)
    probe = sys.modules.get("_neurondesk_probe")
    print("workload: done, probe disabled:", probe is not None and probe._probe.disabled, flush=True)
""")


_SOCKET_DIRS: list[str] = []


@pytest.fixture(autouse=True)
def _remove_socket_dirs():
    yield
    while _SOCKET_DIRS:
        shutil.rmtree(_SOCKET_DIRS.pop(), ignore_errors=True)


def short_socket_path() -> str:
    d = tempfile.mkdtemp(prefix="nd-t-")  # not tmp_path: AF_UNIX paths max ~107 bytes
    _SOCKET_DIRS.append(d)  # removed after the test by _remove_socket_dirs
    return os.path.join(d, "p.sock")


def start_workload(tmp_path: Path, socket_path: str, *args: str) -> subprocess.Popen:
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    env = dict(os.environ, NEURONDESK_SOCKET=socket_path, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(BOOTSTRAP), os.environ.get("PYTHONPATH", "")) if p))
    return subprocess.Popen([sys.executable, str(script), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)


def proceed(proc: subprocess.Popen) -> None:
    proc.stdin.write("\n")
    proc.stdin.flush()


# The recorder's reading side in a process of its own, so that it can be SIGKILLed.
READER = textwrap.dedent("""
    import socket, sys
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sys.argv[1])
    server.listen(8)
    print("ready", flush=True)
    conn, _ = server.accept()
    told = False
    with conn.makefile("rb") as f:
        for line in f:
            if b'"kind":"step' in line and not told:  # a step, or a batch of them
                print("got a step", flush=True)
                told = True
""")


@needs_torch
def test_recorder_killed_mid_run_leaves_a_sigpipe_default_workload_unharmed(tmp_path):
    path = short_socket_path()
    reader = subprocess.Popen([sys.executable, "-c", READER, path], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "ready"
        proc = start_workload(tmp_path, path, "sigpipe-default", "300:0", "400:0.001", "400:0")
        assert proc.stdout.readline().strip() == "workload: 300 steps"
        assert reader.stdout.readline().strip() == "got a step"  # the probe was talking to it
        reader.send_signal(signal.SIGKILL)  # the recorder dies, as it may at any moment
        reader.wait(timeout=30)
        proceed(proc)  # steps with pauses: the probe flushes into the dead socket, several times
        proceed(proc)
        out, err = proc.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
    assert proc.returncode == 0, (proc.returncode, err[-2000:])
    assert out.splitlines() == ["workload: 700 steps", "workload: 1100 steps", "workload: done, probe disabled: True"]
    assert err == "", err[-2000:]  # nothing of the probe's: no traceback, no notice, no "Broken pipe"


def run_with_stalled_reader(tmp_path: Path, phases: list[str]) -> tuple[subprocess.Popen, str, list[dict]]:
    """The workload's first phase runs while the reader does not read at all; the reader then reads
    to the end while the workload goes on (or exits, with a single phase)."""
    path = short_socket_path()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    proc = start_workload(tmp_path, path, "default", *phases)
    lines: list[bytes] = []
    try:
        server.settimeout(120)
        conn, _ = server.accept()
        # Not reading: the kernel's buffer fills, then the probe's bounded backlog, then it drops.
        first = proc.stdout.readline()
        assert first.startswith("workload: "), first

        def read_all() -> None:
            with conn, conn.makefile("rb") as f:
                lines.extend(f)

        reading = threading.Thread(target=read_all, daemon=True)
        reading.start()  # the recorder reads again
        if len(phases) > 1:
            proceed(proc)
        out, err = proc.communicate(timeout=120)
        reading.join(timeout=60)
    finally:
        server.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert err == "", err[-2000:]
    return proc, first + out, [json.loads(line) for line in lines]


def check_drops_are_told(msgs: list[dict], pid: int, total: int) -> None:
    msgs = expand_steps(msgs)
    assert msgs[0]["kind"] == "process_attached"
    assert all(m["pid"] == pid for m in msgs)
    reports = [(i, m) for i, m in enumerate(msgs) if m["kind"] == "probe_dropped"]
    assert reports, "drops happened (the backlog is bounded) but no probe_dropped came"
    steps_seen = 0
    for i, m in enumerate(msgs):
        if m["kind"] == "step":
            steps_seen += 1
        elif m["kind"] == "probe_dropped":
            assert list(m) == DROPPED_FIELDS
            assert m["dropped"] >= m["dropped_steps"] > 0
            # At each report: the steps received so far plus the steps dropped are the steps ended.
            assert steps_seen + m["dropped_steps"] == m["steps"]
            after = next((n for n in msgs[i + 1:] if n["kind"] == "step"), None)
            if after is not None:
                assert after["step"] == m["steps"]  # the index counted on through the drops
    step_msgs = [m for m in msgs if m["kind"] == "step"]
    last = reports[-1][1]
    assert last["dropped_steps"] + len(step_msgs) == total  # no step went missing untold
    indices = [m["step"] for m in step_msgs]
    assert indices == sorted(set(indices))  # in order, none twice
    assert 0 < len(step_msgs) < total


# Stalled long enough to overflow the kernel's socket buffer and the probe's backlog (20,000).
STALL_STEPS = 45000


@needs_torch
def test_recorder_that_stalls_then_reads_again_hears_what_it_missed(tmp_path):
    later = 60
    proc, out, msgs = run_with_stalled_reader(tmp_path, [f"{STALL_STEPS}:0", f"{later}:0.002"])
    total = STALL_STEPS + later
    assert out.splitlines()[:2] == [f"workload: {STALL_STEPS} steps", f"workload: {total} steps"]
    check_drops_are_told(msgs, proc.pid, total)
    last = [m for m in msgs if m["kind"] in ("step", "steps")][-1]  # as sent: one step or a batch of them
    assert last["dropped_before"] == max(m["dropped"] for m in msgs if m["kind"] == "probe_dropped")
    steps = [m for m in expand_steps(msgs) if m["kind"] == "step"]
    assert steps[-1]["step"] == total - 1  # none lost once it reads again


@needs_torch
def test_workload_that_exits_right_after_the_stall_still_tells_at_exit(tmp_path):
    proc, out, msgs = run_with_stalled_reader(tmp_path, [f"{STALL_STEPS}:0"])
    assert out.splitlines()[0] == f"workload: {STALL_STEPS} steps"
    check_drops_are_told(msgs, proc.pid, STALL_STEPS)
    assert msgs[-1]["kind"] == "probe_dropped"  # the final count, after everything else
    assert msgs[-1]["steps"] == STALL_STEPS


def test_step_line_has_the_schema_the_dict_form_gave(tmp_path):
    """The step message is formatted by hand for speed; it must carry what json.dumps gave of the
    dict the probe used to build: the same keys in the same order, the same types and values
    (times fixed-point: t to the microsecond, durations to the nanosecond)."""
    sys.path.insert(0, str(BOOTSTRAP))
    try:
        import _neurondesk_probe as probe_mod
    finally:
        sys.path.remove(str(BOOTSTRAP))
    path = short_socket_path()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    probe = probe_mod.Probe(path)
    cases = [
        {},
        {"samples": 8, "tokens": 512, "shapes": [[8, 64]], "xla": 3, "dropped": 7, "wait": 0.25, "compiles": 2},
        {"samples": 8, "tokens": 512, "tokens_known": False, "shapes": [[8, 3, 32, 32]]},
        {"loader_samples": 4, "loader_tokens": 0, "loader_shapes": [[4, 10]]},
        {"loader_samples": 4, "loader_tokens": 40, "loader_shapes": [[4, 10]], "xla": 0},
    ]
    expected = []
    for i, c in enumerate(cases):
        probe.clock.samples, probe.clock.tokens = c.get("samples", 0), c.get("tokens", 0)
        probe.clock.tokens_known, probe.clock.shapes = c.get("tokens_known", True), c.get("shapes", [])
        probe.clock.loader_samples, probe.clock.loader_tokens = c.get("loader_samples", 0), c.get("loader_tokens", 0)
        probe.clock.loader_shapes = c.get("loader_shapes", [])
        probe.clock.is_xla, probe.clock.step_execs = "xla" in c, c.get("xla", 0)
        probe.transport.dropped, probe.transport.dropped_reported = c.get("dropped", 0), c.get("dropped", 0)
        # a step that compiled goes alone, as a `step` line (an ordinary one joins a `steps` batch:
        # tests/unit/test_step_batches.py)
        probe.clock.data_wait, probe.clock.step_compiles = c.get("wait", 0.0), c.get("compiles", 1)
        # what the dict form held, in its order (t and duration_s are taken from the line)
        msg = {"kind": "step", "t": None, "step": i, "duration_s": None, "data_wait_s": probe.clock.data_wait,
               "compiles": probe.clock.step_compiles}
        if probe.clock.samples:
            msg["samples"] = probe.clock.samples
            if probe.clock.tokens_known and probe.clock.tokens:
                msg["tokens"] = probe.clock.tokens
            msg["input_shapes"] = probe.clock.shapes
        elif probe.clock.loader_samples:
            msg["samples"] = probe.clock.loader_samples
            if probe.clock.loader_tokens:
                msg["tokens"] = probe.clock.loader_tokens
            msg["input_shapes"] = probe.clock.loader_shapes
        if probe.clock.is_xla:
            msg["executions"] = probe.clock.step_execs
        if probe.transport.dropped:
            msg["dropped_before"] = probe.transport.dropped
        msg["pid"] = os.getpid()
        expected.append(msg)
        probe.clock.end_step()
    probe.flush_at_exit()
    conn, _ = server.accept()
    conn.shutdown(socket.SHUT_WR)
    probe.transport.sock.close()
    probe.disabled = True  # its flusher thread ends
    with conn, conn.makefile("rb") as f:
        lines = list(f)
    server.close()
    assert json.loads(lines[0])["kind"] == "process_attached"
    assert len(lines) == 1 + len(cases)
    for line, msg in zip(lines[1:], expected, strict=True):
        assert line.endswith(b"}\n") and b"\n" not in line[:-1]
        got = json.loads(line)
        assert list(got) == list(msg)
        for key in ("t", "duration_s", "data_wait_s"):
            assert type(got[key]) is float, (key, line)
        assert abs(got["t"] - time.time()) < 3600 and 0 <= got["duration_s"] < 3600
        msg["t"], msg["duration_s"] = got["t"], got["duration_s"]
        assert got == msg
        assert all(type(got[k]) is type(v) for k, v in msg.items())
