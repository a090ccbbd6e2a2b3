"""No secret given to neurondesk reaches any output (issue 45 item 2): a marker secret planted in every
input that can carry one (a sink's URI and MLflow's and W&B's variables, the webhook, Neuron Observer's
URL, Prometheus's URL, the price refresh's endpoint and keys), real runs and commands against real
loopback services, then every file of the run folder, the run index and both streams of the neurondesk
process grepped for it. Each service was still asked with its credential (the servers here see it), and
what may be said of each (its host) is said."""

from __future__ import annotations

import base64
import http.server
import json
import os
import pty
import secrets
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import REPO, base_env, wait_until
from test_notify_webhook import Hook

OBSERVER_METRICS = REPO / "tests" / "data" / "neuron" / "neuron-observer-trn2-metrics.prom"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """A loopback HTTP server answering every GET and POST with ``status`` and ``body``, keeping each
    request's Authorization header (what the client sent of the URL's user info)."""

    def __init__(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.auth: list[str | None] = []
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                service.auth.append(self.headers.get("Authorization"))
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815 - http.server's names

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _nd(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300)


def _where_found(marker: str, folders: list[Path], streams: str | bytes) -> list[str]:
    """Every file under ``folders`` (binary too: the SQLite index, checkpoints) holding ``marker``, and
    'streams' when the process's output does."""
    found = [str(p) for folder in folders if folder.exists() for p in sorted(folder.rglob("*"))
             if p.is_file() and not p.is_symlink() and marker.encode() in p.read_bytes()]
    text = streams if isinstance(streams, bytes) else streams.encode()
    return found + (["streams"] if marker.encode() in text else [])


def test_a_marker_secret_in_every_input_of_a_run_is_in_no_file_and_no_stream(tmp_path):
    mark = f"mk{secrets.token_hex(6)}"
    hook = Hook(status=404)  # the webhook refuses: its failure is said
    hook_base = hook.url.split("/hook?")[0]
    observer = Service(200, OBSERVER_METRICS.read_bytes(), "text/plain; version=0.0.4")
    mlflow_port = _closed_port()
    env = {**base_env(tmp_path), "MLFLOW_TRACKING_USERNAME": "nd", "MLFLOW_TRACKING_PASSWORD": f"{mark}pw",
           "MLFLOW_TRACKING_TOKEN": f"{mark}tok", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
           "WANDB_API_KEY": f"{mark}wandbkey", "WANDB_MODE": "offline",
           "NEURONDESK_NOTIFY_URL": f"{hook_base}/services/T0/{mark}hook?token={mark}hookq"}
    run_dir = tmp_path / "run"
    try:
        p = _nd(["run", "--headless", "--run-dir", str(run_dir), "--notify", "--price-per-hour", "360",
                 "--budget-usd", "0.05",  # an alert after about 0.5 s: the webhook is tried
                 "--mlflow", f"http://nd:{mark}url@127.0.0.1:{mlflow_port}/",
                 "--neuron-observer", f"http://nd:{mark}obs@127.0.0.1:{observer.port}/metrics?token={mark}q",
                 "--wandb", "marker-test", "--",
                 sys.executable, "-c", "import time; print('hello', flush=True); time.sleep(6)"], env)
    finally:
        hook.close()
        observer.close()
    assert p.returncode == 0, p.stderr[-3000:]
    assert hook.paths and all(mark in path for path in hook.paths)  # the whole URL was used
    assert observer.auth and set(observer.auth) == {_basic("nd", f"{mark}obs")}  # its user info as Basic auth
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    sources = {e["raw"] for e in events if e["kind"] == "neuron_sample"}
    assert sources == {f"neuron-observer http://127.0.0.1:{observer.port}/metrics"}, sources  # its samples kept
    said = " ".join(e["message"] for e in events if e["kind"] == "notice")
    assert f"mlflow http://127.0.0.1:{mlflow_port}/: " in said and "frames not sent" in said  # by their hosts
    assert f"{hook_base}/… (HTTP 404)" in said
    assert f"--mlflow puts the password of http://127.0.0.1:{mlflow_port}/ on the command line" in p.stderr
    found = _where_found(mark, [run_dir, tmp_path / "runs", tmp_path / "user"], p.stdout + p.stderr)
    assert found == [], (found, p.stderr[-3000:])


def test_prometheus_price_refresh_and_export_say_their_failures_without_the_marker(tmp_path):
    mark = f"mk{secrets.token_hex(6)}"
    env = {**base_env(tmp_path), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    prometheus = Service(400, json.dumps({"status": "error", "errorType": "bad_data", "error": "no such job"}).encode())
    try:
        fleet = _nd(["fleet", "--once", "--prometheus", f"http://nd:{mark}@127.0.0.1:{prometheus.port}"], env)
    finally:
        prometheus.close()
    assert fleet.returncode == 1 and f"Prometheus at http://127.0.0.1:{prometheus.port} refused " in fleet.stderr
    assert prometheus.auth and set(prometheus.auth) == {_basic("nd", mark)}
    gone = _closed_port()
    down = _nd(["fleet", "--once", "--prometheus", f"http://nd:{mark}@127.0.0.1:{gone}/?token={mark}"], env)
    assert down.returncode == 1 and f"cannot query Prometheus at http://127.0.0.1:{gone}: " in down.stderr
    aws = {**env, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEMARKER", "AWS_SECRET_ACCESS_KEY": f"{mark}awssecret",
           "AWS_SESSION_TOKEN": f"{mark}session", "AWS_MAX_ATTEMPTS": "1",
           "AWS_ENDPOINT_URL_PRICING": f"http://nd:{mark}@127.0.0.1:{gone}/"}
    prices = _nd(["prices", "refresh", "--region", "us-east-1"], aws)
    assert prices.returncode == 1 and "EndpointConnectionError" in prices.stderr, prices.stderr
    assert f"http://127.0.0.1:{gone}/" in prices.stderr  # the endpoint, by its host
    journal = REPO / "tests" / "data" / "journals" / "plain"
    export = _nd(["export", str(journal), "--format", "mlflow", "-o", f"http://nd:{mark}@127.0.0.1:{gone}/"], env)
    assert export.returncode == 1 and f"export to mlflow http://127.0.0.1:{gone}/: MlflowException" in export.stderr
    for p in (fleet, down, prices, export):
        assert _where_found(mark, [tmp_path], p.stdout + p.stderr) == [], (p.args, p.stderr)


def _screen(args: list[str], env: dict[str, str], shown: bytes, tmp_path: Path, done: Path | None = None) -> bytes:
    """What a Textual screen of neurondesk draws in a terminal (a pty, 160 x 40) until ``shown`` is on it
    (and the file ``done`` is there: the run is over, so q quits without a question); then q quits it."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "neurondesk.cli", *args], stdin=slave, stdout=slave, stderr=slave,
                         env={**env, "TERM": "xterm-256color"}, cwd=tmp_path, start_new_session=True)
    os.close(slave)
    seen = bytearray()

    def drawn() -> bool:
        assert p.poll() is None, bytes(seen[-3000:])
        while select.select([master], [], [], 0.1)[0]:
            seen.extend(os.read(master, 65536))
        return shown in seen and (done is None or done.exists())
    try:
        wait_until(drawn, 180, f"{shown!r} on the screen")
        os.write(master, b"q")
        end = time.monotonic() + 60
        while p.poll() is None and time.monotonic() < end:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    seen.extend(os.read(master, 65536))
                except OSError:
                    break
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(30)
        os.close(master)
    return bytes(seen)


def test_the_fleet_screen_and_the_consoles_job_line_name_prometheus_by_its_host_only(tmp_path):
    mark = f"mk{secrets.token_hex(6)}"
    env = base_env(tmp_path)
    gone = _closed_port()
    url = f"http://nd:{mark}@127.0.0.1:{gone}"
    fleet = _screen(["fleet", "--prometheus", url], env, b"cannot query Prometheus at", tmp_path)
    assert f"http://127.0.0.1:{gone}".encode() in fleet and mark.encode() not in fleet
    console = _screen(["run", "--run-dir", str(tmp_path / "run"), "--prometheus", url, "--",
                       sys.executable, "-c", "import time; time.sleep(3)"], env, b"cannot query Prometheus at", tmp_path,
                      done=tmp_path / "run" / "summary.json")
    assert f"Prometheus at http://127.0.0.1:{gone}".encode() in console, console[-3000:]
    assert _where_found(mark, [tmp_path / "run", tmp_path / "runs"], console) == []


def test_redact_drops_each_form_a_credential_takes_in_a_tools_text():
    from neurondesk.sinks.redact import basic_auth, redact, secret_values, shown_url

    url = "https://nd:p%40ss%3Aw0rd!@h.example.com:8443/api?token=abc123&x=1"
    found = secret_values({"MLFLOW_TRACKING_TOKEN": "tok-123456", "MLFLOW_TRACKING_URI": "h", "WANDB_MODE": "offline",
                           "HF_TOKEN": "x"}, [url])  # too short a value is no secret worth replacing
    assert set(found) == {"tok-123456", "p%40ss%3Aw0rd!", "p@ss:w0rd!"}
    text = (f"API request to {url} failed; Authorization: Bearer tok-123456abcdef; password=hunter22, "
            "sent p@ss:w0rd! as p%40ss%3Aw0rd%21; botocore: Could not connect to \"http://u:pw99@127.0.0.1:9/\"")
    said = redact(text, found)
    for secret in ("p@ss", "p%40ss", "tok-123456", "hunter22", "abc123", "pw99", "nd:"):
        assert secret not in said, (secret, said)
    assert "https://h.example.com:8443/api?…" in said and '"http://127.0.0.1:9/"' in said
    assert shown_url(url) == "https://h.example.com:8443/api" and shown_url(url, path=False) == "https://h.example.com:8443/…"
    assert shown_url("http://[::1]:9090/x") == "http://[::1]:9090/x"
    bare, headers = basic_auth(url)
    assert bare == "https://h.example.com:8443/api?token=abc123&x=1"  # the service still gets its query
    assert headers == {"Authorization": _basic("nd", "p@ss:w0rd!")} and basic_auth("http://h/x") == ("http://h/x", {})
