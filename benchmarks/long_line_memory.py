"""Peak memory of the recorder and the headless viewer when the workload prints one 50 MB line
with no newline (issue 24 item 6), against the same 50 MB printed as ordinary 1 KiB lines, in the
same invocation. Before the line bound the long line took the recorder to 247 MB and the viewer
to 144 MB.

Rerun::

    .venv/bin/python benchmarks/long_line_memory.py --out benchmarks/results/long_line_memory.json

Each case is a real `neurondesk run --headless` of a `python -c` workload; RSS of the CLI (the
viewer), the recorder and the output relay is sampled every 50 ms (psutil) and the peak kept.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from conftest import base_env  # noqa: E402 - the tests' clean environment (no user config)

MIB = 50
CASES = {
    "one 50 MB line, no newline": f"import sys\nw=sys.stdout.write\nfor _ in range({MIB}):\n"
                                  "    w('x'*(1<<20)); sys.stdout.flush()\nw('\\n')\n",
    "50 MB in 1 KiB lines (baseline)": f"import sys\nline='x'*1023+'\\n'\nfor _ in range({MIB}):\n"
                                       "    sys.stdout.write(line*1024); sys.stdout.flush()\n",
}
ROLES = {"neurondesk.cli": "viewer", "neurondesk.recorder": "recorder", "output_relay.py": "relay"}


def _role(cmdline: list[str]) -> str | None:
    text = " ".join(cmdline)
    return next((role for key, role in ROLES.items() if key in text), None)


def peak_rss(program: str) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="nd-longline-"))
    p = subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(tmp / "run"),
                          "--", sys.executable, "-c", program], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=base_env(tmp), cwd=REPO)
    peak: dict[str, float] = {}
    top = psutil.Process(p.pid)
    while p.poll() is None:
        try:
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            break
        for q in procs:
            try:
                role = _role(q.cmdline())
                if role:
                    peak[role] = max(peak.get(role, 0.0), q.memory_info().rss / 2**20)
            except psutil.Error:
                pass
        time.sleep(0.05)
    events = (tmp / "run" / "events.jsonl").stat().st_size
    shutil.rmtree(tmp, ignore_errors=True)  # 50 MB of stdout.log each
    return {**{k: round(v, 1) for k, v in sorted(peak.items())}, "journal_bytes": events}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = {name: peak_rss(program) for name, program in CASES.items()}
    long, base = rows["one 50 MB line, no newline"], rows["50 MB in 1 KiB lines (baseline)"]
    ratios = {role: round(long[role] / base[role], 2) for role in ("viewer", "recorder") if role in long and role in base}
    doc = {"command": "python benchmarks/long_line_memory.py", "peak_rss_mib": rows,
           "long_line_over_baseline": ratios, "before_the_bound": {"recorder": 247, "viewer": 144},
           "date": time.strftime("%Y-%m-%d"), "machine": f"{psutil.cpu_count()} CPUs, shared dev container"}
    print(json.dumps(doc, indent=2))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
