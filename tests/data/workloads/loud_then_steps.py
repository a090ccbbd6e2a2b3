"""LINES lines of 60,000 characters (every other one on stderr: under a file size limit each
output file takes half of them), then STEPS eager-torch optimizer steps that print nothing
until the end, then exit with EXIT_CODE. The long lines fill a journal to a known size at once,
whatever the machine's speed (the disk-full tests: test_disk_full.py).

    python loud_then_steps.py LINES STEPS EXIT_CODE
"""

import sys

lines, steps, code = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for i in range(lines):
    print(f"{i:04d} " + "y" * 60000, flush=True, file=sys.stderr if i % 2 else sys.stdout)

import torch  # noqa: E402 - after the output: the journal fills before the steps begin

p = torch.nn.Parameter(torch.zeros(4))
opt = torch.optim.SGD([p], lr=0.1)
for _ in range(steps):
    (p - 1).pow(2).sum().backward()
    opt.step()
    opt.zero_grad()
print(f"loud_then_steps ran {steps} steps", flush=True)
sys.exit(code)
