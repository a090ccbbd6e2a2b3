"""torch.compile: dynamo's compile start/end callbacks (its compiles, where the user's code
triggered them) and, when the launcher asks, its recompile and graph-break log records, sent to
the recorder instead of printed on the script's stderr."""

from __future__ import annotations

import os
import time

from .. import frames


class DynamoHooks:
    NAME = "dynamo"
    PATCHES = (("torch._dynamo.callback", "patch_dynamo", "dynamo"),
               ("torch._logging._internal", "patch_torch_logging", "dynamo-logs"))

    def __init__(self, probe) -> None:
        self.probe = probe
        self.starts: dict[str, float] = {}

    def patch_dynamo(self, module) -> None:
        module.on_compile_start(self.compile_start)
        module.on_compile_end(self.compile_end)

    def patch_torch_logging(self, module) -> None:
        """Dynamo's recompile reasons and graph breaks, to the recorder rather than to the
        script's stderr: the launcher asks for them this way when the user set no TORCH_LOGS of
        their own. torch's logging setup (_init_logs, also run by torch._logging.set_logs) is
        wrapped so these two artifacts stay enabled and ours; an artifact logger made later
        (a dynamo module imported lazily) is configured as it is made."""
        if os.environ.get("NEURONDESK_DYNAMO_LOGS") != "1":
            return
        import logging

        probe, hooks = self.probe, self
        mine = ("recompiles", "graph_breaks")

        class ToProbe(logging.Handler):
            def emit(self, record) -> None:
                probe.guarded(hooks.send_torch_log, record, hook="dynamo-logs")

        handler = ToProbe(logging.DEBUG)
        real_configure, real_init = module.configure_artifact_log, module._init_logs

        def take(log) -> None:
            log.setLevel(logging.DEBUG)
            log.propagate = False  # never to torch's stream handlers: the script's stderr stays its own
            if handler not in log.handlers:
                log.addHandler(handler)

        def configure_artifact_log(log) -> None:
            if getattr(log, "artifact_name", None) in mine:
                take(log)
            else:
                real_configure(log)

        def _init_logs(*args, **kwargs):
            result = real_init(*args, **kwargs)
            for name in mine:
                module.log_state.enable_artifact(name)
            for qname in module.log_registry.get_artifact_log_qnames():
                log = logging.getLogger(qname)
                if getattr(log, "artifact_name", None) in mine:
                    take(log)
            return result

        module.configure_artifact_log, module._init_logs = configure_artifact_log, _init_logs
        for name in mine:
            module.log_state.enable_artifact(name)

    def send_torch_log(self, record) -> None:
        """One dynamo log record, as the lines TORCH_LOGS would have printed (the recorder reads
        them with the same parser)."""
        t = record.created
        prefix = (time.strftime("V%m%d %H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1e6):06d} {self.probe.pid} "
                  f"{record.pathname}:{record.lineno}] [__{getattr(record, 'name', '').rsplit('__', 1)[-1]}] ")
        text = "\n".join(prefix + line for line in record.getMessage().splitlines())
        self.probe.send({"kind": "torch_log", "text": text[:100_000]})

    def compile_start(self, args=None) -> None:
        self.probe.guarded(self._on_start, args, hook="dynamo")

    def _on_start(self, args) -> None:
        key = str(getattr(args, "compile_id", ""))
        self.starts[key] = time.perf_counter()
        self.probe.send({"kind": "compile_started", "source": "dynamo", "step": self.probe.clock.step})

    def compile_end(self, args=None) -> None:
        self.probe.guarded(self._on_end, args, hook="dynamo")

    def _on_end(self, args) -> None:
        probe, phase = self.probe, self.probe.phase
        key = str(getattr(args, "compile_id", ""))
        trigger = getattr(getattr(args, "callback_trigger", None), "name", "")
        started = self.starts.pop(key, None)
        duration = time.perf_counter() - started if started is not None else None
        phase.count_compiles(1)
        point = f"dynamo@{key.split('/')[0]}:{trigger}" if key else None
        probe.send({"kind": "compile", "source": "dynamo", "step": probe.clock.step,
                    "location": frames.user_location(), "library": frames.library_location(),
                    "duration_s": duration, "trigger": "dynamo", "phase": phase.name,
                    "point": point, "input_shapes": phase.shapes()})
        if probe.torchneuron.module is not None:  # its graphs' records, now: never per step
            probe.guarded(probe.torchneuron.graphs.after_dynamo_compile, point, hook="torchneuron-graphs")
