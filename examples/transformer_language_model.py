"""A causal Transformer language model on a synthetic token stream.

The stream follows a hidden transition table (each token is usually followed by one fixed
successor), so a model that attends to the previous position can predict it. Embedding scaled by
sqrt(d_model), sinusoidal positional encoding held in a buffer, a TransformerEncoder under a
causal mask, a Linear decoder, CrossEntropyLoss, SGD with gradient clipping and a StepLR schedule.
Runs with PyTorch, or with staticgrad through ``examples/run_with_staticgrad.py``.
"""

import argparse
import math
import os
import tempfile
import time

import torch
from torch import nn
from torch.nn import TransformerEncoder, TransformerEncoderLayer


class PositionalEncoding(nn.Module):
    """Adds sin/cos position codes of geometrically spaced wavelengths to a (seq, batch, d) input."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)


def causal_mask(size):
    """A float (size, size) mask: 0 where a position may attend (itself and earlier), -inf elsewhere."""
    mask = (torch.triu(torch.ones(size, size)) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = TransformerEncoder(encoder_layers, nlayers, enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.linear.bias.data.zero_()
        self.linear.weight.data.uniform_(-initrange, initrange)

    def forward(self, src, src_mask=None):
        """src: (seq_len, batch) token ids; returns (seq_len, batch, ntoken) logits."""
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, src_mask)
        return self.linear(output)


def synthetic_stream(length, ntokens, table, generator, stay=0.9):
    """Token ids where each token is followed by table[token] with probability ``stay``."""
    coins = torch.rand(length, generator=generator).tolist()
    jumps = torch.randint(0, ntokens, (length,), generator=generator).tolist()
    successor = table.tolist()
    tokens = [jumps[0]]
    for coin, jump in zip(coins[1:], jumps[1:]):
        tokens.append(successor[tokens[-1]] if coin < stay else jump)
    return torch.tensor(tokens, dtype=torch.long)


def batchify(data, bsz):
    """(N,) -> (N // bsz, bsz): bsz independent columns of the stream."""
    seq_len = data.size(0) // bsz
    data = data[:seq_len * bsz]
    return data.view(bsz, seq_len).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


def train(model, train_data, criterion, optimizer, scheduler, args, ntokens, epoch):
    model.train()
    total_loss, epoch_loss, batches = 0.0, 0.0, 0
    start_time = time.time()
    num_batches = len(train_data) // args.bptt
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i, args.bptt)
        src_mask = causal_mask(data.size(0))
        output = model(data, src_mask)
        loss = criterion(output.view(-1, ntokens), targets)

        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()

        total_loss += loss.item()
        epoch_loss += loss.item()
        batches += 1
        if batch % args.log_interval == 0 and batch > 0:
            lr = scheduler.get_last_lr()[0]
            ms_per_batch = (time.time() - start_time) * 1000 / args.log_interval
            cur_loss = total_loss / args.log_interval
            print(f"| epoch {epoch:3d} | {batch:5d}/{num_batches:5d} batches | lr {lr:02.2f} | "
                  f"ms/batch {ms_per_batch:5.2f} | loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}")
            total_loss = 0.0
            start_time = time.time()
    print(f"epoch {epoch} train_loss {epoch_loss / batches:.6f}")


def evaluate(model, eval_data, criterion, args, ntokens):
    model.eval()
    total_loss = 0.0
    with torch.no_grad():
        for i in range(0, eval_data.size(0) - 1, args.bptt):
            data, targets = get_batch(eval_data, i, args.bptt)
            output = model(data, causal_mask(data.size(0)))
            total_loss += data.size(0) * criterion(output.view(-1, ntokens), targets).item()
    return total_loss / (len(eval_data) - 1)


def main():
    parser = argparse.ArgumentParser(description="Transformer language model on a synthetic stream")
    parser.add_argument("--ntokens", type=int, default=40)
    parser.add_argument("--emsize", type=int, default=32)
    parser.add_argument("--d-hid", type=int, default=64)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--nhead", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=5.0)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--bptt", type=int, default=16)
    parser.add_argument("--train-tokens", type=int, default=4000)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    generator = torch.Generator().manual_seed(args.seed)
    table = torch.randperm(args.ntokens, generator=generator)
    train_data = batchify(synthetic_stream(args.train_tokens, args.ntokens, table, generator), args.batch_size)
    val_data = batchify(synthetic_stream(args.train_tokens // 4, args.ntokens, table, generator), 10)
    train_data, val_data = train_data.to(device), val_data.to(device)

    model = TransformerModel(args.ntokens, args.emsize, args.nhead, args.d_hid, args.nlayers, args.dropout)
    model = model.to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)

    best_val_loss = float("inf")
    with tempfile.TemporaryDirectory() as tempdir:
        best_model_params_path = os.path.join(tempdir, "best_model_params.pt")
        for epoch in range(1, args.epochs + 1):
            epoch_start_time = time.time()
            train(model, train_data, criterion, optimizer, scheduler, args, args.ntokens, epoch)
            val_loss = evaluate(model, val_data, criterion, args, args.ntokens)
            elapsed = time.time() - epoch_start_time
            print("-" * 89)
            print(f"| end of epoch {epoch:3d} | time: {elapsed:5.2f}s | valid loss {val_loss:5.2f} | "
                  f"valid ppl {math.exp(val_loss):8.2f}")
            print("-" * 89)
            if val_loss < best_val_loss:
                best_val_loss = val_loss
                torch.save(model.state_dict(), best_model_params_path)
            scheduler.step()
        model.load_state_dict(torch.load(best_model_params_path))

    final_loss = evaluate(model, val_data, criterion, args, args.ntokens)
    print("=" * 89)
    print(f"| End of training | best valid loss {final_loss:5.2f} | valid ppl {math.exp(final_loss):8.2f}")
    print("=" * 89)


if __name__ == "__main__":
    main()
