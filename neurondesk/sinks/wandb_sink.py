"""``--wandb PROJECT``: a Weights & Biases run of the neurondesk run, offline unless the user is logged in.

Mode: ``WANDB_MODE`` of the workload's environment when set; else online when an API key is there
(``WANDB_API_KEY``: W&B's own variable, so nothing secret is on a command line; never in what the sink
says), offline otherwise: the run's files go to ``RUN_DIR/wandb/`` (or ``WANDB_DIR``) and
``wandb sync`` uploads them later. The metrics are every sink's (``neurondesk/...`` at the job's step),
the run's params and tags its config, the compiles a table (``neurondesk/compiles``) and summary.json /
summary.md / report.html an artifact, at the end.

Never a second run beside the script's: with ``WANDB_RUN_ID`` in the workload's environment the
script (or its launcher) has chosen its W&B run, and two writers of one run id clash (offline, each
writes a history of its own for the same steps). The sink refuses then, in one line
(``SinkError``): the workload's run is left alone; run without ``--wandb``, or unset WANDB_RUN_ID for
neurondesk's own run beside it (same project, ``job_type`` neurondesk, grouped by WANDB_RUN_GROUP).

Never a folder the user did not point at: W&B falls back to the system's temporary folder (``/tmp/wandb``)
when its folder cannot be written, and that folder may be another user's (made first, mode 0777). A
``WANDB_DIR`` this user cannot write is refused in one line before the run (cli/sinks.py), and a folder
that cannot be written when the sink opens is this sink's one failure line, never W&B's fallback. Never a secret: W&B's
own metadata (the recorder's argv, where the workload's command line stands, ``--hf-token X`` and all) is
not collected (``x_disable_meta``), and the config and artifacts it gets are scrubbed (sinks/base.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from neurondesk.sinks.base import SinkError
from neurondesk.sinks.frames import Frame, RunEnd, RunInfo, scalars
from neurondesk.sinks.redact import secret_values

COMPILE_COLUMNS = ["index", "step", "cause", "reason", "location", "duration_s", "status", "recompile", "source"]


def refusal(env: dict[str, str], folder: Path | None = None) -> str | None:
    """Why neurondesk opens no W&B run for this workload (one line), or None. ``folder``: where its files go."""
    if env.get("WANDB_RUN_ID"):
        return (f"--wandb: the workload's environment names its own W&B run (WANDB_RUN_ID={env['WANDB_RUN_ID'][:40]}); "
                "neurondesk opens no second run for it: unset WANDB_RUN_ID for neurondesk's run beside it, "
                "or run without --wandb")
    if folder is not None and not writable(folder):
        named = "WANDB_DIR" if env.get("WANDB_DIR") else "the run folder"
        return (f"--wandb: {named} {folder} cannot be written by this user (W&B would write the run to the "
                "shared temporary folder instead, /tmp/wandb, which another user may own): set WANDB_DIR to a "
                "folder of yours, or run without --wandb")
    return None


def writable(folder: Path) -> bool:
    """``folder`` can be made and written by this user: itself, or the nearest folder above it that exists."""
    path = folder.absolute()
    while not path.exists():
        if path.parent == path:
            return False
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK | os.R_OK)


class WandbSink:
    name = "wandb"

    def __init__(self, project: str, env: dict[str, str], run_dir: Path) -> None:
        why = refusal(env)  # (the folder is checked by the command line before the run, and at open)
        if why:
            raise SinkError(why)
        self.dir = Path(env.get("WANDB_DIR") or run_dir)
        self.named = "WANDB_DIR" if env.get("WANDB_DIR") else "the run folder"
        self.project = project
        self.mode = env.get("WANDB_MODE") or ("online" if env.get("WANDB_API_KEY") else "offline")
        self.group = env.get("WANDB_RUN_GROUP") or None
        self.where = f"{project} ({self.mode})"
        self.secrets = secret_values({**os.environ, **env})  # WANDB_API_KEY: never in what the sink says
        self._run = None

    def open(self, info: RunInfo) -> None:
        import wandb

        if not writable(self.dir):  # never W&B's fallback to the shared /tmp/wandb (this sink alone is refused)
            raise SinkError(refusal({"WANDB_DIR": str(self.dir)} if self.named == "WANDB_DIR" else {}, self.dir))
        self.dir.mkdir(parents=True, exist_ok=True)
        # x_disable_meta: no wandb-metadata.json (the argv, where the workload's command and its secrets stand)
        settings = wandb.Settings(console="off", x_disable_stats=True, x_disable_meta=True, silent=True,
                                  save_code=False)
        self._run = wandb.init(project=self.project, name=info.run_id or None, mode=self.mode, dir=str(self.dir),
                               group=self.group, job_type="neurondesk", config={**info.params, **info.tags},
                               settings=settings, reinit="create_new")

    def write(self, frames: list[Frame]) -> None:
        for frame in frames:
            self._run.log(scalars(frame), step=frame.step)

    def close(self, end: RunEnd) -> str:
        import wandb

        run = self._run
        run.config.update({**end.info.params, **end.info.tags}, allow_val_change=True)
        rows = [[c.index, c.step, c.cause, c.reason, c.location, c.duration_s, c.status, c.recompile, c.source]
                for c in end.compiles]
        run.log({"neurondesk/compiles": wandb.Table(columns=COMPILE_COLUMNS, data=rows)}, step=end.frame.step)
        if end.artifacts:
            artifact = wandb.Artifact(f"neurondesk-{end.info.run_id or 'run'}", type="neurondesk-run")
            for name, text in end.artifacts.items():
                with artifact.new_file(name, mode="w") as f:
                    f.write(text)
            run.log_artifact(artifact)
        run.finish(exit_code=0 if end.exit_code is None else end.exit_code)
        if self.mode == "offline":
            return f"wandb sync {Path(run.dir).parent}"
        return f"W&B run {run.url or run.id}"
