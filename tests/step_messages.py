"""Steps as tests read them: the probe coalesces ordinary steps into `steps` messages (one
StepBatch event in the journal, neurondesk/core/events/run_events.py); a test that counts or reads steps
takes each as the `step` events it stands for, through the core's own codec."""

from __future__ import annotations


def expand_steps(msgs: list[dict]) -> list[dict]:
    """Every `steps` message (a probe message or a journal line, decoded) as its `step` dicts, in
    place and in order; every other message as it is."""
    from neurondesk.core.events.codec import event_from_dict, event_to_dict

    out: list[dict] = []
    for m in msgs:
        if m.get("kind") == "steps":
            out.extend(event_to_dict(s) for s in event_from_dict(m).steps())
        else:
            out.append(m)
    return out
