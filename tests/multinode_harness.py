"""Two nodes of one job on loopback for the many-node tests: each a torchrun launch (`--nnodes 2
--node-rank 0|1`, c10d rendezvous, 2 ranks a node) under its own `neurondesk run --metrics-addr`, named and
identified by SLURM-style variables, and a real Prometheus scraping both; `fleet --once --format json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, base_env
from prometheus_harness import Prometheus, free_port, require_prometheus, stop

TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def launch(tmp: Path, workload: Path, job_id: str, env: dict[str, str]):
    """Two nodes of one job on loopback, each torchrun under its own recorder, and a real Prometheus
    scraping both: (prom, control folder, processes). Stop them with ``stop_job``. ``env``: the workload's
    knobs, ``{n}`` in a value standing for the node's index."""
    require_prometheus()
    control = tmp / "control"
    control.mkdir()
    prom = Prometheus(tmp / "prom")
    rdzv, ports = free_port(), [free_port(), free_port()]
    procs = []
    try:
        for n in (0, 1):
            node_env = base_env(tmp / f"home{n}") | {
                "SLURM_JOB_ID": job_id, "SLURM_NNODES": "2", "SLURM_NTASKS": "2", "SLURM_NODEID": str(n),
                "SLURM_PROCID": str(n), "SLURMD_NODENAME": f"trn-{n:02d}", "ND_CONTROL": str(control),
                "OMP_NUM_THREADS": "1"} | {k: v.format(n=n) for k, v in env.items()}
            cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(tmp / f"run{n}"),
                   "--metrics-addr", str(ports[n]), "--price-per-hour", "21.50", "--warmup-steps", "2", "--",
                   TORCHRUN, "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(n), "--rdzv-backend",
                   "c10d", "--rdzv-endpoint", f"127.0.0.1:{rdzv}", str(workload)]
            log = open(tmp / f"node{n}.log", "wb")  # noqa: SIM115 - the child holds it
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=node_env, cwd=REPO))
        prom.set_targets({f"127.0.0.1:{p}": f"node{n}" for n, p in enumerate(ports)})
    except BaseException:
        stop_job(prom, control, procs)
        raise
    return prom, control, procs


def stop_job(prom: Prometheus, control, procs) -> None:
    (control / "stop").touch()
    for p in procs:
        stop(p)
    prom.stop()


def job_json(prom: Prometheus, job_id: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "fleet", "--prometheus", prom.url, "--job", job_id,
                        "--once", "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)
