"""doctor where TorchNeuron is the training path (issue 50 item 6): the NEFF cache folder
(TORCH_NEURONX_NEFF_CACHE_DIR, else /tmp/neff_cache) in place of the XLA compile cache, the cache switch
under both spellings, and TorchNeuron's variables (TORCH_NEURONX_*, NEURON_RT_*, the metrics switch) in
place of the XLA path's. On a fake machine (test_doctor.py's: a fake root, fake tools on PATH); the
TorchNeuron interpreter is a stand-in that answers its package versions."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_doctor import GOOD_SYSTEM, TRN1_JSON, Machine, by_name

from neurondesk.doctor.run import run_doctor

TORCHNEURON = {"torch": "2.14.0", "torch-neuronx": "2.14.3.0.1234"}


@pytest.fixture
def tn(tmp_path: Path) -> Machine:
    m = Machine(tmp_path)
    m.devices(1)
    m.neuron_ls(old_json=TRN1_JSON)
    m.dpkg(GOOD_SYSTEM)
    m.os_release("ubuntu", "24.04")
    m.python(TORCHNEURON, version="3.12.3")
    return m


def test_the_neff_cache_folder_is_checked_not_the_xla_compile_cache(tn: Machine) -> None:
    neff = tn.tmp / "neff"
    (neff / "k1").mkdir(parents=True)
    (neff / "k1" / "graph.neff").write_bytes(b"n" * 4096)
    (neff / "k1" / "meta.json").write_bytes(b"{}")
    tn.env["TORCH_NEURONX_NEFF_CACHE_DIR"] = str(neff)
    checks = run_doctor(tn.options(instance_type="trn2.48xlarge"))
    c = by_name(checks)
    assert by_name(checks)["training path"].found.startswith("TorchNeuron")
    assert "compile cache" not in c  # NEURON_CC_FLAGS' --cache_dir is the XLA path's, not written here
    assert c["NEFF cache"].found.startswith(f"{neff}: ") and "NEFF cache 4.0 KiB, 1 NEFF" in c["NEFF cache"].found
    low = by_name(run_doctor(tn.options(instance_type="trn2.48xlarge", min_free_bytes=1 << 62)))["NEFF cache"]
    assert low.status == "warn" and "TORCH_NEURONX_NEFF_CACHE_DIR=" in low.todo and "NEURON_CC_FLAGS" not in low.todo


def test_the_default_neff_cache_folder_when_none_is_set(tn: Machine) -> None:
    c = by_name(run_doctor(tn.options(instance_type="trn2.48xlarge")))["NEFF cache"]
    assert c.found.startswith("/tmp/neff_cache: ")


@pytest.mark.parametrize("name", ["TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE"])
def test_either_spelling_of_the_cache_switch_is_said(tn: Machine, name: str) -> None:
    tn.env[name] = "1"
    c = by_name(run_doctor(tn.options(instance_type="trn2.48xlarge")))["NEFF cache switch"]
    assert c.status == "warn" and f"{name}=1" in c.found and "every run compiles every NEFF anew" in c.found
    tn.env[name] = "0"
    assert by_name(run_doctor(tn.options()))["NEFF cache switch"].status == "ok"


def test_the_two_spellings_disagreeing_is_said(tn: Machine) -> None:
    tn.env.update({"TORCH_NEURONX_NEFF_DISABLE_CACHE": "1", "TORCH_NEURONX_DISABLE_NEFF_CACHE": "0"})
    c = by_name(run_doctor(tn.options()))["NEFF cache switch"]
    assert c.status == "warn" and "the two spellings disagree" in c.found


def test_torchneuron_variables_are_listed_and_the_xla_ones_are_not_checked(tn: Machine) -> None:
    tn.env.update({"TORCH_NEURONX_LOG_LEVEL": "2", "NEURON_RT_LOG_LEVEL": "INFO", "XLA_USE_BF16": "1",
                   "PJRT_DEVICE": "CPU"})
    c = by_name(run_doctor(tn.options(instance_type="trn2.48xlarge")))
    listed = c["TorchNeuron variables"].found
    assert "TORCH_NEURONX_LOG_LEVEL=2" in listed and "NEURON_RT_LOG_LEVEL=INFO" in listed
    assert "XLA_USE_BF16" not in c and "PJRT_DEVICE" not in c  # the XLA path's own checks
    assert c["XLA-path variables"].status == "warn" and "TorchNeuron does not read" in c["XLA-path variables"].found
    assert c["TORCH_NEURONX_METRICS_ENABLED"].status == "ok" and "neurondesk sets" in \
        c["TORCH_NEURONX_METRICS_ENABLED"].found


def test_metrics_switched_off_is_said_with_what_it_costs(tn: Machine) -> None:
    tn.env["TORCH_NEURONX_METRICS_ENABLED"] = "0"
    c = by_name(run_doctor(tn.options()))["TORCH_NEURONX_METRICS_ENABLED"]
    assert c.status == "warn" and "from the NEFF cache log alone" in c.found


def test_the_xla_path_keeps_its_compile_cache_and_variables(tn: Machine) -> None:
    tn.python({"torch": "2.9.0", "torch-neuronx": "2.9.0.2.15.32035", "torch-xla": "2.9.0"})
    tn.env.update({"XLA_USE_BF16": "1", "TORCH_NEURONX_NEFF_DISABLE_CACHE": "1"})
    c = by_name(run_doctor(tn.options()))
    assert "compile cache" in c and "NEFF cache" not in c and "TorchNeuron variables" not in c
    assert c["XLA_USE_BF16"].status == "warn"


def test_trn2_without_torch_neuronx_yet_is_checked_as_the_torchneuron_path(tn: Machine) -> None:
    """training_path says TorchNeuron is the way there; the cache and variables follow it."""
    tn.python({"torch": "2.13.0"}, version="3.12.3")
    c = by_name(run_doctor(tn.options(instance_type="trn2.48xlarge")))
    assert "NEFF cache" in c and "compile cache" not in c and "TorchNeuron variables" in c
    c = by_name(run_doctor(tn.options(instance_type="trn1.2xlarge")))  # trn1 runs only the XLA path
    assert "compile cache" in c and "NEFF cache" not in c
