"""Advice for a graph run inside a library (a value read or a sync in transformers, accelerate ...):
the user cannot edit that line, nor put a step closure around it. Say where it is and what the user
controls instead: a model or Trainer argument, an attention implementation, the library's version.

``library`` and ``called_from`` are the probe's frame names ('transformers _ignore_causal_mask_sdpa at
masking_utils.py:255', 'GPT2Model.forward at modeling_gpt2.py:873')."""

from __future__ import annotations

# (file, function) of a known place -> what the user controls. Each checked against the library's
# source (transformers 4.57, accelerate 1.11): the reason the graph runs there and the argument
# that avoids it.
KNOWN = {
    ("masking_utils.py", "_ignore_causal_mask_sdpa"): (
        "transformers reads the attention mask on the host (padding_mask.all()) to choose SDPA's is_causal; "
        "with no padding in the batches pass no attention_mask (drop it in the data collator), or load the model "
        "with attn_implementation=\"eager\" (from_pretrained or the config), which skips that check"),
    ("operations.py", "_tpu_gather"): (
        "Trainer gathers the batch's token count across devices at each step "
        "(TrainingArguments.average_tokens_across_devices, on by default); average_tokens_across_devices=False "
        "keeps it on the device"),
    ("trainer_pt_utils.py", "nested_xla_mesh_reduce"): (
        "Trainer reads the loss across devices at each logging step: a larger logging_steps reads it less often"),
}
GENERIC = ("not a line of yours: what you control is what reaches it (the model's or Trainer's arguments, the "
           "attention implementation, the library's version); a step closure cannot reach inside the library")


def _key(frame: str) -> tuple[str, str]:
    """('masking_utils.py', '_ignore_causal_mask_sdpa') of 'transformers _ignore_causal_mask_sdpa at
    masking_utils.py:255' (a qualified name's last part: 'Trainer.f' is f)."""
    head, _, where = frame.rpartition(" at ")
    return where.rsplit(":", 1)[0], head.rsplit(" ", 1)[-1].rsplit(".", 1)[-1]


def where_in_library(library: str, called_from: str | None) -> str:
    """'in transformers _ignore_causal_mask_sdpa at masking_utils.py:255, called from GPT2Model.forward at
    modeling_gpt2.py:873'."""
    return f"in {library}" + (f", called from {called_from}" if called_from else "")


def what_to_do(library: str) -> str:
    return KNOWN.get(_key(library), GENERIC)
