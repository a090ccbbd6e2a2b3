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
_PID = re.compile(r"^\d{4}-[A-Z][a-z]{2}-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+(\d+):\d+\s")
_NEEDLES = ("alloc", "nrt_mem_log", "F137", "neuronx-cc", "compatibility id", "undefined symbol", "NEFF version",
            "hardware operator code")  # a cheap test first: most lines hold none of these


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
        return None
    return replace(fault, t=t, line=clip(s.strip(), 500), pid=_pid(s))
