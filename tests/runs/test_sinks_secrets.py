"""No secret reaches a sink (issue 53 items 7 and 8), on real runs read back by each tool's own reader and
by every byte the tool left on disk: a secret on the workload's command line (``--hf-token X``,
``--api-key=Y``) or in its environment (``HF_TOKEN``) never reaches MLflow (params, artifacts),
TensorBoard (the event file) nor W&B (config, files, the argv W&B records itself); and where W&B would
fall back to a shared folder (an unwritable WANDB_DIR: W&B writes to the temporary folder's ``wandb``,
which another user may own) neurondesk refuses in one line, the run goes on and nothing lands there."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import DATA, REAL_RUN_TIMEOUT_S, REPO, base_env
from sink_readers import mlflow_run, tensorboard_run, wandb_offline_run

STEPS = DATA / "workloads" / "steps.py"
ARG_TOKEN, ARG_KEY, ENV_TOKEN = "hf_ArgSecretToken4821", "sk-ArgSecretKey7730", "hf_EnvSecretToken5519"


def test_a_command_lines_secret_flags_are_hidden_where_they_stand():
    from neurondesk.sinks.redact import argv_secrets, redact_argv

    argv = ["python", "t.py", "--hf-token", "abcdef", "--api-key=sk-1", "--lr", "0.1", "--password", "-v",
            "--auth-token", "tok123", "--tokenizer", "gpt2"]
    assert redact_argv(argv) == ["python", "t.py", "--hf-token", "***", "--api-key=***", "--lr", "0.1", "--password",
                                 "-v", "--auth-token", "***", "--tokenizer", "***"]
    assert set(argv_secrets(argv)) == {"abcdef", "sk-1", "tok123", "gpt2"}


def _files(*folders: Path) -> dict[Path, bytes]:
    return {f: f.read_bytes() for d in folders for f in d.rglob("*") if f.is_file()}


def test_no_secret_of_the_command_line_or_the_environment_reaches_any_sink(tmp_path):
    run_dir, tb, ml = tmp_path / "run", tmp_path / "tb", tmp_path / "mlflow"
    env = base_env(tmp_path) | {"HF_TOKEN": ENV_TOKEN, "WANDB_MODE": "offline"}
    env.pop("WANDB_DIR", None)
    workload = [sys.executable, str(STEPS), "5", "0", str(tmp_path / "done"), "--hf-token", ARG_TOKEN,
                f"--api-key={ARG_KEY}", "--from-env", ENV_TOKEN]
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
                        "--tensorboard", str(tb), "--mlflow", str(ml), "--wandb", "secrets-test", "--", *workload],
                       capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    shown = "--hf-token *** --api-key=*** --from-env ***"
    # each tool, read back by its own reader, has the run and its command, the secrets hidden
    assert shown in tensorboard_run(tb)["hparams"]["command"]
    got = mlflow_run(f"sqlite:///{ml / 'mlflow.db'}")
    assert shown in got["params"]["neurondesk.command"] and "summary.json" in got["artifacts"]
    w = wandb_offline_run(run_dir / "wandb")
    command = w["config"]["command"]
    assert shown in (command["value"] if isinstance(command, dict) else command)
    # and no byte any of them left on disk holds a secret (the event file, MLflow's store and its
    # artifacts, W&B's run file, its config, its metadata and logs)
    files = _files(tb, ml, run_dir / "wandb")
    assert any(f.suffix == ".wandb" for f in files) and any(".tfevents." in f.name for f in files)
    for secret in (ARG_TOKEN, ARG_KEY, ENV_TOKEN):
        leaks = [str(f) for f, data in files.items() if secret.encode() in data]
        assert not leaks, (secret, leaks)
    assert not list((run_dir / "wandb").rglob("wandb-metadata.json"))  # W&B's own record of the argv


# ---------------------------------------------------------------- a folder shared with another user
@pytest.fixture
def other_user():
    """A real other user (useradd, removed after): the owner of the planted folder."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("making a real other user needs root and useradd")
    name = f"nds{uuid.uuid4().hex[:8]}"
    p = subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"useradd refused: {p.stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:  # it runs nothing: userdel goes through (6: already gone)
        assert subprocess.run(["userdel", name], capture_output=True).returncode in (0, 6)


READ_ONLY = Path("/proc/sys")  # a folder that exists and that even root cannot write (procfs)
JOURNAL = REPO / "tests" / "data" / "journals" / "plain"


def _planted(tmp_path, other: pwd.struct_passwd) -> tuple[Path, Path]:
    """(TMPDIR: 1777, as /tmp is; its ``wandb`` folder, made first by a real other user, 0777)."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    planted = shared / "wandb"
    planted.mkdir()
    os.chown(planted, other.pw_uid, other.pw_gid)
    planted.chmod(0o777)
    return shared, planted


@pytest.mark.parametrize("where", ["read-only folder", "path through a file"])
@pytest.mark.parametrize("how", ["run", "export"])
def test_an_unwritable_wandb_dir_is_refused_not_left_to_fall_back_to_another_users_folder(tmp_path, other_user,
                                                                                          where, how):
    """The planted folder is owned by a real other user (0777, made first, as on a shared /tmp); this
    user's WANDB_DIR is an existing folder it cannot write (W&B then falls back to TMPDIR/wandb: the planted
    one), or a path that cannot be made. The test runs as root (the interpreter lives under /root): the
    unwritable folder is one even root cannot write. `run` refuses before anything runs; `export` (the
    sink itself, at its open) refuses in one line too."""
    if where == "read-only folder" and (not READ_ONLY.is_dir() or os.access(READ_ONLY, os.W_OK)):
        pytest.skip(f"{READ_ONLY} is writable here: no folder root cannot write")
    shared, planted = _planted(tmp_path, other_user)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the user thought a folder was\n")
    wandb_dir = READ_ONLY if where == "read-only folder" else blocker / "wandb"
    env = base_env(tmp_path) | {"TMPDIR": str(shared), "WANDB_DIR": str(wandb_dir), "WANDB_MODE": "offline"}
    if how == "run":
        args = ["run", "--headless", "--run-dir", str(tmp_path / "run"), "--wandb", "shared-test", "--",
                sys.executable, str(STEPS), "3", "0", str(tmp_path / "done"), "--hf-token", ARG_TOKEN]
    else:
        args = ["export", str(JOURNAL), "--format", "wandb", "-o", "shared-test"]
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                       timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    assert list(planted.iterdir()) == []  # nothing in the other user's folder
    assert (p.returncode, p.stderr.count("\n")) == ((2, 1) if how == "run" else (1, 1)), p.stderr[-3000:]
    assert f"WANDB_DIR {wandb_dir} cannot be written by this user" in p.stderr
    assert "set WANDB_DIR to a folder of yours" in p.stderr
    assert not (tmp_path / "done").exists()  # refused before the workload started (run), none (export)
