"""A recurrent digit classifier that reads each 28x28 image one row at a time.

An LSTM consumes the 28 rows of a synthetic "digit" (one template per class plus noise) and its
last output goes through BatchNorm1d, dropout and two Linear layers. Runs with PyTorch, or with
staticgrad through ``examples/run_with_staticgrad.py``.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class RowLSTM(nn.Module):
    def __init__(self, hidden_size=64):
        super().__init__()
        self.rnn = nn.LSTM(input_size=28, hidden_size=hidden_size, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(hidden_size)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(hidden_size, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, images):
        rows = images.reshape(-1, 28, 28)
        output, _ = self.rnn(rows)
        last = output[:, -1, :]
        x = self.batchnorm(last)
        x = self.dropout1(x)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_digits(count, templates, generator):
    labels = torch.randint(0, 10, (count,), generator=generator)
    noise = torch.rand(count, 1, 28, 28, generator=generator)
    images = (0.7 * templates[labels] + 0.3 * noise - 0.1307) / 0.3081
    return TensorDataset(images, labels)


def train(args, model, device, loader, optimizer, epoch):
    model.train()
    total, batches = 0.0, 0
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        total += loss.item()
        batches += 1
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}]\tLoss: {loss.item():.6f}")
        if args.dry_run:
            break
    print(f"epoch {epoch} train_loss {total / batches:.6f}")


def test(model, device, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1, keepdim=True).eq(target.view(-1, 1)).sum().item()
    count = len(loader.dataset)
    print(f"\nTest set: Average loss: {test_loss / count:.4f}, Accuracy: {correct}/{count} "
          f"({100.0 * correct / count:.0f}%)\n")


def main():
    parser = argparse.ArgumentParser(description="Synthetic MNIST, one row per LSTM step")
    parser.add_argument("--batch-size", type=int, default=32, metavar="N")
    parser.add_argument("--test-batch-size", type=int, default=100, metavar="N")
    parser.add_argument("--train-size", type=int, default=256, metavar="N")
    parser.add_argument("--test-size", type=int, default=100, metavar="N")
    parser.add_argument("--epochs", type=int, default=3, metavar="N")
    parser.add_argument("--lr", type=float, default=0.01, metavar="LR")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    parser.add_argument("--no-cuda", action="store_true")
    parser.add_argument("--no-mps", action="store_true")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=4, metavar="N")
    args = parser.parse_args()

    use_cuda = not args.no_cuda and torch.cuda.is_available()
    use_mps = not args.no_mps and torch.backends.mps.is_available()
    torch.manual_seed(args.seed)
    if use_cuda:
        device = torch.device("cuda")
    elif use_mps:
        device = torch.device("mps")
    else:
        device = torch.device("cpu")

    generator = torch.Generator().manual_seed(args.seed)
    templates = (torch.rand(10, 1, 28, 28, generator=generator) > 0.75).float()
    train_loader = DataLoader(synthetic_digits(args.train_size, templates, generator),
                              batch_size=args.batch_size, shuffle=True, drop_last=True)
    test_loader = DataLoader(synthetic_digits(args.test_size, templates, generator),
                             batch_size=args.test_batch_size)

    model = RowLSTM().to(device)
    optimizer = optim.RMSprop(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()


if __name__ == "__main__":
    main()
