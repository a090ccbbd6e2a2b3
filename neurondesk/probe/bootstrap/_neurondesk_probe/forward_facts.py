"""What a watched forward says: at its start, the phase it is in and the end of a step of a loop
with no optimizer; at its end, its samples, tokens and input shape (forward.py calls these)."""

from __future__ import annotations

from time import perf_counter

from . import _state
from .shapes import SHAPES_KEEP, dims_of, holds_ids


class ForwardFacts:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.seq_first = False  # the model takes (sequence, batch) inputs

    @staticmethod
    def sequence_first(mod) -> bool:
        """Whether the model takes (sequence, batch, ...) inputs: its recurrent / transformer /
        attention layers say batch_first=False, none says True (an LSTM language model's [35, 20]
        batch holds 20 samples, not 35). Looked at once."""
        firsts = set()
        for i, m in enumerate(mod.modules()):
            if i > 10000:
                break
            flag = getattr(m, "batch_first", None)
            if type(flag) is bool:
                firsts.add(flag)
        return firsts == {False}

    def whole(self, mod, args, kwargs):
        """One whole forward of a watched module, its beginning and its end; never raises."""
        probe = self.probe
        if _state.is_compiling() or probe.disabled or "forward" in probe.off:
            return None
        evaluating = probe.guarded(self.began, mod, hook="forward")
        probe.guarded(self.count_inputs, args, kwargs, bool(evaluating), hook="forward")
        return None

    def began(self, mod) -> bool:
        """What a forward's start says: the phase it is in (evaluation or not, returned), the end
        of a step of a loop with no optimizer, the time its batch took to reach it."""
        clock, phase = self.probe.clock, self.probe.phase
        clock.note_activity()
        if phase.is_eval_forward(mod):
            phase.enter()
            phase.eval_batches += 1
            return True
        phase.leave()
        if clock.backward_pending and clock.manual_steps():
            clock.end_manual_step(mod)  # no optimizer: a backward, then the next forward, is a step
        if clock.batch_at is not None:  # from the batch to its forward: the copy to the device (h2d)
            clock.h2d += max(0.0, perf_counter() - clock.batch_at)
            clock.batch_at = None
        clock.forwards_since_step += 1
        return False

    def count_inputs(self, args, kwargs, evaluating: bool) -> None:
        """The forward's samples, tokens and input shape: `input_ids=`, else its first tensor argument."""
        clock, phase = self.probe.clock, self.probe.phase
        x = kwargs.get("input_ids") if kwargs else None
        dims = dims_of(x) if x is not None else None
        if dims is None:
            for a in args:
                dims = dims_of(a)
                if dims is not None:
                    x = a
                    break
        batch_dim = 1 if self.seq_first and dims and len(dims) >= 2 else 0
        if evaluating:
            if dims:
                phase.eval_samples += dims[batch_dim]
                phase.eval_tokens += dims[0] * dims[1] if len(dims) >= 2 and holds_ids(x) else 0
                phase.eval_dims = dims
            return
        if not dims:
            return
        clock.samples += dims[batch_dim]
        if len(dims) >= 2 and holds_ids(x):
            clock.tokens += dims[0] * dims[1]
        else:
            clock.tokens_known = False
        if len(clock.shapes) < SHAPES_KEEP:  # bounded: a loop with no step boundary adds none past it
            clock.shapes.append(dims)
        clock.train_dims = dims
        devices = self.probe.devices
        if devices.autocast is None:
            try:
                device_type = x.device.type
            except Exception:  # noqa: BLE001 - not a torch tensor (numpy's .device is a str)
                device_type = None
            if isinstance(device_type, str):
                devices.autocast = devices.autocast_state(device_type)
