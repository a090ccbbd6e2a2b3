"""The neurondesk probe: runs inside the user's training process, with no code change.

Rules (docs/design.md): stdlib only, imports nothing of neurondesk, never raises into user code,
never forces a device sync, and costs a few microseconds per step. On an internal error in a hook,
that hook turns itself off (the rest of the probe runs on, see "Fail open" below) and training runs on.

A private package (the bootstrap folder is on the user's PYTHONPATH: nothing here may collide
with a module of theirs). Its parts, each a class the Probe below holds:
  transport.Transport   the socket, batching, sending, drop counts
  steps.StepClock       the current step's figures and the step message it ends with
  phase.EvalPhase       evaluation phases (no_grad / inference_mode / eval() forwards)
  devices.Devices       the device and precision, said once
  optim.OptimizerHooks  torch.optim.optimizer  global optimizer-step hooks -> step boundaries
                        torch.autograd.backward -> loops with no optimizer, pre-sync time
  forward.ForwardWatch  torch.nn.modules.module  the outermost module's calls -> samples, tokens
  loader.LoaderHooks    torch.utils.data.dataloader, torch_xla's PerDeviceLoader -> data wait
  xla.XlaHooks          torch_xla.sync -> XLA step boundaries, compiles, graph executions
  values.ValueReads     Tensor value reads under XLA -> value-access executions
  dynamo.DynamoHooks    torch._dynamo.callback, torch._logging -> torch.compile compiles, logs
  torchneuron.TorchNeuronHooks  torch_neuronx -> device `neuron`, eager NEFF compiles, its torch.compile graphs
  collective.CollectiveHooks  torch.distributed's collectives -> the step's collective phase
  checkpoints.CheckpointHooks  torch.save / load, torch.distributed.checkpoint, Lightning and Trainer
                        checkpoints -> checkpoint messages (their time left out of the step)
  frameworks.records.FrameworkRecords  transformers' Trainer.log, Lightning's logger path -> the loss and
                        the script's own throughput as the framework logged them (numbers, not its print)
  flight                Flight Recorder dumps on request, through a FIFO (where TORCH_FR_BUFFER_SIZE is set)
  finder.PostImportFinder  applies each patch right after its module was imported by the user
  lifelines             files in the run's private folder that outlive the process: its step
                        count in shared memory, its threads' stacks on SIGUSR2

Messages are JSON lines shaped like neurondesk events, sent over a Unix socket to the recorder,
in batches (transport.py). When the recorder does not read and the bounded backlog overflows,
messages are dropped, never waited for; as soon as it reads again (and at exit) the probe says so:
  {"kind":"probe_dropped","t":<time.time()>,"pid":<pid>,"dropped":<messages dropped so far by this
   process>,"dropped_steps":<how many of those were step messages>,"steps":<steps ended so far>}

Fail open, hook by hook: whatever the user's program hands a hook (numpy batches, dicts of them,
objects with odd `shape`s or attributes that raise), the hook never raises into it. A hook that
fails anyway is turned off alone (the others run on) and says so once, in a `notice` message.
Patching is idempotent: a module reloaded (`importlib.reload`) is patched once more, never twice.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

from . import _state, backends
from .backends.devices import Devices
from .checkpoints import CheckpointHooks
from .collective import CollectiveHooks
from .finder import PostImportFinder
from .flight import flight_env
from .forward import ForwardWatch
from .frameworks.records import FrameworkRecords
from .lifelines import register_stack_dump
from .loader import LoaderHooks
from .optim import OptimizerHooks
from .phase import EvalPhase
from .steps import StepClock
from .transport import Transport
from .values import ValueReads

# The launchers' variables sent in the hello (neurondesk/core/events/job_identity.py reads them: the same list).
LAUNCH_VARS = (
    "TORCHELASTIC_RUN_ID", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "RANK", "LOCAL_RANK",
    "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "SLURM_JOB_ID", "SLURM_NODEID", "SLURM_NNODES", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURMD_NODENAME",
    "PJRT_LOCAL_PROCESS_RANK", "PJRT_LOCAL_PROCESS_COUNT",
    "TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT",  # which attempt of the job (core/reduce/attempts.py)
)

_probe: Probe | None = None


def install() -> None:
    """Called by the bootstrap sitecustomize. Cheap: imports nothing heavy."""
    global _probe
    if _probe is not None:
        return
    _probe = Probe(os.environ["NEURONDESK_SOCKET"])
    sys.meta_path.insert(0, PostImportFinder(_probe))
    if hasattr(os, "register_at_fork"):
        # A forked DataLoader worker shares our socket; it must stay silent.
        os.register_at_fork(after_in_child=_probe.disable_in_forked_child)
    atexit.register(_probe.flush_at_exit)
    _probe.chain_excepthook()
    _state.chain_unraisablehook()
    _probe.stacks_file = register_stack_dump(_probe.private_dir, _probe.pid)


class Probe:
    """The parts, and what they share: the process, the on/off switches, fail-open guarding."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.private_dir = os.path.dirname(socket_path)  # the run's private folder (lifelines.py)
        self.disabled = False
        self.pid = os.getpid()
        self.stacks_file = None  # where SIGUSR2 dumps every thread's stack (lifelines.py), if anywhere
        self.off: set[str] = set()  # hooks that failed: each is off for the rest of the run, alone
        self.train_thread = threading.main_thread().ident
        self.transport = Transport(self, socket_path, self._hello)
        self.clock = StepClock(self)
        self.phase = EvalPhase(self)
        self.devices = Devices(self)
        self.optim = OptimizerHooks(self)
        self.forward = ForwardWatch(self)
        self.loader = LoaderHooks(self)
        for backend in backends.BACKENDS:  # self.xla, self.torchneuron, self.dynamo (backends/__init__.py)
            setattr(self, backend.NAME, backend(self))
        self.values = ValueReads(self)
        self.collective = CollectiveHooks(self)
        self.checkpoints = CheckpointHooks(self)
        self.records = FrameworkRecords(self)

    def send(self, msg: dict) -> None:
        self.transport.send(msg)

    def guarded(self, fn, *args, hook: str):
        """Run a probe function for `hook`; on any error turn that hook off (alone) and say so
        once. Never raises into user code."""
        if self.disabled or hook in self.off:
            return None
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - fail open by design
            self.hook_failed(hook, exc)
            return None

    def hook_failed(self, hook: str, exc: BaseException) -> None:
        """Turn one hook off for the rest of the run and tell the recorder, once per hook."""
        if hook in self.off:
            return
        self.off.add(hook)
        try:
            why = f"{type(exc).__name__}: {exc}"
        except Exception:  # noqa: BLE001 - an exception whose str() raises
            why = type(exc).__name__
        try:
            self.send({"kind": "notice", "level": "warn", "source": "probe",
                       "message": f"probe hook {hook!r} failed in pid {self.pid} ({why[:500]}); that hook is off "
                                  f"from now on, the rest of the probe runs on and training continues"})
        except Exception:  # noqa: BLE001
            pass

    def disable_in_forked_child(self) -> None:
        self.disabled = True
        self.transport.forget_in_forked_child()
        if self.stacks_file is not None:  # a DataLoader worker's stacks are its own, in its own file
            self.pid = os.getpid()
            self.stacks_file = register_stack_dump(self.private_dir, self.pid)

    def flush_at_exit(self) -> None:
        """atexit: end what the process leaves open, then send what is left, never raising."""
        self.guarded(self.close_at_exit, hook="exit")
        self.transport.flush_at_exit()

    def close_at_exit(self) -> None:
        """The last evaluation, compiles torch_xla counted since the last sync, and the last step
        end with the process; then TorchNeuron's last NEFF compiles, graphs and cache counters."""
        self.phase.leave()
        if self.xla.xlac is not None:
            self.xla.catch_up(self.xla.counts())
        self.clock.end_at_exit()
        self.guarded(self.torchneuron.at_exit, hook="torchneuron")

    def _hello(self) -> dict:
        torch = sys.modules.get("torch")
        txla = sys.modules.get("torch_xla")
        rank = None
        for var in ("RANK", "PJRT_LOCAL_PROCESS_RANK", "LOCAL_RANK"):
            rank = _state.env_int(var)
            if rank is not None:
                break
        return {"kind": "process_attached", "t": time.time(), "pid": self.pid, "ppid": os.getppid(),
                "rank": rank, "local_rank": _state.env_int("LOCAL_RANK"),
                "world_size": _state.env_int("WORLD_SIZE"),
                "launch_env": {k: os.environ[k][:128] for k in LAUNCH_VARS if k in os.environ},
                "flight_recorder": flight_env(),
                "python": sys.executable, "argv": list(sys.argv),
                "torch_version": getattr(torch, "__version__", None),
                "torch_xla_version": getattr(txla, "__version__", None)}

    def chain_excepthook(self) -> None:
        """A process that dies of an uncaught exception says which and where, once, before the
        hook it had (the user's, or Python's) prints it as always. Under torchrun the rank that
        failed first is told from the ranks the agent then tears down."""
        real = sys.excepthook
        probe = self

        def excepthook(kind, value, tb):
            probe.guarded(probe.report_failure, kind, value, tb, hook="failure")
            probe.guarded(probe.flush_at_exit, hook="failure")
            return real(kind, value, tb)

        sys.excepthook = excepthook

    def report_failure(self, kind, value, tb) -> None:
        if kind is KeyboardInterrupt or self.disabled:
            return
        import traceback

        lines = traceback.format_exception(kind, value, tb)
        text = "".join(lines).splitlines()
        self.send({"kind": "process_failed", "error": f"{kind.__name__}: {value}"[:2000], "step": self.clock.step,
                   "traceback": text[-60:]})
