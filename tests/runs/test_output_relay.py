"""No disk can break the workload's output, and no death of neurondesk can either: its stdout and
stderr are pipes drained by the output relay (collectors/output_relay.py), which stores what it
can in stdout.log / stderr.log and counts the rest.

Real filesystems, real failures (the tests run as root): a small tmpfs that fills mid-run and
frees again; an ext4 filesystem on a loop device forced read-only mid-run (ext4's own
``trigger_fs_error`` with ``errors=remount-ro``, as an EBS volume that fails does it: a plain
``mount -o remount,ro`` is refused while files are open for writing); a recorder SIGKILLed while
the workload prints heavily. In each, the workload's own exit status and its last line (it counts
what it printed) prove that it lived, and stored + not stored = what it printed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, base_env
from test_recorder_lifecycle import wait_until

from neurondesk.collectors.output_relay import BACKLOG_MAX
from neurondesk.store.journal import read_journal
from neurondesk.store.liveness import read_recorder_info, recorder_alive

CHATTY = REPO / "tests" / "data" / "workloads" / "chatty.py"
RELAY = REPO / "neurondesk" / "collectors" / "output_relay.py"
ND = [sys.executable, "-m", "neurondesk.cli"]


def _mount(argv: list[str], what: str) -> None:
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount {what} here ({p.stderr.strip() or p.returncode}); these tests need root "
                    "and a kernel that lets a container mount")


def _umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(folder: Path) -> Path:
    """Write a file until the filesystem refuses (ENOSPC); returns it (delete it to free the disk)."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError:
                pass
    return filler


def _start(run_dir: Path, sync: Path, tmp_path: Path, *counts: int, size: int = 1024) -> subprocess.Popen:
    out, err = open(tmp_path / "cli.out", "wb"), open(tmp_path / "cli.err", "wb")
    with out, err:
        return subprocess.Popen([*ND, "run", "--headless", "--run-dir", str(run_dir), "--", sys.executable,
                                 str(CHATTY), str(sync), str(size), *map(str, counts)],
                                stdout=out, stderr=err, env=base_env(tmp_path / "home"), cwd=REPO)


def _step(sync: Path, phase: int, before=None) -> None:
    """Wait until the workload printed phase ``phase``, do ``before``, then let it go on."""
    wait_until(lambda: (sync / f"printed-{phase}").exists(), 120, f"the workload to print phase {phase}")
    if before is not None:
        before()
    (sync / f"go-{phase}").touch()


def _final(sync: Path) -> tuple[str, int]:
    """The workload's last line and the bytes it printed in all, that line included."""
    line = (sync / "final").read_text().rstrip("\n")
    before = int(line.split(", ")[1].split()[0])
    return line, before + len(line) + 1


def _relay_pids(run_dir: Path) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmd = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(b"output_relay.py" in c for c in cmd) and str(run_dir / "stdout.log").encode() in cmd:
                found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def test_a_tmpfs_that_fills_mid_run_loses_output_not_the_training(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    _mount(["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(mnt)], "a tmpfs")
    try:
        sync = tmp_path / "sync"
        sync.mkdir()
        run_dir = mnt / "run"
        # 200 lines, then the disk fills; 12 MiB while it is full (more than the relay holds), then
        # the disk frees and 5 lines more
        p = _start(run_dir, sync, tmp_path, 200, 12 * 1024, 5)
        filler: list[Path] = []
        _step(sync, 0, lambda: filler.append(_fill(mnt)))
        _step(sync, 1, lambda: filler[0].unlink())
        assert p.wait(timeout=180) == 3  # the workload's own exit status: its prints never failed
    finally:
        if "p" in locals() and p.poll() is None:
            p.kill()
        err = (tmp_path / "cli.err").read_text(errors="replace") if (tmp_path / "cli.err").exists() else ""
        stored_log = (run_dir / "stdout.log").read_bytes() if (run_dir / "stdout.log").exists() else b""
        summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else None
        events = read_journal(run_dir / "events.jsonl")[0] if (run_dir / "events.jsonl").exists() else []
        _umount(mnt)
    final, printed = _final(sync)
    assert final == f"chatty done: {200 + 12 * 1024 + 5} lines, {(200 + 12 * 1024 + 5) * 1024} bytes before this one"
    assert stored_log.endswith(final.encode() + b"\n")  # stored again once the disk freed
    assert final.encode() in (tmp_path / "cli.out").read_bytes()  # and passed through to the terminal

    lost = summary["disk"]["output_not_stored"]["bytes"]
    assert len(stored_log) + lost == printed  # every byte is either in stdout.log or counted
    assert lost >= 12 * 1024 * 1024 - BACKLOG_MAX - (1 << 20) - 65536  # past what the relay holds and the pipe
    stream = summary["disk"]["output_not_stored"]["streams"]["stdout"]
    assert stream["reason"] == "disk full (ENOSPC)" and stream["storing"] is True
    words = summary["disk"]["output_not_stored"]["words"]
    assert words.startswith(f"{lost / 1e6:.1f} MB of the workload's output were not stored: disk full (ENOSPC) at ")
    assert words in summary["notices"] and f"neurondesk: {words}" in err
    notices = [e.message for e in events if e.kind == "notice"]
    assert any(n.startswith("the workload's stdout cannot be stored in") for n in notices), notices
    assert any(n.startswith("the workload's stdout is stored in") and "again" in n for n in notices), notices


def _ext4(tmp_path: Path) -> tuple[Path, Path]:
    """A 64 MiB ext4 filesystem on a loop device, mounted with errors=remount-ro; returns the mount
    point and its trigger_fs_error switch."""
    img, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    if subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], capture_output=True).returncode != 0:
        pytest.skip("mkfs.ext4 is not available")
    _mount(["mount", "-o", "loop,errors=remount-ro", str(img), str(mnt)], "an ext4 image on a loop device")
    dev = subprocess.run(["findmnt", "-no", "SOURCE", str(mnt)], capture_output=True, text=True).stdout.strip()
    trigger = Path("/sys/fs/ext4") / os.path.basename(dev) / "trigger_fs_error"
    if not trigger.exists():
        _umount(mnt)
        pytest.skip(f"{trigger} is missing: this kernel cannot force an ext4 filesystem read-only")
    return mnt, trigger


def _read_only(mnt: Path) -> bool:
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == str(mnt):
            return "ro" in fields[3].split(",") or "emergency_ro" in fields[3].split(",")
    return False


def test_a_run_folder_forced_read_only_mid_run_loses_output_not_the_training(tmp_path):
    mnt, trigger = _ext4(tmp_path)
    try:
        sync = tmp_path / "sync"
        sync.mkdir()
        run_dir = mnt / "run"
        p = _start(run_dir, sync, tmp_path, 300, 3000, 5)

        def fail_the_filesystem() -> None:
            trigger.write_text("neurondesk test: the run folder's disk fails")
            assert _read_only(mnt)
        _step(sync, 0, fail_the_filesystem)
        _step(sync, 1)
        assert p.wait(timeout=180) == 3  # the workload's own exit status: its prints never failed
        stored = (run_dir / "stdout.log").read_bytes()
    finally:
        if "p" in locals() and p.poll() is None:
            p.kill()
        _umount(mnt)
    final, printed = _final(sync)
    assert final == f"chatty done: 3305 lines, {3305 * 1024} bytes before this one"  # the workload's own count
    assert 0 < len(stored) <= 300 * 1024 + 65536  # what came before the failure (a little of the rest, maybe)
    # the journal could not be written either: it went on in the fallback folder, with the summary
    err = (tmp_path / "cli.err").read_text(errors="replace")
    fallback = tmp_path / "home" / "fallback" / "run"  # $NEURONDESK_HOME/fallback/<run id> (store/fallback.py)
    assert str(fallback) in err, err[-3000:]
    summary = json.loads((fallback / "summary.json").read_text())
    out = summary["disk"]["output_not_stored"]
    assert out["streams"]["stdout"]["reason"] == "read-only filesystem (EROFS)"
    assert len(stored) + out["bytes"] == printed  # what is not in stdout.log is counted, to the byte
    assert out["words"] in summary["notices"] and f"neurondesk: {out['words']}" in err
    assert "writes still fail" in out["words"]


def test_the_training_outlives_a_recorder_sigkilled_while_it_prints_heavily(tmp_path):
    sync = tmp_path / "sync"
    sync.mkdir()
    exit_file = sync / "exit"
    out = subprocess.run([*ND, "run", "--detach", "--run-dir", str(tmp_path / "run"), "--", "sh", "-c",
                          f'"{sys.executable}" "{CHATTY}" "{sync}" 200 2000 20000 40000; echo $? > "{exit_file}"'],
                         capture_output=True, text=True, env=base_env(tmp_path / "home"), cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    run_dir = Path(out.stdout.strip())
    log = run_dir / "stdout.log"
    _step(sync, 0)
    wait_until(lambda: log.stat().st_size > 2500 * 200, 120, "the workload to print its second phase")
    info = read_recorder_info(run_dir)
    os.kill(info.pid, signal.SIGKILL)  # while it prints, or just after: its next phase has no recorder
    wait_until(lambda: not recorder_alive(run_dir), 30, "the recorder to die")
    relays = _relay_pids(run_dir)
    assert len(relays) == 1
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):  # not killed by accident
        os.kill(relays[0], sig)
    _step(sync, 1)  # 40,000 lines more with no recorder
    wait_until(lambda: exit_file.exists() and exit_file.read_text().strip(), 180, "the workload to exit")
    assert exit_file.read_text().strip() == "3"  # its own exit status
    # the relay ends once the pipes close (the workload is gone): not immortal
    wait_until(lambda: not _alive(relays[0]), 60, "the relay to end at the end of its pipes")
    final, printed = _final(sync)
    stored = log.read_bytes()
    assert stored.endswith(final.encode() + b"\n") and len(stored) == printed  # every byte stored
    assert stored.count(b"\n") == 62001


def test_relay_makes_a_removed_output_file_again_and_ends_at_the_end_of_its_pipes(tmp_path):
    """The relay alone: a file removed by hand comes back with what follows; what it reports."""
    r, w = os.pipe()
    status_r, status_w = os.pipe()
    path = tmp_path / "stdout.log"
    relay = subprocess.Popen([sys.executable, "-I", "-S", str(RELAY), "--status-fd", str(status_w),
                              "--stream", "stdout", str(r), str(path)], pass_fds=[r, status_w], cwd="/")
    os.close(r)
    os.close(status_w)
    os.write(w, b"first\n")
    wait_until(lambda: path.exists() and path.read_bytes() == b"first\n", 30, "the first line stored")
    path.unlink()
    os.write(w, b"second\n")
    wait_until(lambda: path.exists() and path.read_bytes() == b"second\n", 30, "the file made again")
    assert relay.poll() is None
    os.close(w)  # the workload is gone: the relay ends
    assert relay.wait(timeout=30) == 0
    with os.fdopen(status_r, "rb") as f:
        status = [json.loads(line) for line in f]
    assert status == [{"ready": True, "pid": relay.pid}, {"end": True}]  # nothing failed: nothing else to say


def test_relay_counts_what_a_file_size_limit_refuses_and_the_writer_never_sees_an_error(tmp_path):
    """RLIMIT_FSIZE (EFBIG) as the disk that refuses: the writer's every write succeeds."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))

    r, w = os.pipe()
    status_r, status_w = os.pipe()
    path = tmp_path / "stdout.log"
    relay = subprocess.Popen([sys.executable, "-I", "-S", str(RELAY), "--status-fd", str(status_w),
                              "--stream", "stdout", str(r), str(path)], pass_fds=[r, status_w], cwd="/",
                             preexec_fn=limit)
    os.close(r)
    os.close(status_w)
    for _ in range(1000):
        os.write(w, b"x" * 99 + b"\n")  # 100 kB: ten times the limit
    os.close(w)
    assert relay.wait(timeout=60) == 0
    with os.fdopen(status_r, "rb") as f:
        status = [json.loads(line) for line in f]
    assert status[-1] == {"end": True}
    last = status[-2]
    assert last["final"] and last["reason"] == "file too large (EFBIG)" and last["storing"] is False
    assert path.stat().st_size == 10_000 and last["lost_bytes"] == 100_000 - 10_000
    assert last["stored_bytes"] == 10_000


def test_relay_is_started_in_a_session_of_its_own_and_out_of_the_workload_group(tmp_path):
    sync = tmp_path / "sync"
    sync.mkdir()
    p = _start(tmp_path / "run", sync, tmp_path, 10, 10, size=64)
    try:
        wait_until(lambda: (sync / "printed-0").exists(), 120, "the workload's first phase")
        relay = _relay_pids(tmp_path / "run")
        info = read_recorder_info(tmp_path / "run")
        assert len(relay) == 1 and os.getsid(relay[0]) == relay[0]  # its own session, no terminal
        assert os.getsid(info.workload_pid) == info.workload_pid != relay[0]
        (sync / "go-0").touch()
        assert p.wait(timeout=120) == 3
    finally:
        if p.poll() is None:
            p.kill()
    wait_until(lambda: not _alive(relay[0]), 60, "the relay to end with the workload")


def test_a_relay_killed_on_purpose_leaves_the_pipes_to_the_recorder_and_the_training_goes_on(tmp_path):
    sync = tmp_path / "sync"
    sync.mkdir()
    run_dir = tmp_path / "run"
    p = _start(run_dir, sync, tmp_path, 100, 5000, size=200)
    try:
        def kill_the_relay() -> None:
            relays = _relay_pids(run_dir)
            assert len(relays) == 1
            os.kill(relays[0], signal.SIGKILL)
            wait_until(lambda: not _alive(relays[0]), 30, "the relay to die")
        _step(sync, 0, kill_the_relay)  # 5,000 lines more, with no relay
        assert p.wait(timeout=120) == 3  # the workload's own exit status: no broken pipe
    finally:
        if p.poll() is None:
            p.kill()
    final, printed = _final(sync)
    stored = (run_dir / "stdout.log").read_bytes()
    assert stored.endswith(final.encode() + b"\n") and stored.count(b"\n") == 5101
    assert final.encode() in (tmp_path / "cli.out").read_bytes()
    notices = [e.message for e in read_journal(run_dir / "events.jsonl")[0] if e.kind == "notice"]
    assert any("the output relay (pid" in n and "killed by SIGKILL" in n and "drains the workload's output itself" in n
               for n in notices), notices


def test_relay_never_blocks_the_writer_on_a_disk_that_does_not_answer(tmp_path):
    """A write that hangs (here: stdout.log is a FIFO, given as the stream's own file, whose reader
    never reads, so a write into it never returns, as on a dead NFS server): the writer's writes
    still go through, the relay holds 8 MiB, drops the rest, and at the end counts everything as
    not stored."""
    path = tmp_path / "stdout.log"
    os.mkfifo(path)
    never_reads = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    st = os.stat(path)
    r, w = os.pipe()
    status_r, status_w = os.pipe()
    relay = subprocess.Popen([sys.executable, "-I", "-S", str(RELAY), "--status-fd", str(status_w), "--final-wait",
                              "0.5", "--stream", "stdout", str(r), str(path), "--file-id", f"{st.st_dev}:{st.st_ino}"],
                             pass_fds=[r, status_w], cwd="/")
    os.close(r)
    os.close(status_w)
    for _ in range(20):
        os.write(w, b"y" * (1 << 20))  # 20 MiB: would block past the pipe's 64 KiB if nobody drained it
    os.close(w)
    assert relay.wait(timeout=60) == 0
    with os.fdopen(status_r, "rb") as f:
        status = [json.loads(line) for line in f]
    assert status[-1] == {"end": True}
    last = status[-2]
    # what the FIFO's buffer took before its writes stopped returning is stored (64 KiB at most); the rest lost
    assert last["final"] and last["lost_bytes"] + last["stored_bytes"] == 20 << 20 and last["stored_bytes"] <= 1 << 16
    assert last["reason"] == "the disk did not answer" and last["storing"] is False
    assert any(x.get("reason") == "the disk did not keep up" for x in status[1:-2])  # said while it ran
    os.close(never_reads)


def test_a_relay_that_cannot_start_leaves_the_workload_writing_its_files_itself(tmp_path, monkeypatch):
    """The fallback, in-process: the relay's script is missing, so it never says it is ready."""
    import queue

    from neurondesk.collectors import relay_link
    from neurondesk.collectors import workload as wl

    monkeypatch.setattr(relay_link, "RELAY_SCRIPT", tmp_path / "no-such-relay.py")
    out: queue.SimpleQueue = queue.SimpleQueue()
    w = wl.WorkloadProcess(["sh", "-c", "echo out; echo err >&2"], out, stdout_path=tmp_path / "stdout.log",
                           stderr_path=tmp_path / "stderr.log")
    w.start()
    try:
        items = []
        while not any(isinstance(x, wl.RawExit) for x in items):
            items.append(out.get(timeout=60))
    finally:
        w.cleanup()
    assert w.relay is None and w.relay_problem == "the output relay did not answer"
    assert (tmp_path / "stdout.log").read_text() == "out\n" and (tmp_path / "stderr.log").read_text() == "err\n"
    assert sorted((x.stream, x.text) for x in items if isinstance(x, wl.RawOutput)) == [("stderr", "err"),
                                                                                        ("stdout", "out")]


def test_relay_follows_a_run_folder_moved_while_the_run_goes_on(tmp_path):
    """`mv RUN elsewhere` mid-run (the registry of live runs finds it there): the output goes on into
    the moved folder's stdout.log."""
    run = tmp_path / "run"
    run.mkdir()
    r, w = os.pipe()
    relay = subprocess.Popen([sys.executable, "-I", "-S", str(RELAY), "--stream", "stdout", str(r),
                              str(run / "stdout.log")], pass_fds=[r], cwd="/")
    os.close(r)
    os.write(w, b"before\n")
    wait_until(lambda: (run / "stdout.log").exists() and (run / "stdout.log").read_bytes() == b"before\n", 30,
               "the first line")
    moved = tmp_path / "moved"
    run.rename(moved)
    os.write(w, b"after\n")
    wait_until(lambda: (moved / "stdout.log").read_bytes() == b"before\nafter\n", 30, "the line after the move")
    os.close(w)
    assert relay.wait(timeout=30) == 0
    assert not run.exists()
