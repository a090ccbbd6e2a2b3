"""The step clock: what the current training step has seen so far, and the step message it ends
with. Step messages carry the 0-based `step` index, which counts on through drops."""

from __future__ import annotations

import json
import threading
import time


class StepClock:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.pid_tail = f',"pid":{probe.pid}}}\n'  # the end of every preformatted step line
        self.step = 0
        self.step_start: float | None = None  # perf_counter at the start of the current step
        self.step_start_wall: float | None = None
        self.opt_stepped = False  # an optimizer step happened since the last boundary
        self.lead_optimizer: int | None = None
        self.has_optimizer = False  # an optimizer exists: syncs before its first step are inside step 0
        self.is_xla = False
        self.samples = 0
        self.tokens = 0
        self.tokens_known = True
        self.shapes: list[list[int]] = []
        self.loader_samples = 0
        self.loader_tokens = 0
        self.loader_shapes: list[list[int]] = []
        self.data_wait = 0.0
        self.step_execs = 0
        self.step_compiles = 0
        self.forwards_since_step = 0  # training forwards since the last step ended
        self.backward_seen = False  # a backward ran: a training script, even without an optimizer
        self.backward_pending = False  # a backward since the last step ended
        self.presync: float | None = None  # time from the step's start to its first sync point
        self.train_dims: list[int] | None = None  # the last training forward's input shape
        # the arguments of the training forward running now (None between forwards): a compile inside it
        # (torch.compile's first or a recompile) is of these shapes, not the last forward's
        self.running_args: tuple | None = None
        self.eval_s_in_step = 0.0  # evaluation time inside the current step, left out of its duration
        self.ckpt_s = 0.0  # checkpoint saves and loads inside the current step, left out of it too (checkpoints.py)
        self.last_shapes: list | None = None  # the input shapes of the last step message, and their JSON
        self.last_shapes_json = ""
        # The step's phases (phases.md): host seconds in the training forwards, the backwards, the
        # optimizer steps, from a batch to the forward that takes it (h2d), in XLA syncs (the wait
        # at the device), in torch.distributed calls. `inner` is sync + collective so far: a phase
        # that holds one leaves it out of its own time (no second count).
        self.h2d = self.fwd = self.bwd = self.opt = self.sync = self.coll = self.inner = 0.0
        self.phased = False  # a phase was timed in this step: its step message carries phases_s
        self.batch_at: float | None = None  # perf_counter when the last training batch came
        self.opt_t0: float | None = None  # perf_counter at the optimizer step's pre-hook
        self.opt_inner0 = 0.0
        self.neff = None  # TorchNeuron's NEFF compiles of the step, read at its end (torchneuron.py), when loaded

    def note_activity(self) -> None:
        if self.step_start is None:
            self.step_start = time.perf_counter()
            self.step_start_wall = time.time()

    def end_step(self) -> None:
        """The step ends: an ordinary one into the transport's columns (batch.py), one that
        compiled, ran an evaluation or holds an odd count as a message of its own."""
        neff = self.neff
        if neff is not None:  # TorchNeuron: the step's NEFF compiles, first (they mark the step)
            try:  # guarded() inline: its call cost a microsecond a step (benchmarks/probe_step_torchneuron.py)
                if "torchneuron" not in self.probe.off:
                    neff()
            except Exception as exc:  # noqa: BLE001 - fail open: that hook alone turns off, said once
                self.probe.hook_failed("torchneuron", exc)
        now = time.perf_counter()
        start = self.step_start if self.step_start is not None else now
        phase = self.probe.phase
        if phase.in_eval:  # evaluation runs on into the next step: its time so far belongs to this one
            self.eval_s_in_step += now - phase.eval_start
            phase.eval_start = now
        duration = max(0.0, now - start - self.eval_s_in_step - self.ckpt_s)
        if self.samples:
            samples, tokens, shapes = self.samples, self.tokens if self.tokens_known else 0, self.shapes
        elif self.loader_samples:
            samples, tokens, shapes = self.loader_samples, self.loader_tokens, self.loader_shapes
        else:
            samples, tokens, shapes = 0, 0, None
        transport = self.probe.transport
        if self.step_compiles or self.eval_s_in_step or type(samples) is not int or type(tokens) is not int:  # noqa: E721
            transport.queue(self._step_line(duration, samples, tokens, shapes), True, False, now)
        else:
            transport.queue_step(self.step, time.time(), duration, self.data_wait, samples, tokens,
                                 self.step_execs if self.is_xla else None, self.presync, shapes, now,
                                 (self.h2d, self.fwd, self.bwd, self.opt, self.sync, self.coll) if self.phased else None)
        self.step += 1  # counts on through drops: the receiver can tell how many it missed
        self.step_start = now
        self.opt_stepped = False
        self.samples = self.tokens = 0
        self.tokens_known = True
        self.shapes = []
        self.loader_samples = self.loader_tokens = 0
        self.loader_shapes = []
        self.data_wait = 0.0
        self.step_execs = self.step_compiles = 0
        self.forwards_since_step = 0
        self.backward_pending = False
        self.presync = None
        self.eval_s_in_step = self.ckpt_s = 0.0
        self.batch_at = None  # a batch of this step never tells the next one its h2d
        if self.phased:
            self.h2d = self.fwd = self.bwd = self.opt = self.sync = self.coll = self.inner = 0.0
            self.phased = False

    def _step_line(self, duration: float, samples, tokens, shapes) -> bytes:
        # Formatted by hand rather than through json.dumps of a dict: the same keys in the same
        # order with the same types (tests/runs/test_probe_send.py checks it) at a fraction of the
        # cost. Times are written fixed-point (t to the microsecond, durations to the nanosecond).
        line = (f'{{"kind":"step","t":{time.time():.6f},"step":{self.step},"duration_s":{duration:.9f},'
                f'"data_wait_s":{self.data_wait:.9f},"compiles":{self.step_compiles}')
        if samples:
            line += self._inputs_json(samples, tokens, shapes)
        if self.is_xla:
            line += f',"executions":{self.step_execs}'
        if self.eval_s_in_step:
            line += f',"eval_s":{self.eval_s_in_step:.9f}'
        if self.presync is not None:
            line += f',"presync_s":{self.presync:.9f}'
        if self.phased:
            line += (f',"phases_s":[{self.h2d:.6f},{self.fwd:.6f},{self.bwd:.6f},{self.opt:.6f},{self.sync:.6f},'
                     f'{self.coll:.6f}]')
        dropped = self.probe.transport.dropped
        if dropped:
            line += f',"dropped_before":{dropped}'
        return (line + self.pid_tail).encode()

    def _inputs_json(self, samples, tokens, shapes) -> str:
        """`,"samples":..,"tokens":..,"input_shapes":..` of a step message; the shapes' JSON is
        reused while they do not change (the usual case: one batch shape)."""
        if shapes != self.last_shapes:
            self.last_shapes = shapes
            self.last_shapes_json = json.dumps(shapes, separators=(",", ":"), default=str)
        if type(samples) is not int or type(tokens) is not int:  # noqa: E721 - not a subclass: SymInt
            out = "," + json.dumps({"samples": samples, **({"tokens": tokens} if tokens else {})},
                                   separators=(",", ":"), default=str)[1:-1]
        else:
            out = f',"samples":{samples},"tokens":{tokens}' if tokens else f',"samples":{samples}'
        return out + ',"input_shapes":' + self.last_shapes_json

    # ---------------------------------------------------------------- step boundaries
    def mark_presync(self) -> None:
        """The step reaches its first synchronising point (backward, where DDP all-reduces; the
        optimizer step; an XLA sync): the time before it is this rank's own (data wait plus
        forward), before any wait for the other ranks. A straggler shows there. The time spent inside
        torch.distributed calls before it is a wait too, not its own (Lightning broadcasts a tensor before
        every training step; a loop may all_reduce its loss before the backward): left out."""
        if self.presync is None and self.step_start is not None and not self.probe.phase.in_eval:
            self.presync = max(0.0, time.perf_counter() - self.step_start - self.coll)

    def note_backward(self) -> None:
        self.mark_presync()
        if not self.probe.phase.in_eval and threading.get_ident() == self.probe.train_thread:
            self.backward_seen = self.backward_pending = True

    def manual_steps(self) -> bool:
        """Steps come from backwards: no optimizer exists, and no XLA sync cuts the steps."""
        return not self.has_optimizer and self.lead_optimizer is None and not self.is_xla

    def end_manual_step(self, mod) -> None:
        """A training loop with no optimizer (`p.data.add_(p.grad, alpha=-lr)`, as pytorch/examples'
        word_language_model does): its step ends at the next training forward after a backward,
        or at exit. The device is the model's, said once."""
        devices = self.probe.devices
        if not devices.device_reported:
            # the module's parameters() is the user's code: its failure turns "device" off, not the step
            self.probe.guarded(devices.report_module_device, mod, hook="device")
        self.end_step()

    def end_at_exit(self) -> None:
        """An XLA step whose optimizer step no sync followed (a script that never cuts its graph),
        and the last step of a loop with no optimizer, end with the process."""
        if self.opt_stepped and self.is_xla:
            self.end_step()
        elif self.backward_pending and self.manual_steps():
            watch = self.probe.forward
            top = watch.top_module() if watch.top_module is not None else None
            self.end_manual_step(top)
