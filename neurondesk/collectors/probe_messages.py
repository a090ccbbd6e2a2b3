"""Turn one JSON line from the probe into a typed event.

The probe sends dicts shaped like events (it cannot import them). They go through the core's
validating codec, so a message with a field of the wrong type is refused here, with the reason,
and never reaches the reducer. Anything odd becomes a ParseProblem, never an exception. A
compile message may carry the raw PT_XLA_DEBUG analysis text its process wrote during that
compile; it is parsed here into hash, cause and frames. A ``torch_log`` message carries dynamo's
recompile and graph-break log lines (sent by the probe instead of printed on the script's
stderr); ``ProbeDecoder`` reads them with the TORCH_LOGS parser.
"""

from __future__ import annotations

from neurondesk.collectors.logparse.pt_xla_debug import parse_debug_block_text
from neurondesk.collectors.logparse.torch_logs import TorchLogsParser
from neurondesk.core import events as ev
from neurondesk.core.codec import decode_known_kind, event_from_dict, loads

PROBE_FILE = "_neurondesk_probe.py"
_COMPILE_HEAD = b'{"kind":"compile",'
_TORCH_LOG_HEAD = b'{"kind":"torch_log",'
# The kinds the probe sends. The socket is the workload's to write to: any other kind (a launcher's
# run_started with its price and id, a run_finished ...) is refused, never taken as the run's own.
PROBE_KINDS = frozenset({"process_attached", "device_seen", "step", "graph_executed", "compile_started",
                         "compile", "dynamo_recompile", "graph_break", "notice", "probe_dropped",
                         "eval_phase", "torch_log", "process_failed"})  # torch_log: read by ProbeDecoder into dynamo events


class RefusedKind(ValueError):
    pass


def decode_probe_line(line: bytes, t_received: float) -> ev.Event:
    if not line.startswith(_COMPILE_HEAD):  # a compile may carry debug text to parse (general path)
        event = decode_known_kind(line)  # the probe writes "kind" first: straight into its type
        if event is not None and event.kind in PROBE_KINDS:
            return event
    try:
        msg = loads(line)
        if not isinstance(msg, dict) or "kind" not in msg:
            raise ValueError("not an event object")
        if msg["kind"] not in PROBE_KINDS:
            raise RefusedKind(f"kind {str(msg['kind'])[:80]!r} is not one the probe sends; refused")
        msg.setdefault("t", t_received)
        if "debug_text" in msg:
            debug_text = msg.pop("debug_text")
            if msg["kind"] == "compile" and isinstance(debug_text, str) and debug_text:
                _enrich_compile(msg, debug_text)
        return event_from_dict(msg)  # keys it does not know ("dropped_before") are ignored
    except (ValueError, KeyError, TypeError) as exc:
        raw = line.decode("utf-8", "replace").strip()
        return ev.ParseProblem(t=t_received, source="probe", raw=raw[:2000], error=f"{type(exc).__name__}: {exc}")


def _enrich_compile(msg: dict, debug_text: str) -> None:
    blocks = [b for b in parse_debug_block_text(debug_text) if b.kind == "compile"]
    if not blocks:
        return
    block = blocks[0]
    msg["graph_hash"] = msg.get("graph_hash") or block.graph_hash
    msg["graph_inputs"] = msg.get("graph_inputs") or block.n_inputs
    msg["reason"] = msg.get("reason") or block.cause
    # The probe's own sync wrapper sits in the stack torch_xla printed; it is not the user's story.
    msg["frames"] = msg.get("frames") or [f for f in block.frames if PROBE_FILE not in f]
    if not msg.get("location") and block.location:
        msg["location"] = block.location


class ProbeDecoder:
    """Decodes the probe's lines into events: one event per line, except a ``torch_log`` message,
    whose dynamo log lines become the DynamoRecompile / GraphBreak events they describe (none,
    one or several). Never raises."""

    def __init__(self) -> None:
        self.torch_logs = TorchLogsParser()

    def decode(self, line: bytes, t_received: float) -> list[ev.Event]:
        if not line.startswith(_TORCH_LOG_HEAD):
            return [decode_probe_line(line, t_received)]
        try:
            msg = loads(line)
            text = msg.get("text") if isinstance(msg, dict) else None
            if not isinstance(text, str):
                raise ValueError("a torch_log message without its text")
            out: list[ev.Event] = []
            for log_line in text.splitlines():
                self.torch_logs.feed(log_line, t_received, out)
            out.extend(self.torch_logs.flush(t_received))  # one message is one whole log record
            return out
        except (ValueError, KeyError, TypeError) as exc:
            raw = line.decode("utf-8", "replace").strip()
            return [ev.ParseProblem(t=t_received, source="probe", raw=raw[:2000], error=f"{type(exc).__name__}: {exc}")]
