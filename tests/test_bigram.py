"""bigram.py: the baseline model, and a real run on Tiny Shakespeare."""
import os
import subprocess
import sys

import pytest
import torch

from bigram import BigramLanguageModel
from conftest import ROOT


def test_bigram_logits_are_rows_of_the_table():
    torch.manual_seed(0)
    model = BigramLanguageModel(vocab_size=7)
    idx = torch.tensor([[3, 1, 3]])  # (B, T)
    logits, loss = model(idx, idx)
    assert logits.shape == (1, 3, 7) and loss.shape == ()
    torch.testing.assert_close(logits[0, 0], model.token_embedding_table.weight[3])
    torch.testing.assert_close(logits[0, 0], logits[0, 2])  # same token, same prediction: no context
    assert model.generate(idx, 5).shape == (1, 8)


def test_bigram_loss_matches_counting(tmp_path):
    """After training, the table's softmax approaches the bigram frequencies of the text."""
    text = "abab" * 50 + "aab" * 30
    ids = torch.tensor([ord(c) - ord("a") for c in text])
    x, y = ids[:-1][None], ids[1:][None]  # (1, T)
    torch.manual_seed(0)
    model = BigramLanguageModel(vocab_size=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.0)
    for _ in range(300):
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    counts = torch.zeros(2, 2)
    counts.index_put_((x[0], y[0]), torch.ones(x.shape[1]), accumulate=True)
    probs = counts / counts.sum(1, keepdim=True)  # (V, V) next-character frequencies
    entropy = -torch.where(counts > 0, counts * torch.log(probs), 0.0).sum() / counts.sum()  # the best possible loss
    assert entropy.item() - 1e-5 <= loss.item() < entropy.item() + 5e-3  # near the optimum, never below it


@pytest.mark.slow
def test_bigram_on_tiny_shakespeare_reaches_the_lectures_loss(shakespeare_path):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "bigram.py"), f"--input={shakespeare_path}",
                             "--eval_iters=50", "--max_new_tokens=100"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    last = [line for line in result.stdout.splitlines() if line.startswith("step  3000 | train")][0]
    val = float(last.split("| val ")[1])  # the same log format as gpt.py's
    assert 2.40 < val < 2.60, last
