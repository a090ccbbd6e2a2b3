"""An LSTM language model fed (sequence, batch) tensors, as pytorch/examples' word_language_model
does (batchify + get_batch: input [35, 20] is 35 time steps of 20 sequences), with an optimizer.

    python sequence_first_lstm.py [STEPS]
"""

import sys

import torch
from _common import truth

BPTT, BATCH, VOCAB = 35, 20, 100


class RNNModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Embedding(VOCAB, 32)
        self.rnn = torch.nn.LSTM(32, 32, 1)  # batch_first=False: (seq, batch, feature)
        self.decoder = torch.nn.Linear(32, VOCAB)

    def forward(self, x, hidden=None):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
torch.manual_seed(0)
data = torch.randint(0, VOCAB, (BPTT * steps + 1, BATCH))  # batchify: (time, batch)
model = RNNModel()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(steps):
    x, y = data[i * BPTT:(i + 1) * BPTT], data[i * BPTT + 1:(i + 1) * BPTT + 1]
    opt.zero_grad()
    out, _ = model(x)
    torch.nn.functional.cross_entropy(out.view(-1, VOCAB), y.reshape(-1)).backward()
    opt.step()
truth(steps=steps, train_samples=BATCH * steps, train_tokens=BPTT * BATCH * steps)
