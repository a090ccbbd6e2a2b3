"""Print a recorded line stream at its own pace, like a live neuron-monitor.

    python -m neurondesk.collectors.devices.replay_stream FILE [--delay S] [--exit-after N]
        [--exit-code C] [--loop]

Lines are written byte for byte (flushed one by one), ``--delay`` seconds apart. ``--exit-after N``
exits with ``--exit-code`` (default 1) after N lines, to play a monitor that dies. Standard
library only, so it also runs as a plain script path.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time

MAX_BYTES = 256 << 20  # a recorded stream of days is tens of MB


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="replay_stream", description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--delay", type=float, default=1.0, help="seconds between lines (default 1)")
    ap.add_argument("--exit-after", type=int, default=None, help="exit after this many lines")
    ap.add_argument("--exit-code", type=int, default=1, help="status for --exit-after (default 1)")
    ap.add_argument("--loop", action="store_true", help="start again at the end of the file")
    args = ap.parse_args(argv)
    try:  # a regular file only, bounded: a FIFO would block the open, /dev/zero never end
        fd = os.open(args.file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                print(f"replay_stream: {args.file} is not a regular file (a FIFO, a device ...): give a recorded "
                      "neuron-monitor stream", file=sys.stderr)
                return 2
            if st.st_size > MAX_BYTES:
                print(f"replay_stream: {args.file} is larger than {MAX_BYTES >> 20} MiB, not read", file=sys.stderr)
                return 2
            lines = f.read(MAX_BYTES).splitlines(keepends=True)
    except OSError as e:
        print(f"replay_stream: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    out = sys.stdout.buffer
    written = 0
    try:
        while True:
            for line in lines:
                if written and args.delay > 0:
                    time.sleep(args.delay)
                out.write(line if line.endswith(b"\n") else line + b"\n")
                out.flush()
                written += 1
                if args.exit_after is not None and written >= args.exit_after:
                    return args.exit_code
            if not args.loop or not lines:
                return 0
    except BrokenPipeError:  # the reader went away: quiet exit (the Python docs' recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
