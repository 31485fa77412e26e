"""A word-level recurrent language model trained with truncated backpropagation through time.

The corpus is synthetic text: sentences drawn from a small set of fixed random "sentences" over a
made-up vocabulary, so the next word is predictable and perplexity falls quickly. The model is an
embedding, a multi-layer LSTM (or GRU), dropout and a Linear decoder (optionally tied to the
embedding); parameters are updated by hand with clipped gradients, and the learning rate is divided
by four whenever the validation loss stops improving. Runs with PyTorch, or with staticgrad
through ``examples/run_with_staticgrad.py``.
"""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class SyntheticCorpus:
    """Train/valid/test splits of token ids, tokenised from generated lines of text."""

    def __init__(self, vocab_size, sentences, train_lines, eval_lines, generator):
        self.dictionary = Dictionary()
        lengths = torch.randint(4, 10, (sentences,), generator=generator).tolist()
        self.sentences = [
            " ".join(f"w{int(i)}" for i in torch.randint(0, vocab_size, (n,), generator=generator))
            for n in lengths
        ]
        self.train = self.tokenize(self.lines(train_lines, generator))
        self.valid = self.tokenize(self.lines(eval_lines, generator))
        self.test = self.tokenize(self.lines(eval_lines, generator))

    def lines(self, count, generator):
        picks = torch.randint(0, len(self.sentences), (count,), generator=generator)
        return [self.sentences[i] for i in picks.tolist()]

    def tokenize(self, lines):
        chunks = []
        for line in lines:
            ids = [self.dictionary.add_word(word) for word in line.split() + ["<eos>"]]
            chunks.append(torch.tensor(ids, dtype=torch.int64))
        return torch.cat(chunks)


class RNNModel(nn.Module):
    """Encoder (embedding), recurrent module, decoder (Linear to the vocabulary)."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type == "LSTM":
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        elif rnn_type == "GRU":
            self.rnn = nn.GRU(ninp, nhid, nlayers, dropout=dropout)
        else:
            raise ValueError(f"unknown --model {rnn_type!r}: choose LSTM or GRU")
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def batchify(data, bsz, device):
    """Cut the token stream into bsz columns: shape (length // bsz, bsz)."""
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


def repackage_hidden(h):
    """Detach hidden states from the history that produced them (truncated BPTT)."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def evaluate(model, criterion, data_source, args, eval_batch_size):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i, args.bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train(model, criterion, train_data, args, lr, epoch):
    model.train()
    total_loss, epoch_loss, batches = 0.0, 0.0, 0
    start_time = time.time()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i, args.bptt)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()

        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)

        total_loss += loss.item()
        epoch_loss += loss.item()
        batches += 1
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            ms_per_batch = (time.time() - start_time) * 1000 / args.log_interval
            num_batches = len(train_data) // args.bptt
            print(f"| epoch {epoch:3d} | {batch:5d}/{num_batches:5d} batches | lr {lr:02.2f} | "
                  f"ms/batch {ms_per_batch:5.2f} | loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}")
            total_loss = 0.0
            start_time = time.time()
        if args.dry_run:
            break
    print(f"epoch {epoch} train_loss {epoch_loss / batches:.6f}")


def main():
    parser = argparse.ArgumentParser(description="Word-level LSTM language model on synthetic text")
    parser.add_argument("--model", type=str, default="LSTM", help="LSTM or GRU")
    parser.add_argument("--vocab", type=int, default=60, help="size of the made-up vocabulary")
    parser.add_argument("--train-lines", type=int, default=600, help="sentences in the training split")
    parser.add_argument("--emsize", type=int, default=32)
    parser.add_argument("--nhid", type=int, default=32)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=20)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=10, metavar="N")
    parser.add_argument("--bptt", type=int, default=8)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--tied", action="store_true")
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--log-interval", type=int, default=20, metavar="N")
    parser.add_argument("--save", type=str, default="model.pt")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    generator = torch.Generator().manual_seed(args.seed)
    corpus = SyntheticCorpus(args.vocab, sentences=12, train_lines=args.train_lines, eval_lines=60, generator=generator)
    eval_batch_size = 10
    train_data = batchify(corpus.train, args.batch_size, device)
    val_data = batchify(corpus.valid, eval_batch_size, device)
    test_data = batchify(corpus.test, eval_batch_size, device)

    ntokens = len(corpus.dictionary)
    model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)
    criterion = nn.NLLLoss()

    lr = args.lr
    best_val_loss = None
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        train(model, criterion, train_data, args, lr, epoch)
        val_loss = evaluate(model, criterion, val_data, args, eval_batch_size)
        print("-" * 89)
        elapsed = time.time() - epoch_start_time
        print(f"| end of epoch {epoch:3d} | time: {elapsed:5.2f}s | valid loss {val_loss:5.2f} | "
              f"valid ppl {math.exp(val_loss):8.2f}")
        print("-" * 89)
        if not best_val_loss or val_loss < best_val_loss:
            torch.save(model.state_dict(), args.save)
            best_val_loss = val_loss
        else:
            lr /= 4.0

    model.load_state_dict(torch.load(args.save))
    test_loss = evaluate(model, criterion, test_data, args, eval_batch_size)
    print("=" * 89)
    print(f"| End of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
    print("=" * 89)


if __name__ == "__main__":
    main()
