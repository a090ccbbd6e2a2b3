"""Neuron failures as people paste them, read into ``NeuronFault`` events (their meaning; the
line's LogError is made by the other parsers as before).

Device out of memory (the Neuron Runtime's device-memory guide and error codes): ``Failed to
allocate 4.000GB (alignment: none, usage: tensors) on ND 0:NC 4`` (older: ``Failed to alloc DEVICE
memory: <bytes>``), the allocation log it dumps
(``Wrote nrt memory alloc debug info to /tmp/nrt_mem_log_device_0_<id>.csv``; CSV, see
NEURON_RT_DEBUG_MEMLOG_MAX_SIZE) and ``nrt_tensor_allocate status=4`` (NRT_RESOURCE).
The compiler killed by the host's OOM killer: ``[F137] neuronx-cc was forcibly killed``, a
parallel compile's ``Received error code: -9``, Python's ``died with <Signals.SIGKILL: 9>``.
Version skew: ``This Neuron Runtime (compatibility id: X) is not compatible with the installed
aws-neuron-dkms package``, ``undefined symbol: nrt_...``, ``NEFF version mismatch supported: A
received: B``, ``Unsupported hardware operator code N found in neff``.

TorchNeuron's (torch-neuronx 2.13+, the native ``neuron`` device; issue 44 item 6), each with the page
and the Neuron release it was read for:

- ``dynamic-shape``: ``[NCC_EMOD025] Dynamic shape is not supported: instruction '<name>' has shape
  '<shape>'. The Neuron compiler requires all tensor dimensions to be statically sized.`` (compiler
  error codes, compiler/error-codes/EMOD025, as stored for Neuron 2.33-2.34). With
  ``torch.compile(backend="neuron")`` it is ``dynamic=True``, "rejected during compilation" ("torch.compile
  backend reference", torch/compile/reference-torch-compile, date-modified 2026-10-14: Neuron 2.33).
- ``mode-ignored``: a ``mode`` other than 'default' "log[s] a warning and fall[s] back to default"
  (same page). The warning's words are not in the pages we read: a TorchNeuron line naming
  reduce-overhead / max-autotune(-no-cudagraphs) and falling back to default.
- ``graph-fallback``: a torch.compile graph that failed runs eagerly when
  ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0`` ("TorchNeuron environment variables",
  torch/reference/env-vars, 2026-10-14: 1, failing fast, is the default); its warning ``Falling back to
  original GraphModule execution`` after ``Execution failed: <error>`` is torch-neuronx's own
  (neuron_dynamo_backend, its source as published: not in the pages).
- ``cpu-fallback``: an eager op no Neuron implementation handles runs on the CPU, its result copied
  back ("Supported PyTorch APIs and operators", torch/reference/api/supported-operators, 2026-11-06:
  CPU_FALLBACK); the line ``No implementation could handle operation <op>. Falling back on CPU`` is
  torch-neuronx's (a debug line of its dispatcher, its source as published); the probe also reads
  ``torch_neuronx.get_fallback_ops()`` at exit (probe/.../backends/torchneuron.py).
"""

from __future__ import annotations

import re
from dataclasses import replace

from neurondesk.core.events.device_events import NeuronFault

from ._common import clip, small_int

_ALLOC = re.compile(r"Failed to allocate\s+(\d+(?:\.\d+)?\s*[KMGT]?i?B)\b\s*(?:\(([^)]*)\))?\s*on\s+ND\s*(\d+)\s*:\s*NC\s*(\d+)")
_ALLOC_BYTES = re.compile(r"Failed to alloc DEVICE memory:\s*(\d{1,18})\b")
_USAGE = re.compile(r"usage:\s*([\w ]+?)\s*(?:,|$)")
_STATUS = re.compile(r"nrt_tensor_allocate\b.*?status[=:]\s*(\d+)")
_MEM_LOG = re.compile(r"(/[^\s'\"\x00-\x1f\x7f]{0,400}nrt_mem_log_device_\d+[^\s'\"\x00-\x1f\x7f/]{0,100}\.csv)")
_KILLED = re.compile(r"error code:?\s*-9\b|exit(?:ed)?(?: with)?(?: code| status)?:?\s*-9\b|Signals\.SIGKILL|"
                     r"status -9\b|forcibly killed")
_COMPAT = re.compile(r"compatibility id:?\s*(\w+)\)?\s*is not compatible with the installed ([\w-]+)")
_SYMBOL = re.compile(r"undefined symbol:\s*(nrt_\w+)")
_NEFF = re.compile(r"NEFF version mismatch supported:\s*(\S+)\s+received:\s*(\S+)")
_OPCODE = re.compile(r"Unsupported hardware operator code (\d+) found in neff")
_EMOD025 = re.compile(r"Dynamic shape is not supported: instruction '([^']{0,200})' has shape '([^']{0,200})'")
_MODE = re.compile(r"\bmode\W{0,3}(reduce-overhead|max-autotune-no-cudagraphs|max-autotune)\b.{0,200}?"
                   r"\bfall(?:s|ing)? back to\W{0,3}(?:the )?'?default", re.IGNORECASE)
_CPU_OP = re.compile(r"No implementation could handle operation (\S{1,200})\. Falling back on CPU")
_GRAPH_EAGER = re.compile(r"Falling back to original GraphModule execution|"
                          r"neuron\b.{0,200}?\bfall(?:s|ing)? back to eager", re.IGNORECASE)
WARNINGS = frozenset({"mode-ignored", "graph-fallback", "cpu-fallback"})  # the run goes on: its line is no error
_PID = re.compile(r"^\d{4}-[A-Z][a-z]{2}-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+(\d+):\d+\s")
_NEEDLES = ("alloc", "nrt_mem_log", "F137", "neuronx-cc", "compatibility id", "undefined symbol", "NEFF version",
            "hardware operator code", "EMOD025", "max-autotune", "reduce-overhead", "Falling back", "falling back",
            "falls back")  # a cheap test first: most lines hold none of these


def _pid(s: str) -> int | None:
    m = _PID.match(s)
    return small_int(m.group(1)) if m else None


def _device_oom(s: str) -> NeuronFault | None:
    m = _ALLOC.search(s)
    if m:
        usage = _USAGE.search(m.group(2) or "")
        return NeuronFault(t=0.0, fault="device-oom", size=m.group(1).replace(" ", ""),
                           usage=usage.group(1) if usage else None, device=small_int(m.group(3)),
                           core=small_int(m.group(4)))
    m = _ALLOC_BYTES.search(s)
    if m:
        return NeuronFault(t=0.0, fault="device-oom", size=f"{int(m.group(1)):,} bytes")
    m = _MEM_LOG.search(s)
    if m:
        return NeuronFault(t=0.0, fault="device-oom", mem_log=m.group(1))
    m = _STATUS.search(s)
    if (m is not None and m.group(1) == "4") or ("Allocation Failure" in s and "nrt_tensor_allocate" in s):
        return NeuronFault(t=0.0, fault="device-oom")
    return None


def _version_skew(s: str) -> NeuronFault | None:
    if m := _COMPAT.search(s):
        what = (f"the Neuron Runtime (compatibility id {m.group(1)}) is not compatible with the installed "
                f"{m.group(2)} (the driver)")
    elif m := _SYMBOL.search(s):
        what = (f"undefined symbol {m.group(1)}: the Neuron Runtime library (libnrt) is older than the framework "
                "package that calls it")
    elif m := _NEFF.search(s):
        what = f"the NEFF is version {m.group(2)}, this Neuron Runtime supports {m.group(1)} (compiler newer than runtime)"
    elif m := _OPCODE.search(s):
        what = f"the NEFF uses hardware operator code {m.group(1)}, which this Neuron Runtime does not support"
    else:
        return None
    return NeuronFault(t=0.0, fault="version-skew", mismatch=what)


def _torchneuron(s: str) -> NeuronFault | None:
    if "EMOD025" in s or "Dynamic shape is not supported" in s:
        m = _EMOD025.search(s)
        if m or "NCC_EMOD025" in s:
            return NeuronFault(t=0.0, fault="dynamic-shape",
                               detail=f"instruction '{m.group(1)}' has shape '{m.group(2)}'" if m else None)
    if m := _CPU_OP.search(s):
        return NeuronFault(t=0.0, fault="cpu-fallback", detail=m.group(1))
    if _GRAPH_EAGER.search(s):
        return NeuronFault(t=0.0, fault="graph-fallback")
    if ("max-autotune" in s or "reduce-overhead" in s) and (m := _MODE.search(s)):
        return NeuronFault(t=0.0, fault="mode-ignored", detail=m.group(1))
    return None


def fault_of(s: str, t: float) -> NeuronFault | None:
    """The NeuronFault a line tells, or None (most lines: a cheap substring test first)."""
    if not any(n in s for n in _NEEDLES):
        return None
    fault = _device_oom(s) if ("alloc" in s or "nrt_mem_log" in s) else None
    if fault is None and ("F137" in s or ("neuronx-cc" in s and _KILLED.search(s))):
        fault = NeuronFault(t=0.0, fault="compiler-oom")
    if fault is None:
        fault = _version_skew(s)
    if fault is None:
        fault = _torchneuron(s)
    if fault is None:
        return None
    return replace(fault, t=t, line=clip(s.strip(), 500), pid=_pid(s))
