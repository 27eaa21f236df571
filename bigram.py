"""
The baseline: a bigram model predicts the next character from the current one alone, by reading
a row of a (V, V) table as logits. Same data code and flags as gpt.py (imported, not copied), so
the two differ only in the model. `python bigram.py --help` lists the flags.
"""
from contextlib import nullcontext
from dataclasses import dataclass
import os

import torch
import torch.nn as nn
from torch.nn import functional as F

from gpt import (HERE, CharTokenizer, estimate_loss, fail, flag, get_batch, load_text, parse_flags,
                 pick_hardware, split_data)


@dataclass
class BigramConfig:
    """The lecture's bigram settings; each is also a flag (python bigram.py --help)."""
    input: str = flag("input.txt", "training text (UTF-8); input.txt beside gpt.py is downloaded")
    batch_size: int = flag(32, "independent sequences per step")
    block_size: int = flag(8, "context length; the bigram model only reads the last character")
    max_iters: int = flag(3000, "optimizer steps in total")
    learning_rate: float = flag(1e-2, "a table of logits tolerates a large step")
    eval_interval: int = flag(300, "estimate the losses and log every this many steps")
    eval_iters: int = flag(200, "batches averaged per split for each loss estimate")
    device: str = flag("auto", "auto: cuda, mps or cpu", ("auto", "cpu", "cuda", "mps"))
    seed: int = flag(1337, "random seed: the same seed repeats a run exactly on a CPU")
    max_new_tokens: int = flag(500, "characters to generate at the end")


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
    cfg = BigramConfig(**parse_flags(BigramConfig, argv))  # the flags' types refuse bad values
    device = pick_hardware(cfg.device, "float32")[0]
    torch.manual_seed(cfg.seed)
    default_input = os.path.join(HERE, "input.txt")
    text = load_text(default_input if cfg.input == "input.txt" else cfg.input)
    tokenizer = CharTokenizer.from_text(text)
    splits = split_data(text, tokenizer)
    if len(splits["val"]) <= cfg.block_size:
        fail(f"the text is too short for --block_size={cfg.block_size}: give a longer one")
    model = BigramLanguageModel(len(tokenizer.chars)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    for step in range(cfg.max_iters + 1):
        if step % cfg.eval_interval == 0 or step == cfg.max_iters:
            losses = estimate_loss(model, splits, cfg, nullcontext())
            print(f"step {step:5d} | train {losses['train']:.4f} | val {losses['val']:.4f}")
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
    try:
        main()
    except (OSError, UnicodeDecodeError) as e:  # a file that can't be read, in Python's words
        fail(f"{e}; check --input")
