"""A small convolutional digit classifier trained on synthetic 28x28 "digits".

The images are random class templates plus noise, shaped and normalised like MNIST, so the script
needs no download and finishes in seconds. Runs with PyTorch, or with staticgrad through
``examples/run_with_staticgrad.py``.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def synthetic_digits(count, templates, generator):
    """Images of shape (count, 1, 28, 28) drawn around one template per class, and their labels."""
    labels = torch.randint(0, 10, (count,), generator=generator)
    noise = torch.rand(count, 1, 28, 28, generator=generator)
    images = (0.7 * templates[labels] + 0.3 * noise).clamp(0.0, 1.0)
    images = (images - 0.1307) / 0.3081
    return TensorDataset(images, labels)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    total, seen = 0.0, 0
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(data)
        seen += len(data)
        if batch_idx % args.log_interval == 0:
            done, total_count = batch_idx * len(data), len(train_loader.dataset)
            percent = 100.0 * batch_idx / len(train_loader)
            print(f"Train Epoch: {epoch} [{done}/{total_count} ({percent:.0f}%)]\tLoss: {loss.item():.6f}")
        if args.dry_run:
            break
    print(f"epoch {epoch} train_loss {total / seen:.6f}")


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    count = len(test_loader.dataset)
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{count} ({100.0 * correct / count:.0f}%)\n")
    return correct / len(test_loader.dataset)


def main():
    parser = argparse.ArgumentParser(description="Synthetic MNIST-style CNN")
    parser.add_argument("--batch-size", type=int, default=32, metavar="N")
    parser.add_argument("--test-batch-size", type=int, default=100, metavar="N")
    parser.add_argument("--train-size", type=int, default=256, metavar="N")
    parser.add_argument("--test-size", type=int, default=100, metavar="N")
    parser.add_argument("--epochs", type=int, default=2, metavar="N")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    parser.add_argument("--no-accel", action="store_true", help="disable the accelerator")
    parser.add_argument("--dry-run", action="store_true", help="run a single batch per epoch")
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=4, metavar="N")
    parser.add_argument("--save-model", action="store_true", help="save (and reload) the trained weights")
    parser.add_argument("--save-path", default="mnist_cnn.pt")
    args = parser.parse_args()

    use_accel = not args.no_accel and torch.accelerator.is_available()
    torch.manual_seed(args.seed)
    if use_accel:
        device = torch.accelerator.current_accelerator()
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")

    train_kwargs = {"batch_size": args.batch_size, "shuffle": True}
    test_kwargs = {"batch_size": args.test_batch_size}
    if use_accel:
        accel_kwargs = {"num_workers": 1, "pin_memory": True}
        train_kwargs.update(accel_kwargs)
        test_kwargs.update(accel_kwargs)

    generator = torch.Generator().manual_seed(args.seed)
    templates = (torch.rand(10, 1, 28, 28, generator=generator) > 0.75).float()
    train_loader = DataLoader(synthetic_digits(args.train_size, templates, generator), **train_kwargs)
    test_loader = DataLoader(synthetic_digits(args.test_size, templates, generator), **test_kwargs)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()

    if args.save_model:
        torch.save(model.state_dict(), args.save_path)
        reloaded = Net()
        reloaded.load_state_dict(torch.load(args.save_path, weights_only=True))
        accuracy = test(reloaded.to(device), device, test_loader)
        print(f"reloaded accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()
