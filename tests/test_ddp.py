"""gpt_ddp.py as a user starts it: two CPU processes (gloo) under torchrun on a tiny model. It trains, logs
each evaluation once, saves gpt.py's own checkpoint; a nan, an error or Ctrl-C on one rank ends every rank with
one line, in seconds (a hang would hit the timeout)."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

import gpt
from conftest import ROOT

GPT_DDP = os.path.join(ROOT, "gpt_ddp.py")
SAMPLE_PY = os.path.join(ROOT, "sample.py")
# A tiny model on a small text: a 2-process run takes about 5 s, most of it starting three Pythons.
TINY_FLAGS = ["--n_layer=1", "--n_head=2", "--n_embd=16", "--block_size=8", "--batch_size=4", "--max_iters=20",
              "--eval_interval=10", "--eval_iters=2", "--max_new_tokens=30", "--warmup_iters=2"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
# gpt_ddp.py with a fault on rank 1 at step 5 (its loss turns nan, or it raises): a file, as torchrun runs files.
FAULTY = """
import os, runpy, sys
import torch
sys.path.insert(0, {root!r})
import gpt

real_train_step = gpt.train_step
steps = 0


def train_step(model, optimizer, scaler, splits, cfg, lr):
    global steps
    loss = real_train_step(model, optimizer, scaler, splits, cfg, lr)
    steps += 1
    if os.environ["RANK"] == "1" and steps == 6:  # the step from 5 to 6
        if {fault!r} == "nan":
            return torch.tensor(float("nan"))
        raise RuntimeError("disk on fire\\nand a second line")
    return loss


gpt.train_step = train_step
runpy.run_path({script!r}, run_name="__main__")
"""


def torchrun(*args, nproc=2, script=GPT_DDP, timeout=90):
    """torchrun --standalone --nproc_per_node=nproc script args; a hang fails with TimeoutExpired."""
    return subprocess.run([*TORCHRUN, f"--nproc_per_node={nproc}", script, *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})


def log_lines(stdout):
    return [line for line in stdout.splitlines() if line.startswith("step ")]


def script_lines(stderr):
    """What gpt_ddp.py itself said on stderr; torchrun's report that follows is its own (logging lines,
    a traceback of torchrun, its table of failures) and is left out."""
    return [line for line in stderr.splitlines() if line.startswith(("error:", "interrupted"))]


def assert_one_line(result, *phrases):
    """A non-zero exit, one line from the script naming the problem, and no rank's traceback."""
    assert result.returncode != 0, result.stdout
    lines = script_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith("[rank")], result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def test_two_ranks_train_log_once_and_save_a_checkpoint_that_gpt_py_samples_from(tmp_path, text_file):
    out = tmp_path / "out"
    result = torchrun(f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.match(r"preset laptop(_float32)?: 1 layers", lines[0]) and "at most 20 steps" in lines[0]  # gpt.py's
    assert lines[1] == "DDP, world size 2 (gloo): batch 4 per rank, global batch 8"
    assert sum("at most 20 steps" in line for line in lines) == 1  # the settings line, once
    assert [line[:10] for line in log_lines(result.stdout)] == ["step     0", "step    10", "step    20"]
    assert "20 steps in" in result.stdout and not script_lines(result.stderr)
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    assert ckpt["step"] == 20 and ckpt["history"]["step"] == [0, 10, 20]
    assert not [k for k in ckpt["model"] if k.startswith("module.")]  # the plain model, as gpt.py saves it
    assert ckpt["config"]["max_time"] == 0 and ckpt["config"]["batch_size"] == 4  # the laptop preset's 600 s: off
    model = gpt.GPT(gpt.Config(**ckpt["config"]))
    model.load_state_dict(ckpt["model"])
    text = open(text_file, encoding="utf-8").read()
    val = torch.tensor([ckpt["vocab"].index(c) for c in text[int(0.9 * len(text)):]])
    cfg = gpt.Config(**ckpt["config"])
    exact = gpt.whole_text_loss(model, val, cfg, gpt.autocast(cfg))  # as gpt.py's last evaluation scores val
    assert ckpt["finished"] is True and ckpt["history"]["val"][-1] == pytest.approx(exact, abs=1e-5)
    sample = subprocess.run([sys.executable, SAMPLE_PY, f"--out_dir={out}", "--prompt=To be", "--max_new_tokens=25"],
                            capture_output=True, text=True, timeout=60)
    assert sample.returncode == 0, sample.stderr
    assert sample.stdout.startswith("To be") and len(sample.stdout.rstrip("\n")) >= 25
    resumed = torchrun("--init_from=resume", f"--out_dir={out}", "--max_iters=30", "--max_new_tokens=5")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0].startswith(f"resuming {out}/ckpt.pt at step 20")
    assert [line[:10] for line in log_lines(resumed.stdout)] == ["step    30"]  # step 20 is not logged again
    assert torch.load(out / "ckpt.pt", weights_only=True)["history"]["step"] == [0, 10, 20, 30]


@pytest.mark.parametrize("fault, phrases", [
    ("nan", ["error: the loss became nan or inf on rank 1 by step 6", "lower --learning_rate"]),
    ("error", ["error: rank 1: RuntimeError: disk on fire"]),
])
def test_a_fault_on_one_rank_ends_both_with_one_line(tmp_path, text_file, fault, phrases):
    script = tmp_path / "faulty.py"
    script.write_text(FAULTY.format(root=ROOT, script=GPT_DDP, fault=fault), encoding="utf-8")
    out = tmp_path / "out"
    started = time.perf_counter()
    result = torchrun(f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS, script=str(script), timeout=60)
    assert time.perf_counter() - started < 30  # both ranks ended, well before any collective's timeout
    assert_one_line(result, *phrases)
    assert "second line" not in result.stderr
    assert [line[:10] for line in log_lines(result.stdout)] == ["step     0"]
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)  # the last evaluation's, before the fault
    assert ckpt["step"] == 0 and all(torch.isfinite(t).all() for t in ckpt["model"].values())


def test_ctrl_c_ends_every_rank_with_one_line_and_keeps_the_checkpoint(tmp_path, text_file):
    out = tmp_path / "out"
    flags = [f for f in TINY_FLAGS if not f.startswith(("--max_iters", "--eval_interval"))]
    proc = subprocess.Popen([*TORCHRUN, "--nproc_per_node=2", GPT_DDP, f"--input={text_file}", f"--out_dir={out}",
                             *flags, "--max_iters=1000000", "--eval_interval=50"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    for line in proc.stdout:  # wait until training is under way
        if line.startswith("step    50"):
            break
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: torchrun and both ranks get it
    _, err = proc.communicate(timeout=60)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
    assert_one_line(result, "interrupted", "--init_from=resume")
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    assert ckpt["step"] >= 50 and ckpt["step"] % 50 == 0


@pytest.mark.parametrize("flags, phrase", [
    ([], "start gpt_ddp.py with torchrun: torchrun --standalone --nproc_per_node=N gpt_ddp.py"),
    (["--max_time=60"], "no time budget: drop --max_time"),
])
def test_without_torchrun_or_with_a_time_budget_one_line(flags, phrase):
    result = subprocess.run([sys.executable, GPT_DDP, *flags], capture_output=True, text=True, timeout=60)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert phrase in lines[0], lines[0]
