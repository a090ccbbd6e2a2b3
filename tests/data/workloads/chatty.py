"""A workload that prints a lot and counts it, in phases a test can step through: after each
phase but the last it makes SYNC/printed-I and waits for SYNC/go-I. Its last line says how many
lines and bytes it printed before it (also written to SYNC/final, for a disk that stores nothing
more); it exits with status 3, so a test tells its own exit from anything else.

    python chatty.py SYNC LINE_BYTES COUNT [COUNT ...]
"""

import os
import sys
import time

sync, size, counts = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3:]]
lines = printed = 0
for phase, count in enumerate(counts):
    for _ in range(count):
        text = f"line {lines:08d} "
        text += "x" * (size - len(text) - 1) + "\n"
        sys.stdout.write(text)
        sys.stdout.flush()
        lines += 1
        printed += len(text)
    if phase < len(counts) - 1:
        open(os.path.join(sync, f"printed-{phase}"), "w").close()
        while not os.path.exists(os.path.join(sync, f"go-{phase}")):
            time.sleep(0.02)
final = f"chatty done: {lines} lines, {printed} bytes before this one"
print(final, flush=True)
with open(os.path.join(sync, "final"), "w") as f:
    f.write(final + "\n")
sys.exit(3)
