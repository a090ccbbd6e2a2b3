"""A TRL SFTTrainer + PEFT LoRA fine-tune in the shape of the TorchNeuron LoRA tutorial, on the CPU:
a tiny GPT-2 made from a config, a word-level tokenizer built here, a few sentences as the data set
(nothing downloaded). Prints its own truth from Trainer's log history.

    python trl_sft_lora.py      (needs trl, peft, datasets: the newest-release lane installs them)
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
WORDS = "the a cat dog sat ran on under mat rug and then slept ate".split()


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<eos>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")


def sentences(n: int) -> Dataset:
    g = torch.Generator().manual_seed(0)
    picks = torch.randint(0, len(WORDS), (n, 8), generator=g).tolist()
    return Dataset.from_dict({"text": [" ".join(WORDS[i] for i in row) for row in picks]})


def main() -> int:
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    tok = tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=32, n_layer=1, n_head=2,
                                       pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(output_dir=out, max_steps=STEPS, per_device_train_batch_size=BATCH, logging_steps=3,
                         save_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0, seed=0,
                         learning_rate=1e-3, max_length=16, dataset_text_field="text")
        trainer = SFTTrainer(model=model, args=args, train_dataset=sentences(STEPS * BATCH), processing_class=tok,
                             peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], task_type="CAUSAL_LM"))
        result = trainer.train()
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    print("pattern-truth: " + json.dumps({
        "steps": trainer.state.global_step, "logged_losses": logged,
        "samples_per_second_said": result.metrics["train_samples_per_second"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
