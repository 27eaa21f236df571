"""gpt.py as a user runs it: end to end, presets, resume, seeds, and every bad input (one clear line, no traceback)."""
import contextlib
import dataclasses
import math
import os
import pathlib
import re
import shutil
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
              "--eval_interval=10", "--eval_iters=2", "--max_new_tokens=30", "--warmup_iters=2", "--max_time=0"]


def run(*args, cwd=None, script=GPT_PY, timeout=180):
    """Run the script in a fresh process and return the CompletedProcess (text output)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=env)


def assert_clean_error(result, *phrases):
    """Non-zero exit, one 'error:' line on stderr naming the problem (argparse's own starts 'gpt.py: error:'),
    and no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and re.match(r"^(\S+\.py: )?error: ", lines[0]), result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def test_end_to_end_writes_a_checkpoint_and_a_sample(tmp_path, text_file):
    out = tmp_path / "out"
    result = run(f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # the first line says what runs: the laptop preset on any machine without CUDA, and why that dtype
    assert re.match(r"preset laptop: 1 layers, 2 heads, 16 channels, context 8, batch 4 \| at most 20 steps "
                    r"\| cpu, (bfloat16|float32): .+ \| 0\.\d\dM parameters\n", result.stdout)
    assert "step    20 | train" in result.stdout
    lines = result.stdout.splitlines()
    last_val = re.findall(r"step    20 \| train \S+ \| val (\S+) \|", result.stdout)[0]
    assert re.fullmatch(rf"trained 20 steps in \d+ s: val {last_val} is exact \(the whole validation text\), train an "
                        r"estimate \(--max_iters=20 --max_time=0 trains as many by count\)",
                        lines[lines.index(next(line for line in lines if line.startswith("trained")))])
    sample = result.stdout.split("trains as many by count)\n", 1)[1]
    assert len(sample) == 31 + 1 and sample.startswith("\n")  # id 0 (a newline) and 30 new characters, printed
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    assert ckpt["step"] == 20 and ckpt["history"]["step"] == [0, 10, 20]
    assert ckpt["config"]["n_layer"] == 1 and ckpt["vocab"] == sorted(set(open(text_file).read()))


def test_help_lists_every_flag_with_its_help_text():
    result = run("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # argparse wraps long help lines
    flags = [f for f in dataclasses.fields(gpt.Config) if "help" in f.metadata]
    assert len(flags) >= 20
    for f in flags:
        assert re.search(f"--{f.name}[ ,]", text) and " ".join(f.metadata["help"].split()) in text, f.name
        assert f"(default: {f.default!r})" in text, f.name  # the plain default, not a preset's
    assert "--vocab_size" not in text  # set from the data
    assert "--preset {auto,lecture,laptop}" in text and "--compile, --no-compile" in text


def test_help_works_where_gpt_py_was_pasted_into_a_notebook_cell(capsys):
    """No __file__, no source file to read: the help text lives in the fields themselves."""
    namespace = {"__name__": "pasted"}
    exec(compile(open(GPT_PY, encoding="utf-8").read(), "<cell>", "exec"), namespace)
    with pytest.raises(SystemExit) as stop:
        namespace["main"](["--help"])
    assert stop.value.code == 0 and "--max_iters" in capsys.readouterr().out


def settings(tmp_path, *flags):
    """The Config that make_settings decides for these flags, on this machine (no CUDA GPU)."""
    return gpt.make_settings([f"--out_dir={tmp_path}", *flags])[0]


def hardware(monkeypatch, device="cpu", native_bf16=True):
    """Make gpt.py see this device (and the CPU), and a CPU with or without native bfloat16."""
    monkeypatch.setattr(gpt.torch.cuda, "is_available", lambda: device == "cuda")
    monkeypatch.setattr(gpt.torch.backends.mps, "is_available", lambda: device == "mps")
    monkeypatch.setattr(gpt.torch.cuda, "get_device_capability", lambda: (9, 0))
    monkeypatch.setattr(gpt.torch.cpu, "_is_avx512_bf16_supported", lambda: native_bf16)
    monkeypatch.setattr(gpt.torch.cpu, "_is_amx_tile_supported", lambda: False)


def test_laptop_preset_without_a_gpu_and_lecture_preset_by_flag(tmp_path, monkeypatch):
    hardware(monkeypatch, "cpu", native_bf16=True)
    laptop, _, summary = gpt.make_settings([f"--out_dir={tmp_path}"])
    chosen = dict(device="cpu", dtype="bfloat16")
    assert laptop == gpt.Config(**gpt.PRESETS["laptop"], preset="laptop", out_dir=str(tmp_path), **chosen)
    assert summary == ("preset laptop: 4 layers, 4 heads, 128 channels, context 64, batch 16 | at most 585 s, "
                       "100000 steps | cpu, bfloat16: the CPU has native bfloat16 (AVX512-BF16 or AMX)")
    lecture = settings(tmp_path, "--preset=lecture")
    assert lecture == gpt.Config(preset="lecture", out_dir=str(tmp_path), **chosen)
    assert (lecture.n_layer, lecture.n_embd, lecture.block_size) == (6, 384, 256)


def test_cuda_picks_the_lecture_preset(tmp_path, monkeypatch):
    hardware(monkeypatch, "cuda")
    cfg, _, summary = gpt.make_settings([f"--out_dir={tmp_path}"])
    assert cfg == gpt.Config(preset="lecture", out_dir=str(tmp_path), device="cuda", dtype="bfloat16")
    assert summary.startswith("preset lecture: 6 layers, 6 heads, 384 channels, context 256, batch 64 | at most 5000 "
                              "steps | cuda, bfloat16: compute capability 9.0 has bfloat16")


@pytest.mark.parametrize("avx512_bf16,amx,expected", [(True, False, "bfloat16"), (False, True, "bfloat16"),
                                                      (False, False, "float32")])
def test_cpu_bfloat16_only_where_it_is_native(tmp_path, monkeypatch, avx512_bf16, amx, expected):
    """oneDNN emulates bfloat16 on any AVX-512 CPU; gpt.py picks it only with AVX512-BF16 or AMX."""
    hardware(monkeypatch, "cpu")
    monkeypatch.setattr(gpt.torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(gpt.torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(gpt.torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    assert settings(tmp_path).dtype == expected


@pytest.mark.parametrize("device,native_bf16,flags,preset,dtype", [
    ("cpu", True, [], "laptop", "bfloat16"),
    ("cpu", False, [], "laptop", "float32"),  # most laptops: no AVX512-BF16, no AMX; the same model
    ("cpu", True, ["--dtype=float32"], "laptop", "float32"),  # the precision given, not detected
    ("mps", True, [], "laptop", "float32"),  # MPS trains in float32
    ("cuda", False, [], "lecture", "bfloat16"),
    ("cuda", False, ["--dtype=float32"], "lecture", "float32"),
    ("cuda", False, ["--preset=laptop"], "laptop", "bfloat16"),  # a preset named stays as it is
])
def test_auto_preset_follows_the_device_alone(tmp_path, monkeypatch, device, native_bf16, flags, preset, dtype):
    """One preset without CUDA, whatever the precision: the precision follows the hardware, the model does not."""
    hardware(monkeypatch, device, native_bf16)
    cfg, _, summary = gpt.make_settings([f"--out_dir={tmp_path}", *flags])
    assert cfg.preset == preset and summary.startswith(f"preset {preset}: ") and cfg.dtype == dtype
    assert cfg == gpt.Config(**{**gpt.PRESETS[preset], "preset": preset, "out_dir": str(tmp_path), "device": device,
                                "dtype": dtype})
    assert f"| {device}, {dtype}: " in summary  # the line says on what, and why that dtype


def test_only_two_presets_and_the_laptop_one_is_held_by_time():
    assert set(gpt.PRESETS) == {"lecture", "laptop"}
    laptop = gpt.Config(**gpt.PRESETS["laptop"])
    assert laptop.max_time == 585 and laptop.max_iters >= 50000  # time stops it, not the step count
    assert sum(p.numel() for p in gpt.GPT(laptop).parameters()) < 1e6  # small enough for one slow core


def test_settings_need_no_os_sysconf(tmp_path, monkeypatch):
    """Windows has no os.sysconf: nothing on the way to a run may call it."""
    monkeypatch.delattr(os, "sysconf", raising=False)
    assert settings(tmp_path).n_layer == 4 or torch.cuda.is_available()


@pytest.mark.parametrize("preset", ["laptop", "lecture"])
def test_a_flag_changes_only_the_field_it_names(tmp_path, preset):
    base = settings(tmp_path, f"--preset={preset}")
    for f in dataclasses.fields(gpt.Config):
        if "help" not in f.metadata or f.name in ("out_dir", "preset", "init_from", "device", "input"):
            continue
        choices = f.metadata["choices"]
        value = getattr(base, f.name) * 2
        if choices:
            value = [c for c in choices if c not in (getattr(base, f.name), "auto")][0]
        if f.name == "dropout":
            value = 0.3
        given = f"--{f.name}={value}"
        if f.type is bool:
            value = not getattr(base, f.name)
            given = f"--{'' if value else 'no-'}{f.name}"
        changed = settings(tmp_path, f"--preset={preset}", given)
        assert changed == dataclasses.replace(base, **{f.name: value}), f.name


def test_kernel_arguments_are_ignored_inside_a_notebook(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", "/tmp/kernel-1.json"])
    monkeypatch.setitem(sys.modules, "ipykernel", sys)  # anything: only its presence matters
    assert gpt.parse_flags(gpt.Config) == {}


def test_checkpoint_round_trip_gives_identical_logits_and_resume_continues(tmp_path, text_file):
    out = str(tmp_path / "out")
    first = gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS])
    ckpt = gpt.load_checkpoint(os.path.join(out, "ckpt.pt"))
    assert len(ckpt["history"]["seconds"]) == 3 and ckpt["history"]["seconds"][0] < 1  # of training before step 0
    model = gpt.GPT(gpt.Config(**ckpt["config"]))
    model.load_state_dict(ckpt["model"])
    idx = torch.randint(len(ckpt["vocab"]), (2, 8))
    torch.testing.assert_close(model.eval()(idx)[0], first["model"].eval()(idx)[0], rtol=0, atol=0)
    step = ckpt["step"]  # the last step: ckpt.pt holds the latest state
    resumed = run("--init_from=resume", f"--out_dir={out}", f"--max_iters={step + 10}")
    assert resumed.returncode == 0, resumed.stderr
    steps = [int(line.split("|")[0].split()[1]) for line in resumed.stdout.splitlines() if line.startswith("step")]
    assert steps == [step + 10]  # the step resumed from is not evaluated (nor logged) twice
    history = torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)["history"]
    assert history["step"] == [0, 10, 20, 30]
    assert history["seconds"][:3] == ckpt["history"]["seconds"] and history["seconds"][3] >= history["seconds"][2]


def test_the_final_val_is_the_exact_whole_text_score_of_the_saved_model(tmp_path, text_file):
    """The last evaluation's val scores every target of the validation split once, as a plain loop over its windows
    of 8 scores ckpt.pt; the evaluations before it are random estimates."""
    out = tmp_path / "out"
    result = run(f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS, "--dtype=float32")
    assert result.returncode == 0, result.stderr
    printed = float(re.findall(r"step    20 \| train \S+ \| val (\S+)", result.stdout)[0])
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    model = gpt.GPT(gpt.Config(**ckpt["config"])).eval()
    model.load_state_dict(ckpt["model"])
    text = open(text_file, encoding="utf-8").read()
    val = torch.tensor([ckpt["vocab"].index(c) for c in text[int(0.9 * len(text)):]])
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(val) - 8, 8):  # each window whose 8 targets all lie in val; the rest dropped
            logits, _ = model(val[None, start:start + 8])
            total += torch.nn.functional.cross_entropy(logits[0], val[start + 1:start + 9], reduction="sum").item()
            count += 8
    assert count == (len(val) - 1) // 8 * 8 and len(val) - 1 - count < 8
    assert abs(printed - total / count) <= 1e-4 and ckpt["history"]["val"][-1] == pytest.approx(total / count, abs=1e-5)
    assert ckpt["finished"] is True


def test_the_exact_score_draws_no_random_numbers_and_leaves_dropout_as_it_was():
    cfg = gpt.Config(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.3, batch_size=3, device="cpu")
    model = gpt.GPT(cfg)  # in training mode, dropout on: the score must switch it off
    data = torch.randint(11, (101,))
    splits = {"train": data, "val": data}
    exact, estimates = [], []
    for seed in (0, 1):
        torch.manual_seed(seed)
        exact.append(gpt.whole_text_loss(model, data, cfg, contextlib.nullcontext()))
        estimates.append(gpt.estimate_loss(model, splits, dataclasses.replace(cfg, eval_iters=2),
                                           contextlib.nullcontext())["val"])
    assert exact[0] == exact[1] and estimates[0] != estimates[1] and model.training


def test_a_save_that_fails_midway_is_one_line_and_keeps_the_last_checkpoint(trained, monkeypatch, capsys):
    """As on a full disk: part of ckpt.pt.tmp is written, then the write raises an OSError."""
    out, blob = trained
    write_bytes = pathlib.Path.write_bytes

    def full_disk(path, data):
        write_bytes(path, bytes(data[:100]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_bytes", full_disk)
    with pytest.raises(SystemExit) as stop:
        gpt.main([f"--out_dir={out}", "--init_from=resume", "--max_iters=30"])
    err = [line for line in capsys.readouterr().err.splitlines() if line]
    assert stop.value.code == 1 and len(err) == 1, err
    assert err[0].startswith(f"error: can't save {out / 'ckpt.pt'} ([Errno 28] No space left on device)")
    assert "--out_dir" in err[0] and not (out / "ckpt.pt.tmp").exists() and (out / "ckpt.pt").read_bytes() == blob
    assert gpt.load_checkpoint(str(out / "ckpt.pt"))["step"] == 20


def test_a_full_disk_at_a_save_on_a_real_small_filesystem(tmp_path, text_file):
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("no tmpfs can be mounted here (it needs root on Linux)")
    try:
        out = small / "out"
        first = run(f"--out_dir={out}", f"--input={text_file}", *TINY_FLAGS)
        assert first.returncode == 0, first.stderr
        blob = (out / "ckpt.pt").read_bytes()
        with open(small / "filler", "wb") as f:  # the rest of the disk
            try:
                f.write(b"\0" * shutil.disk_usage(small).free)
            except OSError:
                pass
        result = run("--init_from=resume", f"--out_dir={out}", "--max_iters=30")
        assert_clean_error(result, "can't save", "No space left on device", str(out), "--out_dir")
        assert not (out / "ckpt.pt.tmp").exists() and (out / "ckpt.pt").read_bytes() == blob
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_ctrl_c_then_resume_gives_the_losses_of_an_uninterrupted_run(tmp_path, text_file, monkeypatch):
    """Ctrl-C injected at a fixed step: the last evaluation's checkpoint holds the random state, so the run
    resumed from it goes on exactly."""
    flags = [f"--input={text_file}", *TINY_FLAGS, "--dropout=0.2"]  # dropout draws random numbers too
    straight = gpt.main([*flags, f"--out_dir={tmp_path / 'a'}"])["history"]
    lr_at = gpt.lr_at

    def lr_at_pressing_ctrl_c(step, seconds, cfg):
        if step == 13:
            signal.raise_signal(signal.SIGINT)
        return lr_at(step, seconds, cfg)

    monkeypatch.setattr(gpt, "lr_at", lr_at_pressing_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        gpt.main([*flags, f"--out_dir={tmp_path / 'b'}"])
    interrupted = torch.load(tmp_path / "b" / "ckpt.pt", weights_only=True)
    assert interrupted["step"] == 10 and interrupted["finished"] is False  # the last evaluation, not the end
    monkeypatch.setattr(gpt, "lr_at", lr_at)
    resumed = gpt.main([*flags, f"--out_dir={tmp_path / 'b'}", "--init_from=resume"])["history"]
    assert len(straight["step"]) == 3 and len(resumed["seconds"]) == 3  # the seconds differ: a real clock
    assert {k: resumed[k] for k in ("step", "train", "val")} == {k: straight[k] for k in ("step", "train", "val")}


def test_same_seed_repeats_a_run_exactly(tmp_path, text_file):
    def losses(seed, name):
        result = run(f"--input={text_file}", f"--out_dir={tmp_path / name}", f"--seed={seed}", *TINY_FLAGS)
        return [line.split("|")[1:3] for line in result.stdout.splitlines() if line.startswith("step")]

    assert losses(7, "a") == losses(7, "b")
    assert losses(7, "a") != losses(8, "c")


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("flag,phrases", [
    ("--n_layr=2", ["gpt.py: error: unrecognized arguments: --n_layr=2"]),
    ("--max_iters=lots", ["--max_iters", "invalid number value: 'lots'"]),
    ("--dropout=x", ["--dropout", "invalid number value: 'x'"]),
    ("n_layer=2", ["unrecognized arguments: n_layer=2"]),
    ("--compile=yes", ["--compile", "ignored explicit argument 'yes'"]),
    ("--n_head=3", ["--n_embd=128 must be divisible by --n_head=3", "e.g. --n_embd=192"]),
    ("--n_layer=0", ["--n_layer: must be in [1, inf), got 0"]),
    ("--batch_size=-3", ["--batch_size: must be in [1, inf), got -3"]),
    ("--eval_interval=0", ["--eval_interval: must be in [1, inf), got 0"]),
    ("--dropout=1.0", ["--dropout: must be in [0, 1), got 1.0"]),
    ("--dropout=-0.1", ["--dropout: must be in [0, 1), got -0.1"]),
    ("--dropout=nan", ["--dropout: must be in [0, 1), got nan"]),
    ("--max_time=inf", ["--max_time: must be in [0, inf), got inf"]),
    ("--max_iters=-1", ["--max_iters: must be in [0, inf), got -1"]),
    ("--learning_rate=nan", ["--learning_rate: must be in [0, inf), got nan"]),
    ("--learning_rate=inf", ["--learning_rate: must be in [0, inf), got inf"]),
    ("--min_lr=nan", ["--min_lr: must be in [0, inf)"]),
    ("--grad_clip=nan", ["--grad_clip: must be in [0, inf)"]),
    ("--weight_decay=nan", ["--weight_decay: must be in [0, inf)"]),
    ("--init_from=resum", ["--init_from", "invalid choice: 'resum'"]),
    ("--preset=gpu", ["--preset", "invalid choice: 'gpu'"]),
    ("--max_iters=0", ["--max_iters=0 trains nothing", "sample.py"]),
    ("--prompt=To", ["unrecognized arguments: --prompt=To"]),  # sampling with a prompt: sample.py
])
def test_bad_flags(flag, phrases, tmp_path, text_file):
    """On the laptop preset (a flag given later wins), so that --n_head=3 meets its 128 channels."""
    assert_clean_error(run("--preset=laptop", flag, f"--input={text_file}", f"--out_dir={tmp_path}"), *phrases)


def test_a_flag_given_twice_the_last_wins_as_in_argparse(tmp_path):
    assert settings(tmp_path, "--max_iters=3", "--max_iters=4").max_iters == 4
    assert settings(tmp_path, "--compile").compile is True and settings(tmp_path, "--no-compile").compile is False


@pytest.mark.parametrize("where", ["/proc/forbidden", "/proc", "a regular file"])
def test_an_out_dir_that_cannot_be_written_is_one_line_at_the_first_save(tmp_path, text_file, where):
    if where == "a regular file":
        where = str(tmp_path / "file")
        open(where, "w").close()
    result = run(f"--out_dir={where}", f"--input={text_file}", *TINY_FLAGS)
    assert_clean_error(result, where, "--out_dir")
    assert "step     0 | train" not in result.stdout  # the first evaluation is saved before it is logged


def test_a_second_run_never_replaces_a_checkpoint_silently(tmp_path, trained, text_file):
    out, blob = trained
    for args in ([], ["--max_iters=0"]):  # a new run; a run that trains nothing, without resume
        result = run(f"--out_dir={out}", f"--input={text_file}", *TINY_FLAGS, *args)
        assert_clean_error(result)
        assert (out / "ckpt.pt").read_bytes() == blob
    assert_clean_error(run(f"--out_dir={out}", f"--input={text_file}", *TINY_FLAGS), "ckpt.pt exists",
                       "--init_from=resume", "--init_from=scratch", "--out_dir=DIR")
    over = run(f"--out_dir={out}", f"--input={text_file}", *TINY_FLAGS, "--init_from=scratch", "--seed=5")
    assert over.returncode == 0 and (out / "ckpt.pt").read_bytes() != blob  # said explicitly: trains over it


def test_a_failed_first_run_leaves_no_empty_out_dir(tmp_path, text_file):
    result = run(f"--out_dir={tmp_path / 'out'}", f"--input={text_file}", *TINY_FLAGS, "--block_size=100000")
    assert_clean_error(result, "too short for --block_size=100000")
    assert not (tmp_path / "out").exists()


def test_bigram_refuses_a_learning_rate_that_is_not_finite():
    assert_clean_error(run("--learning_rate=inf", script=os.path.join(ROOT, "bigram.py")), "--learning_rate")


def test_bad_input_files(tmp_path):
    missing = run(f"--input={tmp_path / 'nope.txt'}", f"--out_dir={tmp_path}")
    assert_clean_error(missing, "No such file", "nope.txt", "--input")
    assert missing.stdout == ""  # nothing printed before the error: the input is read before the settings line
    (tmp_path / "empty.txt").write_text("")
    assert_clean_error(run(f"--input={tmp_path / 'empty.txt'}", f"--out_dir={tmp_path}"), "too short")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait ".encode("latin-1") * 100)
    assert_clean_error(run(f"--input={tmp_path / 'latin1.txt'}", f"--out_dir={tmp_path}"), "utf-8", "position 3")
    (tmp_path / "short.txt").write_text("a short text, " * 30)
    assert_clean_error(run(f"--input={tmp_path / 'short.txt'}", "--n_layer=1", "--block_size=128",
                           f"--out_dir={tmp_path}"), "too short for --block_size=128")


def test_device_that_is_not_there():
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    assert_clean_error(run("--device=cuda"), "--device=cuda", "no such device", "use auto or cpu")


def test_resume_without_a_checkpoint(tmp_path):
    assert_clean_error(run("--init_from=resume", f"--out_dir={tmp_path}"), "can't load", "ckpt.pt",
                       "FileNotFoundError", "train a model there first")


@pytest.fixture
def trained(tmp_path, text_file):
    """An out_dir holding the checkpoint of a tiny run, and that checkpoint's bytes."""
    out = tmp_path / "trained"
    gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS])
    return out, (out / "ckpt.pt").read_bytes()


def test_resume_from_a_corrupt_or_unsafe_checkpoint(tmp_path, trained):
    out, blob = trained
    (out / "ckpt.pt").write_bytes(blob[: len(blob) // 2])
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}"), "can't load")
    torch.save({"model": object()}, out / "ckpt.pt")  # a pickled object: code that weights_only refuses
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}"), "can't load")


def test_resume_with_a_value_that_diverges_keeps_the_checkpoint_and_its_settings(trained, text_file):
    """A flag given on resume applies to that run; it is saved only with a good step, so a NaN saves nothing."""
    out, blob = trained
    result = run("--init_from=resume", f"--out_dir={out}", "--max_iters=40", "--learning_rate=1e30", "--grad_clip=0",
                 "--warmup_iters=0")
    assert_clean_error(result, "loss became nan by step 30", "keeps the last evaluation's state")
    assert (out / "ckpt.pt").read_bytes() == blob
    plain = run("--init_from=resume", f"--out_dir={out}", "--max_iters=30")
    assert plain.returncode == 0 and "step    30 | train" in plain.stdout, plain.stderr


def test_resume_with_other_shapes_or_vocabulary_keeps_the_checkpoint(tmp_path, trained):
    out, blob = trained
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}", "--n_embd=32"),
                       "does not fit this model", "drop the flags that change its shape")
    other = tmp_path / "other.txt"
    other.write_text("0123456789 abcdef\n" * 500)
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}", f"--input={other}", "--max_iters=40"),
                       "other characters")
    assert (out / "ckpt.pt").read_bytes() == blob


def test_bad_input_never_touches_an_existing_checkpoint(trained, text_file):
    out, blob = trained
    for args in (["--n_layr=1"], ["--n_embd=31"], ["--input=/no/such/file"], ["--dropout=2"]):
        result = run(f"--out_dir={out}", f"--input={text_file}", "--init_from=scratch", *args)  # the last --input wins
        assert_clean_error(result)
        assert (out / "ckpt.pt").read_bytes() == blob


def test_loss_turning_nan_stops_and_keeps_the_last_good_checkpoint(tmp_path, text_file):
    out = tmp_path / "out"
    flags = [f for f in TINY_FLAGS if not f.startswith("--warmup_iters")]
    result = run(f"--input={text_file}", f"--out_dir={out}", *flags, "--learning_rate=1e30", "--warmup_iters=0",
                 "--grad_clip=0")
    assert_clean_error(result, "loss became nan by step 10", "lower --learning_rate", "keeps the last evaluation's")
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
    assert "interrupted" in err and "--init_from=resume" in err and "error" not in err  # a choice, not an error
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)  # whole: a save cut short only leaves ckpt.pt.tmp
    assert ckpt["step"] >= 50 and ckpt["step"] % 50 == 0
    resumed = run("--init_from=resume", f"--out_dir={out}", f"--max_iters={ckpt['step'] + 5}", "--max_new_tokens=5")
    assert resumed.returncode == 0 and f"step {ckpt['step'] + 5:5d}" in resumed.stdout, resumed.stderr


# ----------------------------------------------------------------------------- the schedule and the time budget


def step_schedule(step, cfg):
    """The oracle: the step-counted schedule as gpt.py had it before the time budget, written out again."""
    if step < cfg.warmup_iters:
        return cfg.learning_rate * (step + 1) / cfg.warmup_iters
    ratio = min(1.0, (step - cfg.warmup_iters) / max(1, cfg.max_iters - cfg.warmup_iters))
    return cfg.min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (cfg.learning_rate - cfg.min_lr)


def test_without_a_budget_the_schedule_is_the_step_schedule_whatever_the_clock():
    cfg = gpt.Config(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, max_iters=110, max_time=0)
    for step in range(0, 130):
        for seconds in (0.0, 1.0, 1e6):  # no budget: the seconds never count
            assert gpt.lr_at(step, seconds, cfg) == pytest.approx(step_schedule(step, cfg), rel=1e-12), step
    assert gpt.lr_at(0, 0, cfg) == pytest.approx(1e-4) and gpt.lr_at(9, 0, cfg) == pytest.approx(1e-3)
    assert gpt.lr_at(60, 0, cfg) == pytest.approx((1e-3 + 1e-4) / 2)  # half way down the cosine
    assert gpt.progress(110, 0, cfg) == 1 and gpt.lr_at(110, 0, cfg) == pytest.approx(1e-4)


def test_with_a_budget_progress_is_the_larger_share_of_steps_or_seconds():
    cfg = gpt.Config(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, max_iters=1010, max_time=100)
    assert gpt.progress(510, 10, cfg) == pytest.approx(0.5)  # steps ahead of the clock
    assert gpt.progress(20, 50, cfg) == pytest.approx(0.5)  # the clock ahead of the steps
    assert gpt.progress(20, 150, cfg) == 1 and gpt.lr_at(20, 150, cfg) == pytest.approx(1e-4)
    assert gpt.lr_at(5, 99, cfg) == pytest.approx(6e-4)  # the warm-up counts steps, not seconds
    lrs = [gpt.lr_at(10, seconds, cfg) for seconds in range(0, 101)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:])) and lrs[-1] == pytest.approx(1e-4)


class FakeClock:
    """time.perf_counter for gpt.py, on which only training steps, evaluations and the sample take time: a step
    step_time, an evaluation eval_time per batch pair (one of each split), as many as the config asks for, the exact
    val score half that per batch of its windows, the sample char_time a character. It records each step's learning
    rate, each evaluation's batch count and the windows of each exact score."""

    def __init__(self, monkeypatch, step_time, eval_time, char_time=0.0):
        self.now, self.step_time, self.eval_time, self.char_time = 1000.0, step_time, eval_time, char_time
        self.batches, self.lrs, self.exact = [], [], []
        monkeypatch.setattr(gpt.time, "perf_counter", lambda: self.now)
        train_step, estimate_loss, whole_text_loss, sample = (gpt.train_step, gpt.estimate_loss, gpt.whole_text_loss,
                                                              gpt.sample)

        def timed_sample(model, tokenizer, cfg):
            self.now += self.char_time * cfg.max_new_tokens
            return sample(model, tokenizer, cfg)

        def timed_step(model, optimizer, scaler, splits, cfg, lr):
            self.now += self.step_time
            self.lrs.append(lr)
            return train_step(model, optimizer, scaler, splits, cfg, lr)

        def timed_evaluation(model, splits, cfg, ctx):
            self.now += self.eval_time * cfg.eval_iters
            self.batches.append(cfg.eval_iters)
            return estimate_loss(model, splits, cfg, ctx)

        def timed_whole_text(model, data, cfg, ctx):
            windows = (len(data) - 1) // cfg.block_size
            self.now += self.eval_time / 2 * windows / cfg.batch_size
            self.exact.append(windows)
            return whole_text_loss(model, data, cfg, ctx)

        monkeypatch.setattr(gpt, "train_step", timed_step)
        monkeypatch.setattr(gpt, "estimate_loss", timed_evaluation)
        monkeypatch.setattr(gpt, "whole_text_loss", timed_whole_text)
        monkeypatch.setattr(gpt, "sample", timed_sample)


BUDGET_FLAGS = [f for f in TINY_FLAGS if not f.startswith(("--max_iters", "--warmup_iters", "--eval_interval", "--max_time",
                                                            "--eval_iters"))]
BUDGET = ["--warmup_iters=10", "--eval_interval=20", "--eval_iters=2", "--max_iters=100000", "--max_time=30"]


def val_windows(text_file, block_size=8):
    """Windows of block_size in the validation split of text_file (its last 10%), as the exact score cuts them."""
    n = len(open(text_file, encoding="utf-8").read())
    return (n - int(0.9 * n) - 1) // block_size


def priced_end(cfg, windows, eval_time):
    """The oracle for what max_time keeps free after training, at the pace of the evaluations during training:
    the last evaluation again, the exact val (its windows, batch_size rows a batch, half a pair each), and the
    sample at 2 rows of a batch a character."""
    batch_pair_time = eval_time  # one batch of each split
    return (cfg.eval_iters * batch_pair_time + windows / cfg.batch_size * batch_pair_time / 2
            + 2 * cfg.max_new_tokens / cfg.batch_size * batch_pair_time / 2)


def test_a_budgeted_run_stops_within_one_step_of_max_time_at_min_lr(tmp_path, text_file, monkeypatch, capsys):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.01)  # an evaluation: 2 x 0.01 s
    result = gpt.main([f"--input={text_file}", *BUDGET_FLAGS, *BUDGET, f"--out_dir={tmp_path}"])
    history, cfg = result["history"], result["config"]
    steps, seconds = history["step"][-1], history["seconds"][-1]  # when training stopped
    windows = val_windows(text_file)
    end = priced_end(cfg, windows, 0.01)  # kept free: training stopped at the first step past 30 s - end
    assert 30 - end - 0.005 <= seconds <= 30 - end + 0.05 + 0.02, (seconds, end)  # a part window priced too
    spent_after = 0.02 + 0.005 * windows / 4  # the last evaluation and the exact val; the sample costs 0 here
    assert clock.now - 1000 == pytest.approx(seconds + spent_after) and clock.now - 1000 <= 30 + 0.05
    assert len(clock.lrs) == steps and 500 < steps < 600  # 30 s of 0.05-s steps, less the evaluations
    assert gpt.progress(steps, seconds + end, cfg) == 1 and gpt.progress(steps, seconds, cfg) < 1
    assert clock.lrs[-1] == pytest.approx(cfg.min_lr, rel=1e-3)  # the cosine ended at min_lr
    assert max(clock.lrs) == pytest.approx(cfg.learning_rate)
    assert set(clock.batches) == {2} and clock.exact == [windows]  # every estimate alike; one exact score, last
    out = capsys.readouterr().out
    assert f"trained {steps} steps in 30 s: val " in out
    assert f"train an estimate (--max_iters={steps} --max_time=0 trains as many by count)" in out
    repeat = gpt.main([f"--input={text_file}", *BUDGET_FLAGS, *BUDGET[:3], f"--max_iters={steps}", "--max_time=0",
                       f"--out_dir={tmp_path / 'count'}"])
    assert repeat["history"]["step"][-1] == steps  # as many by count


@pytest.mark.parametrize("eval_time,char_time", [(0.01, 0.0025), (0.1, 0.025), (0.1, 0.0), (1.0, 0.0025)])
def test_the_whole_run_ends_within_max_time_where_evaluating_and_sampling_are_slow(
        tmp_path, text_file, monkeypatch, eval_time, char_time):
    """Evaluations 10 and 100 times slower (a slow or busy CPU), a sampled character costing up to 2 rows of a
    batch (0.25 eval_time here: 2 splits of 4 rows): the last evaluation, the exact val and the sample still end
    within max_time plus one step, and the reported val loss is the exact one."""
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=eval_time, char_time=char_time)
    result = gpt.main([f"--input={text_file}", *BUDGET_FLAGS, *BUDGET, f"--out_dir={tmp_path}"])
    history, cfg = result["history"], result["config"]
    assert clock.now - 1000 <= cfg.max_time + clock.step_time, clock.now - 1000  # main(), start to sample
    end = priced_end(cfg, val_windows(text_file), eval_time)  # what came after training, at most
    assert clock.now - 1000 >= cfg.max_time - 2 * end - clock.step_time  # and the budget was used, not wasted
    assert len(clock.batches) == len(history["val"]) and len(clock.exact) == 1  # val: the exact score, last
    assert clock.lrs[-1] == pytest.approx(cfg.min_lr, rel=1e-2)  # the schedule ended where training did


def test_a_machine_that_slows_down_tenfold_still_stops_on_time(tmp_path, text_file, monkeypatch):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.01)
    lr_at = gpt.lr_at

    def slower_after_step_100(step, seconds, cfg):
        if step == 100:
            clock.step_time = 0.5  # ten times slower, a third of the way in
        return lr_at(step, seconds, cfg)

    monkeypatch.setattr(gpt, "lr_at", slower_after_step_100)
    result = gpt.main([f"--input={text_file}", *BUDGET_FLAGS, *BUDGET, f"--out_dir={tmp_path}"])
    history, cfg = result["history"], result["config"]
    end = priced_end(cfg, val_windows(text_file), 0.01)
    assert 30 - end - 0.005 <= history["seconds"][-1] <= 30 - end + 0.5 + 0.02
    assert 100 < history["step"][-1] < 160  # fewer steps, the same budget
    assert clock.lrs[-1] == pytest.approx(cfg.min_lr, rel=1e-2)  # and the schedule still ended at min_lr


def interrupted_at(step_to_stop, monkeypatch, flags):
    """Run gpt.main with flags and press Ctrl-C (a KeyboardInterrupt) before the step step_to_stop."""
    lr_at = gpt.lr_at

    def lr_at_pressing_ctrl_c(step, seconds, cfg):
        if step == step_to_stop:
            raise KeyboardInterrupt
        return lr_at(step, seconds, cfg)

    monkeypatch.setattr(gpt, "lr_at", lr_at_pressing_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        gpt.main(flags)
    monkeypatch.setattr(gpt, "lr_at", lr_at)


def test_a_resumed_budgeted_run_goes_on_from_its_saved_seconds(tmp_path, text_file, monkeypatch):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.01)
    flags = [f"--input={text_file}", *BUDGET_FLAGS, *BUDGET, f"--out_dir={tmp_path}"]
    interrupted_at(250, monkeypatch, flags)
    saved = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert saved["step"] == 240 and 12 < saved["history"]["seconds"][-1] < 13  # steps and evaluations to step 240
    clock.lrs = []
    resumed = gpt.main([*flags, "--init_from=resume"])  # the same budget, the clock going on from 12.x s
    history = resumed["history"]
    assert resumed["config"].max_time == 30 and history["step"][:13] == saved["history"]["step"]
    end = priced_end(resumed["config"], val_windows(text_file), 0.01)
    assert 30 - end - 0.005 <= history["seconds"][-1] <= 30 - end + 0.05 + 0.02  # the end kept free, as above
    assert len(clock.lrs) < 0.6 * history["step"][-1]  # only the steps that the saved seconds left
    assert clock.lrs[-1] == pytest.approx(resumed["config"].min_lr, rel=1e-3)


def test_max_iters_given_on_resume_turns_the_budget_off(tmp_path, text_file, monkeypatch):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.01)
    flags = [f"--input={text_file}", *BUDGET_FLAGS, *BUDGET, f"--out_dir={tmp_path}"]
    interrupted_at(250, monkeypatch, flags)
    clock.step_time = 1.0  # 1,000 steps would take far longer than the budget
    more = gpt.main([f"--out_dir={tmp_path}", "--init_from=resume", "--max_iters=1240"])  # the saved --max_time=30
    assert more["config"].max_time == 0 and more["history"]["step"][-1] == 1240
    assert clock.lrs[-1] == pytest.approx(gpt.lr_at(1239, 0.0, more["config"]))  # the step schedule to 1,240


def test_every_evaluation_estimates_on_eval_iters_batches_and_the_last_scores_val_exactly(
        tmp_path, text_file, monkeypatch):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.1)
    flags = [f"--input={text_file}", *BUDGET_FLAGS, "--warmup_iters=10", "--eval_interval=20", "--eval_iters=10"]
    gpt.main([*flags, "--max_iters=45", "--max_time=0", f"--out_dir={tmp_path}"])
    assert clock.batches == [10, 10, 10, 10] and clock.exact == [val_windows(text_file)]  # steps 0, 20, 40, 45


def test_a_line_every_log_interval_steps_with_the_batch_loss_and_the_pace(tmp_path, text_file, monkeypatch, capsys):
    FakeClock(monkeypatch, step_time=1.5, eval_time=2.5)
    gpt.main([f"--input={text_file}", *BUDGET_FLAGS, "--max_iters=60", "--eval_interval=1000", "--max_time=0",
              "--log_interval=7", "--eval_iters=2", f"--out_dir={tmp_path}"])
    lines = [line for line in capsys.readouterr().out.splitlines() if re.match(r"step +\d+ \| loss", line)]
    steps = [int(line.split("|")[0].split()[1]) for line in lines]
    assert steps == list(range(7, 61, 7))
    for line, step in zip(lines, steps):
        seconds = 2.5 * 2 + 1.5 * (step - 1)  # the first evaluation (2 batch pairs), then the steps before this one
        tokens_per_s = float(line.split("|")[2].split()[0].replace(",", ""))
        assert tokens_per_s == pytest.approx(step * 4 * 8 / seconds, abs=0.5)  # batch 4 x context 8 a step, so far
        assert 0 < float(line.split("|")[1].split()[1]) < 10  # the batch's loss


# ----------------------------------------------------------------------------- precision and compile


@pytest.mark.parametrize("device,capability,cpu_bf16,expected", [
    ("cuda", (7, 5), False, "float16"),  # T4 (Colab's free GPU): no bfloat16 tensor cores
    ("cuda", (7, 0), False, "float16"),  # V100
    ("cuda", (8, 0), False, "bfloat16"),  # A100
    ("cuda", (9, 0), False, "bfloat16"),  # H100
    ("mps", None, False, "float32"),  # Apple GPUs
    ("cpu", None, True, "bfloat16"),  # AVX512-BF16 or AMX
    ("cpu", None, False, "float32"),
])
def test_precision_follows_the_hardware(device, capability, cpu_bf16, expected):
    dtype, why = gpt.pick_precision(device, capability, cpu_bf16)
    assert dtype == expected and why


def test_float16_with_a_gradient_scaler_trains_on_a_cpu_and_resumes_its_scale(tmp_path, text_file):
    result = gpt.main([f"--input={text_file}", f"--out_dir={tmp_path}", *TINY_FLAGS, "--dtype=float16"])
    assert result["config"].dtype == "float16"
    val = result["history"]["val"]
    assert all(math.isfinite(v) for v in val) and val[-1] < val[0]
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert ckpt["scaler"]["scale"] == 65536.0  # GradScaler's start: no overflow in 20 steps
    ckpt["scaler"]["scale"] = 1234.0  # as if it had backed off: a resumed run must go on from it
    torch.save(ckpt, tmp_path / "ckpt.pt")
    gpt.main([f"--out_dir={tmp_path}", "--init_from=resume", "--max_iters=21", "--dtype=float16"])
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["scaler"]["scale"] == 1234.0


def test_a_compiled_models_checkpoint_loads_into_a_plain_model_and_back(tmp_path):
    cfg = gpt.Config(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.0)
    model = gpt.GPT(cfg)
    compiled = torch.compile(model, backend="eager")  # the wrapper that --compile=True makes
    optimizer = gpt.make_optimizer(model, cfg)
    path = str(tmp_path / "ckpt.pt")
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    cfg = dataclasses.replace(cfg, out_dir=str(tmp_path))
    gpt.save_checkpoint(compiled, optimizer, scaler, cfg, list("abcdefghijk"),
                        {"step": [0], "seconds": [0.0], "train": [2.4], "val": [2.5]})
    saved = gpt.load_checkpoint(path)["model"]
    assert not [key for key in saved if key.startswith("_orig_mod")]
    plain = gpt.GPT(cfg)
    plain.load_state_dict(saved)
    idx = torch.randint(11, (2, 8))
    torch.testing.assert_close(plain(idx)[0], model(idx)[0])
    torch.testing.assert_close(torch.compile(plain, backend="eager")(idx)[0], model(idx)[0])
