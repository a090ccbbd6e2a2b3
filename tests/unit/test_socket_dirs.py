"""Socket folders (``<tmp>/nd-XXXX``) of recorders killed with SIGKILL are removed by ls/summary,
and nothing else is."""

from __future__ import annotations

import os
import shutil
import tempfile

from neurondesk.sources.runs import remove_socket_dir, sweep_socket_dirs
from neurondesk.store.liveness import RecorderInfo, RecorderLock, write_recorder_info


def _run(tmp_path, name: str, sock_dir: str):
    d = tmp_path / "runs" / name
    d.mkdir(parents=True)
    write_recorder_info(d, RecorderInfo(pid=999999, control_socket=os.path.join(sock_dir, "control.sock")))
    return d


def test_a_dead_recorders_socket_folder_is_removed_a_live_ones_is_kept(tmp_path):
    dead_dir, live_dir = tempfile.mkdtemp(prefix="nd-"), tempfile.mkdtemp(prefix="nd-")
    try:
        open(os.path.join(dead_dir, "control.sock"), "w").close()
        dead = _run(tmp_path, "20260101-000000-dead", dead_dir)
        live = _run(tmp_path, "20260101-000001-live", live_dir)
        lock = RecorderLock(live)
        try:
            assert not remove_socket_dir(live) and os.path.isdir(live_dir)
            assert sweep_socket_dirs(tmp_path / "runs") == 1
            assert not os.path.exists(dead_dir) and os.path.isdir(live_dir)
            assert not remove_socket_dir(dead)  # gone already: nothing to do
        finally:
            lock.release()
        assert remove_socket_dir(live) and not os.path.exists(live_dir)
    finally:
        shutil.rmtree(dead_dir, ignore_errors=True)
        shutil.rmtree(live_dir, ignore_errors=True)


def test_only_an_nd_folder_directly_in_the_temp_dir_and_never_a_symlink(tmp_path):
    other = tempfile.mkdtemp(prefix="ndx-")
    inside = tmp_path / "nd-elsewhere"
    inside.mkdir()
    link = os.path.join(tempfile.gettempdir(), f"nd-link-{os.getpid()}")
    os.symlink(inside, link)
    try:
        for i, sock_dir in enumerate((other, str(inside), link)):
            assert not remove_socket_dir(_run(tmp_path, f"r{i}", sock_dir))
        assert os.path.isdir(other) and inside.is_dir() and os.path.islink(link)
    finally:
        os.unlink(link)
        shutil.rmtree(other, ignore_errors=True)
