"""The frameworks' own logged figures, as numbers: transformers' ``Trainer.log`` (its ``logs`` dict:
``loss``, ``train_samples_per_second``; TRL's trainers log through it) and Lightning's logger path
(``_LoggerConnector``: each training batch's progress-bar metrics, and ``log_metrics``, what
``self.log`` sent to the loggers). transformers 5 prints
them quoted (``{'loss': '4.905'}``), a progress bar rounds them: the record does neither. Each is
sent as the ``loss`` / ``throughput`` event the printed line gives, with ``source`` naming the
framework; core prefers the record to the printed text of the same value (core/reduce/loss.py).

The class's method is wrapped (never a callback on the user's Trainer: nothing is left on the
user's objects); the framework's call runs first and untouched, its values are read after it
returned. No tensor is read here that the framework did not read itself: Trainer logs floats;
Lightning's bar metrics are numbers it made, and its connector turns the logged tensors into
scalars for its loggers in the same call (with no logger it reads nothing, neither do we)."""

from __future__ import annotations

import math
import re
import time

from .. import _state

HOOK = "framework-records"
# a training loss a Lightning module logged: loss, train_loss, train/loss, training_loss, with the
# _step suffix on_step=True and on_epoch=True give (the _epoch one is an average, not the last loss)
_LIGHTNING_LOSS = re.compile(r"(?:train(?:ing)?[_/])?loss(?:_step)?", re.IGNORECASE)
# transformers' end-of-training figures over the whole train(): the first one present is sent
_TRAINER_RATES = (("train_samples_per_second", "samples/s"), ("train_steps_per_second", "steps/s"))


def _number(value) -> float | None:
    """A logged value as a float: a Python or numpy number, a one-element tensor already on the host
    side of the framework's own read, or a numeric string; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):  # a tuple, not int | float: the probe loads on Python 3.7+
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        out = item()
        return float(out) if isinstance(out, (int, float)) and not isinstance(out, bool) else None
    return None


class FrameworkRecords:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.lightning_step: int | None = None  # the step whose Lightning loss was sent last

    def patch_transformers(self, module) -> None:
        cls = getattr(module, "Trainer", None)
        if isinstance(cls, type):
            self._wrap(cls, "log", self.trainer_logged)

    def patch_lightning(self, module) -> None:
        cls = getattr(module, "_LoggerConnector", None)
        if isinstance(cls, type):
            self._wrap(cls, "on_batch_end", self.lightning_batch_ended)
            self._wrap(cls, "log_metrics", self.lightning_logged)

    def _wrap(self, owner: type, name: str, read) -> None:
        real = owner.__dict__.get(name)
        if not callable(real) or getattr(real, "_neurondesk", False):
            return
        probe = self.probe

        def call(*args, **kwargs):
            result = real(*args, **kwargs)  # the framework's call first, untouched; its exception is its own
            if not (_state.is_compiling() or probe.disabled or HOOK in probe.off):
                probe.guarded(read, args, kwargs, hook=HOOK)
            return result

        setattr(owner, name, _state.dressed(call, real))

    # ------------------------------------------------------------ what each framework logged
    def trainer_logged(self, args, kwargs) -> None:
        trainer = args[0]
        logs = args[1] if len(args) > 1 else kwargs.get("logs")
        if not isinstance(logs, dict):
            return
        state = getattr(trainer, "state", None)
        if getattr(state, "is_world_process_zero", True) is False:
            return  # every rank logs the same (gathered) values; the one that prints them sends them
        step = getattr(state, "global_step", None)
        step = step if type(step) is int and step >= 0 else None
        loss = _number(logs.get("loss"))
        if loss is not None:
            self.send_loss(loss, step, "transformers")
        for key, unit in _TRAINER_RATES:
            rate = _number(logs.get(key))
            if rate is not None and math.isfinite(rate) and rate > 0:
                self.send_rate(rate, unit, f"Trainer.log: {key} {rate:g}", "transformers")
                break

    def lightning_batch_ended(self, args, kwargs) -> None:
        """After each training batch: the progress bar's metrics, which Lightning has just turned into
        Python numbers itself (what its bar prints, rounded)."""
        connector = args[0]
        self._lightning_loss(getattr(connector, "trainer", None), getattr(connector, "_progress_bar_metrics", None))

    def lightning_logged(self, args, kwargs) -> None:
        """What went to the loggers (a loss logged with prog_bar=False is only here): Lightning turns
        these into scalars for its loggers in this same call; with no logger it reads nothing."""
        connector = args[0]
        metrics = args[1] if len(args) > 1 else kwargs.get("metrics")
        trainer = getattr(connector, "trainer", None)
        if getattr(trainer, "loggers", None):
            self._lightning_loss(trainer, metrics)

    def _lightning_loss(self, trainer, metrics) -> None:
        if not isinstance(metrics, dict) or trainer is None or getattr(trainer, "is_global_zero", True) is False:
            return  # another rank's: the one whose bar shows the loss sends it
        stage = getattr(getattr(trainer, "state", None), "stage", None)
        if getattr(stage, "value", stage) != "train":
            return  # validation, test and predict log their own losses: not training's
        step = getattr(trainer, "global_step", None)
        step = step if type(step) is int and step >= 0 else None
        if step is not None and step == self.lightning_step:
            return  # the bar's value of this step was sent: the loggers' is the same one
        for key, value in metrics.items():
            if isinstance(key, str) and _LIGHTNING_LOSS.fullmatch(key):
                loss = _number(value)
                if loss is not None:
                    self.lightning_step = step
                    self.send_loss(loss, step, "lightning")
                    return

    def send_loss(self, value: float, step: int | None, source: str) -> None:
        msg = {"kind": "loss", "t": time.time(), "value": value, "source": source}
        if step is not None:
            msg["step"] = step
        self.probe.send(msg)

    def send_rate(self, value: float, unit: str, line: str, source: str) -> None:
        self.probe.send({"kind": "throughput", "t": time.time(), "value": value, "unit": unit, "line": line,
                         "source": source})
