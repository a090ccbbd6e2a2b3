"""Which sinks a run has (``--tensorboard``, ``--mlflow``, ``--wandb``), each built only when asked for:
its library is imported then, and a missing one is one line that says what to install."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from neurondesk.sinks.base import Sink, SinkError

LIBRARIES = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}
INSTALL = "pip install 'neurondesk[sinks]'"


def missing_library(kind: str) -> str | None:
    """The one line for a sink whose library is not installed here, or None."""
    module = LIBRARIES[kind]
    if importlib.util.find_spec(module) is None:
        return f"--{kind}: the {module} package is not installed in neurondesk's environment ({INSTALL})"
    return None


def make_sinks(env: dict[str, str], run_dir: Path, tensorboard: str | None = None, mlflow: str | None = None,
               wandb: str | None = None) -> list[Sink]:
    """The sinks asked for; SinkError (one line) for one that cannot be had."""
    sinks: list[Sink] = []
    for kind, value in (("tensorboard", tensorboard), ("mlflow", mlflow), ("wandb", wandb)):
        if not value:
            continue
        why = missing_library(kind)
        if why:
            raise SinkError(why)
        if kind == "tensorboard":
            from neurondesk.sinks.tensorboard_sink import TensorBoardSink

            sinks.append(TensorBoardSink(value, env))
        elif kind == "mlflow":
            from neurondesk.sinks.mlflow_sink import MlflowSink

            sinks.append(MlflowSink(value, env))
        else:
            from neurondesk.sinks.wandb_sink import WandbSink

            sinks.append(WandbSink(value, env, run_dir))
    return sinks
