"""A TRL SFTTrainer fine-tune with a PEFT LoRA adapter, as the TorchNeuron LoRA tutorial shapes it, on the
CPU: a tiny GPT-2 made from a config and a word-level tokenizer built here (nothing downloaded), a text
dataset made in memory. Prints its own truth from the trainer's log history.

    python trl_sft.py      (needs trl and peft: the newest-release lane's .venv-latest has them)
"""

import json
import sys
import tempfile

import torch
from datasets import Dataset
from peft import LoraConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging
from trl import SFTConfig, SFTTrainer

STEPS, BATCH = 12, 4
WORDS = "the a cat dog sat ran on under mat log and then".split()


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def texts(n: int) -> Dataset:
    g = torch.Generator().manual_seed(0)
    picks = torch.randint(0, len(WORDS), (n, 8), generator=g).tolist()
    return Dataset.from_dict({"text": [" ".join(WORDS[i] for i in row) for row in picks]})


def main() -> int:
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    tok = tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=32, n_layer=1, n_head=2,
                                       pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                       bos_token_id=tok.eos_token_id))
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(output_dir=out, max_steps=STEPS, per_device_train_batch_size=BATCH, logging_steps=3,
                         save_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0, seed=0,
                         learning_rate=1e-3, max_length=32)
        lora = LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], lora_dropout=0.0, task_type="CAUSAL_LM")
        trainer = SFTTrainer(model=model, args=args, train_dataset=texts(STEPS * BATCH), processing_class=tok,
                             peft_config=lora)
        result = trainer.train()
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    print("pattern-truth: " + json.dumps({
        "steps": trainer.state.global_step, "logged_losses": [float(x) for x in logged],
        "samples_per_second_said": float(result.metrics["train_samples_per_second"]),
        "trainable": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
