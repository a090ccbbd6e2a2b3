"""A checkpoint call that fails in the user's code and is not caught: the traceback is the user's to
read. Args: OUT_DIR MODE, MODE one of save (torch.save into a missing folder), load (torch.load of a
corrupt file), inner (torch.save of an object whose pickling raises)."""

import os
import sys

import torch

out, mode = sys.argv[1], sys.argv[2]
model = torch.nn.Linear(4, 4)
model(torch.randn(2, 4)).sum().backward()


class Unpicklable:
    def __reduce__(self):
        raise RuntimeError("this object cannot be saved")


if mode == "save":
    torch.save(model.state_dict(), os.path.join(out, "missing", "model.pt"))
elif mode == "load":
    path = os.path.join(out, "corrupt.pt")
    with open(path, "wb") as f:
        f.write(b"not a checkpoint at all")
    torch.load(path, weights_only=True)
else:
    torch.save({"model": model.state_dict(), "extra": Unpicklable()}, os.path.join(out, "model.pt"))
