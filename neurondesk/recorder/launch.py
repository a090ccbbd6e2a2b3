"""Start a recorder process for a run and wait until it has journaled the run's start.

The recorder runs in a session of its own (``start_new_session``): closing the terminal, a
dropped ssh connection or the death of the console that launched it does not reach it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime

from neurondesk.recorder.options import RunOptions
from neurondesk.store.rundir import (
    RunPaths,
    create_run_dir,
    default_run_root,
    holds_a_run,
    make_run_id,
    move_run_aside,
)

READY_TIMEOUT_S = 60.0


class LaunchError(RuntimeError):
    pass


@dataclass
class LaunchedRun:
    paths: RunPaths
    process: subprocess.Popen  # the recorder (reap it with poll()/wait() when it ends)


def make_run_paths(options: RunOptions) -> RunPaths:
    if options.run_dir is not None:
        d = options.run_dir
        if os.path.lexists(d) and not d.is_dir():
            raise FileExistsError(f"--run-dir {d} is a file, not a folder: give a folder (made if it does not "
                                  "exist), or leave --run-dir out for a new one under the data folder")
        if not d.is_dir():
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        if holds_a_run(d):
            if not options.force:
                raise FileExistsError(f"{d} already holds a run (events.jsonl); choose another --run-dir, "
                                      "or add --force to move its files into previous-TIME/ there")
            move_run_aside(d, datetime.now())
        return RunPaths(d)
    root = options.run_root or default_run_root()
    return create_run_dir(root, make_run_id(datetime.now()))


def launch_recorder(command: list[str], options: RunOptions) -> LaunchedRun:
    paths = make_run_paths(options)
    spec = {"command": command, "options": json.loads(options.to_json()), "run_dir": str(paths.dir),
            "env": options.env if options.env is not None else dict(os.environ)}
    log_fd = os.open(paths.recorder_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "neurondesk.recorder"], stdin=subprocess.PIPE,
                                stdout=log_fd, stderr=log_fd, start_new_session=True,
                                cwd=options.cwd or os.getcwd())
    finally:
        os.close(log_fd)
    try:
        proc.stdin.write((json.dumps(spec) + "\n").encode())
        proc.stdin.close()
    except OSError:
        pass  # it died at once: said below with its log
    _wait_ready(paths, proc)
    return LaunchedRun(paths, proc)


def _wait_ready(paths: RunPaths, proc: subprocess.Popen) -> None:
    """Until the journal holds the run's first event (viewers can follow it from there)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if paths.events.stat().st_size > 0:
                return
        except FileNotFoundError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    try:
        log = paths.recorder_log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        log = []
    if log:
        why = log[-1]
    elif proc.returncode is not None:
        why = f"it exited with status {proc.returncode}"
    else:
        why = f"no journal after {READY_TIMEOUT_S:.0f} s"
    raise LaunchError(f"the recorder for {paths.dir} did not start: {why} (its log: {paths.recorder_log})")
