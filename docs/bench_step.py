"""A step file for ``staticgrad bench --step docs/bench_step.py:make_step`` (see docs/bench.md): a
small classifier trained with AdamW, and its PyTorch twin built from the same initial weights."""

import staticgrad

BATCH, FEATURES, HIDDEN, CLASSES = 64, 128, 256, 10


def make_step():
    staticgrad.manual_seed(0)
    nn = staticgrad.nn
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, CLASSES))
    opt = staticgrad.optim.AdamW(model.parameters(), lr=1e-3)

    def train_step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss       # return the loss tensor: reading it (.item()) inside the step stops replay

    batches = [(staticgrad.randn(BATCH, FEATURES), staticgrad.randint(0, CLASSES, (BATCH,))) for _ in range(4)]
    step = {"step": train_step, "batches": batches, "name": "classifier"}
    try:
        import torch
    except ImportError:   # no PyTorch: time staticgrad alone
        return step
    twin = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.GELU(), torch.nn.LayerNorm(HIDDEN),
                               torch.nn.Linear(HIDDEN, CLASSES))
    twin.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in model.state_dict().items()})
    twin_opt = torch.optim.AdamW(twin.parameters(), lr=1e-3)

    def torch_step(x, y):
        twin_opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(twin(x), y)
        loss.backward()
        twin_opt.step()
        return loss

    # torch_batches left out: compare copies the staticgrad batches into torch tensors
    return {**step, "torch_step": torch_step}
