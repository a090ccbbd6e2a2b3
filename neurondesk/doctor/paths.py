"""Which PyTorch training path this machine is on (issue 44 item 7): TorchNeuron (torch-neuronx
2.13+ / 2.14+, the native ``neuron`` device) or the XLA path (torch-neuronx 2.9.0.2.x with
torch-xla), with torch, torch-neuronx and Python versions and the instance family, and whether
Neuron supports it (compat.json's training_paths table: XLA training ended with Neuron 2.29; trn1
runs only the XLA path, so after 2.29 it has no supported training path; TorchNeuron needs
Python 3.12+)."""

from __future__ import annotations

from neurondesk.doctor import facts as F
from neurondesk.doctor import tables as T
from neurondesk.doctor.check import Check

NAME = "training path"
MOVE = ("move to TorchNeuron (torch-neuronx 2.13.x / 2.14.x on torch 2.13 / 2.14, Python 3.12+) on a trn2 or "
        "trn3 instance; to stay on XLA, pin the whole Neuron stack to 2.29 (torch-neuronx 2.9.0.2.13.*)")


def training_path(pk: F.PackageFacts, py: F.InterpreterFacts, family: str | None) -> Check:
    table = T.load()["training_paths"]
    last_xla, min_py = T.version_tuple(table["xla_training_last_release"]), T.major_minor(table["torchneuron_min_python"])
    pkgs = py.packages if not py.error else {}
    tnx, torch = pkgs.get("torch-neuronx"), pkgs.get("torch")
    fam = T.torch_neuronx_family(tnx) if tnx else None
    release = T.neuron_release(pk.versions.get("aws-neuronx-runtime-lib"), tnx)
    rel_v = T.version_tuple(release[0]) if release else None
    after_xla = rel_v is not None and rel_v[:2] > last_xla[:2]
    where = family or "an unknown instance"
    neuron = f"Neuron {release[0]} (from its {release[1]})" if release else "Neuron release unknown"
    pyv = T.major_minor(py.python)
    versions = f"torch {torch or '-'}, torch-neuronx {tnx or '-'}, Python {py.python or '?'}, {where}, {neuron}"
    fam_row = T.instance_family(family)
    if family in ("trn1", "trn1n") and after_xla:
        return Check("compatibility", NAME, "warn",
                     f"{versions}: {family} runs only the XLA path, and Neuron no longer supports XLA training "
                     f"after {table['xla_training_last_release']}: no supported training path here",
                     "train on trn2 / trn3 with TorchNeuron, or keep this trn1 on Neuron 2.29 (torch-neuronx "
                     "2.9.0.2.13.*, torch-xla 2.9)")
    if fam is not None and fam["kind"] == "xla":
        if after_xla:
            return Check("compatibility", NAME, "warn",
                         f"XLA path ({versions}): PyTorch/XLA training is not supported from Neuron 2.30 on", MOVE)
        return Check("compatibility", NAME, "ok" if release else "warn",
                     f"XLA path ({versions})" + ("" if release else ": XLA training is supported up to Neuron "
                                                 f"{table['xla_training_last_release']} only"),
                     "" if release else "check this machine's Neuron release is 2.29 or older, or " + MOVE)
    if fam is not None:  # native
        if pyv is not None and pyv < min_py:
            return Check("compatibility", NAME, "warn", f"TorchNeuron ({versions}): it needs Python "
                         f"{table['torchneuron_min_python']}+", "make a venv with Python 3.12, 3.13 or 3.14")
        return Check("compatibility", NAME, "ok", f"TorchNeuron, native neuron device ({versions})")
    if fam_row is not None and "native" in fam_row["paths"] and pyv is not None and pyv < min_py:
        return Check("compatibility", NAME, "warn",
                     f"no torch-neuronx ({versions}): TorchNeuron, the training path on {family}, needs Python "
                     f"{table['torchneuron_min_python']}+", "make a venv with Python 3.12, 3.13 or 3.14, then "
                                                           "pip install torch-neuronx")
    return Check("compatibility", NAME, "skip", f"no torch-neuronx in the workload's interpreter ({versions})")
