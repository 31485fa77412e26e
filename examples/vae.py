"""A variational autoencoder on synthetic 28x28 binary-ish images.

Encoder and decoder are two Linear layers each; the latent code is sampled with the
reparameterisation trick (mu + eps * std, eps from randn_like) and the loss is the summed binary
cross-entropy of the reconstruction plus the KL divergence to a unit Gaussian. Runs with PyTorch,
or with staticgrad through ``examples/run_with_staticgrad.py``.
"""

import argparse

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F


class VAE(nn.Module):
    def __init__(self, latent=20):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, latent)
        self.fc22 = nn.Linear(400, latent)
        self.fc3 = nn.Linear(latent, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        hidden = F.relu(self.fc1(x))
        return self.fc21(hidden), self.fc22(hidden)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        hidden = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(hidden))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction term plus KL(q(z|x) || N(0, I)), both summed over the batch."""
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def synthetic_images(count, templates, generator):
    """Binary pixels: one of the templates with about 5% of its pixels flipped."""
    choice = torch.randint(0, 5, (count,), generator=generator)
    noise = torch.rand(count, 1, 28, 28, generator=generator)
    images = torch.where(noise < 0.05, 1.0 - templates[choice], templates[choice])
    return torch.utils.data.TensorDataset(images, choice)


def train(args, model, device, loader, optimizer, epoch):
    model.train()
    train_loss = 0.0
    for batch_idx, (data, _) in enumerate(loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            done, total_count = batch_idx * len(data), len(loader.dataset)
            print(f"Train Epoch: {epoch} [{done}/{total_count}]\tLoss: {loss.item() / len(data):.6f}")
    print(f"====> Epoch: {epoch} Average loss: {train_loss / len(loader.dataset):.4f}")
    print(f"epoch {epoch} train_loss {train_loss / len(loader.dataset):.6f}")


def test(args, model, device, loader, epoch):
    model.eval()
    test_loss = 0.0
    with torch.no_grad():
        for i, (data, _) in enumerate(loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            if i == 0:
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n], recon_batch.view(-1, 1, 28, 28)[:n]])
                print(f"comparison grid for epoch {epoch}: {tuple(comparison.shape)}")
    print(f"====> Test set loss: {test_loss / len(loader.dataset):.4f}")


def main():
    parser = argparse.ArgumentParser(description="VAE on synthetic images")
    parser.add_argument("--batch-size", type=int, default=32, metavar="N")
    parser.add_argument("--train-size", type=int, default=512, metavar="N")
    parser.add_argument("--test-size", type=int, default=128, metavar="N")
    parser.add_argument("--epochs", type=int, default=3, metavar="N")
    parser.add_argument("--no-accel", action="store_true")
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=8, metavar="N")
    args = parser.parse_args()

    use_accel = not args.no_accel and torch.accelerator.is_available()
    torch.manual_seed(args.seed)
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")

    generator = torch.Generator().manual_seed(args.seed)
    templates = (torch.rand(5, 1, 28, 28, generator=generator) > 0.8).float()
    train_loader = torch.utils.data.DataLoader(synthetic_images(args.train_size, templates, generator),
                                               batch_size=args.batch_size, shuffle=True)
    test_loader = torch.utils.data.DataLoader(synthetic_images(args.test_size, templates, generator),
                                              batch_size=args.batch_size, shuffle=False)

    model = VAE().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(args, model, device, test_loader, epoch)
        with torch.no_grad():
            sample = torch.randn(64, 20).to(device)
            sample = model.decode(sample).cpu()
            print(f"sampled {tuple(sample.view(64, 1, 28, 28).shape)} images, mean pixel {sample.mean().item():.4f}")


if __name__ == "__main__":
    main()
