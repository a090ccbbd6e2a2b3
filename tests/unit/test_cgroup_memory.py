"""collectors/cgroup_memory.py on cgroup trees laid out as the kernel does (this machine has no cgroup v2
memory controller; the real v1 kill is in tests/runs/test_crash_runs.py): v2 and v1, a limit held by a parent,
a bind-mounted subtree, a move, an exiting process, no memory controller."""

from __future__ import annotations

from pathlib import Path

from neurondesk.collectors.cgroup_memory import CgroupWatch, cgroup_folder, parse_mountinfo

STAT = "{pid} (python) {state} 1 {pid} {pid} 0 -1 {flags} 100 0 0 0 5 2 0 0 20 0 3 0 1000 100000 50"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake(tmp: Path, mountinfo: str, cgroup: str, pid: int = 123, flags: int = 0x400000) -> CgroupWatch:
    proc = tmp / "proc"
    write(proc / "self" / "mountinfo", mountinfo)
    write(proc / "vmstat", "nr_free_pages 1\noom_kill 5\n")
    write(proc / str(pid) / "cgroup", cgroup)
    write(proc / str(pid) / "stat", STAT.format(pid=pid, state="S", flags=flags))
    return CgroupWatch(pid, proc=str(proc))


def v2_tree(tmp: Path) -> Path:
    root = tmp / "cg2"
    write(root / "cgroup.controllers", "cpuset cpu io memory pids\n")
    write(root / "job" / "memory.max", "1073741824\n")
    leaf = root / "job" / "leaf"
    write(leaf / "memory.max", "max\n")
    write(leaf / "memory.current", "5242880\n")
    write(leaf / "memory.peak", "6291456\n")
    write(leaf / "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n")
    return root


def test_v2_the_tightest_limit_of_its_parents_and_the_kills_since_first_read(tmp_path):
    root = v2_tree(tmp_path)
    w = fake(tmp_path, f"41 31 0:38 / {root} rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n", "0::/job/leaf\n")
    first = w.poll(10.0)
    assert (first.version, first.path, first.limit_bytes, first.limit_path) == (2, "/job/leaf", 1 << 30, "/job")
    assert (first.usage_bytes, first.peak_bytes, first.oom_kills, first.limit_hits) == (5 << 20, 6 << 20, 0, 0)
    assert w.poll(10.5) is None  # the same cgroup: nothing new to say
    write(root / "job" / "leaf" / "memory.events", "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 0\n")
    write(tmp_path / "proc" / "vmstat", "oom_kill 6\n")
    end = w.final(11.0)
    assert end.final and (end.oom_kills, end.limit_hits, end.host_oom_kills) == (1, 6, 1)


def test_a_process_that_moves_is_followed_and_an_exiting_one_is_not(tmp_path):
    root = v2_tree(tmp_path)
    (root / "other").mkdir()
    w = fake(tmp_path, f"41 31 0:38 / {root} rw - cgroup2 cgroup2 rw\n", "0::/other\n")
    assert w.poll(1.0).path == "/other"
    write(tmp_path / "proc" / "123" / "cgroup", "0::/job/leaf\n")
    assert w.poll(2.0).path == "/job/leaf"
    # exiting (PF_EXITING): the kernel already shows the root cgroup; that reading is dropped
    write(tmp_path / "proc" / "123" / "cgroup", "0::/\n")
    write(tmp_path / "proc" / "123" / "stat", STAT.format(pid=123, state="R", flags=0x400004))
    assert w.poll(3.0) is None
    write(tmp_path / "proc" / "123" / "stat", STAT.format(pid=123, state="Z", flags=0x400000))
    assert w.poll(4.0) is None
    assert w.final(5.0).path == "/job/leaf"


def test_v1_memory_hierarchy(tmp_path):
    root = tmp_path / "memory"
    write(root / "memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    leaf = root / "nd"
    write(leaf / "memory.limit_in_bytes", "67108864\n")
    write(leaf / "memory.usage_in_bytes", "1000\n")
    write(leaf / "memory.max_usage_in_bytes", "67108864\n")
    write(leaf / "memory.failcnt", "0\n")
    write(leaf / "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    mountinfo = (f"35 31 0:32 / {root} rw,relatime - cgroup cgroup rw,memory\n"
                 f"41 31 0:38 / {tmp_path}/unified rw,relatime - cgroup2 cgroup2 rw\n")
    w = fake(tmp_path, mountinfo, "5:devices:/\n4:memory:/nd\n0::/\n")
    assert (w.poll(1.0).version, w.where[1]) == (1, "/nd")
    write(leaf / "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    write(leaf / "memory.failcnt", "77\n")
    end = w.final(2.0)
    assert (end.limit_bytes, end.limit_path, end.peak_bytes, end.oom_kills, end.limit_hits) == (
        64 << 20, "/nd", 64 << 20, 1, 77)


def test_without_a_memory_controller_the_reading_says_why(tmp_path):
    write(tmp_path / "unified" / "cgroup.controllers", "hugetlb\n")
    w = fake(tmp_path, f"41 31 0:38 / {tmp_path}/unified rw - cgroup2 cgroup2 rw\n", "0::/\n")
    assert w.poll(1.0) is None
    end = w.final(2.0)
    assert end.version == 0 and "no memory cgroup controller" in end.error and end.host_oom_kills == 0


def test_a_bind_mounted_subtree_and_escaped_mount_points():
    m = parse_mountinfo("50 40 0:30 /docker/abc /sys/fs/cgroup\\040x ro - cgroup2 cgroup2 rw\n"
                        "51 40 0:31 / /other rw - ext4 /dev/sda1 rw\n")
    assert len(m) == 1 and m[0].point == "/sys/fs/cgroup x" and m[0].root == "/docker/abc"
    assert cgroup_folder(m[0], "/docker/abc/train") == "/sys/fs/cgroup x/train"
    assert cgroup_folder(m[0], "/docker/abc") == "/sys/fs/cgroup x"
    assert cgroup_folder(m[0], "/docker/abcd") is None  # another container's


def test_the_final_reading_never_raises(tmp_path, monkeypatch):
    w = fake(tmp_path, f"41 31 0:38 / {v2_tree(tmp_path)} rw - cgroup2 cgroup2 rw\n", "0::/job/leaf\n")
    assert w.poll(1.0) is not None

    def broken(*args):
        raise RuntimeError("a kernel that says something odd")
    monkeypatch.setattr("neurondesk.collectors.cgroup_memory.read_folder", broken)
    end = w.final(2.0)
    assert end.final and end.error == "RuntimeError: a kernel that says something odd"
