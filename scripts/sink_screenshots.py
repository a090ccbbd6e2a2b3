"""Screenshots of a real run in TensorBoard and in MLflow (screenshots/sinks-tensorboard.png,
screenshots/sinks-mlflow.png) for docs/sinks.md: a real XLA-on-CPU run of the bundled workload with
`--tensorboard` and `--mlflow` (a local folder), then `tensorboard --logdir` and `mlflow ui` on
127.0.0.1, each page taken by a real headless Chromium (Debian package `chromium`).

    .venv/bin/python scripts/sink_screenshots.py
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "screenshots"
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, limit_s: float = 180) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=5).read(100)
            return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"sink_screenshots: {url} did not answer in {limit_s:.0f} s")


def shoot(url: str, out: Path, size: str = "1500,1000") -> None:
    binary = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
    if binary is None:
        raise SystemExit("sink_screenshots: no chromium binary; install the Debian package `chromium`")
    subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={size}", "--virtual-time-budget=40000", f"--screenshot={out}", url],
                   check=True, capture_output=True, timeout=180)
    print(f"wrote {out}")


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="neurondesk-sinks-"))
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn1.2xlarge",
                    "--run-dir", str(tmp / "run"), "--tensorboard", str(tmp / "tb"), "--mlflow", str(tmp / "mlflow"),
                    "--", sys.executable, str(REPO / "workloads" / "train.py"), "--preset", "demo", "--steps", "60",
                    "--graph-break", "item", "--log-every", "50"], check=True, cwd=REPO, env=env)
    OUT.mkdir(exist_ok=True)
    port = free_port()
    tb = subprocess.Popen([str(BIN / "tensorboard"), "--logdir", str(tmp / "tb"), "--host", "127.0.0.1",
                           "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/data/runs")
        shoot(f"http://127.0.0.1:{port}/#scalars&tagFilter=neurondesk%2F(samples_per_s%7Cstep_time_s%7Ctotal_usd%7Closs"
              "%7Ccompile_in_progress%7Clast_step_time_s)", OUT / "sinks-tensorboard.png", "1500,1100")
    finally:
        tb.terminate()
    port = free_port()
    ui = subprocess.Popen([str(BIN / "mlflow"), "ui", "--backend-store-uri", f"sqlite:///{tmp / 'mlflow' / 'mlflow.db'}",
                           "--host", "127.0.0.1", "--port", str(port), "--workers", "1"], cwd=tmp,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health")
        from mlflow import MlflowClient

        client = MlflowClient(f"http://127.0.0.1:{port}")
        exp = client.get_experiment_by_name("neurondesk")
        run = client.search_runs([exp.experiment_id])[0]
        shoot(f"http://127.0.0.1:{port}/#/experiments/{exp.experiment_id}/runs/{run.info.run_id}",  # its overview
              OUT / "sinks-mlflow.png", "1500,1300")
    finally:
        os.killpg(ui.pid, 15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
