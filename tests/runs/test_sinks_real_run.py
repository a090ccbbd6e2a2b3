"""The sinks end to end (docs/sinks.md): one real XLA-on-CPU run with `--tensorboard --mlflow --wandb`
at once, against a real `mlflow server` on 127.0.0.1, read back by TensorBoard's event reader,
MlflowClient and W&B's reader of its offline files; while the run goes (the workload holds at a step)
and after it. Then the faults: a server that never answers and a folder that cannot be written (the
run is recorded whole, one line each, what was not sent counted), a server refused at the start and
one that goes down mid-run (counted exactly), MLFLOW_RUN_ID attached to, W&B's WANDB_RUN_ID refused.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, TINY_MODEL, TRAIN, base_env, needs_xla, wait_until
from sink_readers import as_tensorboard, mlflow_run, tensorboard_run, wandb_offline_run

from neurondesk.sinks.frames import FIGURE_SCALARS, PREFIX

HOLD_AT = 8  # the workload holds at this step until the test has seen the figures live
LIVE = HOLD_AT - 1  # the steps done then (steps 0 .. HOLD_AT - 1)
JOURNAL = REPO / "tests" / "data" / "journals" / "plain"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}", "--artifacts-destination", str(tmp / "artifacts")],
        cwd=tmp, stdout=subprocess.DEVNULL, stderr=open(tmp / "server.log", "w"), start_new_session=True)
    uri = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert server.poll() is None, (tmp / "server.log").read_text()[-2000:]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                import urllib.request
                return urllib.request.urlopen(f"{uri}/health", timeout=5).read() == b"OK"
        except OSError:
            return False
    wait_until(healthy, 300, "mlflow server to answer /health", every=1.0)
    yield uri
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(60)


def _cli(tmp, args: list[str], env: dict | None = None, **kw):
    return subprocess.Popen([sys.executable, "-m", "neurondesk.cli", *args], cwd=REPO, env=env or base_env(tmp),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _sink_notices(run_dir) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("kind") == "notice" and e.get("source") == "sinks"]


@pytest.fixture(scope="module")
def live(tmp_path_factory, mlflow_server):
    """The run; at step HOLD_AT the workload sleeps: what each tool shows then is read, then the
    workload is ended (SIGTERM) and the recorder finishes."""
    from neurondesk.store.liveness import read_recorder_info

    tmp = tmp_path_factory.mktemp("sinks-live")
    run_dir = tmp / "run"
    p = _cli(tmp, ["run", "--headless", "--instance-type", "trn1.2xlarge", "--run-dir", str(run_dir),
                   "--tensorboard", str(tmp / "tb"), "--mlflow", mlflow_server, "--wandb", "neurondesk-test", "--",
                   sys.executable, str(TRAIN), "--preset", "demo", *TINY_MODEL, "--steps", "40",
                   "--hang-at-step", str(HOLD_AT), "--hang-s", "600"])
    try:
        def tb_steps() -> float:
            assert p.poll() is None, p.communicate()[1][-3000:]
            points = tensorboard_run(tmp / "tb")["scalars"].get(PREFIX + "steps", []) if (tmp / "tb").exists() else []
            return points and points[-1][1] >= LIVE
        wait_until(tb_steps, 600, f"TensorBoard to show {LIVE} steps while the run goes", every=1.0)
        seen_tb = tensorboard_run(tmp / "tb")
        wait_until(lambda: _mlflow_steps(mlflow_server) >= LIVE, 120, "MLflow to have the steps while the run goes",
                   every=1.0)
        seen_mlflow = mlflow_run(mlflow_server)
        still_running = p.poll() is None
        os.kill(read_recorder_info(run_dir).workload_pid, signal.SIGTERM)
        out, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:  # a failure above: nothing of the run is left behind
            info = read_recorder_info(run_dir)
            for pid in (info.workload_pid, info.pid) if info else ():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (OSError, TypeError):
                    pass
            p.kill()
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"tmp": tmp, "run_dir": run_dir, "summary": summary, "stderr": err, "still_running": still_running,
            "seen_tb": seen_tb, "seen_mlflow": seen_mlflow, "uri": mlflow_server}


def _mlflow_steps(uri: str) -> float:
    try:
        return mlflow_run(uri)["history"].get(PREFIX + "steps", [(0, 0.0)])[-1][1]
    except (AttributeError, AssertionError):  # no experiment or run yet
        return 0.0


def _want(summary: dict) -> dict[str, float]:
    f = summary["figures"]
    return {PREFIX + n: f[field] for n, field in FIGURE_SCALARS if f[field] is not None}


@needs_xla
def test_tensorboard_shows_the_run_live_and_whole(live):
    s = live["summary"]
    assert live["still_running"] and LIVE <= s["steps"] < 40  # the workload held there, then was ended
    seen = live["seen_tb"]["scalars"]
    assert {PREFIX + "step_time_s", PREFIX + "samples_per_s", PREFIX + "loss", PREFIX + "total_usd",
            PREFIX + "compile_in_progress", PREFIX + "data_wait_fraction"} <= set(seen)
    run = tensorboard_run(live["tmp"] / "tb")
    last = {tag: points[-1][1] for tag, points in run["scalars"].items()}
    for key, value in _want(s).items():
        assert last[key] == as_tensorboard(value), key
    steps = [step for step, _ in run["scalars"][PREFIX + "steps"]]
    assert steps == sorted(steps) and steps[-1] == s["steps"]
    assert [v for step, v in run["scalars"][PREFIX + "steps"]] == [float(step) for step in steps]  # x axis = steps
    texts = [text for _, text in run["texts"][PREFIX + "compiles"]]
    assert len(texts) == s["compile_count"]
    first = s["compiles"][0]
    assert "compile #1 at step 0: **first**" in texts[0] and f"`{first['location']}`" in texts[0]
    assert run["hparams"]["instance_type"] == "trn1.2xlarge" and run["hparams"]["tag.device"] == "xla-cpu"
    from tensorboard.plugins.hparams import api_pb2

    assert run["status"] == api_pb2.Status.Value("STATUS_FAILURE")  # the workload was ended by a signal


@needs_xla
def test_mlflow_server_has_the_run_with_params_tags_metrics_and_artifacts(live):
    s = live["summary"]
    assert live["seen_mlflow"]["run"].info.status == "RUNNING"
    got = mlflow_run(live["uri"])
    assert got["run"].info.run_name == s["run_id"] and got["run"].info.status == "FAILED"
    for key, value in _want(s).items():
        assert got["metrics"][key] == value, key
    assert [step for step, _ in got["history"][PREFIX + "steps"]][-1] == s["steps"]
    assert len(got["history"][PREFIX + "steps"]) > len(live["seen_mlflow"]["history"][PREFIX + "steps"]) > 1
    assert got["params"]["neurondesk.instance_type"] == "trn1.2xlarge"
    assert got["params"]["neurondesk.warmup_steps"] == "5"
    tags = got["tags"]
    assert tags["neurondesk.run_id"] == s["run_id"] and tags["neurondesk.device"] == "xla-cpu"
    assert tags["neurondesk.node"] == s["job"]["node"] and tags["neurondesk.torch_xla_version"]
    assert got["artifacts"] == {"summary.json", "summary.md", "report.html", "compiles.md"}
    folder = got["client"].download_artifacts(got["run_id"], "neurondesk/summary.json", str(live["tmp"]))
    assert json.loads(open(folder).read()) == s


@needs_xla
def test_wandb_offline_files_hold_the_same_figures(live):
    s = live["summary"]
    run = wandb_offline_run(live["run_dir"] / "wandb")
    for key, value in _want(s).items():
        assert run["summary"][key] == value, key
    steps = [h["_step"] for h in run["history"] if PREFIX + "steps" in h]
    assert steps == sorted(steps) and steps[-1] == s["steps"]
    assert run["summary"][PREFIX + "compiles/_type"] == "table-file"
    assert run["summary"][PREFIX + "compiles/nrows"] == s["compile_count"]
    instance = run["config"]["instance_type"]
    assert (instance["value"] if isinstance(instance, dict) else instance) == "trn1.2xlarge"
    assert run["run"].display_name == s["run_id"] and run["exit_code"] != 0


@needs_xla
def test_each_sink_says_one_line_at_the_end(live):
    notices = _sink_notices(live["run_dir"])
    assert [n["level"] for n in notices] == ["info"] * 3, notices
    words = " ".join(n["message"] for n in notices)
    assert f"tensorboard --logdir {live['tmp'] / 'tb'}" in words and "wandb sync " in words
    assert "frames written" in words and "not sent" not in words


# ------------------------------------------------------------------ faults

class Silent:
    """A TCP server that accepts and never answers (a hung tracking server)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"


def test_a_hung_server_and_an_unwritable_folder_cost_the_run_nothing(tmp_path):
    hung = Silent()
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n")
    run_dir = tmp_path / "run"
    p = _cli(tmp_path, ["run", "--headless", "--run-dir", str(run_dir), "--price-per-hour", "1",
                        "--mlflow", hung.uri, "--tensorboard", str(blocked / "tb"), "--",
                        sys.executable, str(TRAIN), "--preset", "demo", "--device", "cpu", *TINY_MODEL,
                        "--steps", "150", "--log-every", "50"])
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["steps"] == 150 and s["steps_lost"] == 0  # recorded whole
    notices = _sink_notices(run_dir)
    tb = [n["message"] for n in notices if n["message"].startswith("tensorboard ")]
    assert len(tb) == 2, notices  # one line when it failed, one at the end
    assert "cannot open it: " in tb[0] and "the run goes on" in tb[0]
    mlflow = [n["message"] for n in notices if n["message"].startswith(f"mlflow {hung.uri}: ")]
    assert 1 <= len(mlflow) <= 2, notices  # hung: its first failure may come after the run
    assert mlflow[-1].startswith(f"mlflow {hung.uri}: still not done at the end of the run, left")
    for line in (tb[-1], mlflow[-1]):  # nothing reached either: every frame counted
        offered = int(line.split(" frames not sent")[0].rsplit(" of ", 1)[1])
        assert f"{offered} of {offered} frames not sent" in line and offered >= 2
    assert hung.held  # it was asked


def _frames(n: int):
    from neurondesk.core.reduce.state import RunState
    from neurondesk.sinks.frames import FrameTaker, replayed_frames, run_info
    from neurondesk.store.journal import iter_journal

    state, taker = RunState(), FrameTaker()
    frames = list(replayed_frames(iter_journal(JOURNAL / "events.jsonl", []), state, taker))[:n]
    return run_info(state), frames, taker.end(state, state.last_t, {"summary.json": "{}"})


def test_a_server_refused_at_the_start_is_one_line_and_every_frame_counted(monkeypatch):
    from neurondesk.sinks.base import SinkRunner
    from neurondesk.sinks.mlflow_sink import HTTP_BOUNDS, MlflowSink

    for key, value in {**HTTP_BOUNDS, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}.items():
        monkeypatch.setenv(key, value)
    info, frames, end = _frames(6)
    said: list[str] = []
    runner = SinkRunner(MlflowSink(f"http://127.0.0.1:{_free_port()}", {}), said.append)
    runner.start(info)
    for f in frames:
        runner.offer(f)
    level, line = runner.close(end, 120)
    assert len(said) == 1 and "cannot open it" in said[0] and "the run goes on" in said[0]
    assert level == "warn" and line.startswith("mlflow http://127.0.0.1:") and "7 of 7 frames not sent" in line


class Link:
    """A TCP relay to the real server that can be cut (the server gone, for the client) and mended."""

    def __init__(self, port: int) -> None:
        self.target, self.up = port, threading.Event()
        self.up.set()
        self.open: list[socket.socket] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client = self.sock.accept()[0]
            if not self.up.is_set():
                client.close()
                continue
            server = socket.create_connection(("127.0.0.1", self.target))
            self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while self.up.is_set() and (data := a.recv(65536)):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.up.clear()
        for s in self.open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"


def test_a_server_going_down_mid_run_loses_only_what_came_while_down(mlflow_server, monkeypatch):
    from neurondesk.sinks.base import SinkRunner
    from neurondesk.sinks.mlflow_sink import HTTP_BOUNDS, MlflowSink

    for key, value in {**HTTP_BOUNDS, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}.items():
        monkeypatch.setenv(key, value)
    info, frames, end = _frames(12)
    link = Link(int(mlflow_server.rsplit(":", 1)[1]))
    said: list[str] = []
    sink = MlflowSink(link.uri, {"MLFLOW_EXPERIMENT_NAME": "down-mid-run"})
    runner = SinkRunner(sink, said.append)
    runner.start(info)
    for f in frames[:4]:
        runner.offer(f)
    wait_until(lambda: runner.sent == 4, 120, "the first frames to reach the server")
    link.cut()
    for f in frames[4:8]:
        runner.offer(f)
    wait_until(lambda: runner.failed == 4, 120, "the frames of the cut to be tried")
    link.up.set()
    for f in frames[8:]:
        runner.offer(f)
    level, line = runner.close(end, 120)
    assert level == "warn" and "4 of 13 frames not sent" in line, (line, said)
    assert said[0].startswith(f"mlflow {link.uri}: ") and "the run goes on" in said[0]
    got = mlflow_run(mlflow_server, experiment="down-mid-run")
    steps = [step for step, _ in got["history"][PREFIX + "steps"]]
    assert steps == [f.step for f in frames[:4] + frames[8:]] + [end.frame.step]


def test_mlflow_run_id_attaches_to_the_scripts_run_and_leaves_it_open(mlflow_server, tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_server)
    exp = client.create_experiment("the-script")
    theirs = client.create_run(exp, run_name="script's own").info.run_id
    env = {**base_env(tmp_path), "MLFLOW_RUN_ID": theirs}
    p = _cli(tmp_path, ["export", str(JOURNAL), "--format", "mlflow", "-o", mlflow_server], env=env)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    got = mlflow_run(mlflow_server, run_id=theirs)
    assert got["run"].info.status == "RUNNING" and got["run"].info.run_name == "script's own"
    assert got["metrics"][PREFIX + "steps"] > 0 and "summary.json" in got["artifacts"]
    assert f"MLflow run {theirs} (attached)" in err


def test_wandb_run_id_of_the_workload_is_refused_in_one_line(tmp_path):
    env = {**base_env(tmp_path), "WANDB_RUN_ID": "abc123"}
    p = _cli(tmp_path, ["run", "--headless", "--wandb", "proj", "--", sys.executable, "-c", "pass"], env=env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and err.count("\n") == 1
    assert "WANDB_RUN_ID=abc123" in err and "no second run" in err


def test_export_writes_a_recorded_run_into_tensorboard(tmp_path, capsys):
    from neurondesk.cli.main import main
    from neurondesk.sources.rebuild import summary_from_run_dir

    assert main(["export", str(JOURNAL), "--format", "tensorboard", "-o", str(tmp_path / "tb")]) == 0
    err = capsys.readouterr().err
    assert f"written to tensorboard {tmp_path / 'tb'}" in err and f"tensorboard --logdir {tmp_path / 'tb'}" in err
    run = tensorboard_run(tmp_path / "tb")
    typed, _ = summary_from_run_dir(JOURNAL)
    summary = typed.as_dict()
    for key, value in _want(summary).items():
        assert run["scalars"][key][-1][1] == as_tensorboard(value), key
    assert len(run["texts"][PREFIX + "compiles"]) == summary["compile_count"]
    _tensorboard_serves(tmp_path / "tb", summary)
    with pytest.raises(SystemExit) as stop:  # not a run: one line
        main(["export", str(tmp_path), "--format", "tensorboard", "-o", str(tmp_path / "tb2")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not found" in err


def _tensorboard_serves(folder, summary: dict) -> None:
    """`tensorboard --logdir` itself (its default fast loader) answers with the scalars, over its HTTP data API."""
    import urllib.request

    port = _free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "tensorboard"), "--logdir", str(folder), "--host",
                               "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/data/plugin/scalars"

    def tags() -> dict:
        try:
            return json.loads(urllib.request.urlopen(f"{base}/tags", timeout=5).read()).get(".", {})
        except OSError:
            return {}
    try:
        assert PREFIX + "samples_per_s" in wait_until(tags, 180, "tensorboard to list the scalars", every=1.0)
        points = json.loads(urllib.request.urlopen(f"{base}/scalars?run=.&tag={PREFIX}steps", timeout=10).read())
        assert points[-1][1:] == [summary["steps"], summary["steps"]]  # [wall time, step, value]
    finally:
        server.terminate()
        server.wait(30)
