"""Per-line cost of OutputParser.feed. Rerun: ``.venv/bin/python benchmarks/logparse_cost.py``.

Results (CPython 3.11.7, 2-CPU dev container shared with other jobs, load ~5, 2026-11-30; three runs):
    plain line (matches nothing)        4.3-4.7 us/line (3.4 us in an earlier, quieter timeit run)
    '[rank 0] ...' status line          4.9-5.0 us/line
    'Step 10/100 | loss: 2.31'          9.6-9.7 us/line
    torch-neuronx-train.log, all lines  6.2-7.3 us/line (blocks, wrapper lines, losses)
About 0.9 us of each line is building the frozen OutputLine dataclass itself.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from neurondesk.collectors.logparse import OutputParser  # noqa: E402

FIXTURE = REPO / "tests" / "data" / "neuron" / "torch-neuronx-train.log"  # in the repository: a clone has it


def per_line_us(lines: list[str], rounds: int) -> float:
    p = OutputParser()
    start = time.perf_counter()
    for _ in range(rounds):
        for line in lines:
            p.feed("stderr", line, 0.0)
    return (time.perf_counter() - start) / (rounds * len(lines)) * 1e6


def main() -> None:
    import argparse

    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no options: --help says what it is
    cases = {
        "plain line (matches nothing)": ["an ordinary line of output from the user program, nothing to see"],
        "'[rank 0] ...' status line": ["[rank 0] world_size=2 device=xla:0 model=gpt2-small params=124.4M"],
        "'Step 10/100 | loss: 2.31'": ["Step 10/100 | loss: 2.31"],
    }
    cases[f"{FIXTURE.name}, all lines"] = FIXTURE.read_text().splitlines()
    for name, lines in cases.items():
        rounds = max(1, 100_000 // len(lines))
        print(f"{name:40s} {per_line_us(lines, rounds):6.2f} us/line", file=sys.stdout)


if __name__ == "__main__":
    main()
