"""Example models for dptwin_profile (and its tests): each build function returns
(model, (inputs, targets), loss_fn) as `python3 -m dptwin_profile models:NAME` expects.

  mlp           a plain MLP
  tied_lm       a small causal transformer LM whose head shares the token embedding
  cnn_bn        a small CNN with BatchNorm (running statistics are buffers, not parameters)
  frozen        an MLP whose first layer is frozen (requires_grad=False)
  encoder       PyTorch's own nn.TransformerEncoderLayer (nn.MultiheadAttention inside)

The builders take their shape as keyword arguments, so the closure test
(verify/oracle/closure_ddp.py) builds its larger MLP, CNN and block stack from the same code.
"""
import torch
from torch import nn
import torch.nn.functional as F


def mlp(batch=32, features=64, hidden=256, depth=2, classes=10):
    """depth hidden Linear + ReLU layers of width hidden, then a Linear to the classes."""
    torch.manual_seed(0)
    layers = [nn.Linear(features, hidden), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(hidden, hidden), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(hidden, classes))
    return model, (torch.randn(batch, features), torch.randint(0, classes, (batch,))), nn.CrossEntropyLoss()


class Block(nn.Module):
    """Pre-LayerNorm block; attention written functionally (its matmuls count as the block's own work)."""

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
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        att = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class TransformerLM(nn.Module):
    """Token and position embeddings, pre-LayerNorm blocks, a head to the vocabulary;
    tied: the head shares the token embedding (one tensor, counted once)."""

    def __init__(self, vocab=512, d=64, heads=4, layers=2, seq=32, tied=True):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _token_loss(logits, y):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def tied_lm(batch=8, vocab=512, d=64, heads=4, layers=2, seq=32, tied=True):
    torch.manual_seed(0)
    model = TransformerLM(vocab, d, heads, layers, seq, tied)
    idx = torch.randint(0, vocab, (batch, seq))
    return model, (idx, torch.randint(0, vocab, (batch, seq))), _token_loss


def cnn_bn(batch=16, widths=(16, 32), classes=10):
    """3x3 convolutions (no bias) + BatchNorm + ReLU, a 2x2 max-pool after each but the last."""
    torch.manual_seed(0)
    layers, prev = [], 3
    for i, w in enumerate(widths):
        layers += [nn.Conv2d(prev, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
        if i + 1 < len(widths):
            layers.append(nn.MaxPool2d(2))
        prev = w
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(prev, classes))
    return model, (torch.randn(batch, 3, 32, 32), torch.randint(0, classes, (batch,))), nn.CrossEntropyLoss()


def frozen(batch=32):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    for p in model[0].parameters():
        p.requires_grad_(False)
    return model, (torch.randn(batch, 64), torch.randint(0, 10, (batch,))), nn.CrossEntropyLoss()


class _Encoder(nn.Module):
    def __init__(self, d, heads, ff, classes):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.layer(x).mean(dim=1))


def encoder(batch=4, seq=16, d=32, heads=4, ff=64, classes=10):
    """nn.TransformerEncoderLayer (its attention is F.multi_head_attention_forward), mean-pooled, then a Linear."""
    torch.manual_seed(0)
    model = _Encoder(d, heads, ff, classes)
    return model, (torch.randn(batch, seq, d), torch.randint(0, classes, (batch,))), nn.CrossEntropyLoss()


# ---- bad input, for the tests ---------------------------------------------------------

def broken(batch=8):
    """A model that does not run: its second layer expects 32 features, gets 16."""
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(32, 4))
    return model, (torch.randn(batch, 8), torch.randint(0, 4, (batch,))), nn.CrossEntropyLoss()


def not_a_module(batch=8):
    return (lambda x: x * 2), (torch.randn(batch, 8), torch.randn(batch, 8)), nn.MSELoss()


def no_backward(batch=8):
    """Every parameter frozen: the loss has no backward."""
    model = nn.Sequential(nn.Linear(8, 4))
    for p in model.parameters():
        p.requires_grad_(False)
    return model, (torch.randn(batch, 8), torch.randn(batch, 4)), nn.MSELoss()


def detached_loss(batch=8):
    """A loss that detaches the output: nothing reaches the parameters."""
    model = nn.Sequential(nn.Linear(8, 4))
    return model, (torch.randn(batch, 8), torch.randn(batch, 4)), lambda out, y: ((out.detach() - y) ** 2).mean()


def bad_loss(batch=8):
    """A loss that does not fit the output: 4 outputs, targets of 5 classes."""
    model = nn.Sequential(nn.Linear(8, 4))
    return model, (torch.randn(batch, 8), torch.randn(batch, 5)), nn.MSELoss()
