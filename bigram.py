"""
The baseline: a bigram model predicts the next character from the current one alone, by reading
a row of a (V, V) table as logits. Same data code and flags as gpt.py (imported, not copied), so
the two differ only in the model. `python bigram.py --help` lists the flags.
"""
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

from gpt import (DEFAULT_INPUT, CharTokenizer, check_config, estimate_loss, get_batch, load_text, parse_args,
                 pick_device, split_data)


@dataclass
class BigramConfig:
    input: str = "input.txt"  # training text (UTF-8); the default is beside the script and downloaded when missing
    batch_size: int = 32  # independent sequences per step
    block_size: int = 8  # context length; the bigram model only ever looks at the last character
    max_iters: int = 3000  # optimizer steps in total
    learning_rate: float = 1e-2  # a table of logits tolerates a large step
    eval_interval: int = 300  # estimate the losses and log every this many steps
    eval_iters: int = 200  # batches averaged per split for each loss estimate
    device: str = "auto"  # 'auto' (cuda, then mps, then cpu), 'cpu', 'cuda' or 'mps'
    seed: int = 1337  # random seed: the same seed repeats a run exactly on CPU
    max_new_tokens: int = 500  # characters to generate at the end


class BigramLanguageModel(nn.Module):
    """Each token reads the logits for the next token straight off its row of a lookup table."""

    def __init__(self, vocab_size):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)  # (V, V)

    def forward(self, idx, targets=None):
        logits = self.token_embedding_table(idx)  # (B, T, V)
        if targets is None:
            return logits, None
        B, T, V = logits.shape
        loss = F.cross_entropy(logits.view(B * T, V), targets.reshape(B * T))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens):
        """Extend idx (B, T) one sampled token at a time; only the last token matters."""
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -1:])  # (B, 1, V)
            probs = F.softmax(logits[:, -1, :], dim=-1)  # (B, V)
            idx_next = torch.multinomial(probs, num_samples=1)  # (B, 1)
            idx = torch.cat((idx, idx_next), dim=1)  # (B, T+1)
        return idx


def main(argv=None):
    """Train the bigram model, printing the losses, and end with a sample."""
    cfg = BigramConfig(**parse_args(BigramConfig, argv))
    check_config(cfg)
    device = pick_device(cfg.device)
    torch.manual_seed(cfg.seed)
    text = load_text(DEFAULT_INPUT if cfg.input == BigramConfig.input else cfg.input)
    tokenizer = CharTokenizer.from_text(text)
    splits = split_data(text, tokenizer, cfg.block_size)
    model = BigramLanguageModel(len(tokenizer.chars)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    for step in range(cfg.max_iters + 1):
        if step % cfg.eval_interval == 0 or step == cfg.max_iters:
            losses = estimate_loss(model, splits, cfg, nullcontext())
            print(f"step {step:4d}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        if step == cfg.max_iters:
            break
        xb, yb = get_batch(splits["train"], cfg.batch_size, cfg.block_size)  # (B, T), (B, T)
        _, loss = model(xb.to(device), yb.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    idx = torch.zeros((1, 1), dtype=torch.long, device=device)  # (1, 1) start from id 0, a newline
    sample = tokenizer.decode(model.generate(idx, cfg.max_new_tokens)[0].tolist())
    print(sample)
    return dict(model=model, val_loss=losses["val"], sample=sample)


if __name__ == "__main__":
    main()
