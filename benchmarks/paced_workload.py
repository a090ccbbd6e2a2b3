"""A small synthetic training loop paced at about 50 optimizer steps/s, for benchmarks/watch_cost.py.

Eager torch on CPU: a Linear(4, 1) (five parameters), SGD, a batch of 8, then a fixed
``time.sleep`` (not a deadline), so that anything that delays the loop (the probe's hooks, CPU
taken by the recorder or a console on a small machine) lowers the rate instead of being absorbed
by the pacing. A log line every 10 steps. At the end, one parseable line:

    workload-rate: {"steps_per_s": ..., "busy_ms_median": ..., ...}

measured over the steps after ``--warmup-s`` (default 3 s).

    python benchmarks/paced_workload.py --seconds 60 [--step-s 0.02]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to train (default 60)")
    ap.add_argument("--step-s", type=float, default=0.02, help="pace: seconds per step, sleep included (0.02)")
    ap.add_argument("--warmup-s", type=float, default=3.0, help="steps in the first S s are not measured (3)")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 4)
    y = torch.randn(8, 1)

    # calibrate the sleep once (a fixed value from then on) so that a step is about --step-s here
    took = []
    for _ in range(30):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        took.append(time.perf_counter() - t)
    compute = statistics.median(took)
    sleep_s = max(0.0, args.step_s - compute)
    slept = []  # and the sleep's own overshoot (timer slack, wake-up latency) on this machine now
    for _ in range(10):
        t = time.perf_counter()
        time.sleep(sleep_s)
        slept.append(time.perf_counter() - t - sleep_s)
    sleep_s = max(0.0, sleep_s - statistics.median(slept))

    start = time.perf_counter()
    measure_from = start + args.warmup_s
    end = start + args.seconds
    step = 0
    measured_steps = 0
    t_first = None
    busy: list[float] = []
    now = start
    while now < end:
        b = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.5f}")
        step += 1
        busy_s = time.perf_counter() - b
        time.sleep(sleep_s)
        now = time.perf_counter()
        if now >= measure_from:
            if t_first is None:
                t_first = now  # the measured window starts at the end of this step
            else:
                measured_steps += 1
                busy.append(busy_s)
    window = now - t_first if t_first is not None else 0.0
    rate = {
        "steps_per_s": round(measured_steps / window, 3) if window > 0 else None,
        "steps": step,
        "measured_steps": measured_steps,
        "measured_s": round(window, 3),
        "busy_ms_median": round(statistics.median(busy) * 1000, 4) if busy else None,
        "busy_ms_p90": round(sorted(busy)[int(0.9 * (len(busy) - 1))] * 1000, 4) if busy else None,
        "sleep_ms": round(sleep_s * 1000, 4),
    }
    print("workload-rate: " + json.dumps(rate), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
