"""A compile inside a framework that runs the user's loop (Hugging Face Trainer, Lightning) is
located at the user's own line and names the framework's frame beside it, even when the framework
is a source checkout outside site-packages (it was taken for the user's code): 'in transformers
Trainer.evaluation_loop at trainer.py:N, called from run_trainer.py:6'. A real XLA CPU run of a
stand-in `transformers` package (tests/data/fake_framework/)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import DATA, REAL_RUN_TIMEOUT_S, REPO, Run, base_env, needs_xla

FAKE = DATA / "fake_framework"


@needs_xla
def test_compiles_in_a_framework_name_its_frame_and_the_users_line(tmp_path):
    env = base_env(tmp_path)
    env["PYTHONPATH"] = str(FAKE)
    run_dir = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1",
                        "--run-dir", str(run_dir), "--", sys.executable, str(FAKE / "run_trainer.py")],
                       capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    run = Run(p.returncode, p.stdout, p.stderr, run_dir)
    assert run.returncode == 0, run.stderr[-2000:]
    compiles = run.summary["compiles"]
    assert compiles and all(c["location"] == f"{FAKE / 'run_trainer.py'}:6" for c in compiles)
    libs = {c["library"].rsplit(":", 1)[0] for c in compiles}
    assert libs <= {"transformers Trainer.train at trainer.py", "transformers Trainer.evaluation_loop at trainer.py"}
    assert "transformers Trainer.evaluation_loop at trainer.py" in libs
    md = (run_dir / "summary.md").read_text()
    assert "in transformers Trainer.evaluation_loop at trainer.py:" in md and "called from " in md


@needs_xla
def test_a_value_read_inside_a_library_is_advised_as_the_librarys_and_torch_xla_sees_no_frame_of_ours(tmp_path):
    """tests/data/workloads/library_value_read.py: the stand-in transformers model's forward calls its
    masking_utils, which reads the mask's value (`bool(mask.all())`) on an XLA tensor each step. With
    the user's PT_XLA_DEBUG_LEVEL=1, torch_xla's report of that compile tops with the library's own
    frame (no probe wrapper above it) and counts what neurondesk counts; the advice names the library
    function and its caller, and says the line is not the user's (no step closure to place)."""
    env = base_env(tmp_path)
    env["PYTHONPATH"] = str(FAKE)
    env["PT_XLA_DEBUG_LEVEL"] = "1"
    run_dir = tmp_path / "run"
    script = DATA / "workloads" / "library_value_read.py"
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1",
                        "--run-dir", str(run_dir), "--", sys.executable, str(script)],
                       capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    run = Run(p.returncode, p.stdout, p.stderr, run_dir)
    assert run.returncode == 0, run.stderr[-2000:]
    line = next(x for x in (run_dir / "stdout.log").read_text().splitlines() if x.startswith("pattern-truth: "))
    truth = json.loads(line.split(": ", 1)[1])
    s = run.summary
    report = (run_dir / "stderr.log").read_text()
    assert report.count("Compilation Cause") == truth["xla_compiles"] == s["compile_count"]
    block = report.split("most likely user code trying to access tensor value", 1)[1]
    top = next(x for x in block.splitlines() if x.startswith("Compilation Analysis:   ") and " (/" in x)
    assert top.split()[2] == "mask_has_no_padding" and top.endswith("masking_utils.py:7)")
    # no frame of ours in torch_xla's report: not the value reads', nor torch_xla.sync's (the user's and
    # MpDeviceLoader's), PerDeviceLoader.next's or the module call's hooks (callthrough.py); between the
    # user's model(x) line and the model's forward, torch's own Module._call_impl, as without neurondesk
    assert "_neurondesk_probe" not in report
    frames = [x.split()[2] for x in block.split("\n\n", 1)[0].splitlines() if x.startswith("Compilation Analysis:   ")]
    assert frames.index("_call_impl") < frames.index("<module>"), frames
    (read,) = [a for a in s["advice"] if a["kind"] == "value-access"]
    assert read["location"] == f"{script}:20"
    assert read["library"] == "transformers mask_has_no_padding at masking_utils.py:7"
    assert read["called_from"] == "TinyModel.forward at modeling_tiny.py:15"
    assert read["count"] == truth["steps"]
    assert "not a line of yours" in read["message"] and "add_step_closure" not in read["message"]
    md = (run_dir / "summary.md").read_text()
    assert "in transformers mask_has_no_padding at masking_utils.py:7, called from TinyModel.forward" in md
