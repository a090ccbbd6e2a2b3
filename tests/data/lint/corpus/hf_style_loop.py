"""A transformers-style fine-tuning loop moved to XLA: tokenizer padding, a collator, logging."""
import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding

device = xm.xla_device()
tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased").to(device)


def tokenize(example):
    return tokenizer(example["text"], truncation=True, padding=True)  # expect: padding-longest


collator = DataCollatorWithPadding(tokenizer)  # expect: padding-longest
train_loader = DataLoader(dataset, batch_size=16, shuffle=True, collate_fn=collator, drop_last=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
for step, batch in enumerate(train_loader):
    batch = {k: v.to(device) for k, v in batch.items()}
    outputs = model(**batch)
    loss = outputs.loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    xm.mark_step()
    total = loss.item()  # expect: item
    if step % 50 == 0:
        print(f"step {step} loss {loss}")  # expect: fstring-tensor
    if step > 1000:
        break
