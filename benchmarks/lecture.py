"""
The lecture's model as the notebooks build it: one `Head` module per head in a ModuleList, each
with its own mask and an explicit masked softmax, concatenated and projected. It is gpt.py's GPT
with that attention swapped in (dropout on the attention weights included, as in the lecture), so
the benchmark compares attention and precision only, and the tests use it as an independent oracle
for gpt.py's batched attention.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F

from gpt import GPT


class Head(nn.Module):
    """One head of self-attention: a weighted average of earlier values, weights from query-key match."""

    def __init__(self, config, head_size):
        super().__init__()
        self.key = nn.Linear(config.n_embd, head_size, bias=False)
        self.query = nn.Linear(config.n_embd, head_size, bias=False)
        self.value = nn.Linear(config.n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(config.block_size, config.block_size)))
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)  # (B, T, hs)
        q = self.query(x)  # (B, T, hs)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
        wei = F.softmax(wei, dim=-1)  # (B, T, T)
        wei = self.dropout(wei)
        v = self.value(x)  # (B, T, hs)
        out = wei @ v  # (B, T, T) @ (B, T, hs) -> (B, T, hs)
        return out


class MultiHeadAttention(nn.Module):
    """Several heads in parallel, their outputs concatenated and projected back to n_embd."""

    def __init__(self, config):
        super().__init__()
        head_size = config.n_embd // config.n_head
        self.heads = nn.ModuleList([Head(config, head_size) for _ in range(config.n_head)])
        self.proj = nn.Linear(head_size * config.n_head, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)  # (B, T, C)
        out = self.dropout(self.proj(out))  # (B, T, C)
        return out


def lecture_gpt(config):
    """gpt.py's GPT with every block's batched attention replaced by the per-head MultiHeadAttention."""
    model = GPT(config)
    for block in model.blocks:
        block.attn = MultiHeadAttention(config)
    model.apply(model._init_weights)
    return model


@torch.no_grad()
def copy_attention(fused, lecture):
    """Load a CausalSelfAttention's fused q/k/v weights into a MultiHeadAttention, head by head."""
    C, hs = fused.proj.weight.shape[0], lecture.heads[0].key.weight.shape[0]
    q, k, v = fused.qkv.weight.split(C, dim=0)  # 3 x (C, C): rows are output channels
    for h, head in enumerate(lecture.heads):
        rows = slice(h * hs, (h + 1) * hs)  # head h owns channels h*hs ... (h+1)*hs - 1
        head.query.weight.copy_(q[rows])
        head.key.weight.copy_(k[rows])
        head.value.weight.copy_(v[rows])
    lecture.proj.load_state_dict(fused.proj.state_dict())
