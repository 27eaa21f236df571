"""gpt.py as a user runs it: end to end, resume, seeds, and every bad input (one clear line, no traceback)."""
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import gpt
from conftest import ROOT

GPT_PY = os.path.join(ROOT, "gpt.py")
# A small model on a small text, so that a whole run takes a few seconds.
TINY_FLAGS = ["--n_layer=1", "--n_head=2", "--n_embd=16", "--block_size=8", "--batch_size=4", "--max_iters=20",
              "--eval_interval=10", "--eval_iters=2", "--max_new_tokens=30", "--warmup_iters=2"]


@pytest.fixture
def text_file(tmp_path):
    """About 6,000 characters of made-up verse: enough for a block of 8 in both splits."""
    words = "to be or not that is the question whether tis nobler in mind suffer slings arrows".split()
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(8)).capitalize() + "," for i in range(120)]
    path = tmp_path / "verse.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def run(*args, cwd=None, script=GPT_PY, timeout=180):
    """Run the script in a fresh process and return the CompletedProcess (text output)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=env)


def assert_clean_error(result, *phrases):
    """Non-zero exit, one 'error:' line on stderr naming the problem, and no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def test_end_to_end_writes_checkpoint_plot_and_sample(tmp_path, text_file):
    out = tmp_path / "out"
    result = run(f"--input={text_file}", f"--out_dir={out}", "--prompt=To be", *TINY_FLAGS, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "step    20 | train" in result.stdout
    assert (out / "ckpt.pt").stat().st_size > 0 and (out / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert result.stdout[-36:-1].startswith("To be")  # the last thing printed: the prompt and 30 new characters
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    assert ckpt["config"]["n_layer"] == 1 and ckpt["vocab"] == sorted(set(open(text_file).read()))


def test_help_lists_every_flag_with_its_comment():
    result = run("--help")
    assert result.returncode == 0
    for field in ("batch_size", "block_size", "max_iters", "learning_rate", "n_embd", "top_k", "init_from"):
        assert f"--{field}=" in result.stdout
    assert "context length" in result.stdout and "--vocab_size" not in result.stdout


def test_checkpoint_round_trip_gives_identical_logits_and_resume_continues(tmp_path, text_file):
    out = str(tmp_path / "out")
    first = gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS])
    ckpt = gpt.load_checkpoint(os.path.join(out, "ckpt.pt"))
    model = gpt.GPT(gpt.Config(**ckpt["config"]))
    model.load_state_dict(ckpt["model"])
    idx = torch.randint(len(ckpt["vocab"]), (2, 8))
    torch.testing.assert_close(model.eval()(idx)[0], first["model"].eval()(idx)[0], rtol=0, atol=0)
    step = ckpt["step"]  # the step of the best val loss so far
    resumed = run("--init_from=resume", f"--out_dir={out}", f"--input={text_file}", f"--max_iters={step + 10}")
    assert resumed.returncode == 0, resumed.stderr
    steps = [int(line.split("|")[0].split()[1]) for line in resumed.stdout.splitlines() if line.startswith("step")]
    assert steps[0] == step and steps[-1] == step + 10
    sample_only = run("--init_from=resume", f"--out_dir={out}", "--max_iters=0", "--max_new_tokens=20")
    assert sample_only.returncode == 0 and "step" not in sample_only.stdout, sample_only.stderr


def test_same_seed_repeats_a_run_exactly(tmp_path, text_file):
    def losses(seed, name):
        result = run(f"--input={text_file}", f"--out_dir={tmp_path / name}", f"--seed={seed}", *TINY_FLAGS)
        return [line.split("|")[1:3] for line in result.stdout.splitlines() if line.startswith("step")]

    assert losses(7, "a") == losses(7, "b")
    assert losses(7, "a") != losses(8, "c")


def test_laptop_preset_without_a_gpu_and_not_with_size_flags(text_file, capsys):
    cfg = gpt.make_config({}, "cpu", None, "")
    assert (cfg.n_layer, cfg.n_embd, cfg.block_size) == (gpt.LAPTOP["n_layer"], gpt.LAPTOP["n_embd"],
                                                         gpt.LAPTOP["block_size"])
    assert "laptop-sized" in capsys.readouterr().out
    assert gpt.make_config({"max_iters": 7}, "cpu", None, "").max_iters == 7  # other flags apply on top
    assert gpt.make_config({"n_layer": 6}, "cpu", None, "") == gpt.Config(n_layer=6)  # a size flag: the full model
    assert gpt.make_config({}, "cuda", None, "") == gpt.Config()


def test_kernel_arguments_are_ignored_inside_a_notebook(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", "/tmp/kernel-1.json"])
    monkeypatch.setitem(sys.modules, "ipykernel", sys)  # anything: only its presence matters
    assert gpt.parse_args(gpt.Config) == {}


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("flag,phrases", [
    ("--n_layr=2", ["unknown flag --n_layr", "did you mean --n_layer?"]),
    ("--max_iters=lots", ["--max_iters=lots is not a valid int"]),
    ("--dropout=x", ["--dropout=x is not a valid float"]),
    ("n_layer=2", ["write flags as --name=value"]),
    ("--n_embd=100", ["--n_embd=100 must be divisible by --n_head=6"]),
    ("--n_layer=0", ["--n_layer must be at least 1"]),
    ("--batch_size=-3", ["--batch_size must be at least 1"]),
    ("--dropout=1.0", ["--dropout must be in [0, 1)"]),
    ("--dropout=-0.1", ["--dropout must be in [0, 1)"]),
    ("--temperature=0", ["--temperature must be above 0"]),
    ("--init_from=resum", ["--init_from must be one of scratch, resume"]),
])
def test_bad_flags(flag, phrases, tmp_path, text_file):
    assert_clean_error(run(flag, f"--input={text_file}", f"--out_dir={tmp_path}"), *phrases)


def test_bad_input_files(tmp_path):
    assert_clean_error(run(f"--input={tmp_path / 'nope.txt'}"), "nope.txt", "--input")
    (tmp_path / "empty.txt").write_text("")
    assert_clean_error(run(f"--input={tmp_path / 'empty.txt'}"), "empty")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait ".encode("latin-1") * 100)
    assert_clean_error(run(f"--input={tmp_path / 'latin1.txt'}"), "not UTF-8", "offset 3")
    (tmp_path / "short.txt").write_text("a short text, " * 30)
    assert_clean_error(run(f"--input={tmp_path / 'short.txt'}", "--n_layer=1"), "too short for --block_size=256")


def test_prompt_outside_the_vocabulary_is_named(tmp_path, text_file):
    result = run(f"--input={text_file}", f"--out_dir={tmp_path}", "--prompt=Zebra§", *TINY_FLAGS)
    assert_clean_error(result, "'Z§'", "--prompt")
    assert not (tmp_path / "ckpt.pt").exists()  # checked before any training


def test_device_that_is_not_there():
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    assert_clean_error(run("--device=cuda"), "--device=cuda", "no CUDA device")


def test_resume_without_a_checkpoint(tmp_path):
    assert_clean_error(run("--init_from=resume", f"--out_dir={tmp_path}"), "no checkpoint at", "ckpt.pt")


@pytest.fixture
def trained(tmp_path, text_file):
    """An out_dir holding the checkpoint of a tiny run, and that checkpoint's bytes."""
    out = tmp_path / "trained"
    gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS])
    return out, (out / "ckpt.pt").read_bytes()


def test_resume_from_a_corrupt_or_unsafe_checkpoint(tmp_path, trained):
    out, blob = trained
    (out / "ckpt.pt").write_bytes(blob[: len(blob) // 2])
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}"), "not a readable checkpoint")
    torch.save({"model": object()}, out / "ckpt.pt")  # a pickled object: code that weights_only refuses
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}"), "not a readable checkpoint")


def test_resume_with_other_shapes_or_vocabulary_keeps_the_checkpoint(tmp_path, trained):
    out, blob = trained
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}", "--n_embd=32"),
                       "--n_embd=32 but", "has n_embd=16")
    other = tmp_path / "other.txt"
    other.write_text("0123456789 abcdef\n" * 500)
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}", f"--input={other}", "--max_iters=40"),
                       "other characters")
    assert (out / "ckpt.pt").read_bytes() == blob


def test_bad_input_never_touches_an_existing_checkpoint(trained, text_file):
    out, blob = trained
    for args in (["--n_layr=1"], ["--n_embd=31"], ["--input=/no/such/file"], ["--prompt=§"]):
        assert_clean_error(run(f"--out_dir={out}", f"--input={text_file}", *args))  # the last --input wins
        assert (out / "ckpt.pt").read_bytes() == blob


def test_loss_turning_nan_stops_and_keeps_the_last_good_checkpoint(tmp_path, text_file):
    out = tmp_path / "out"
    result = run(f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS, "--learning_rate=1e30", "--warmup_iters=0",
                 "--grad_clip=0")
    assert_clean_error(result, "loss became", "lower --learning_rate")
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)  # saved at step 0, before it diverged
    assert ckpt["step"] == 0 and all(torch.isfinite(t).all() for t in ckpt["model"].values())


def test_ctrl_c_saves_a_checkpoint_and_says_how_to_resume(tmp_path, text_file):
    out = tmp_path / "out"
    flags = [f for f in TINY_FLAGS if not f.startswith(("--max_iters", "--eval_interval"))]
    proc = subprocess.Popen([sys.executable, "-u", GPT_PY, f"--input={text_file}", f"--out_dir={out}", *flags,
                             "--max_iters=1000000", "--eval_interval=50"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:  # wait until training is under way
        if line.startswith("step    50"):
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "interrupted at step" in err and "--init_from=resume" in err
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    assert ckpt["step"] >= 50 and not os.path.exists(out / "ckpt.pt.tmp")
    resumed = run("--init_from=resume", f"--out_dir={out}", f"--max_iters={ckpt['step'] + 5}", "--max_new_tokens=5")
    assert resumed.returncode == 0 and f"step {ckpt['step'] + 5:5d}" in resumed.stdout, resumed.stderr
