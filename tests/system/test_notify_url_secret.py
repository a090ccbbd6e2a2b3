"""The webhook's secret never shows to other users (issue 34 item 3): the URL comes from a private
file (``--notify-url-file``) or from ``NEURONDESK_NOTIFY_URL``, never from the command line unless
the user puts it there (then said once, with what to use instead); it reaches neither the workload's
environment nor any command line, and is never written to the run folder. Checked with a real
second user (useradd, removed after) reading ``ps`` and /proc of a live run's processes."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, base_env, wait_until
from test_notify_webhook import Hook

from neurondesk.store.secret_inputs import NOTIFY_URL_ENV, SecretRefused, read_secret_file

# the workload: says whether it inherited the variable, writes its pid, then waits for a stop file
HOLD = """
import os, sys, time
from pathlib import Path
d = Path(sys.argv[1])
print("inherited:", os.environ.get("NEURONDESK_NOTIFY_URL", "none"), flush=True)
(d / "workload.pid").write_text(str(os.getpid()))
end = time.monotonic() + 120
while not (d / "stop").exists() and time.monotonic() < end:
    time.sleep(0.05)
"""


def url_file(folder: Path, url: str, mode: int = 0o600) -> Path:
    f = folder / "hook.url"
    f.write_text(url + "\n")
    f.chmod(mode)
    return f


def nd(tmp: Path, *args: str, env: dict | None = None, **kw):
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=env or base_env(tmp), timeout=kw.pop("timeout", 120), **kw)


def no_token_in_run_folder(run_dir: Path, token: str) -> None:
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


# ---------------------------------------------------------------------------- the file, refused in one line
@pytest.mark.parametrize("how", ["mode 0644", "mode 0660", "symlink", "fifo", "empty", "two lines", "too large"])
def test_a_url_file_others_could_read_or_that_is_no_one_line_file_is_refused_in_one_line(tmp_path, how):
    token = secrets.token_hex(8)
    real = url_file(tmp_path, f"https://hooks.example.com/services/{token}")
    path = real
    if how.startswith("mode"):
        real.chmod(int(how.split()[1], 8))
    elif how == "symlink":
        path = tmp_path / "link.url"
        path.symlink_to(real)
    elif how == "fifo":
        path = tmp_path / "fifo.url"
        os.mkfifo(path, 0o600)  # an open() that blocks, were it not refused
    elif how == "empty":
        real.write_text("\n \n")
    elif how == "two lines":
        real.write_text(f"https://a.example.com/{token}\nhttps://b.example.com/{token}\n")
    else:
        real.write_text("https://x.example.com/" + "a" * (9 << 10) + token)
    with pytest.raises(SecretRefused) as err:
        read_secret_file(path)
    words = str(err.value)
    assert str(path) in words and "\n" not in words and token not in words
    expect = {"mode 0644": "chmod 600", "mode 0660": "chmod 600", "symlink": "symbolic link", "fifo": "FIFO",
              "empty": "is empty", "two lines": "holds 2 lines", "too large": "larger than 8 KiB"}[how]
    assert expect in words, words
    # the CLI: exit 2 before anything runs, the same line, no run folder
    p = nd(tmp_path, "run", "--headless", "--run-dir", str(tmp_path / "run"), "--notify-url-file", str(path),
           "--", sys.executable, "-c", "print('never')")
    assert p.returncode == 2 and p.stderr == f"neurondesk: {words}\n", p.stderr
    assert not (tmp_path / "run").exists() and token not in p.stdout + p.stderr


def test_a_private_url_file_is_read_and_the_flag_and_variable_are_checked_alike(tmp_path):
    assert read_secret_file(url_file(tmp_path, "  https://hooks.example.com/x?t=1  ")) == \
        "https://hooks.example.com/x?t=1"
    bad = nd(tmp_path, "run", "--headless", "--run-dir", str(tmp_path / "run"),
             "--notify-url-file", str(url_file(tmp_path, "ftp://example.com/secret-path")), "--", "true")
    assert bad.returncode == 2 and "secret-path" not in bad.stderr
    assert bad.stderr.startswith(f"neurondesk: --notify-url-file {tmp_path / 'hook.url'}: ftp://example.com/… is no "), \
        bad.stderr
    env = {**base_env(tmp_path), NOTIFY_URL_ENV: "hooks.slack.com/services/T/B/secret-path"}
    bad = nd(tmp_path, "run", "--headless", "--run-dir", str(tmp_path / "run"), "--", "true", env=env)
    assert bad.returncode == 2 and bad.stderr.startswith(f"neurondesk: {NOTIFY_URL_ENV}: ") and \
        "secret-path" not in bad.stderr
    both = nd(tmp_path, "run", "--headless", "--notify-url", "https://h.example.com/x",
              "--notify-url-file", str(tmp_path / "hook.url"), "--", "true")
    assert both.returncode == 2 and "one way" in both.stderr
    helped = nd(tmp_path, "run", "--help")
    assert "--notify-url-file PATH" in helped.stdout and NOTIFY_URL_ENV in helped.stdout


# ---------------------------------------------------------------------------- real runs, a real second user
@pytest.fixture
def other_user():
    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("reading another user's processes as a second user needs root, useradd and runuser")
    name = f"ndurl{secrets.token_hex(3)}"
    p = subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"useradd refused: {p.stderr.strip()}")
    try:
        yield pwd.getpwnam(name).pw_name
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def as_user(user: str, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, cwd="/", timeout=30)


def what_user_reads(user: str, pids: list[int]) -> bytes:
    """All that ``user`` can read of these processes: ps of every process, and each pid's
    /proc cmdline and environ (the environ is refused to another user: then nothing)."""
    seen = as_user(user, "ps", "-eww", "-o", "pid,args").stdout
    for pid in pids:
        for part in ("cmdline", "environ"):
            seen += as_user(user, "cat", f"/proc/{pid}/{part}").stdout
    return seen


@pytest.mark.parametrize("source", ["file", "environment", "command line"])
def test_the_token_is_in_no_command_line_or_environment_another_user_can_read(tmp_path, other_user, source):
    token = f"tok{secrets.token_hex(8)}"
    hook = Hook()
    url = hook.url.replace("token=s3cr3t", f"token={token}")
    run_dir, work = tmp_path / "run", tmp_path / "work"
    work.mkdir()
    env = base_env(tmp_path)
    flags = ["--notify"]
    if source == "file":
        flags += ["--notify-url-file", str(url_file(tmp_path, url))]
    elif source == "environment":
        env[NOTIFY_URL_ENV] = url
    else:
        flags += ["--notify-url", url]
    cli = subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
                            *flags, "--", sys.executable, "-c", HOLD, str(work)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        wpid = int(wait_until(lambda: (work / "workload.pid").exists() and (work / "workload.pid").read_text(), 120,
                              "the workload to start"))
        rpid = json.loads((run_dir / "recorder.json").read_text())["pid"]
        pids = [cli.pid, rpid, wpid]
        seen = what_user_reads(other_user, pids)
        assert str(wpid).encode() in seen  # ps did list the run's processes
        # root reads the environ the other user is refused: the workload and the recorder never had it
        for pid in (rpid, wpid):
            assert token.encode() not in Path(f"/proc/{pid}/environ").read_bytes(), pid
        if source == "command line":  # the baseline: what the warning is about, seen by the other user
            assert token.encode() in seen
        else:
            assert token.encode() not in seen
            assert token.encode() not in Path(f"/proc/{cli.pid}/cmdline").read_bytes()
    finally:
        (work / "stop").write_text("")
        out, err = cli.communicate(timeout=120)
        hook.close()
    assert cli.returncode == 0, err[-2000:]
    assert "inherited: none" in out
    assert [b["event"] for b in hook.bodies][-1:] == ["finished"]  # the URL, wherever it came from, was used
    assert all(token in path for path in hook.paths)
    warned = [line for line in err.splitlines() if "--notify-url puts the webhook URL" in line]
    assert len(warned) == (1 if source == "command line" else 0), err
    if warned:
        assert "--notify-url-file PATH" in warned[0] and NOTIFY_URL_ENV in warned[0]
    assert token not in err
    no_token_in_run_folder(run_dir, token)


@pytest.mark.parametrize("source", ["file", "environment"])
def test_a_failing_webhook_is_said_without_its_token_in_path_or_query(tmp_path, source):
    """Slack-like (token in the path) and query tokens, a webhook that answers 404: the failure is
    a notice naming the host only; the token is nowhere in the run folder or the output."""
    token = f"tok{secrets.token_hex(8)}"
    hook = Hook(status=404)
    url = hook.url.split("/hook?")[0] + f"/services/T0/B0/{token}?token={token}"
    env = base_env(tmp_path)
    flags = ["--notify", "--price-per-hour", "360", "--budget-usd", "0.05"]  # an alert after about 0.4 s
    if source == "file":
        flags += ["--notify-url-file", str(url_file(tmp_path, url))]
    else:
        env[NOTIFY_URL_ENV] = url
    run_dir = tmp_path / "run"
    try:
        p = nd(tmp_path, "run", "--headless", "--run-dir", str(run_dir), *flags, "--", sys.executable, "-c",
               "import time; print('hello'); time.sleep(3)", env=env, timeout=180)
    finally:
        hook.close()
    assert p.returncode == 0, p.stderr[-2000:]
    assert hook.paths and all(token in path for path in hook.paths)  # the whole URL was used
    notices = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
               if '"kind":"notice"' in line]
    failed = [n["message"] for n in notices if "could not be sent" in n["message"]]
    assert failed and f"{hook.url.split('/hook?')[0]}/… (HTTP 404)" in failed[0], notices
    no_token_in_run_folder(run_dir, token)
    assert token not in p.stdout + p.stderr
