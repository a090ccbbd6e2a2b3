"""The post-import finder: runs a probe patch right after a watched module has executed, so the
probe costs nothing until the user's program imports torch (or torch_xla) itself."""

from __future__ import annotations

from . import backends


class PostImportFinder:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.patches = {  # module -> (its patch, the hook turned off if the patch fails)
            "torch.compiler": (probe.optim.patch_compiler, "compiler"),
            "torch.optim.optimizer": (probe.optim.patch_optimizer, "optimizer"),
            "torch.nn.modules.module": (probe.forward.patch_module, "forward"),
            "torch.utils.data.dataloader": (probe.loader.patch_dataloader, "dataloader"),
            "torch_xla.distributed.parallel_loader": (probe.loader.patch_parallel_loader, "parallel-loader"),
            "torch._dynamo.eval_frame": (probe.forward.patch_eval_frame, "forward"),
            "torch.autograd": (probe.optim.patch_autograd, "presync"),
            "torch.distributed.distributed_c10d": (probe.collective.patch_c10d, "collective"),
            "torch.serialization": (probe.checkpoints.patch_serialization, "checkpoint"),
            "torch.distributed.checkpoint": (probe.checkpoints.patch_dcp, "checkpoint"),
            "lightning.pytorch.trainer.trainer": (probe.checkpoints.patch_lightning, "checkpoint"),
            "pytorch_lightning.trainer.trainer": (probe.checkpoints.patch_lightning, "checkpoint"),
            "transformers.trainer": (probe.checkpoints.patch_transformers, "checkpoint"),
        }
        for backend in backends.BACKENDS:  # each backend's own modules (backends/__init__.py)
            part = getattr(probe, backend.NAME)
            for module, method, hook in backend.PATCHES:
                self.patches[module] = (getattr(part, method), hook)
        # the frameworks' own logged figures (frameworks/records.py): a second patch of the same modules
        self.more = {
            "transformers.trainer": (probe.records.patch_transformers, "framework-records"),
            "lightning.pytorch.trainer.connectors.logger_connector.logger_connector":
                (probe.records.patch_lightning, "framework-records"),
            "pytorch_lightning.trainer.connectors.logger_connector.logger_connector":
                (probe.records.patch_lightning, "framework-records"),
        }
        self.busy: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        entries = [e for e in (self.patches.get(name), self.more.get(name)) if e is not None]
        if not entries or name in self.busy or self.probe.disabled:
            return None
        self.busy.add(name)
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        # A reload finds the module's own spec again (importlib.util.find_spec returns the loaded
        # module's __spec__), whose loader we wrapped the first time: wrap the real one, once.
        real_exec = getattr(spec.loader.exec_module, "_neurondesk_real", spec.loader.exec_module)
        probe = self.probe

        def exec_module(module):
            real_exec(module)
            for patch, hook in entries:
                probe.guarded(patch, module, hook=hook)

        exec_module._neurondesk_real = real_exec
        spec.loader.exec_module = exec_module
        return spec
