"""Step boundaries from torch itself: the global optimizer-step hooks (eager and compiled
training), Optimizer.__init__ (an optimizer exists) and torch.autograd.backward (a loop with no
optimizer; the time before the first synchronising point). Also picks up
torch.compiler.is_compiling for every hook."""

from __future__ import annotations

import time

from . import _state


class OptimizerHooks:
    def __init__(self, probe) -> None:
        self.probe = probe

    def patch_compiler(self, module) -> None:
        if hasattr(module, "is_compiling"):
            _state.is_compiling = module.is_compiling

    def patch_optimizer(self, module) -> None:
        # Once per module execution: a reload makes new hook tables (and a new Optimizer class).
        if self.pre not in getattr(module, "_global_optimizer_pre_hooks", {}).values():
            module.register_optimizer_step_pre_hook(self.pre)
        if self.post not in getattr(module, "_global_optimizer_post_hooks", {}).values():
            module.register_optimizer_step_post_hook(self.post)
        real_init = module.Optimizer.__init__
        if getattr(real_init, "_neurondesk", False):
            return
        clock, probe = self.probe.clock, self.probe

        def __init__(opt, *args, **kwargs):
            if not clock.has_optimizer:  # a training process: say hello now, not at its first step (a rank
                # that waits from the start for a peer, in its first collective, is then seen as a rank)
                probe.guarded(probe.transport.say_hello, hook="hello")
            clock.has_optimizer = True
            return real_init(opt, *args, **kwargs)

        __init__.__doc__, __init__.__wrapped__, __init__._neurondesk = real_init.__doc__, real_init, True
        module.Optimizer.__init__ = __init__

    def pre(self, optimizer, args, kwargs):
        probe = self.probe
        if _state.is_compiling() or probe.disabled or "optimizer" in probe.off:
            return None
        try:  # guarded inline: this runs at every step
            self._on_pre(optimizer)
        except Exception as exc:  # noqa: BLE001 - fail open: this hook alone turns off
            probe.hook_failed("optimizer", exc)
        return None

    def _on_pre(self, optimizer) -> None:
        # What phase.leave, clock.note_activity and clock.mark_presync do, their checks inline:
        # this runs at every step, and most steps need none of their work.
        probe, clock = self.probe, self.probe.clock
        if probe.phase.in_eval:
            probe.phase.leave()
        if clock.step_start is None:
            clock.note_activity()
        if clock.presync is None:  # not in an evaluation: it has just ended; less the collectives so far
            clock.presync = max(0.0, time.perf_counter() - clock.step_start - clock.coll)
        if not probe.devices.device_reported:
            probe.guarded(probe.devices.report_device, optimizer, hook="device")  # an odd optimizer: no device, steps on
        if clock.lead_optimizer is None:
            clock.lead_optimizer = id(optimizer)
        elif clock.is_xla and clock.opt_stepped and id(optimizer) == clock.lead_optimizer:
            clock.end_step()  # two steps with no sync in between: close the previous one here
        clock.opt_t0, clock.opt_inner0 = time.perf_counter(), clock.inner  # the optimizer phase begins

    def post(self, optimizer, args, kwargs):
        probe = self.probe
        if _state.is_compiling() or probe.disabled or "optimizer" in probe.off:
            return None
        clock = probe.clock
        t0 = clock.opt_t0
        if t0 is not None:  # every optimizer's step is the optimizer phase (a GAN's two)
            clock.opt += time.perf_counter() - t0 - (clock.inner - clock.opt_inner0)
            clock.opt_t0, clock.phased = None, True
        if id(optimizer) == clock.lead_optimizer:
            if clock.is_xla:
                clock.opt_stepped = True  # the next sync ends the step
            else:
                try:
                    clock.end_step()
                except Exception as exc:  # noqa: BLE001
                    probe.hook_failed("optimizer", exc)
        return None

    def patch_autograd(self, module) -> None:
        real = module.backward
        if getattr(real, "_neurondesk", False):
            return
        probe = self.probe

        def backward(*args, **kwargs):
            if _state.is_compiling() or probe.disabled or "presync" in probe.off:
                return real(*args, **kwargs)
            probe.guarded(probe.clock.note_backward, hook="presync")
            clock = probe.clock
            t0, inner0 = time.perf_counter(), clock.inner
            try:
                return real(*args, **kwargs)
            finally:
                if not probe.phase.in_eval:  # the backward phase: host time until it returns, less syncs in it
                    took = time.perf_counter() - t0 - (clock.inner - inner0)
                    wait = probe.guarded(probe.collective.ddp.in_backward, took, hook="ddp-wait") or 0.0
                    clock.bwd += took - wait
                    clock.coll += wait  # DDP's all-reduce, waited for after the backward's compute
                    clock.phased = True

        backward.__doc__, backward.__wrapped__, backward._neurondesk = real.__doc__, real, True
        module.backward = backward
