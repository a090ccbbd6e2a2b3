"""A death explained: why a run (or its first failing rank) died, as one finding with what to try.

The kinds, in the order they are tested (the first that fits is the finding):

- ``device-oom``: the device's memory (the Neuron Runtime's allocation failures, core/findings/neuron_errors.py;
  CUDA's "CUDA out of memory"; XLA's RESOURCE_EXHAUSTED)
- ``compiler-oom``: neuronx-cc killed by the host's OOM killer (core/findings/neuron_errors.py)
- ``dynamic-shape``: TorchNeuron's compiler rejected a dynamic shape (NCC_EMOD025; torch.compile's dynamic=True)
- ``oom-killer``: the kernel's OOM killer (SIGKILL, and the cgroup's or the host's oom_kill count grew)
- ``segfault`` (SIGSEGV), ``bus-error`` (SIGBUS: /dev/shm too small for the DataLoader, most often)
- ``nan``: the script stopped on a NaN or infinite loss (it raised, or the last loss it reported was one)
- ``collective-timeout``: gloo's or NCCL's timeout, torch's watchdog, a store that timed out
- ``killed`` (SIGKILL with no OOM kill counted), ``stopped`` (SIGINT, SIGTERM, SIGHUP: a person or a
  scheduler), ``signal`` (another signal), ``error`` (an uncaught exception), ``exit`` (a non-zero exit)

Read from the reduced state only (the cgroup's counts come as ``CgroupMemory`` events from
collectors/cgroup_memory.py). Pure; run_figures (core/figures/run_figures.py) computes it once for every output.
"""

from __future__ import annotations

import math
import re

import msgspec

from neurondesk.core.findings.crash_memory import NRT_OOM, CrashMemory, device_memory, host_memory
from neurondesk.core.findings.neuron_errors import (
    COMPILER_OOM_FIX,
    DEVICE_OOM_FIX,
    DYNAMIC_FIX,
    neuron_fault_findings,
)
from neurondesk.core.findings.run_end import first_failure
from neurondesk.core.reduce.state import RunState

KINDS = ("device-oom", "compiler-oom", "oom-killer", "segfault", "bus-error", "nan", "collective-timeout",
         "killed", "stopped", "signal", "error", "exit")

_CUDA_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|"
                       r"RESOURCE_EXHAUSTED:.{0,80}(?:[Oo]ut of memory|memory)")
_NAN = re.compile(r"\b(?:nan|inf|infinite|non-finite|not finite)\b.{0,80}\bloss\b|\bloss\b.{0,80}"
                  r"\b(?:nan|inf|infinite|non-finite|not finite)\b|returned nan values|"
                  r"Monitored metric \S+ = (?:nan|inf|-inf) is not finite", re.IGNORECASE)
_LIGHTNING_NAN = re.compile(r"Monitored metric \S+ = (?:nan|inf|-inf) is not finite")
_TIMEOUT = re.compile(r"Timed out waiting \d+ ?ms for \w+ operation|Watchdog caught collective operation timeout|"
                      r"collective operation timeout|ProcessGroup\w+.{0,80}time(?:d ?)?out|Socket Timeout|"
                      r"DistStoreError: Timed out|Timed out after \d+ seconds waiting for clients|"
                      r"NCCL communicator was aborted|ran for \d+ milliseconds before timing out")
_SIGNAL_TEXT = (("SIGSEGV", re.compile(r"Segmentation fault|SIGSEGV|signal: Segmentation")),
                ("SIGBUS", re.compile(r"Bus error|SIGBUS")),
                ("SIGKILL", re.compile(r"SIGKILL|is killed by signal: Killed|\bKilled$")))
_SHELL_SIGNALS = {137: "SIGKILL", 139: "SIGSEGV", 135: "SIGBUS", 134: "SIGABRT", 143: "SIGTERM", 130: "SIGINT"}
TEXT_LINES = 200  # lines of the errors and the stderr tail searched for the messages above

TRY = {
    "oom-killer": ("give it more host memory or need less: fewer DataLoader workers or a smaller prefetch_factor "
                   "(each worker holds its own copy of the dataset object), a smaller batch, a dataset read lazily or "
                   "memory-mapped rather than loaded whole, fewer ranks on this node; raise the limit (docker "
                   "--memory, Kubernetes resources.limits.memory, systemd MemoryMax) if the job needs it; host memory "
                   "that grows step after step is a leak (a loss kept without .item() or .detach())"),
    "cuda-oom": ("a smaller batch or sequence length, gradient accumulation to keep the effective batch, "
                 "activation checkpointing, bf16; when much memory is reserved but unallocated, "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
    "segfault": ("a native library crashed, not your Python: run once with PYTHONFAULTHANDLER=1 to print the Python "
                 "stack at the crash; builds that do not match (torch, torch-xla or torch-neuronx, a compiled "
                 "extension) are the usual cause: `neurondesk doctor` lists them; num_workers=0 rules out a DataLoader "
                 "worker"),
    "bus-error": ("shared memory ran out: the DataLoader's workers pass batches through /dev/shm; give the container "
                  "more (docker --shm-size=8g, a Kubernetes emptyDir with medium: Memory) or use fewer workers"),
    "nan": ("lower the learning rate or warm it up, clip gradients (torch.nn.utils.clip_grad_norm_), bf16 rather "
            "than fp16 (or a GradScaler with fp16), check the batch of that step for NaN or inf, and "
            "torch.autograd.set_detect_anomaly(True) for one run to name the operation that made it"),
    "collective-timeout": ("a rank did not reach the collective in time: look first for a rank that died or "
                           "hung before it (its own error), then uneven work (a last batch only some ranks "
                           "have: drop_last=True, DistributedSampler), a long compile on one rank (XLA), the "
                           "network; a longer timeout (init_process_group(timeout=...)) if the wait is expected; "
                           "the Flight Recorder (TORCH_FR_BUFFER_SIZE) names the collective"),
    "killed": ("something sent SIGKILL: a scheduler (Slurm's time limit, a Kubernetes eviction, a spot reclaim), "
               "a person's kill -9, a watchdog; the kernel log (dmesg) says whether the OOM killer did"),
    "stopped": ("nothing to fix if a person stopped it; if a scheduler did (its time limit, preemption), "
                "checkpoint more often and resume"),
    "signal": "a native library aborted: the lines of stderr before the signal say which; `neurondesk doctor` "
              "checks the installed packages agree",
    "error": "the traceback's last frame in your code is where to look",
    "exit": "the script exited with that code itself (sys.exit, os._exit) or a launcher did: its last lines say why",
}


class Crash(msgspec.Struct, frozen=True, kw_only=True):
    """How a run died: the one finding (``kind``, ``finding``), what to try, and the memory at the end."""

    kind: str  # one of KINDS
    finding: str  # in words: which, who, when, the memory at the end against its limit
    try_next: str  # what to try
    rank: int | None = None  # the rank that died first, where known
    pid: int | None = None
    step: int | None = None  # the step it died in (0-based: the steps it had ended)
    signal: str | None = None  # "SIGKILL"
    exit_code: int | None = None
    evidence: str = ""  # the line or the count it was told by
    host_memory: CrashMemory | None = None
    device_memory: CrashMemory | None = None

    def line(self) -> str:
        """One line for the console and the status line."""
        return f"died ({self.kind}): {self.finding}; try: {self.try_next}"


def _texts(state: RunState) -> list[str]:
    """What the failure printed: the first failure's error and traceback, the errors, stderr's tail."""
    out: list[str] = []
    first = state.parts.ranks.failed_first
    if first is not None:
        out += [first.error, *reversed(first.traceback)]
    for e in reversed(state.errors[-50:]):
        out += [e.message, *e.detail]
    tail = state.stderr_tail if state.finished else [o.text for o in state.parts.log.output if o.stream == "stderr"]
    out += list(reversed(tail[-100:]))
    return [x for x in out if x][:TEXT_LINES]


def _find(texts: list[str], pattern: re.Pattern) -> str | None:
    return next((t.strip()[:300] for t in texts if pattern.search(t)), None)


def _signal(state: RunState, texts: list[str]) -> tuple[str | None, str]:
    """The signal the failing process died of, and where that was read."""
    first = state.parts.ranks.failed_first
    if first is not None and first.error.startswith("SIG"):  # torchrun's report (RankExited)
        return first.error.split(" ", 1)[0], first.error
    if state.finished and state.exit_signal:
        return state.exit_signal, f"exit signal {state.exit_signal}"
    code = state.exit_code
    if state.finished and code in _SHELL_SIGNALS:  # a shell or launcher reports 128 + N
        return _SHELL_SIGNALS[code], f"exit code {code} (128 + the signal number)"
    for name, pattern in _SIGNAL_TEXT:
        line = _find(texts, pattern)
        if line is not None:
            return name, line
    return None, ""


def _first_nonfinite_step(state: RunState) -> int | None:
    return next((step for step, v in state.parts.loss.loss_history if not math.isfinite(v)), None)


def crash_of(state: RunState) -> Crash | None:
    """The run's death explained, or None for a run going well or ended well (core/findings/run_end.py's rule)."""
    end = first_failure(state)
    if end is None and not _ended_on_nan(state):
        return None
    texts = _texts(state)
    sig, sig_said = _signal(state, texts)
    kind, what, evidence = _classify(state, texts, sig, sig_said)
    if end is None:  # exit 0, but the loss it ended with is not a number: stopped on it, or trained on garbage
        what += f" and exited {state.exit_code}"
    first = state.parts.ranks.failed_first
    step = first.step if first is not None and first.step is not None else state.current_step
    who = f"rank {end.failed_rank}" if end is not None and end.failed_rank is not None else "the workload"
    host, device = host_memory(state, first.pid if first is not None else None), device_memory(state, texts)
    memory = "; ".join(m.words for m in (host, device) if m is not None)
    finding = f"at step {step}, {who} {what}" + (f"; {memory}" if memory else "")
    return Crash(kind=kind, finding=finding, try_next=_try(kind, texts), rank=end.failed_rank if end else None,
                 pid=first.pid if first is not None else None, step=step, signal=sig,
                 exit_code=state.exit_code if state.finished else None, evidence=evidence,
                 host_memory=host, device_memory=device)


def _ended_on_nan(state: RunState) -> bool:
    """A run that exited 0 after a NaN or infinite last loss, or after Lightning's EarlyStopping stopped it on
    one ("Monitored metric val_loss = nan is not finite")."""
    if not state.finished or state.exit_code != 0:
        return False
    last = state.loss_last
    return (last is not None and not math.isfinite(last)) or _find(state.stderr_tail[-20:], _LIGHTNING_NAN) is not None


def _try(kind: str, texts: list[str]) -> str:
    if kind == "device-oom":
        return TRY["cuda-oom"] if _find(texts, _CUDA_OOM) else DEVICE_OOM_FIX.removeprefix("try ")
    if kind == "compiler-oom":
        return COMPILER_OOM_FIX
    if kind == "dynamic-shape":
        return DYNAMIC_FIX
    return TRY[kind]


def _classify(state: RunState, texts: list[str], sig: str | None, sig_said: str) -> tuple[str, str, str]:
    """(kind, what happened in words, the evidence)."""
    neuron = dict(neuron_fault_findings(state))
    cuda = _find(texts, _CUDA_OOM) or _find(texts, NRT_OOM)  # CUDA's, or TorchNeuron's allocator's
    if "device-oom" in neuron or cuda:
        faults = state.parts.telemetry.faults.by_kind.get("device-oom", [])
        return "device-oom", "ran out of device memory", cuda or (faults[0].line if faults else "")
    if "compiler-oom" in neuron:
        return "compiler-oom", "lost its compiler (neuronx-cc) to the host's OOM killer", neuron["compiler-oom"][:300]
    if "dynamic-shape" in neuron:
        return ("dynamic-shape", "stopped on a dynamic shape the Neuron compiler rejects (NCC_EMOD025)",
                state.parts.telemetry.faults.by_kind["dynamic-shape"][0].line[:300])
    cg = state.parts.telemetry.cgroup
    kills = cg.oom_kills if cg is not None else None
    host_kills = cg.host_oom_kills if cg is not None else None
    # an OOM kill is counted in the victim's cgroup whichever limit was hit (its own, a parent's, the host's):
    # the host's count tells only where the cgroup could not be read (a kill elsewhere is not this run's)
    count = kills if kills is not None else host_kills
    if sig == "SIGKILL" and count:
        where = f"its cgroup {cg.path}" if kills else "the host"
        victim = "lost a DataLoader worker to" if "DataLoader worker" in sig_said else "was killed by"
        return "oom-killer", (f"{victim} the kernel's OOM killer ({where}: {count} OOM kill"
                              f"{'s' if count != 1 else ''} during the run)"), sig_said or "oom_kill count"
    if sig == "SIGSEGV":
        return "segfault", "died of a segmentation fault (SIGSEGV)", sig_said
    if sig == "SIGBUS":
        return "bus-error", "died of a bus error (SIGBUS)", sig_said
    nan = _find(texts, _NAN)
    if nan is not None or (state.loss_last is not None and not math.isfinite(state.loss_last)):
        at = _first_nonfinite_step(state)
        seen = f" (the loss was {state.loss_last} from step {at})" if at is not None else ""
        return "nan", f"stopped on a NaN or infinite loss{seen}", nan or f"last loss {state.loss_last}"
    timeout = _find(texts, _TIMEOUT)
    if timeout is not None:
        return "collective-timeout", "timed out in a collective", timeout
    if sig == "SIGKILL":
        why = (f"no OOM kill counted in its cgroup {cg.path}" if kills is not None
               else f"its cgroup not read: {cg.error}" if cg is not None and cg.error
               else "its cgroup's memory events were not recorded")
        return "killed", f"was killed by SIGKILL ({why})", sig_said
    if sig in ("SIGINT", "SIGTERM", "SIGHUP") or _find(texts, re.compile(r"^KeyboardInterrupt")):
        return "stopped", f"was stopped ({sig or 'KeyboardInterrupt'})", sig_said
    if sig is not None:
        return "signal", f"died of {sig}", sig_said
    first = state.parts.ranks.failed_first
    error = first.error if first is not None else next((e.message for e in reversed(state.errors)), None)
    if error:
        return "error", f"raised {error[:200]}", error[:300]
    return "exit", f"exited with code {state.exit_code}", f"exit code {state.exit_code}"
