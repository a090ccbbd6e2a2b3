"""The probe's backends have one declared shape (issue 51 item 4): each class in backends.BACKENDS says its
NAME (the Probe attribute other parts reach it by) and its PATCHES (module, method, hook); the probe
builds every one and the post-import finder applies exactly their patches. A backend planted in
BACKENDS alone (a new module's one registration line) is built and patched with nothing else changed.
The probe is loaded in a bare interpreter (its package is private to the workload's processes)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"

SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import _neurondesk_probe as p
from _neurondesk_probe import backends
from _neurondesk_probe.finder import PostImportFinder

class CudaHooks:  # a new backend: this class and the line below, nothing else
    NAME = "cuda"
    PATCHES = (("torch.cuda", "patch_torch_cuda", "cuda"),)
    def __init__(self, probe):
        self.probe = probe
    def patch_torch_cuda(self, module):
        pass

shapes = {b.__name__: {"name": b.NAME, "patches": [list(x) for x in b.PATCHES],
                       "methods": all(callable(getattr(b, m, None)) for _, m, _ in b.PATCHES)}
          for b in backends.BACKENDS}
backends.BACKENDS = (*backends.BACKENDS, CudaHooks)
probe = p.Probe(sys.argv[2])
finder = PostImportFinder(probe)
applied = {}
for b in backends.BACKENDS:
    part = getattr(probe, b.NAME)
    for module, method, hook in b.PATCHES:
        fn, got_hook = finder.patches[module]
        applied[module] = [type(part).__name__, fn.__self__ is part and fn.__func__ is getattr(type(part), method),
                           got_hook == hook]
print(json.dumps({"shapes": shapes, "applied": applied}))
"""


def test_every_backend_declares_its_name_and_patches_and_the_finder_applies_exactly_them(tmp_path):
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(BOOTSTRAP), str(tmp_path / "no-recorder.sock")],
                       capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    shapes = got["shapes"]
    assert set(shapes) == {"XlaHooks", "TorchNeuronHooks", "DynamoHooks"}
    names = [s["name"] for s in shapes.values()]
    assert len(names) == len(set(names)) and all(n.isidentifier() for n in names)
    assert all(s["methods"] and s["patches"] for s in shapes.values())
    assert shapes["XlaHooks"]["patches"] == [["torch_xla", "patch_torch_xla", "xla-sync"]]
    # every declared patch is the finder's, bound to the backend the probe built; the planted one too
    assert got["applied"]["torch.cuda"] == ["CudaHooks", True, True]
    assert all(v[1] and v[2] for v in got["applied"].values()), got["applied"]
    assert set(got["applied"]) == {m for s in shapes.values() for m, _, _ in s["patches"]} | {"torch.cuda"}
