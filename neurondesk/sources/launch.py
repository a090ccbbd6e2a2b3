"""Start a recorder process for a run and wait until it has journaled the run's start.

The recorder runs in a session of its own (``start_new_session``): closing the terminal, a
dropped ssh connection or the death of the console that launched it does not reach it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime

from neurondesk.recorder.options import LaunchSpec, RunOptions, encode_spec
from neurondesk.store.liveness import (
    LOCK_TAKEN_EXIT,
    claim_lock_file,
    live_owner,
    lock_holder_pid,
    recorder_alive,
)
from neurondesk.store.own_files import NotOurFile
from neurondesk.store.rundir import (
    RunDirRefused,
    RunPaths,
    create_run_dir,
    default_run_root,
    holds_a_run,
    holds_run_files,
    make_private_run_dir,
    make_run_id,
    move_run_aside,
    planted_file_problem,
)
from neurondesk.store.secret_inputs import without_secrets

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
        paths = RunPaths(d)
        # made 0700 (never through a symlink), or one of this user's own, not writable by others,
        # holding no file another user planted (RunDirRefused, one line; --force moves them aside)
        make_private_run_dir(d)
        owner = live_owner(d)
        if owner is not None:  # never taken over, not even with --force: its recorder writes there now
            raise RunDirRefused(owner)
        if holds_a_run(d):
            if not options.force:
                raise FileExistsError(f"{d} already holds a run (events.jsonl); choose another --run-dir, "
                                      "or add --force to move its files into previous-TIME/ there")
            move_run_aside(d, datetime.now())
        elif holds_run_files(d):  # no run, but files the run writes: reused only if they are private files of ours
            why = planted_file_problem(d)
            if why is not None:
                if not options.force:
                    raise RunDirRefused(why)
                move_run_aside(d, datetime.now())  # theirs, moved aside: never written to
            elif (os.path.lexists(paths.stdout_log) or os.path.lexists(paths.stderr_log)
                  or paths.grown_files()):  # ours, but the run makes its output files itself (O_EXCL),
                move_run_aside(d, datetime.now())  # and checkpoints of another journal are of no use
        return paths
    root = options.run_root or default_run_root()
    return create_run_dir(root, make_run_id(datetime.now()))


def launch_recorder(command: list[str], options: RunOptions) -> LaunchedRun:
    paths = make_run_paths(options)
    # the webhook URL (NEURONDESK_NOTIFY_URL) travels in the options on the recorder's stdin only:
    # neither the workload nor the recorder's own environment holds it
    try:
        lock_id = claim_lock_file(paths.dir)
    except NotOurFile as exc:  # planted after the folder check: refused, nothing runs
        raise RunDirRefused(str(exc)) from exc
    env = without_secrets(options.env if options.env is not None else os.environ)
    spec = LaunchSpec(list(command), paths.dir, dataclasses.replace(options, env=env), lock_id)
    log_fd = os.open(paths.recorder_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "neurondesk.recorder"], stdin=subprocess.PIPE,
                                stdout=log_fd, stderr=log_fd, start_new_session=True,
                                cwd=options.cwd or os.getcwd(), env=without_secrets(os.environ))
    finally:
        os.close(log_fd)
    try:
        proc.stdin.write(encode_spec(spec))
        proc.stdin.close()
    except OSError:
        pass  # it died at once: said below with its log
    _wait_ready(paths, proc)
    return LaunchedRun(paths, proc)


def _wait_ready(paths: RunPaths, proc: subprocess.Popen) -> None:
    """Until the journal holds the run's first event (viewers can follow it from there)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:  # ours, not the journal of another recorder that took the folder meanwhile (a lock file
            # left empty: its holder could not write its pid, a full disk; then the live lock says it)
            holder = lock_holder_pid(paths.dir)
            if paths.events.stat().st_size > 0 and (holder == proc.pid or holder is None and recorder_alive(paths.dir)):
                return
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    try:
        log = paths.recorder_log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        log = []
    if proc.returncode == LOCK_TAKEN_EXIT:  # two launches raced for the folder: the other one won
        why = live_owner(paths.dir) or (log[-1] if log else "another recorder owns the folder")
    elif log:
        why = log[-1]
    elif proc.returncode is not None:
        why = f"it exited with status {proc.returncode}"
    else:
        why = f"no journal after {READY_TIMEOUT_S:.0f} s"
    raise LaunchError(f"the recorder for {paths.dir} did not start: {why} (its log: {paths.recorder_log})")
