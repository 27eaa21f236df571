"""gpt.py as a user runs it: end to end, presets, resume, seeds, and every bad input (one clear line, no traceback)."""
import dataclasses
import math
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
    """Non-zero exit, one 'error:' line on stderr naming the problem, and no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def test_end_to_end_writes_a_checkpoint_and_a_sample(tmp_path, text_file):
    out = tmp_path / "out"
    result = run(f"--input={text_file}", f"--out_dir={out}", "--prompt=To be", *TINY_FLAGS, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # the first line says what runs, and why: laptop, or laptop_float32 on a CPU without native bfloat16
    assert re.match(r"preset laptop(_float32)? \(no CUDA GPU, and (bfloat16|float32) on this cpu\)", result.stdout)
    assert "step    20 | train" in result.stdout
    assert result.stdout[-36:-1].startswith("To be")  # the last thing printed: the prompt and 30 new characters
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
        assert f"--{f.name} " in text and " ".join(f.metadata["help"].split()) in text, f.name
    assert "--vocab_size" not in text  # set from the data


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
    """Make gpt.py see this device, and a CPU with or without native bfloat16."""
    monkeypatch.setattr(gpt, "pick_device", lambda name: device if name == "auto" else name)
    monkeypatch.setattr(gpt.torch.cpu, "_is_avx512_bf16_supported", lambda: native_bf16)
    monkeypatch.setattr(gpt.torch.cpu, "_is_amx_tile_supported", lambda: False)


def test_laptop_preset_without_a_gpu_and_lecture_preset_by_flag(tmp_path, monkeypatch):
    hardware(monkeypatch, "cpu", native_bf16=True)
    laptop, _, summary = gpt.make_settings([f"--out_dir={tmp_path}"])
    chosen = dict(device="cpu", dtype="bfloat16")
    assert laptop == gpt.Config(**gpt.PRESETS["laptop"], preset="laptop", out_dir=str(tmp_path), **chosen)
    assert summary.startswith("preset laptop (no CUDA GPU, and bfloat16 on this cpu)")
    lecture = settings(tmp_path, "--preset=lecture")
    assert lecture == gpt.Config(preset="lecture", out_dir=str(tmp_path), **chosen)
    assert (lecture.n_layer, lecture.n_embd, lecture.block_size) == (6, 384, 256)


def test_cuda_picks_the_lecture_preset(tmp_path, monkeypatch):
    monkeypatch.setattr(gpt, "pick_device", lambda name: "cuda")
    monkeypatch.setattr(gpt.torch.cuda, "get_device_capability", lambda: (9, 0))
    cfg, _, summary = gpt.make_settings([f"--out_dir={tmp_path}"])
    assert cfg == gpt.Config(preset="lecture", out_dir=str(tmp_path), device="cuda", dtype="bfloat16")
    assert summary.startswith("preset lecture (a CUDA GPU)")


@pytest.mark.parametrize("avx512_bf16,amx,expected", [(True, False, "bfloat16"), (False, True, "bfloat16"),
                                                      (False, False, "float32")])
def test_cpu_bfloat16_only_where_it_is_native(tmp_path, monkeypatch, avx512_bf16, amx, expected):
    """oneDNN emulates bfloat16 on any AVX-512 CPU; gpt.py picks it only with AVX512-BF16 or AMX."""
    monkeypatch.setattr(gpt, "pick_device", lambda name: "cpu")
    monkeypatch.setattr(gpt.torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(gpt.torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(gpt.torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    assert settings(tmp_path).dtype == expected


@pytest.mark.parametrize("device,native_bf16,flags,preset", [
    ("cpu", True, [], "laptop"),
    ("cpu", False, [], "laptop_float32"),  # most laptops: no AVX512-BF16, no AMX
    ("cpu", True, ["--dtype=float32"], "laptop_float32"),  # the precision given, not detected
    ("mps", True, [], "laptop_float32"),  # MPS trains in float32
    ("cpu", False, ["--preset=laptop"], "laptop"),  # a preset named stays as it is
    ("cpu", True, ["--dtype=float32", "--preset=laptop"], "laptop"),
    ("cuda", False, ["--dtype=float32"], "lecture"),
])
def test_auto_preset_follows_the_device_and_the_precision(tmp_path, monkeypatch, device, native_bf16, flags, preset):
    hardware(monkeypatch, device, native_bf16)
    monkeypatch.setattr(gpt.torch.cuda, "get_device_capability", lambda: (9, 0))
    cfg, _, summary = gpt.make_settings([f"--out_dir={tmp_path}", *flags])
    assert cfg.preset == preset and summary.startswith(f"preset {preset} (")
    assert (cfg.n_embd, cfg.block_size) == (gpt.PRESETS[preset].get("n_embd", 384), gpt.PRESETS[preset].get("block_size", 256))
    if "--preset=laptop" not in flags and device != "cuda":
        assert f"no CUDA GPU, and {cfg.dtype} on this {device}" in summary.splitlines()[0]  # the first line says why


def test_the_float32_preset_is_a_smaller_model_in_the_same_10_minutes():
    laptop, narrow = (gpt.Config(**gpt.PRESETS[name]) for name in ("laptop", "laptop_float32"))
    assert narrow.max_time == laptop.max_time == 600 and narrow.eval_iters == laptop.eval_iters
    size = {cfg.n_embd: sum(p.numel() for p in gpt.GPT(cfg).parameters()) for cfg in (laptop, narrow)}
    assert size[narrow.n_embd] < 0.6 * size[laptop.n_embd], size  # cheaper steps: more of them fit


def test_settings_need_no_os_sysconf(tmp_path, monkeypatch):
    """Windows has no os.sysconf: nothing on the way to a run may call it."""
    monkeypatch.delattr(os, "sysconf", raising=False)
    assert settings(tmp_path).n_layer == 4 or torch.cuda.is_available()


@pytest.mark.parametrize("native_bf16,here", [(True, "laptop"), (False, "laptop_float32")])
def test_help_shows_the_values_this_machine_uses(monkeypatch, capsys, native_bf16, here):
    hardware(monkeypatch, "cpu", native_bf16)
    with pytest.raises(SystemExit) as stop:
        gpt.make_settings(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert stop.value.code == 0
    n_embd = {name: preset.get("n_embd", 384) for name, preset in gpt.PRESETS.items()}
    others = ", ".join(f"{name}: {value}" for name, value in n_embd.items() if name != here)
    assert f"--n_embd INT channels: the size of every token's vector (default: {n_embd[here]} here, the {here} preset's; {others})" in text
    assert f"--max_time FLOAT" in text and f"(default: 600.0 here, the {here} preset's; lecture: 0.0" in text
    assert "--seed INT random seed: the same seed repeats a run exactly on a CPU (default: 1337)" in text


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
        if f.type is bool:
            value = not getattr(base, f.name)
        if f.name == "dropout":
            value = 0.3
        if f.type is str and not choices:
            value = "To be"
        changed = settings(tmp_path, f"--preset={preset}", f"--{f.name}={value}")
        assert changed == dataclasses.replace(base, **{f.name: value}), f.name


def test_kernel_arguments_are_ignored_inside_a_notebook(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", "/tmp/kernel-1.json"])
    monkeypatch.setitem(sys.modules, "ipykernel", sys)  # anything: only its presence matters
    assert gpt.parse_flags(gpt.Config) == {}


def test_checkpoint_round_trip_gives_identical_logits_and_resume_continues(tmp_path, text_file):
    out = str(tmp_path / "out")
    first = gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS])
    ckpt = gpt.load_checkpoint(os.path.join(out, "ckpt.pt"))
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
    sample_only = run("--init_from=resume", f"--out_dir={out}", "--max_iters=0", "--max_new_tokens=20")
    assert sample_only.returncode == 0, sample_only.stderr
    assert not [line for line in sample_only.stdout.splitlines() if line.startswith("step")]


def test_ctrl_c_then_resume_gives_the_losses_of_an_uninterrupted_run(tmp_path, text_file, monkeypatch):
    """Ctrl-C injected at a fixed step: the last evaluation's checkpoint holds the random state, so the run
    resumed from it goes on exactly."""
    flags = [f"--input={text_file}", *TINY_FLAGS, "--dropout=0.2"]  # dropout draws random numbers too
    straight = gpt.main([*flags, f"--out_dir={tmp_path / 'a'}"])["history"]
    lr_at = gpt.lr_at

    def lr_at_pressing_ctrl_c(step, cfg):
        if step == 13:
            signal.raise_signal(signal.SIGINT)
        return lr_at(step, cfg)

    monkeypatch.setattr(gpt, "lr_at", lr_at_pressing_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        gpt.main([*flags, f"--out_dir={tmp_path / 'b'}"])
    assert torch.load(tmp_path / "b" / "ckpt.pt", weights_only=True)["step"] == 10  # the last evaluation
    monkeypatch.setattr(gpt, "lr_at", lr_at)
    resumed = gpt.main([*flags, f"--out_dir={tmp_path / 'b'}", "--init_from=resume"])["history"]
    assert resumed == straight and len(straight["step"]) == 3


def test_same_seed_repeats_a_run_exactly(tmp_path, text_file):
    def losses(seed, name):
        result = run(f"--input={text_file}", f"--out_dir={tmp_path / name}", f"--seed={seed}", *TINY_FLAGS)
        return [line.split("|")[1:3] for line in result.stdout.splitlines() if line.startswith("step")]

    assert losses(7, "a") == losses(7, "b")
    assert losses(7, "a") != losses(8, "c")


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("flag,phrases", [
    ("--n_layr=2", ["unrecognized arguments: --n_layr=2", "see --help"]),
    ("--max_iters=lots", ["--max_iters", "invalid int value: 'lots'"]),
    ("--dropout=x", ["--dropout", "invalid number value: 'x'"]),
    ("n_layer=2", ["unrecognized arguments: n_layer=2"]),
    ("--compile=yes", ["--compile", "must be True or False, got 'yes'"]),
    ("--n_head=3", ["--n_embd=256 must be divisible by --n_head=3", "e.g. --n_embd=192"]),
    ("--n_layer=0", ["--n_layer must be at least 1"]),
    ("--batch_size=-3", ["--batch_size must be at least 1"]),
    ("--dropout=1.0", ["--dropout must be below 1"]),
    ("--dropout=-0.1", ["--dropout", "must be a finite number, 0 or more"]),
    ("--dropout=nan", ["--dropout", "must be a finite number"]),
    ("--max_time=inf", ["--max_time", "must be a finite number"]),
    ("--max_iters=-1", ["--max_iters must be at least 0"]),
    ("--learning_rate=nan", ["--learning_rate: must be a finite number"]),
    ("--learning_rate=inf", ["--learning_rate: must be a finite number"]),
    ("--min_lr=nan", ["--min_lr: must be a finite number"]),
    ("--grad_clip=nan", ["--grad_clip: must be a finite number"]),
    ("--weight_decay=nan", ["--weight_decay: must be a finite number"]),
    ("--init_from=resum", ["--init_from", "invalid choice: 'resum'"]),
    ("--preset=gpu", ["--preset", "invalid choice: 'gpu'"]),
    ("--max_iters=0", ["--max_iters=0 trains nothing", "--init_from=resume"]),
    ("--warmup_iters=5", ["--max_time measures the speed during the warm-up", "--warmup_iters=10"]),
])
def test_bad_flags(flag, phrases, tmp_path, text_file):
    assert_clean_error(run(flag, f"--input={text_file}", f"--out_dir={tmp_path}"), *phrases)


def test_a_flag_given_twice_the_last_wins_as_in_argparse(tmp_path):
    assert settings(tmp_path, "--max_iters=3", "--max_iters=4").max_iters == 4
    assert settings(tmp_path, "--compile=true").compile is True  # True and False in any case


@pytest.mark.parametrize("where", ["/proc/forbidden", "/proc", "a regular file"])
def test_an_out_dir_that_cannot_be_written_is_one_line_at_the_first_save(tmp_path, text_file, where):
    if where == "a regular file":
        where = str(tmp_path / "file")
        open(where, "w").close()
    result = run(f"--out_dir={where}", f"--input={text_file}", *TINY_FLAGS)
    assert_clean_error(result, where, "check --input and --out_dir")
    assert "step     0 | train" not in result.stdout  # the first evaluation is saved before it is logged


def test_a_second_run_never_replaces_a_checkpoint_silently(tmp_path, trained, text_file):
    out, blob = trained
    for args in ([], ["--max_iters=0", "--prompt=To"]):  # a new run; a sample-only run without resume
        result = run(f"--out_dir={out}", f"--input={text_file}", *TINY_FLAGS, *args)
        assert_clean_error(result)
        assert (out / "ckpt.pt").read_bytes() == blob
    assert_clean_error(run(f"--out_dir={out}", f"--input={text_file}", *TINY_FLAGS), "ckpt.pt exists",
                       "--init_from=resume", "--init_from=scratch", "--out_dir=DIR")
    over = run(f"--out_dir={out}", f"--input={text_file}", *TINY_FLAGS, "--init_from=scratch", "--seed=5")
    assert over.returncode == 0 and (out / "ckpt.pt").read_bytes() != blob  # said explicitly: trains over it


def test_a_failed_first_run_leaves_no_empty_out_dir(tmp_path, text_file):
    result = run(f"--out_dir={tmp_path / 'out'}", f"--input={text_file}", "--prompt=§", *TINY_FLAGS)
    assert_clean_error(result, "--prompt")
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
    assert_clean_error(run(f"--input={tmp_path / 'short.txt'}", "--n_layer=1", f"--out_dir={tmp_path}"),
                       "too short for --block_size=128")


def test_prompt_outside_the_vocabulary_is_named(tmp_path, text_file):
    result = run(f"--input={text_file}", f"--out_dir={tmp_path}", "--prompt=Zebra§", *TINY_FLAGS)
    assert_clean_error(result, "'Z§'", "--prompt")
    assert not (tmp_path / "ckpt.pt").exists()  # checked before any training


def test_device_that_is_not_there():
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    assert_clean_error(run("--device=cuda"), "--device=cuda", "no CUDA device")


def test_resume_without_a_checkpoint(tmp_path):
    assert_clean_error(run("--init_from=resume", f"--out_dir={tmp_path}"), "can't resume from", "ckpt.pt",
                       "FileNotFoundError")


@pytest.fixture
def trained(tmp_path, text_file):
    """An out_dir holding the checkpoint of a tiny run, and that checkpoint's bytes."""
    out = tmp_path / "trained"
    gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS])
    return out, (out / "ckpt.pt").read_bytes()


def test_resume_from_a_corrupt_or_unsafe_checkpoint(tmp_path, trained):
    out, blob = trained
    (out / "ckpt.pt").write_bytes(blob[: len(blob) // 2])
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}"), "can't resume from")
    torch.save({"model": object()}, out / "ckpt.pt")  # a pickled object: code that weights_only refuses
    assert_clean_error(run("--init_from=resume", f"--out_dir={out}"), "can't resume from")


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
    for args in (["--n_layr=1"], ["--n_embd=31"], ["--input=/no/such/file"], ["--prompt=§"]):
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


def test_a_nan_on_mps_suggests_the_cpu_and_a_finite_loss_passes(capsys):
    with pytest.raises(SystemExit):
        gpt.check_finite(float("nan"), 7, gpt.Config(device="mps"))
    assert "try --device=cpu" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpt.check_finite(float("inf"), 7, gpt.Config(device="cpu"))
    assert "--device=cpu" not in capsys.readouterr().err
    gpt.check_finite(2.5, 7, gpt.Config(device="mps"))


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


# ----------------------------------------------------------------------------- the time budget


def test_the_schedule_warms_up_then_decays_to_min_lr_at_max_iters():
    cfg = gpt.Config(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, max_iters=110)
    assert gpt.lr_at(0, cfg) == pytest.approx(1e-4) and gpt.lr_at(9, cfg) == pytest.approx(1e-3)
    assert gpt.lr_at(60, cfg) == pytest.approx((1e-3 + 1e-4) / 2)  # half way down the cosine
    assert gpt.lr_at(110, cfg) == pytest.approx(1e-4) and gpt.lr_at(500, cfg) == pytest.approx(1e-4)
    lrs = [gpt.lr_at(step, cfg) for step in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


class FakeClock:
    """time.perf_counter for gpt.py, on which only training steps and evaluations take time: an
    evaluation eval_time per batch of each split, as many as the config it is given asks for."""

    def __init__(self, monkeypatch, step_time, eval_time):
        self.now, self.step_time, self.eval_time = 1000.0, step_time, eval_time
        self.batches = []  # eval_iters of each evaluation, in order
        monkeypatch.setattr(gpt.time, "perf_counter", lambda: self.now)
        train_step, estimate_loss = gpt.train_step, gpt.estimate_loss

        def timed_step(*args):
            self.now += self.step_time
            return train_step(*args)

        def timed_evaluation(model, splits, cfg, ctx):
            self.now += self.eval_time * cfg.eval_iters
            self.batches.append(cfg.eval_iters)
            return estimate_loss(model, splits, cfg, ctx)

        monkeypatch.setattr(gpt, "train_step", timed_step)
        monkeypatch.setattr(gpt, "estimate_loss", timed_evaluation)


BUDGET_FLAGS = [f for f in TINY_FLAGS if not f.startswith(("--max_iters", "--warmup_iters", "--eval_interval", "--max_time"))]


def test_a_budgeted_run_uses_its_time_and_the_printed_flag_repeats_it(tmp_path, text_file, monkeypatch, capsys):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.5)
    flags = [f"--input={text_file}", *BUDGET_FLAGS, "--warmup_iters=10", "--eval_interval=20"]
    budgeted = gpt.main([*flags, "--max_time=30", "--max_iters=1000", f"--out_dir={tmp_path / 'a'}"])
    spent = clock.now - 1000  # on the fake clock: all of main(), as --max_time counts it
    out = capsys.readouterr().out
    steps = budgeted["config"].max_iters
    assert 20 < steps < 1000 and f"repeat this run with --max_iters={steps} --max_time=0" in out
    assert "time budget: stopping" not in out
    assert 0.95 * 30 <= spent <= 30, spent  # the final evaluation is counted once, not twice
    ckpt = torch.load(tmp_path / "a" / "ckpt.pt", weights_only=True)
    assert ckpt["config"]["max_iters"] == steps and ckpt["config"]["max_time"] == 30  # both recorded
    repeat = gpt.main([*flags, f"--max_iters={steps}", "--max_time=0", f"--out_dir={tmp_path / 'b'}"])
    assert repeat["history"] == budgeted["history"]


def test_evaluations_during_training_use_a_fifth_of_the_batches_the_last_all(tmp_path, text_file, monkeypatch):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.1)
    flags = [f"--input={text_file}", *BUDGET_FLAGS, "--warmup_iters=10", "--eval_interval=20", "--eval_iters=10"]
    budgeted = gpt.main([*flags, "--max_time=30", "--max_iters=1000", f"--out_dir={tmp_path / 'a'}"])
    assert len(clock.batches) >= 3 and clock.batches[:-1] == [2] * (len(clock.batches) - 1) and clock.batches[-1] == 10
    assert 0.95 * 30 <= clock.now - 1000 <= 30  # the plan knew the last evaluation costs five of the others
    clock.batches = []
    gpt.main([*flags, "--max_iters=45", "--max_time=0", f"--out_dir={tmp_path / 'b'}"])
    assert clock.batches == [2, 2, 2, 10]  # steps 0, 20, 40, and the last at 45
    assert budgeted["history"]["step"][-1] == budgeted["config"].max_iters


def test_progress_lines_come_every_10_seconds_between_evaluations(tmp_path, text_file, monkeypatch, capsys):
    FakeClock(monkeypatch, step_time=1.5, eval_time=2.5)  # a line about every 7 steps; the last eval 5 s
    gpt.main([f"--input={text_file}", *BUDGET_FLAGS, "--max_iters=60", "--eval_interval=1000", "--max_time=0",
              f"--out_dir={tmp_path}"])
    seconds = [int(line.split("|")[-1].split()[0]) for line in capsys.readouterr().out.splitlines()
               if line.startswith("step")]
    gaps = [b - a for a, b in zip(seconds, seconds[1:])]
    assert len(seconds) >= 4 and all(gap <= 12 for gap in gaps), seconds


def test_a_resumed_budgeted_run_keeps_its_plan(tmp_path, text_file, monkeypatch, capsys):
    """Resumed after the plan: the same step count, no new budget. --max_iters on resume: that count, no budget."""
    FakeClock(monkeypatch, step_time=0.05, eval_time=0.5)
    flags = [f"--input={text_file}", *BUDGET_FLAGS, "--warmup_iters=10", "--eval_interval=20", f"--out_dir={tmp_path}"]
    planned = gpt.main([*flags, "--max_time=30", "--max_iters=1000"])["config"].max_iters
    capsys.readouterr()
    resumed = gpt.main([*flags, "--init_from=resume"])
    assert resumed["config"].max_iters == planned and resumed["config"].max_time == 0
    more = gpt.main([*flags, "--init_from=resume", f"--max_iters={planned + 25}"])
    assert more["history"]["step"][-1] == planned + 25 and more["config"].max_time == 0
    assert "budget:" not in capsys.readouterr().out


def test_a_run_stopped_in_its_warm_up_plans_when_resumed(tmp_path, text_file, monkeypatch, capsys):
    FakeClock(monkeypatch, step_time=0.05, eval_time=0.5)
    flags = [f"--input={text_file}", *BUDGET_FLAGS, "--warmup_iters=40", "--eval_interval=20", f"--out_dir={tmp_path}"]
    lr_at = gpt.lr_at

    def lr_at_pressing_ctrl_c(step, cfg):
        if step == 25:
            raise KeyboardInterrupt
        return lr_at(step, cfg)

    monkeypatch.setattr(gpt, "lr_at", lr_at_pressing_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        gpt.main([*flags, "--max_time=30", "--max_iters=1000"])
    monkeypatch.setattr(gpt, "lr_at", lr_at)
    assert "budget:" not in capsys.readouterr().out  # stopped at step 25, before the plan at step 40
    resumed = gpt.main([*flags, "--init_from=resume"])  # the saved --max_time=30, a fresh clock
    assert "budget:" in capsys.readouterr().out
    assert resumed["config"].max_time == 30 and 40 < resumed["config"].max_iters < 1000


def test_the_backstop_stops_a_run_that_slows_down(tmp_path, text_file, monkeypatch, capsys):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.5)
    lr_at = gpt.lr_at

    def slower_after_step_30(step, cfg):
        if step == 30:
            clock.step_time = 0.5  # the machine becomes 10x slower after the plan was made
        return lr_at(step, cfg)

    monkeypatch.setattr(gpt, "lr_at", slower_after_step_30)
    flags = [f"--input={text_file}", *BUDGET_FLAGS, "--warmup_iters=10", "--eval_interval=20"]
    result = gpt.main([*flags, "--max_time=30", "--max_iters=1000", f"--out_dir={tmp_path}"])
    out = capsys.readouterr().out
    planned = int(out.split("repeat this run with --max_iters=")[1].split()[0])
    last = result["history"]["step"][-1]
    assert f"time budget: stopping at step {last} of {planned}" in out and 30 < last < planned
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["step"] == last
    assert clock.now - 1000 <= 30  # ended within the budget


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
    gpt.save_checkpoint(path, compiled, optimizer, scaler, cfg, list("abcdefghijk"), 0,
                        {"step": [], "train": [], "val": []})
    saved = gpt.load_checkpoint(path)["model"]
    assert not [key for key in saved if key.startswith("_orig_mod")]
    plain = gpt.GPT(cfg)
    plain.load_state_dict(saved)
    idx = torch.randint(11, (2, 8))
    torch.testing.assert_close(plain(idx)[0], model(idx)[0])
    torch.testing.assert_close(torch.compile(plain, backend="eager")(idx)[0], model(idx)[0])
