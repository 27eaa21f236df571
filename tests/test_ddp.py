"""gpt_ddp.py as a user starts it: two CPU processes (gloo) under torchrun on a tiny model. It trains,
rank 0 alone prints and saves gpt.py's own checkpoint; a nan, an error on one rank or Ctrl-C ends every
rank in seconds (a hang would hit the timeout), with at most one line of the script's own."""
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

pytestmark = [pytest.mark.slow,  # each test starts torchrun and two Pythons
              pytest.mark.skipif(sys.platform == "win32", reason="torchrun's rendezvous, killpg")]
GPT_DDP = os.path.join(ROOT, "gpt_ddp.py")
SAMPLE_PY = os.path.join(ROOT, "sample.py")
# A tiny model on a small text: a 2-process run takes about 5 s, most of it starting three Pythons.
TINY_FLAGS = ["--n_layer=1", "--n_head=2", "--n_embd=16", "--block_size=8", "--batch_size=4",
              "--max_iters=20", "--eval_interval=10", "--eval_iters=2", "--max_new_tokens=30",
              "--warmup_iters=2"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
# gpt_ddp.py with a fault on rank 1 at its 6th step: a file, as torchrun runs files.
FAULTY = """
import os, runpy, sys
sys.path.insert(0, {root!r})
import gpt

real_train_step = gpt.train_step
steps = 0


def train_step(*args):
    global steps
    real_train_step(*args)
    steps += 1
    if os.environ["RANK"] == "1" and steps == 6:
        raise RuntimeError("disk on fire\\nand a second line")


gpt.train_step = train_step
runpy.run_path({script!r}, run_name="__main__")
"""


def sigint_as_a_terminal_sends_it():
    """A child started by a job in the background inherits an ignored SIGINT: restore Python's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def torchrun(*args, nproc=2, script=GPT_DDP, timeout=90):
    """torchrun --standalone --nproc_per_node=nproc script args; a hang fails with TimeoutExpired."""
    return subprocess.run([*TORCHRUN, f"--nproc_per_node={nproc}", script, *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def log_steps(stdout):
    return [int(line.split("|")[0].split()[1]) for line in stdout.splitlines()
            if line.startswith("step ")]


def script_lines(stderr):
    """What gpt_ddp.py itself said on stderr; torchrun's report that follows is its own (logging
    lines, a traceback of torchrun, its table of failures) and is left out."""
    return [line for line in stderr.splitlines() if line.startswith(("error:", "interrupted"))]


def test_two_ranks_train_print_once_and_save_a_checkpoint_that_sample_py_reads(tmp_path, text_file):
    out = tmp_path / "out"
    result = torchrun(f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sum("at most 20 steps" in line for line in lines) == 1  # the settings, once
    assert "DDP on 2 ranks: batch 4 per rank, 8 in all" in lines
    assert log_steps(result.stdout) == [0, 10, 20] and not script_lines(result.stderr)
    assert sum(line.startswith("done: 20 steps") for line in lines) == 1
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    assert ckpt["history"]["step"] == [0, 10, 20] and ckpt["finished"] is True
    assert not [k for k in ckpt["model"] if k.startswith("module.")]  # as gpt.py saves it
    assert ckpt["config"]["max_time"] == 0 and ckpt["config"]["batch_size"] == 4  # by steps
    cfg = gpt.Config(**ckpt["config"])
    model = gpt.GPT(cfg)
    model.load_state_dict(ckpt["model"])
    text = open(text_file, encoding="utf-8").read()
    val = torch.tensor([ckpt["vocab"].index(c) for c in text[int(0.9 * len(text)):]])
    exact = gpt.whole_text_loss(model, val, cfg, gpt.autocast(cfg))  # as gpt.py's last val
    assert ckpt["history"]["val"][-1] == pytest.approx(exact, abs=1e-5)
    sample = subprocess.run([sys.executable, SAMPLE_PY, f"--out_dir={out}", "--prompt=To be",
                             "--max_new_tokens=25"], capture_output=True, text=True, timeout=60)
    assert sample.returncode == 0, sample.stderr
    assert sample.stdout.startswith("To be") and len(sample.stdout.rstrip("\n")) >= 25
    resumed = torchrun(f"--input={text_file}", "--init_from=resume", f"--out_dir={out}",
                       "--max_iters=30", "--max_new_tokens=5")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0].startswith(f"resuming {out}/ckpt.pt at step 20")
    assert log_steps(resumed.stdout) == [30]  # step 20 is not logged again
    history = torch.load(out / "ckpt.pt", weights_only=True)["history"]
    assert history["step"] == [0, 10, 20, 30]


def test_a_loss_turning_nan_ends_both_ranks_with_one_line(tmp_path, text_file):
    out = tmp_path / "out"
    flags = [f for f in TINY_FLAGS if not f.startswith("--warmup_iters")]
    started = time.perf_counter()
    result = torchrun(f"--input={text_file}", f"--out_dir={out}", *flags, "--learning_rate=1e30",
                      "--grad_clip=0", "--warmup_iters=0", timeout=60)
    assert time.perf_counter() - started < 30  # both ranks ended, well before any timeout
    assert result.returncode != 0 and script_lines(result.stderr) == [
        "error: loss nan at step 10: lower --learning_rate"], result.stderr
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)  # the last good evaluation's
    assert ckpt["history"]["step"] == [0]
    assert all(torch.isfinite(t).all() for t in ckpt["model"].values())


def test_an_error_on_one_rank_ends_both_and_keeps_the_checkpoint(tmp_path, text_file):
    script = tmp_path / "faulty.py"
    script.write_text(FAULTY.format(root=ROOT, script=GPT_DDP), encoding="utf-8")
    out = tmp_path / "out"
    started = time.perf_counter()
    result = torchrun(f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS, script=str(script),
                      timeout=60)
    assert time.perf_counter() - started < 30  # torchrun ended the other rank
    assert result.returncode != 0 and len(script_lines(result.stderr)) <= 1, result.stderr
    assert "Traceback" not in "\n".join(script_lines(result.stderr))
    assert log_steps(result.stdout) == [0]
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)  # the last evaluation's, before it
    assert ckpt["history"]["step"] == [0]


def test_ctrl_c_ends_every_rank_with_one_line_and_keeps_the_checkpoint(tmp_path, text_file):
    out = tmp_path / "out"
    flags = [f for f in TINY_FLAGS if not f.startswith(("--max_iters", "--eval_interval"))]
    proc = subprocess.Popen([*TORCHRUN, "--nproc_per_node=2", GPT_DDP, f"--input={text_file}",
                             f"--out_dir={out}", *flags, "--max_iters=1000000",
                             "--eval_interval=50"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=sigint_as_a_terminal_sends_it,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    for line in proc.stdout:  # wait until training is under way
        if line.startswith("step    50"):
            break
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: torchrun and both ranks
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert script_lines(err) == ["interrupted: --init_from=resume goes on from the last evaluation"]
    step = torch.load(out / "ckpt.pt", weights_only=True)["history"]["step"][-1]
    assert step >= 50 and step % 50 == 0


@pytest.mark.parametrize("flags, phrase", [
    ([], "start gpt_ddp.py with torchrun: torchrun --standalone --nproc_per_node=N gpt_ddp.py"),
    (["--max_time=60"], "trains by steps: drop --max_time"),
])
def test_without_torchrun_or_with_a_time_budget_one_line(flags, phrase):
    env = {**os.environ, "LOCAL_RANK": "0", "RANK": "0"} if flags else os.environ
    result = subprocess.run([sys.executable, GPT_DDP, *flags], capture_output=True, text=True,
                            timeout=60, env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: ")
    assert phrase in lines[0], lines[0]
