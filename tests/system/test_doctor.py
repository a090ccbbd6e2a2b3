"""`neurondesk doctor`: each check on a fake machine (a fake root for /dev, /sys, /proc and /etc; fake
neuron-ls, dpkg-query, rpm and interpreters on PATH), and for real on this machine (no Neuron here).

The 2.34 `neuron-ls --output-format json` shape is composed: the announcement says it wraps the
devices with top-level instance fields; its exact keys were not published in what we read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO

from neurondesk.doctor.check import Check, exit_code
from neurondesk.doctor.run import Options, run_doctor

TRN1_JSON = (FIXTURES / "neuron-ls-trn1.2xlarge.json").read_text()
TRN1_TABLE = (FIXTURES / "neuron-ls-trn1.2xlarge.txt").read_text()
NO_DRIVER = (FIXTURES / "neuron-ls-no-driver.stderr.txt").read_text()
GOOD_SYSTEM = {"aws-neuronx-dkms": "2.29.0.0", "aws-neuronx-runtime-lib": "2.33.10.0",
               "aws-neuronx-collectives": "2.33.10.0", "aws-neuronx-tools": "2.31.13.0"}
GOOD_PYTHON = {"torch": "2.9.0", "torch-neuronx": "2.9.0.2.15.32035", "torch-xla": "2.9.0",
               "neuronx-cc": "2.26.6360.0", "libneuronxla": "3.0.3854.0"}


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


class Machine:
    """A fake root and a bin folder that is the whole PATH."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.root, self.bin = tmp, tmp / "root", tmp / "bin"
        self.bin.mkdir()
        (self.root / "dev").mkdir(parents=True)
        (self.root / "proc").mkdir()
        (self.root / "proc" / "modules").write_text("ext4 1 0 - Live 0x0\n")
        (self.root / "etc").mkdir()
        self.os_release("ubuntu", "22.04")
        self.env = {"PATH": str(self.bin), "HOME": str(tmp), "NEURONDESK_HOME": str(tmp / "nd"),
                    "AWS_EC2_METADATA_DISABLED": "true", "NEURON_CC_FLAGS": f"--cache_dir={tmp / 'cache'}"}

    def os_release(self, os_id: str, version: str) -> None:
        (self.root / "etc" / "os-release").write_text(f'ID={os_id}\nVERSION_ID="{version}"\nPRETTY_NAME="{os_id} {version}"\n')

    def devices(self, n: int, driver: str | None = "2.29.0.0") -> None:
        for i in range(n):
            (self.root / "dev" / f"neuron{i}").write_text("")
        mod = self.root / "sys" / "module" / "neuron"
        mod.mkdir(parents=True)
        if driver:
            (mod / "version").write_text(driver + "\n")

    def neuron_ls(self, *, new_json: str | None = None, old_json: str | None = TRN1_JSON, table: str = TRN1_TABLE,
                  fail: str | None = None) -> None:
        data = self.tmp / "ls"
        data.mkdir(exist_ok=True)
        for name, text in (("new", new_json), ("old", old_json), ("table", table), ("err", fail)):
            if text is not None:
                (data / name).write_text(text)
        body = ""
        if fail is not None:
            body += f"/bin/cat {data / 'err'} >&2; exit 1\n"
        body += ('if [ "$1" = "--output-format" ]; then '
                 + (f"/bin/cat {data / 'new'}; exit 0" if new_json else "echo 'usage: neuron-ls [-j]'; exit 2")
                 + "; fi\n")
        body += ('if [ "$1" = "--json-output" ]; then '
                 + (f"/bin/cat {data / 'old'}; exit 0" if old_json else "echo 'usage: neuron-ls'; exit 0")
                 + "; fi\n")
        body += f"/bin/cat {data / 'table'}\n"
        script(self.bin / "neuron-ls", body)

    def dpkg(self, versions: dict[str, str]) -> None:
        lines = "".join(f"{k}\\tii \\t{v}\\n" for k, v in versions.items())
        script(self.bin / "dpkg-query", f"printf '{lines}'\n")

    def python(self, packages: dict[str, str | None], version: str = "3.11.7", name: str = "python") -> Path:
        out = json.dumps({"python": version, "executable": "/fake/python", "packages": packages})
        return script(self.bin / name, f"echo 'neurondesk-versions: {out}'\n")

    def options(self, **kw) -> Options:
        kw.setdefault("imds", lambda: None)
        kw.setdefault("min_free_bytes", 0)
        return Options(root=self.root, env=self.env, path=str(self.bin), run_root=self.tmp / "runs", **kw)


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


@pytest.fixture
def m(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def healthy(m: Machine) -> None:
    m.devices(1)
    m.neuron_ls()
    m.dpkg(GOOD_SYSTEM)
    m.python(GOOD_PYTHON)


def test_a_trn1_on_neuron_2_31_is_sound_but_has_no_supported_training_path(m: Machine) -> None:
    """Every package agrees, yet XLA training ended with Neuron 2.29 and trn1 runs only XLA (issue 44)."""
    healthy(m)
    checks = run_doctor(m.options(instance_type="trn1.2xlarge"))
    bad = [c for c in checks if c.status in ("warn", "fail")]
    assert [c.name for c in bad] == ["training path"] and exit_code(checks) == 1
    assert bad[0].found == ("torch 2.9.0, torch-neuronx 2.9.0.2.15.32035, Python 3.11.7, trn1, Neuron 2.31.0 (from its "
                            "runtime 2.33.10.0): trn1 runs only the XLA path, and Neuron no longer supports XLA "
                            "training after 2.29: no supported training path here")
    assert "keep this trn1 on Neuron 2.29" in bad[0].todo
    c = by_name(checks)
    assert c["neuron-ls"].found == "1 device(s), 2 NeuronCores (2 per device), read with --json-output"
    assert c["driver ↔ runtime"].found == "driver 2.29.0.0, runtime 2.33.10.0 (driver needs 2.33+)"
    assert c["torch ↔ torch-neuronx"].found == "torch 2.9.0 with torch-neuronx 2.9.0.2.15.32035 (xla)"
    assert c["cores per device"].status == "ok"
    assert c["instance type"].found.startswith("trn1.2xlarge (from --instance-type), Trainium")


def test_neuron_ls_2_34_json_first_then_the_table_when_no_json_flag_works(m: Machine) -> None:
    m.devices(1)
    wrapped = json.dumps({"instance_type": "trn1.2xlarge", "neuron_devices": json.loads(TRN1_JSON)})
    m.neuron_ls(new_json=wrapped)
    assert by_name(run_doctor(m.options()))["neuron-ls"].found.endswith("read with --output-format json")
    m.neuron_ls(new_json=None, old_json=None)  # an old neuron-ls: usage text for both flags
    assert by_name(run_doctor(m.options()))["neuron-ls"].found.endswith("read with table")


def test_instance_type_from_neuron_ls_when_not_given(m: Machine) -> None:
    m.devices(1)
    m.neuron_ls(new_json=json.dumps([{**json.loads(TRN1_JSON)[0], "instance_type": "trn1.2xlarge"}]))
    assert by_name(run_doctor(m.options()))["instance type"].found.startswith("trn1.2xlarge (from neuron-ls)")


def test_no_driver_says_so_and_what_to_do(m: Machine) -> None:
    m.neuron_ls(fail=NO_DRIVER)
    checks = run_doctor(m.options())
    c = by_name(checks)
    assert c["device files"].status == "fail"
    assert c["device files"].found.startswith("No Neuron device")
    assert "modprobe neuron" in c["device files"].todo
    assert c["kernel module"].status == "fail"
    assert c["neuron-ls"].status == "fail" and "failed to discover Neuron devices" in c["neuron-ls"].found
    assert exit_code(checks) == 2


def test_module_loaded_without_device_files_is_a_container_without_devices(m: Machine) -> None:
    (m.root / "proc" / "modules").write_text("neuron 4096 0 - Live 0x0\n")
    c = by_name(run_doctor(m.options()))
    assert c["kernel module"].status == "ok" and "/proc/modules" in c["kernel module"].found
    assert c["device files"].status == "fail" and "--device=/dev/neuron0" in c["device files"].todo


def test_a_driver_newer_than_its_runtime_fails_with_the_release_that_pairs_them(m: Machine) -> None:
    healthy(m)
    m.dpkg({**GOOD_SYSTEM, "aws-neuronx-runtime-lib": "2.32.31.0"})
    c = by_name(run_doctor(m.options()))["driver ↔ runtime"]
    assert c.status == "fail"
    assert c.found == ("driver 2.29.0.0 needs runtime 2.33 or later (as in Neuron 2.31.0); runtime 2.32.31.0 is "
                       "older, so nrt_init() fails")


def test_a_driver_not_in_the_table_is_said_not_guessed(m: Machine) -> None:
    healthy(m)
    m.dpkg({**GOOD_SYSTEM, "aws-neuronx-dkms": "2.40.1.0"})
    c = by_name(run_doctor(m.options()))["driver ↔ runtime"]
    assert c.status == "skip" and "not in the bundled table (newest there: 2.31" in c.found


def test_torch_and_torch_xla_must_match_the_xla_family(m: Machine) -> None:
    healthy(m)
    m.python({**GOOD_PYTHON, "torch": "2.8.0", "torch-xla": "2.8.0"})
    c = by_name(run_doctor(m.options()))
    assert c["torch ↔ torch-neuronx"].status == "fail"
    assert "needs torch 2.9.0; torch is 2.8.0" in c["torch ↔ torch-neuronx"].found
    assert c["torch-xla"].status == "fail" and "it needs torch-xla 2.9" in c["torch-xla"].found


def test_torchneuron_native_only_on_trn2_trn3_and_its_python_and_ubuntu(m: Machine) -> None:
    healthy(m)
    m.python({"torch": "2.14.0", "torch-neuronx": "2.14.3.0.1234"}, version="3.11.7")
    c = by_name(run_doctor(m.options(instance_type="trn1.32xlarge")))
    assert c["torch ↔ torch-neuronx"].status == "ok"
    assert c["TorchNeuron on this instance"].status == "fail" and "trn2/trn3 only; this is trn1" in \
        c["TorchNeuron on this instance"].found
    assert c["Python version"].status == "fail" and "supports 3.12, 3.13, 3.14" in c["Python version"].found
    assert c["OS release"].status == "warn" and "Ubuntu 22.04" in c["OS release"].found
    m.python({"torch": "2.14.0", "torch-neuronx": "2.14.3.0.1234"}, version="3.12.3")
    m.os_release("ubuntu", "24.04")
    c = by_name(run_doctor(m.options(instance_type="trn2.48xlarge")))
    assert "TorchNeuron on this instance" not in c
    assert c["Python version"].status == "ok" and c["OS release"].status == "ok"
    m.python({"torch": "2.13.1", "torch-neuronx": "2.14.3.0.1234"}, version="3.12.3")
    assert "needs torch 2.14.0; torch is 2.13.1" in by_name(run_doctor(m.options()))["torch ↔ torch-neuronx"].found


def test_an_interpreter_that_hangs_is_one_line_after_the_timeout(m: Machine) -> None:
    healthy(m)
    hang = script(m.bin / "slowpy", "exec /bin/sleep 60\n")
    c = by_name(run_doctor(m.options(python=str(hang), timeout=1)))["workload interpreter"]
    assert c.status == "fail"
    assert c.found.startswith(f"{hang} did not answer within 1 s when asked its package versions")
    assert "\n" not in c.found


def test_an_interpreter_that_is_not_python_or_is_missing(m: Machine) -> None:
    healthy(m)
    junk = script(m.bin / "notpy", "echo hello; exit 3\n")
    c = by_name(run_doctor(m.options(python=str(junk))))["workload interpreter"]
    assert c.status == "fail" and "did not say its versions (hello)" in c.found
    c = by_name(run_doctor(m.options(python="python9")))["workload interpreter"]
    assert c.status == "fail" and c.found.startswith("python9 on PATH: no interpreter to ask")


def test_the_real_interpreter_is_asked_in_a_subprocess_without_importing(m: Machine) -> None:
    """This test's own interpreter answers for real: the versions come from package metadata."""
    healthy(m)
    c = by_name(run_doctor(m.options(python=sys.executable)))["workload interpreter"]
    assert f"Python {sys.version.split()[0]}" in c.found


def test_rpm_when_there_is_no_dpkg(m: Machine) -> None:
    m.python(GOOD_PYTHON)
    script(m.bin / "rpm", "printf 'aws-neuronx-dkms\\t2.29.0.0\\naws-neuronx-runtime-lib\\t2.33.10.0\\n'\n")
    c = by_name(run_doctor(m.options()))
    sysc = c["system packages (rpm)"]
    assert "aws-neuronx-dkms 2.29.0.0" in sysc.found and "not installed: aws-neuronx-collectives" in sysc.found
    assert c["driver ↔ runtime"].status == "ok"


def test_environment_variables(m: Machine) -> None:
    healthy(m)
    m.env.update({"NEURON_RT_VISIBLE_CORES": "0-5", "XLA_USE_BF16": "1", "PJRT_DEVICE": "CPU",
                  "NEURON_PARALLEL_COMPILE": "true"})
    c = by_name(run_doctor(m.options()))
    assert c["NEURON_RT_VISIBLE_CORES"].status == "fail"
    assert "names cores [2, 3, 4, 5] that do not exist here (cores 0-1)" in c["NEURON_RT_VISIBLE_CORES"].found
    assert c["XLA_USE_BF16"].status == "warn" and "precision" in c["XLA_USE_BF16"].found
    assert c["PJRT_DEVICE"].status == "warn"
    assert c["NEURON_PARALLEL_COMPILE"].status == "warn"
    m.env["NEURON_RT_VISIBLE_CORES"] = "1"
    assert by_name(run_doctor(m.options()))["NEURON_RT_VISIBLE_CORES"].status == "ok"


def test_disk_warns_under_the_floor_and_sizes_the_cache(m: Machine) -> None:
    healthy(m)
    entry = m.tmp / "cache" / "neuronxcc-2.26.6360.0" / "MODULE_1+abc"
    entry.mkdir(parents=True)
    (entry / "model.neff").write_bytes(b"x" * 2048)
    c = by_name(run_doctor(m.options(min_free_bytes=1 << 62)))
    assert c["compile cache"].status == "warn"
    assert "cache 2.0 KiB, 1 entries" in c["compile cache"].found
    assert c["run folders"].status == "warn" and "(same filesystem as compile cache)" in c["run folders"].found


def test_script_findings_are_in_the_advice(m: Machine, tmp_path: Path) -> None:
    healthy(m)
    s = tmp_path / "train.py"
    s.write_text("import torch_xla\nfor x in data:\n    loss = model(x).mean()\n    loss.backward()\n    opt.step()\n")
    c = [x for x in run_doctor(m.options(script=[str(s)])) if x.area == "script"]
    assert [(x.name, x.status) for x in c] == [(f"{s}:2", "warn")]
    assert c[0].found.startswith("[error] a training loop on an XLA device")


# ------------------------------------------------------------------ the command


def nd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          timeout=180, cwd=REPO, env=env)


def test_the_command_on_a_fake_root_json_and_exit(m: Machine) -> None:
    healthy(m)
    env = {**m.env, "NEURONDESK_DOCTOR_ROOT": str(m.root), "PYTHONPATH": str(REPO)}
    p = nd("doctor", "--json", "--instance-type", "trn1.2xlarge", env=env)
    data = json.loads(p.stdout)
    assert p.returncode == data["exit"]
    assert {c["name"]: c["status"] for c in data["checks"]}["neuron-ls"] == "ok"
    assert {t["table"] for t in data["tables"]} == {"releases", "driver_runtime", "torch_neuronx", "training_paths",
                                                    "instances"}


@pytest.mark.skipif(os.path.exists("/dev/neuron0") or os.path.isdir("/sys/module/neuron"),
                    reason="this machine has Neuron")
def test_for_real_on_this_machine_no_neuron_exit_2() -> None:
    p = nd("doctor")
    assert p.returncode == 2, p.stdout + p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("neurondesk doctor: not ready: no Neuron device on this machine")
    assert "FAIL  device files" in p.stdout
    assert "No Neuron device: no /dev/neuron* and the neuron kernel module is not loaded" in p.stdout


def test_tables_list_their_dates_and_sources() -> None:
    p = nd("doctor", "--tables")
    assert p.returncode == 0
    assert p.stdout.count("checked 2026-12-01") == 4
    assert "source: AWS Neuron release content pages" in p.stdout
    assert "Neuron 2.34.0 (2026-11-30) is not listed" in p.stdout


def test_cores_per_device_against_the_family_logical_cores_counted_whole(m: Machine) -> None:
    m.devices(1)
    trn2 = [{"neuron_device": 0, "nc_count": 4, "logical_neuroncore_config": 2, "neuroncore_ids": [0, 1, 2, 3],
             "memory_size": 103079215104, "neuron_processes": []}]
    m.neuron_ls(new_json=json.dumps(trn2))
    c = by_name(run_doctor(m.options(instance_type="trn2.48xlarge")))
    assert c["cores per device"].status == "ok" and c["cores per device"].found == "8 per device, as trn2 has"
    assert "logical NeuronCore config 2" in c["neuron-ls"].found
    one = [{**json.loads(TRN1_JSON)[0], "nc_count": 1, "neuroncore_ids": [0]}]
    m.neuron_ls(new_json=json.dumps(one))
    c = by_name(run_doctor(m.options(instance_type="trn1.2xlarge")))["cores per device"]
    assert c.status == "warn" and c.found == "1 device(s) report 1 NeuronCores; trn1 has 2 per device"


def test_an_instance_that_is_not_neuron_is_said(m: Machine) -> None:
    c = by_name(run_doctor(m.options(instance_type="g5.xlarge")))["instance type"]
    assert c.status == "warn" and c.found == "g5.xlarge (from --instance-type): not a Trainium or Inferentia instance"
    c = by_name(run_doctor(m.options(instance_type="inf1.xlarge")))["instance type"]
    assert c.status == "warn" and "not training" in c.found


# ------------------------------------------------------------------ the training path (issue 44 item 7)

NEURON_2_29 = {"aws-neuronx-dkms": "2.26.10.0", "aws-neuronx-runtime-lib": "2.31.24.0",
               "aws-neuronx-collectives": "2.31.24.0", "aws-neuronx-tools": "2.29.0.0"}


def test_trn1_on_neuron_2_29_is_the_supported_xla_path_all_ok(m: Machine) -> None:
    m.devices(1, driver="2.26.10.0")
    m.neuron_ls()
    m.dpkg(NEURON_2_29)
    m.python({**GOOD_PYTHON, "torch-neuronx": "2.9.0.2.13.24727"})
    checks = run_doctor(m.options(instance_type="trn1.2xlarge"))
    c = by_name(checks)["training path"]
    assert c.status == "ok" and c.found == ("XLA path (torch 2.9.0, torch-neuronx 2.9.0.2.13.24727, Python 3.11.7, "
                                            "trn1, Neuron 2.29.0 (from its runtime 2.31.24.0))")
    assert exit_code(checks) == 0


def test_xla_training_on_trn2_after_2_29_is_unsupported_with_the_way_out(m: Machine) -> None:
    healthy(m)
    c = by_name(run_doctor(m.options(instance_type="trn2.48xlarge")))["training path"]
    assert c.status == "warn" and c.found.startswith("XLA path (") and "not supported from Neuron 2.30 on" in c.found
    assert "move to TorchNeuron" in c.todo


def test_torchneuron_is_said_with_its_versions_and_python_below_3_12_is_unsupported(m: Machine) -> None:
    healthy(m)
    m.os_release("ubuntu", "24.04")
    m.python({"torch": "2.14.0", "torch-neuronx": "2.14.3.0.1234"}, version="3.12.3")
    c = by_name(run_doctor(m.options(instance_type="trn2.48xlarge")))["training path"]
    assert c.status == "ok" and c.found.startswith("TorchNeuron, native neuron device (torch 2.14.0, torch-neuronx "
                                                   "2.14.3.0.1234, Python 3.12.3, trn2, ")
    m.python({"torch": "2.14.0", "torch-neuronx": "2.14.3.0.1234"}, version="3.11.7")
    c = by_name(run_doctor(m.options(instance_type="trn2.48xlarge")))["training path"]
    assert c.status == "warn" and "it needs Python 3.12+" in c.found
    m.python({"torch": "2.13.0"}, version="3.11.7")  # not installed yet: where TorchNeuron is the way, say so
    c = by_name(run_doctor(m.options(instance_type="trn2.48xlarge")))["training path"]
    assert c.status == "warn" and "TorchNeuron, the training path on trn2, needs Python 3.12+" in c.found
    m.python({"torch": "2.13.0"}, version="3.12.3")
    assert by_name(run_doctor(m.options(instance_type="trn2.48xlarge")))["training path"].status == "skip"
