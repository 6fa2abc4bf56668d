"""The closure test's three models (verify/oracle/closure_ddp.py), each of another shape:
a wide MLP (GEMMs, 10 MB of gradients: several 1 MiB buckets), a small CNN with
BatchNorm (convolutions, little to all-reduce), and a stack of transformer blocks
(GEMMs, attention, LayerNorm, an embedding). Each build(batch) returns
(model, (inputs, targets), loss_fn) as dptwin_profile expects; seeded, so every
process builds the same parameters."""
import torch
from torch import nn
import torch.nn.functional as F


def mlp(batch=64):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    return model, (torch.randn(batch, 512), torch.randint(0, 10, (batch,))), nn.CrossEntropyLoss()


def cnn_bn(batch=32):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    return model, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), nn.CrossEntropyLoss()


class Block(nn.Module):
    """Pre-LayerNorm transformer block, causal attention written out."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        att = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class BlockStack(nn.Module):
    def __init__(self, vocab=1024, d=128, heads=4, layers=2, seq=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def blocks(batch=8):
    torch.manual_seed(0)
    model = BlockStack()
    return model, (torch.randint(0, 1024, (batch, 32)), torch.randint(0, 1024, (batch, 32))), \
        lambda logits, y: F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
