"""``python -m neurondesk.recorder``: the recorder process. Its launch spec (command, run folder,
options with the workload's environment) arrives as one JSON line on stdin, never on disk or in
argv (recorder/options.py); one it cannot take is refused in one line, into its log."""

from __future__ import annotations

import sys

from neurondesk.recorder.options import LaunchSpecError, decode_spec
from neurondesk.recorder.recorder import serve
from neurondesk.store.rundir import RunPaths

BAD_SPEC_EXIT = 2


def main() -> int:
    try:
        spec = decode_spec(sys.stdin.buffer.readline())
    except LaunchSpecError as exc:
        sys.stderr.write(f"neurondesk recorder: {exc}\n")
        return BAD_SPEC_EXIT
    finally:
        sys.stdin.close()
    return serve(spec.command, spec.options, RunPaths(spec.run_dir), spec.lock)


if __name__ == "__main__":
    raise SystemExit(main())
