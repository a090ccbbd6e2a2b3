"""``python -m neurondesk.recorder``: the recorder process. Its launch spec (command, options,
the workload's environment) arrives as one JSON object on stdin, never on disk or in argv."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from neurondesk.recorder.options import RunOptions
from neurondesk.recorder.recorder import serve
from neurondesk.store.own_files import FileId
from neurondesk.store.rundir import RunPaths


def main() -> int:
    spec = json.loads(sys.stdin.readline())
    sys.stdin.close()
    options = RunOptions.from_json(json.dumps(spec["options"]))
    options.env = spec.get("env")
    lock = spec.get("lock")  # the lock file the launcher made or checked: (st_dev, st_ino)
    lock_id = FileId(int(lock[0]), int(lock[1])) if isinstance(lock, list) and len(lock) == 2 else None
    return serve(list(spec["command"]), options, RunPaths(Path(spec["run_dir"])), lock_id)


if __name__ == "__main__":
    raise SystemExit(main())
