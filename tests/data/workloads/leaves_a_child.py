"""A workload that exits while a child it started runs on, holding its stdout: the child prints one
line after the parent is gone, then sleeps. Writes the child's pid to argv[1]."""

import subprocess
import sys

CHILD = """
import os, sys, time
parent = int(sys.argv[1])
while True:  # until the parent has exited
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    if os.getppid() != parent:
        break
    time.sleep(0.02)
time.sleep(0.3)
print("late line from the child", flush=True)
time.sleep(60)
"""

import os  # noqa: E402

child = subprocess.Popen([sys.executable, "-c", CHILD, str(os.getpid())])
with open(sys.argv[1], "w") as f:
    f.write(str(child.pid))
print("parent done", flush=True)
