"""A real Prometheus (Debian package `prometheus`) and real neurondesk processes for the fleet tests
and the fleet benchmark. Without the binaries the tests skip with the reason, unless
NEURONDESK_REQUIRE_PROMETHEUS=1 (CI: .ci/run installs the package), where they fail."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INSTALL = "apt-get install prometheus (Debian/Ubuntu: provides prometheus and promtool)"


def binaries() -> tuple[str, str] | None:
    found = shutil.which("prometheus"), shutil.which("promtool")
    return (found[0], found[1]) if all(found) else None


def require_prometheus() -> tuple[str, str]:
    import pytest

    found = binaries()
    if found is None:
        why = f"prometheus/promtool not on PATH; install them with: {INSTALL}"
        if os.environ.get("NEURONDESK_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(f"NEURONDESK_REQUIRE_PROMETHEUS=1 but {why}")
        pytest.skip(why)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond: Callable[[], object], timeout_s: float, what: str, every_s: float = 0.2):
    """Polls ``cond`` until it returns something truthy (returned); fails naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            got = cond()
            if got:
                return got
        except Exception as exc:  # noqa: BLE001 - not up yet
            last_exc = exc
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last error: {last_exc!r})")


def http_get(url: str, accept: str | None = None) -> tuple[str, str]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.headers.get("Content-Type", ""), resp.read().decode()


class Prometheus:
    """One Prometheus on loopback scraping the targets in a file_sd file (rewritten by set_targets)."""

    def __init__(self, folder: Path, interval: str = "1s", timeout: str = "900ms") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.targets = folder / "targets.json"
        self.set_targets([])
        self.config = folder / "prometheus.yml"
        self.config.write_text(
            f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {timeout}\n"
            "scrape_configs:\n  - job_name: neurondesk\n    file_sd_configs:\n"
            f"      - files: ['{self.targets}']\n        refresh_interval: 1s\n")
        self.log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [binaries()[0], f"--config.file={self.config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: http_get(f"{self.url}/-/ready")[1], 30, "Prometheus to be ready")

    def set_targets(self, targets: dict[str, str] | list) -> None:
        """{address: node}; the file is replaced whole (file_sd reads it on change)."""
        groups = [{"targets": [addr], "labels": {"node_hint": node}} for addr, node in dict(targets).items()]
        tmp = self.targets.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(self.targets)

    def query(self, expr: str) -> list[dict]:
        body = http_get(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")[1]
        data = json.loads(body)
        assert data["status"] == "success", data
        return data["data"]["result"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_replay(run_dir: Path, port: int, node: str, job: str, speed: float, env: dict | None = None,
                 log: Path | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "neurondesk.cli", "replay", str(run_dir), "--headless", "--speed", str(speed),
           "--metrics-addr", str(port), "--node", node, "--job", job]
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - the child holds it
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

