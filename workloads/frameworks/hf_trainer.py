"""A stock Hugging Face Trainer run (a tiny GPT-2 made from a config, token ids made here: nothing
downloaded), with in-training evaluation every 10 steps, the final evaluate() right after the
last one (back to back), and log_metrics. Batches carry an attention mask, as a tokenizer's do.
Prints its own truth from Trainer's log history.

    python hf_trainer.py [--compile | --xla]   (eager CPU; --compile: torch_compile with dynamo's eager
                                                backend; --xla: torch_xla, PJRT_DEVICE=CPU, adamw_torch)
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("USE_TORCH_XLA", "1" if "--xla" in sys.argv else "0")  # torch-xla is installed: Trainer picks it

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

STEPS, EVAL_EVERY, BATCH, SEQ = 20, 10, 4, 16
XLA = "--xla" in sys.argv


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 100, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": self.ids[i]}


def xla_compiles() -> int | None:
    """torch_xla's own count of the graphs it compiled (what PT_XLA_DEBUG's report lists)."""
    if not XLA:
        return None
    import torch_xla.debug.metrics as met

    return met.counter_value("UncachedCompile")


def main() -> int:
    compiled = "--compile" in sys.argv
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=100, n_positions=SEQ, n_embd=32, n_layer=1, n_head=2))
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, max_steps=STEPS, per_device_train_batch_size=BATCH, per_device_eval_batch_size=BATCH,
            logging_steps=5, eval_strategy="steps", eval_steps=EVAL_EVERY, save_strategy="no", report_to=[],
            use_cpu=not XLA, dataloader_num_workers=0, seed=0, learning_rate=1e-3,
            torch_compile=compiled, torch_compile_backend="eager" if compiled else None,
            **({"optim": "adamw_torch"} if XLA else {}))
        trainer = Trainer(model=model, args=args, train_dataset=Tokens(STEPS * BATCH, 1),
                          eval_dataset=Tokens(3 * BATCH, 2))
        result = trainer.train()
        trainer.log_metrics("train", result.metrics)
        trainer.evaluate()
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    print("pattern-truth: " + json.dumps({
        "steps": trainer.state.global_step, "logged_losses": logged,
        "samples_per_second_said": result.metrics["train_samples_per_second"],
        "eval_phases": len(evals), "eval_batches_each": 3, "xla_compiles": xla_compiles()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
