"""sample.py as a user runs it on a checkpoint that gpt.py saved: prompt, temperature, top-k, several samples,
and one clear line for a bad prompt or a missing or corrupt checkpoint."""
import os
import subprocess
import sys

import pytest
import torch

import gpt
import sample
from conftest import ROOT
from test_cli import TINY_FLAGS, assert_clean_error, assert_error

SAMPLE_PY = os.path.join(ROOT, "sample.py")


def run_sample(*args):
    return subprocess.run([sys.executable, SAMPLE_PY, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    """The checkpoint of a tiny gpt.py run on a small made-up text of lowercase words."""
    tmp = tmp_path_factory.mktemp("sample")
    text = tmp / "words.txt"
    text.write_text("to be or not to be that is the question\n" * 200, encoding="utf-8")
    gpt.main([f"--input={text}", f"--out_dir={tmp / 'out'}", *TINY_FLAGS, "--max_iters=60"])
    return str(tmp / "out")


def test_samples_start_with_the_prompt_and_have_the_length_asked(out_dir):
    samples = sample.main([f"--out_dir={out_dir}", "--prompt=to be", "--max_new_tokens=40", "--num_samples=3",
                           "--device=cpu"])
    assert len(samples) == 3 and all(s.startswith("to be") and len(s) == 5 + 40 for s in samples)
    assert len(set(samples)) > 1  # sampled, not all the same


@pytest.mark.slow
def test_the_printed_samples_are_separated(out_dir):
    result = run_sample(f"--out_dir={out_dir}", "--prompt=or", "--max_new_tokens=10", "--num_samples=2")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout[:-1].split("\n---------------\n")  # print() adds the last newline
    assert first.startswith("or") and second.startswith("or") and len(first) == len(second) == 12


def test_temperature_0_is_greedy_and_top_k_1_equals_it(out_dir):
    flags = [f"--out_dir={out_dir}", "--prompt=the", "--max_new_tokens=30", "--device=cpu"]
    greedy = sample.main([*flags, "--temperature=0", "--seed=1"])
    assert greedy == sample.main([*flags, "--temperature=0", "--seed=2"])  # the same text, whatever the seed
    assert sample.main([*flags, "--top_k=1", "--seed=3"]) == greedy  # only the likeliest character left


def test_generate_follows_the_argmax_and_top_k_keeps_only_the_k_likeliest():
    """The oracle: with temperature 0 each new token is the argmax of the logits of the text so far."""
    torch.manual_seed(0)
    model = gpt.GPT(gpt.Config(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.0)).eval()
    idx = torch.randint(11, (2, 3))  # (B, T)
    out = sample.generate(model, idx, 12, temperature=0)  # (B, 15): longer than the context of 8
    for t in range(3, 15):
        logits, _ = model(out[:, max(0, t - 8):t])
        assert torch.equal(out[:, t], logits[:, -1].argmax(-1)), t
    top2 = [sample.generate(model, idx[:1, :1], 1, temperature=1.0, top_k=2)[0, 1].item() for _ in range(200)]
    likeliest = model(idx[:1, :1])[0][0, -1].topk(2).indices.tolist()
    assert set(top2) == set(likeliest)  # only the two likeliest tokens, both drawn in 200 tries


def test_a_prompt_outside_the_vocabulary_is_named(out_dir, capsys):
    assert_error([f"--out_dir={out_dir}", "--prompt=To be§"], capsys, "'T§'", "--prompt",
                 main=sample.main)


@pytest.mark.slow
def test_a_missing_or_corrupt_checkpoint_is_one_line(tmp_path, out_dir):
    assert_clean_error(run_sample(f"--out_dir={tmp_path}"), "can't load", "FileNotFoundError", "train a model")
    blob = open(os.path.join(out_dir, "ckpt.pt"), "rb").read()
    (tmp_path / "ckpt.pt").write_bytes(blob[: len(blob) // 2])
    assert_clean_error(run_sample(f"--out_dir={tmp_path}"), "can't load")
    torch.save({"model": object()}, tmp_path / "ckpt.pt")  # a pickled object: code that weights_only refuses
    assert_clean_error(run_sample(f"--out_dir={tmp_path}"), "can't load")


@pytest.mark.parametrize("flag,phrase", [("--temperature=-1", "--temperature"), ("--temperature=nan", "finite"),
                                         ("--top_k=-2", "--top_k"), ("--num_sample=2", "unrecognized"),
                                         ("--num_samples=0", "--num_samples: must be 1 or more, got 0"),
                                         ("--max_new_tokens=0", "--max_new_tokens: must be 1 or more, got 0"),
                                         ("--num_samples=-1", "--num_samples: must be 1 or more, got -1")])
def test_bad_flags_are_one_line(flag, phrase, out_dir, capsys):
    assert_error([f"--out_dir={out_dir}", flag], capsys, phrase, main=sample.main)


@pytest.mark.slow
def test_a_bad_flag_in_a_terminal_is_one_line_and_no_traceback(out_dir):
    assert_clean_error(run_sample(f"--out_dir={out_dir}", "--top_k=-2"), "--top_k")
