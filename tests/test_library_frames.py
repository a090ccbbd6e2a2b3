"""A compile inside a framework that runs the user's loop (Hugging Face Trainer, Lightning) is
located at the user's own line and names the framework's frame beside it, even when the framework
is a source checkout outside site-packages (it was taken for the user's code): 'in transformers
Trainer.evaluation_loop at trainer.py:N, called from run_trainer.py:6'. A real XLA CPU run of a
stand-in `transformers` package (tests/data/fake_framework/)."""

from __future__ import annotations

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
