"""A CUDA script with AMP, tqdm and a NaN guard, before its move to Trainium."""
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

model = Net().cuda()
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scaler = torch.cuda.amp.GradScaler()
train_loader = DataLoader(train_set, batch_size=32, shuffle=True, num_workers=4)  # expect: drop-last

for epoch in range(10):
    running_loss = 0.0
    pbar = tqdm(train_loader)
    for inputs, labels in pbar:
        inputs, labels = inputs.cuda(), labels.cuda()
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            outputs = model(inputs)
            loss = criterion(outputs, labels)
        if torch.isnan(loss):  # expect: tensor-branch
            break
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        running_loss += loss.item()  # expect: item
        pbar.set_postfix(loss=running_loss)
    print(f"epoch {epoch}: {running_loss / len(train_loader):.3f}")
