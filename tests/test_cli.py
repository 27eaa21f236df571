"""gpt.py as a user runs it: end to end, the top and the presets, edit and run again, resume across
precisions, seeds, the time budget, and every bad input (one clear line, no traceback). In-process where
it can be; the tests marked slow start a Python of their own."""
import contextlib
import dataclasses
import math
import os
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
# A small model on a small text, so that a whole run takes well under a second.
TINY_FLAGS = ["--n_layer=1", "--n_head=2", "--n_embd=16", "--block_size=8", "--batch_size=4",
              "--max_iters=20", "--eval_interval=10", "--eval_iters=2", "--max_new_tokens=30",
              "--warmup_iters=2", "--max_time=0"]
# What a line of gpt.py's own says: argparse's "gpt.py: error: ..." or fail()'s "error: ...".
ERROR_LINE = re.compile(r"^(\S+: )?error: ")


def run(*args, cwd=None, script=GPT_PY, timeout=180):
    """Run the script in a fresh process and return the CompletedProcess (text output)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env)


def assert_clean_error(result, *phrases):
    """Non-zero exit, one 'error:' line on stderr naming the problem, and no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line]
    assert len(lines) == 1 and ERROR_LINE.match(lines[0]), result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def error_of(argv, capsys, main=None):
    """The one line that gpt.main(argv) stops with, in-process: fail()'s message, or argparse's."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        (main or gpt.main)(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line]
    if isinstance(stop.value.code, str):  # fail(): Python prints this one line when it exits
        assert not err, err
        return stop.value.code
    assert stop.value.code != 0 and len(err) == 1, err
    return err[0]


def assert_error(argv, capsys, *phrases, main=None):
    line = error_of(argv, capsys, main)
    assert ERROR_LINE.match(line), line
    for phrase in phrases:
        assert phrase in line, line


def log_steps(stdout):
    return [int(line.split("|")[0].split()[1]) for line in stdout.splitlines()
            if line.startswith("step")]


@pytest.mark.slow
def test_end_to_end_writes_a_checkpoint_and_a_sample(tmp_path, text_file):
    out = tmp_path / "out"
    result = run(f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS, cwd=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    # no CUDA here: the first line says what the laptop preset replaced, the flags given excepted
    assert lines[0].startswith("preset laptop replaces values at the top: dropout=0.0")
    assert "n_layer" not in lines[0] and "--preset=none" in lines[0]
    assert re.match(r"1 layers, 2 heads, 16 channels, context 8, batch 4 \| at most 20 steps \| "
                    r"cpu, (bfloat16|float32): ", lines[1])
    assert log_steps(result.stdout) == [0, 10, 20]
    done = next(line for line in lines if line.startswith("done:"))
    val = float(re.search(r"val (\d+\.\d{4}) ", done).group(1))
    bits = float(re.search(r"\((\d+\.\d{3}) bits", done).group(1))
    assert bits == pytest.approx(val / math.log(2), abs=1e-3)
    sample = result.stdout.split(done + "\n", 1)[1]
    assert len(sample) == 31 + 1 and sample.startswith("\n")  # id 0 (a newline), 30 new, print's \n
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    assert ckpt["history"]["step"] == [0, 10, 20] and ckpt["finished"]
    assert ckpt["history"]["val"][-1] == pytest.approx(val, abs=1e-4)
    assert ckpt["config"]["n_layer"] == 1 and ckpt["vocab"] == sorted(set(open(text_file).read()))


def test_help_lists_every_flag_with_its_help_text(capsys):
    with pytest.raises(SystemExit) as stop:
        gpt.main(["--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps long help lines
    flags = [f for f in dataclasses.fields(gpt.Config) if "help" in f.metadata]
    assert len(flags) >= 20
    for f in flags:
        assert re.search(f"--{f.name}[ ,]", text) and " ".join(f.metadata["help"].split()) in text
        assert f"(default: {f.default!r})" in text, f.name  # the value at the top
    assert "--vocab_size" not in text  # set from the data
    assert "--preset {auto,none,laptop,slow}" in text


def pasted(**top):
    """gpt.py as a notebook cell holds it, its top edited (name=value), run as a cell: __main__ no
    more, so that main() is called by hand here."""
    source = open(GPT_PY, encoding="utf-8").read()
    for name, value in top.items():
        source, n = re.subn(rf"^(    {name}: \w+ = flag\()[^,]+,", rf"\g<1>{value!r},", source,
                            flags=re.M)
        assert n == 1, name
    namespace = {"__name__": "pasted"}
    exec(compile(source, "<cell>", "exec"), namespace)
    return namespace


def test_help_works_where_gpt_py_was_pasted_into_a_notebook_cell(capsys):
    """No __file__, no source file to read: the help text lives in the fields themselves."""
    with pytest.raises(SystemExit) as stop:
        pasted()["main"](["--help"])
    assert stop.value.code == 0 and "--max_iters" in capsys.readouterr().out


def hardware(monkeypatch, device="cpu", native_bf16=True, capability=(9, 0)):
    """Make gpt.py see this device (and the CPU), a CPU with or without native bfloat16, and a
    machine fast enough for the laptop preset (its timed steps are tested on their own, below)."""
    monkeypatch.setattr(gpt.torch.cuda, "is_available", lambda: device == "cuda")
    monkeypatch.setattr(gpt.torch.backends.mps, "is_available", lambda: device == "mps")
    monkeypatch.setattr(gpt.torch.cuda, "get_device_capability", lambda: capability)
    monkeypatch.setattr(gpt.torch.cpu, "_is_avx512_bf16_supported", lambda: native_bf16)
    monkeypatch.setattr(gpt, "pick_laptop",
                        lambda budget, device, dtype, why, dtype_flag: ("laptop", dtype, why))


def settings(tmp_path, *flags):
    """The Config that make_settings decides for these flags, on this machine."""
    return gpt.make_settings([f"--out_dir={tmp_path}", *flags])[0]


@pytest.mark.parametrize("device,native_bf16,flags,n_layer,dtype", [
    ("cpu", True, [], 4, "bfloat16"),  # the laptop preset
    ("cpu", False, [], 4, "float32"),  # most laptops: no AVX512-BF16, no AMX; the same model
    ("cpu", True, ["--dtype=float32"], 4, "float32"),  # the precision given, not detected
    ("mps", True, [], 4, "float32"),  # MPS trains in float32
    ("cpu", True, ["--preset=none"], 6, "bfloat16"),  # the values at the top
    ("cuda", False, [], 6, "bfloat16"),  # CUDA: the values at the top
    ("cuda", False, ["--preset=laptop"], 4, "bfloat16"),  # a preset named stays as it is
])
def test_the_preset_follows_the_device_and_the_first_line_says_what_it_replaced(
        tmp_path, monkeypatch, capsys, device, native_bf16, flags, n_layer, dtype):
    hardware(monkeypatch, device, native_bf16)
    cfg = settings(tmp_path, *flags)
    lines = capsys.readouterr().out.splitlines()
    assert cfg.n_layer == n_layer and cfg.dtype == dtype and cfg.device == device
    top = gpt.Config()
    if n_layer == 6:  # nothing replaced: every value is the top's but device and dtype
        assert cfg == dataclasses.replace(top, out_dir=str(tmp_path), preset="none",
                                          device=device, dtype=dtype)
        assert len(lines) == 1 and lines[0].startswith("6 layers, 6 heads, 384 channels")
    else:
        replaced = {f.name for f in dataclasses.fields(cfg)
                    if getattr(cfg, f.name) != getattr(top, f.name)} - {"out_dir", "preset",
                                                                        "device", "dtype"}
        named = re.findall(r"(\w+)=", lines[0].split(":", 1)[1].split("(")[0])
        assert lines[0].startswith("preset laptop replaces values at the top: ")
        assert set(named) == replaced and len(replaced) >= 10  # each value it changed, named
    assert f"| {device}, {dtype}: " in lines[-1]  # the line says on what, and why that dtype


def test_a_value_edited_at_the_top_is_what_runs_or_the_first_line_says_what_replaced_it(
        tmp_path, capsys, monkeypatch):
    hardware(monkeypatch, "cpu")
    cell = pasted(n_layer=2, dropout=0.1)  # a learner's edit at the top
    cell["pick_laptop"] = gpt.pick_laptop  # the cell's own, faked as hardware() fakes gpt's
    cfg = cell["make_settings"]([f"--out_dir={tmp_path}"])[0]
    first = capsys.readouterr().out.splitlines()[0]
    assert cfg.n_layer == 4 and "n_layer=4" in first and "dropout=0.0" in first  # said, not silent
    cell = pasted(n_layer=2, dropout=0.1, preset="none")  # what the line says keeps the top's
    cfg = cell["make_settings"]([f"--out_dir={tmp_path}"])[0]
    assert (cfg.n_layer, cfg.dropout, cfg.n_embd) == (2, 0.1, 384)
    assert not capsys.readouterr().out.startswith("preset")
    hardware(monkeypatch, "cuda")  # the run settings at the top count too, not only the model's
    cell = pasted(device="cpu", dtype="float32", out_dir=str(tmp_path / "nowhere"))
    cfg = cell["make_settings"]([])[0]
    assert (cfg.device, cfg.dtype, cfg.out_dir) == ("cpu", "float32", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit, match="can't load .*nowhere"):  # resume: from that out_dir
        pasted(init_from="resume", out_dir=str(tmp_path / "nowhere"))["make_settings"]([])


def test_cpu_bfloat16_only_where_it_is_native(tmp_path, monkeypatch):
    """oneDNN emulates bfloat16 on any AVX-512 CPU; gpt.py picks it only with AVX512-BF16 (which
    every CPU with AMX also has)."""
    for native, expected in ((True, "bfloat16"), (False, "float32")):
        hardware(monkeypatch, "cpu", native_bf16=native)
        assert settings(tmp_path).dtype == expected


@pytest.mark.parametrize("name", ["laptop", "slow"])
def test_the_laptop_presets_are_held_by_time_and_small(name):
    laptop = gpt.Config(**gpt.PRESETS[name])
    assert 0 < laptop.max_time < 600 and laptop.max_iters >= 50000  # time stops it, not steps
    assert sum(p.numel() for p in gpt.GPT(laptop).parameters()) < 1e6  # for one slow core


class SpeedClock:
    """time.perf_counter for pick_laptop: for each precision it times, 0, then the seconds that 5
    steps at that speed would take."""

    def __init__(self, *speeds):
        self.times = [t for speed in speeds for t in (0.0, 5 * 16 * 128 / speed)]  # 16 x 128

    def __call__(self):
        return self.times.pop(0)


def counted_steps(monkeypatch):
    """gpt.train_step as it is, each call counted: the list of its calls."""
    steps = []
    real_step = gpt.train_step
    monkeypatch.setattr(gpt, "train_step", lambda *args: steps.append(real_step(*args)))
    return steps


def no_clock():
    raise AssertionError("a run that must not depend on the clock read it")


@pytest.mark.parametrize("speed,flags,expected", [
    (20_000, [], "laptop"),  # 11.6M tokens in 580 s
    (10_500, [], "laptop"),  # 6.09M: just over 6M
    (10_000, [], "slow"),  # 5.8M: just under
    (20_000, ["--max_time=236"], "slow"),  # 4.7M: the budget counts, not the speed alone
])
def test_without_cuda_timed_steps_choose_laptop_or_slow_and_the_first_line_says_so(
        tmp_path, monkeypatch, capsys, speed, flags, expected):
    monkeypatch.setattr(gpt.torch.cpu, "_is_avx512_bf16_supported", lambda: False)  # float32
    monkeypatch.setattr(gpt.time, "perf_counter", SpeedClock(speed))
    steps = counted_steps(monkeypatch)
    cfg = settings(tmp_path, "--device=cpu", *flags)
    lines = capsys.readouterr().out.splitlines()
    assert len(steps) == 6  # one to warm up, five timed: on laptop's own model
    assert lines[0] == f"measured {speed:,} tokens/s at context 128: preset {expected}"
    assert lines[1].startswith(f"preset {expected} replaces values at the top: ")
    shape = {"laptop": (4, 128, 1.0), "slow": (2, 64, 0.5)}[expected]  # slow: 0.5 won at S4
    assert (cfg.preset, cfg.n_layer, cfg.block_size, cfg.weight_decay) == (expected, *shape)


@pytest.mark.parametrize("bf16_speed,f32_speed,dtype,why", [
    (15_000, 22_000, "float32", "timed faster than bfloat16 here"),  # an AMX Xeon, this model
    (22_000, 15_000, "bfloat16", "the CPU has native bfloat16 (AVX512-BF16)"),  # a Zen 5
])
def test_where_bfloat16_is_native_both_precisions_are_timed_and_the_faster_trains(
        tmp_path, monkeypatch, capsys, bf16_speed, f32_speed, dtype, why):
    monkeypatch.setattr(gpt.torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    monkeypatch.setattr(gpt.time, "perf_counter", SpeedClock(bf16_speed, f32_speed))
    steps = counted_steps(monkeypatch)
    cfg = settings(tmp_path, "--device=cpu")
    lines = capsys.readouterr().out.splitlines()
    assert len(steps) == 12 and cfg.dtype == dtype  # 6 steps in each, the faster one runs
    speed = max(bf16_speed, f32_speed)
    assert lines[0] == f"measured {speed:,} tokens/s at context 128: preset laptop"
    assert lines[-1].endswith(f"| cpu, {dtype}: {why}")
    monkeypatch.setattr(gpt.time, "perf_counter", SpeedClock(bf16_speed))
    cfg = settings(tmp_path, "--device=cpu", "--dtype=bfloat16")  # given: kept, timed alone
    assert len(steps) == 18 and cfg.dtype == "bfloat16"


def test_a_step_count_a_preset_named_or_cuda_never_reads_the_clock(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpt.time, "perf_counter", no_clock)
    assert settings(tmp_path, "--device=cpu", "--max_time=0").n_layer == 4  # by steps: laptop
    assert settings(tmp_path, "--device=cpu", "--preset=slow").n_layer == 2
    cell = pasted(preset="laptop")  # the top's value, as a flag's
    assert cell["make_settings"]([f"--out_dir={tmp_path}", "--device=cpu"])[0].n_layer == 4
    assert "measured" not in capsys.readouterr().out
    monkeypatch.setattr(gpt.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpt.torch.cuda, "get_device_capability", lambda: (9, 0))
    assert settings(tmp_path).preset == "none"  # CUDA: the values at the top, nothing timed


def test_a_flag_overrides_the_measured_shape_and_the_timing_leaves_the_run_as_it_was(
        tmp_path, monkeypatch, text_file):
    monkeypatch.setattr(gpt.torch.cpu, "_is_avx512_bf16_supported", lambda: False)  # float32
    monkeypatch.setattr(gpt.time, "perf_counter", SpeedClock(1_000))  # a very slow machine: slow
    cfg = settings(tmp_path, "--device=cpu", "--n_layer=3")
    assert (cfg.preset, cfg.n_layer, cfg.block_size) == ("slow", 3, 64)  # the flag wins
    monkeypatch.setattr(gpt.time, "perf_counter", SpeedClock(1_000))
    timed = gpt.prepare([f"--input={text_file}", f"--out_dir={tmp_path}", "--device=cpu"])
    named = gpt.prepare([f"--input={text_file}", f"--out_dir={tmp_path}", "--device=cpu",
                         "--preset=slow"])
    assert timed[0] == named[0]  # the same settings, and the seed's same first weights:
    for a, b in zip(timed[3].parameters(), named[3].parameters()):
        assert torch.equal(a, b)  # the throwaway model drew its numbers before the seed was set


def test_settings_need_no_os_sysconf(tmp_path, monkeypatch):
    """Windows has no os.sysconf: nothing on the way to a run may call it."""
    monkeypatch.delattr(os, "sysconf", raising=False)
    assert settings(tmp_path, "--preset=laptop").n_layer == 4


@pytest.mark.parametrize("preset", ["laptop", "none"])
def test_a_flag_changes_only_the_field_it_names(tmp_path, preset):
    base = settings(tmp_path, f"--preset={preset}")
    for f in dataclasses.fields(gpt.Config):
        if "help" not in f.metadata or f.name in ("out_dir", "preset", "init_from", "device",
                                                  "input"):
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


def test_edit_and_run_again_keeps_every_earlier_model_and_says_where(tmp_path, text_file, capsys):
    out = tmp_path / "out"
    flags = [f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS]
    first = gpt.main(flags)["model"]
    second = gpt.main([*flags, "--n_embd=32"])["model"]  # edited: another model, same folder
    assert capsys.readouterr().out.count("is now") == 1
    gpt.main([*flags, "--seed=3"])
    said = [line for line in capsys.readouterr().out.splitlines() if "is now" in line]
    assert said == [f"the earlier run's {out}/ckpt.pt is now {out}/ckpt-2.pt"]
    for name, model in (("ckpt-1.pt", first), ("ckpt-2.pt", second)):
        saved = gpt.load_checkpoint(str(out / name))["model"]
        assert all(torch.equal(saved[k], v) for k, v in model.state_dict().items()), name
    assert sorted(os.listdir(out)) == ["ckpt-1.pt", "ckpt-2.pt", "ckpt.pt"]


def test_checkpoint_round_trip_gives_identical_logits_and_resume_continues(tmp_path, text_file,
                                                                          capsys):
    out = str(tmp_path / "out")
    first = gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS])
    ckpt = gpt.load_checkpoint(os.path.join(out, "ckpt.pt"))
    model = gpt.GPT(gpt.Config(**ckpt["config"]))
    model.load_state_dict(ckpt["model"])
    idx = torch.randint(len(ckpt["vocab"]), (2, 8))
    torch.testing.assert_close(model.eval()(idx)[0], first["model"].eval()(idx)[0], rtol=0, atol=0)
    capsys.readouterr()
    gpt.main([f"--input={text_file}", "--init_from=resume", f"--out_dir={out}", "--max_iters=30"])
    stdout = capsys.readouterr().out
    assert stdout.startswith(f"resuming {out}/ckpt.pt at step 20")
    assert log_steps(stdout) == [30]  # the step resumed from is not evaluated (nor logged) twice
    history = torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)["history"]
    assert history["step"] == [0, 10, 20, 30]
    assert history["seconds"][:3] == ckpt["history"]["seconds"]
    assert history["seconds"][3] >= history["seconds"][2]


def test_the_final_val_is_the_exact_whole_text_score_of_the_saved_model(tmp_path, text_file):
    """The last val scores every target of the validation split once, as a plain loop over its
    windows of 8 scores ckpt.pt; the evaluations before it are random estimates."""
    out = tmp_path / "out"
    result = gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS, "--dtype=float32"])
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)
    model = gpt.GPT(gpt.Config(**ckpt["config"])).eval()
    model.load_state_dict(ckpt["model"])
    text = open(text_file, encoding="utf-8").read()
    val = torch.tensor([ckpt["vocab"].index(c) for c in text[int(0.9 * len(text)):]])
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(val) - 8, 8):  # each window whose 8 targets lie in val
            logits, _ = model(val[None, start:start + 8])
            total += torch.nn.functional.cross_entropy(logits[0], val[start + 1:start + 9],
                                                       reduction="sum").item()
            count += 8
    assert count == (len(val) - 1) // 8 * 8 and len(val) - 1 - count < 8
    assert result["history"]["val"][-1] == pytest.approx(total / count, abs=1e-5)
    assert ckpt["history"]["val"][-1] == pytest.approx(total / count, abs=1e-5)
    assert ckpt["finished"] is True


def test_the_exact_score_draws_no_random_numbers_and_leaves_dropout_as_it_was():
    cfg = gpt.Config(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.3,
                     batch_size=3, device="cpu")
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


def test_a_save_that_fails_midway_keeps_the_last_checkpoint(trained, monkeypatch):
    """As on a full disk: part of ckpt.pt.tmp is written, then the write raises an OSError."""
    out, blob = trained

    class FullDisk:
        """A file being written on a disk that fills up after 100 bytes."""

        def __init__(self, path):
            self.file = open(path, "wb")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, data):
            self.file.write(bytes(data[:100]))
            raise OSError(28, "No space left on device")

    def full_disk_open(path, mode="r", **kwargs):
        return FullDisk(path) if mode == "wb" else open(path, mode, **kwargs)

    monkeypatch.setattr(gpt, "open", full_disk_open, raising=False)  # gpt.py's open, no other
    with pytest.raises(OSError):  # __main__ turns it into one line: test_a_full_disk_... below
        gpt.main([f"--out_dir={out}", "--init_from=resume", "--max_iters=30"])
    monkeypatch.delattr(gpt, "open")
    assert (out / "ckpt.pt").read_bytes() == blob
    assert gpt.load_checkpoint(str(out / "ckpt.pt"))["history"]["step"][-1] == 20


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="mounts a tmpfs")
def test_a_full_disk_at_a_save_on_a_real_small_filesystem(tmp_path, text_file):
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)],
                             capture_output=True)
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
        assert_clean_error(result, "No space left on device", "--out_dir")
        assert (out / "ckpt.pt").read_bytes() == blob
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_ctrl_c_then_resume_gives_the_losses_of_an_uninterrupted_run(tmp_path, text_file,
                                                                     monkeypatch):
    """Ctrl-C injected at a fixed step: the last evaluation's checkpoint holds the random state,
    so the run resumed from it goes on exactly."""
    flags = [f"--input={text_file}", *TINY_FLAGS, "--dropout=0.2"]  # dropout draws numbers too
    straight = gpt.main([*flags, f"--out_dir={tmp_path / 'a'}"])["history"]
    lr_at = gpt.lr_at

    def lr_at_pressing_ctrl_c(step, seconds, cfg):
        if step == 13:
            signal.raise_signal(signal.SIGINT)
        return lr_at(step, seconds, cfg)

    monkeypatch.setattr(gpt, "lr_at", lr_at_pressing_ctrl_c)
    # Python's Ctrl-C handler, which a suite started in the background (SIGINT ignored) lacks
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            gpt.main([*flags, f"--out_dir={tmp_path / 'b'}"])
    finally:
        signal.signal(signal.SIGINT, previous)
    interrupted = torch.load(tmp_path / "b" / "ckpt.pt", weights_only=True)
    assert interrupted["history"]["step"][-1] == 10 and interrupted["finished"] is False  # not the end
    monkeypatch.setattr(gpt, "lr_at", lr_at)
    resumed = gpt.main([*flags, f"--out_dir={tmp_path / 'b'}", "--init_from=resume"])["history"]
    assert len(straight["step"]) == 3 and len(resumed["seconds"]) == 3
    for key in ("step", "train", "val"):  # the seconds differ: a real clock
        assert resumed[key] == straight[key], key


def test_same_seed_repeats_a_run_exactly(tmp_path, text_file):
    def losses(seed, name):
        flags = [f"--input={text_file}", f"--out_dir={tmp_path / name}", f"--seed={seed}"]
        history = gpt.main([*flags, *TINY_FLAGS])["history"]
        return history["train"] + history["val"]

    assert losses(7, "a") == losses(7, "b")
    assert losses(7, "a") != losses(8, "c")


# ------------------------------------------------------------------ precision, resume across them


@pytest.mark.parametrize("device,capability,cpu_bf16,expected", [
    ("cuda", (6, 1), False, "float32"),  # Pascal (GTX 10xx): float16 is slow there
    ("cuda", (7, 5), False, "float16"),  # T4 (Colab's free GPU): no bfloat16 tensor cores
    ("cuda", (7, 0), False, "float16"),  # V100
    ("cuda", (8, 0), False, "bfloat16"),  # A100
    ("cuda", (9, 0), False, "bfloat16"),  # H100
    ("mps", None, True, "float32"),  # Apple GPUs (the CPU's bfloat16 does not count)
    ("cpu", None, True, "bfloat16"),  # AVX512-BF16 (every CPU with AMX has it)
    ("cpu", None, False, "float32"),
])
def test_precision_follows_the_hardware(monkeypatch, device, capability, cpu_bf16, expected):
    hardware(monkeypatch, device, native_bf16=cpu_bf16, capability=capability)
    found, dtype, why = gpt.pick_hardware("auto", "auto")
    assert (found, dtype) == (device, expected) and why
    if capability:  # the line names the compute capability
        assert f"compute capability {capability[0]}.{capability[1]}" in why or dtype == "float32"


def test_float32_builds_no_autocast_so_a_device_without_one_cannot_fail(monkeypatch):
    """torch 2.5 rejects torch.autocast("mps") before it reads enabled=False: float32 never asks."""
    def no_autocast(*args, **kwargs):
        raise RuntimeError("User specified an unsupported autocast device_type 'mps'")

    monkeypatch.setattr(gpt.torch, "autocast", no_autocast)
    for device in ("mps", "cpu", "cuda"):
        ctx = gpt.autocast(gpt.Config(device=device, dtype="float32"))
        assert isinstance(ctx, contextlib.nullcontext)
    cfg = gpt.Config(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, device="cpu",
                     dtype="float32", batch_size=2)
    model = gpt.GPT(cfg)
    splits = {"train": torch.randint(11, (100,))}
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    before = [p.clone() for p in model.parameters()]
    gpt.train_step(model, gpt.make_optimizer(model, cfg), scaler, splits, cfg, 1e-3)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it trained


@pytest.mark.parametrize("first,then", [("float32", "float16"), ("bfloat16", "float16"),
                                        ("float16", "float32"), ("float16", "bfloat16")])
def test_a_checkpoint_resumes_in_another_precision(tmp_path, text_file, first, then):
    """A laptop's float32 or bfloat16 run goes on on a T4 (float16, GradScaler("cpu") standing in
    for CUDA's), and the other way."""
    gpt.main([f"--input={text_file}", f"--out_dir={tmp_path}", *TINY_FLAGS, f"--dtype={first}"])
    more = gpt.main([f"--input={text_file}", f"--out_dir={tmp_path}", "--init_from=resume",
                     "--max_iters=30", f"--dtype={then}"])
    assert more["config"].dtype == then and more["history"]["step"][-1] == 30
    assert all(math.isfinite(v) for v in more["history"]["train"])
    scale = torch.load(tmp_path / "ckpt.pt", weights_only=True)["scaler"]
    assert bool(scale) == (then == "float16")  # a float16 run keeps its scale, others have none


def test_float16_with_a_gradient_scaler_trains_on_a_cpu_and_resumes_its_scale(tmp_path, text_file):
    result = gpt.main([f"--input={text_file}", f"--out_dir={tmp_path}", *TINY_FLAGS,
                       "--dtype=float16"])
    assert result["config"].dtype == "float16"
    val = result["history"]["val"]
    assert all(math.isfinite(v) for v in val) and val[-1] < val[0]
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert ckpt["scaler"]["scale"] == 65536.0  # GradScaler's start: no overflow in 20 steps
    ckpt["scaler"]["scale"] = 1234.0  # as if it had backed off: a resumed run goes on from it
    torch.save(ckpt, tmp_path / "ckpt.pt")
    gpt.main([f"--input={text_file}", f"--out_dir={tmp_path}", "--init_from=resume",
              "--max_iters=21", "--dtype=float16"])
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["scaler"]["scale"] == 1234.0


# ------------------------------------------------------------------ the schedule and the time budget


def test_the_schedule_warms_up_peaks_and_ends_at_min_lr():
    cfg = gpt.Config(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, max_iters=110, max_time=0)
    lrs = [gpt.lr_at(step, 0.0, cfg) for step in range(111)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)  # 1/10, then all
    assert all(a < b for a, b in zip(lrs[:9], lrs[1:10]))  # up during the warm-up
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))  # then only down
    assert lrs[60] == pytest.approx((1e-3 + 1e-4) / 2)  # half way down the cosine
    assert lrs[110] == pytest.approx(1e-4)
    assert all(gpt.lr_at(60, s, cfg) == lrs[60] for s in (1.0, 1e6))  # no budget: no clock


class FakeClock:
    """time.perf_counter for gpt.py, on which only training steps and evaluations take time:
    step_time a step, eval_time an evaluation. It records the rate each step used, read off the
    optimizer itself."""

    def __init__(self, monkeypatch, step_time, eval_time):
        self.now, self.step_time, self.eval_time, self.lrs = 1000.0, step_time, eval_time, []
        monkeypatch.setattr(gpt.time, "perf_counter", lambda: self.now)
        train_step, estimate_loss = gpt.train_step, gpt.estimate_loss

        def timed_step(model, optimizer, scaler, splits, cfg, lr):
            self.now += self.step_time
            train_step(model, optimizer, scaler, splits, cfg, lr)
            self.lrs.append(optimizer.param_groups[0]["lr"])

        def timed_evaluation(model, splits, cfg, ctx):
            self.now += self.eval_time
            return estimate_loss(model, splits, cfg, ctx)

        monkeypatch.setattr(gpt, "train_step", timed_step)
        monkeypatch.setattr(gpt, "estimate_loss", timed_evaluation)


BUDGET = ["--n_layer=1", "--n_head=2", "--n_embd=16", "--block_size=8", "--batch_size=4",
          "--max_new_tokens=5", "--warmup_iters=10", "--eval_interval=20", "--eval_iters=2",
          "--max_iters=100000", "--max_time=30", "--min_lr=1e-4",
          "--preset=laptop"]  # a preset named: no timed steps


@pytest.mark.parametrize("step_time,eval_time", [(0.05, 0.02), (0.05, 1.0), (0.2, 0.02)])
def test_a_budgeted_run_trains_within_max_time_and_ends_at_min_lr(
        tmp_path, text_file, monkeypatch, step_time, eval_time):
    """Training stops at the first check past max_time: at most a step and an evaluation late."""
    clock = FakeClock(monkeypatch, step_time, eval_time)
    result = gpt.main([f"--input={text_file}", *BUDGET, f"--out_dir={tmp_path}"])
    history, cfg = result["history"], result["config"]
    assert 30 <= history["seconds"][-1] <= 30 + step_time + eval_time
    assert clock.now - 1000 <= 30 + step_time + 2 * eval_time  # and the last estimate after it
    assert len(clock.lrs) == history["step"][-1] > 30 / (step_time + eval_time / 20) * 0.8
    assert max(clock.lrs) == pytest.approx(cfg.learning_rate)
    assert clock.lrs[-1] == pytest.approx(cfg.min_lr, rel=0.01)  # the cosine ended with training


def test_a_machine_that_slows_down_tenfold_still_stops_on_time_at_min_lr(tmp_path, text_file,
                                                                        monkeypatch):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.01)
    lr_at = gpt.lr_at

    def slower_after_step_100(step, seconds, cfg):
        if step == 100:
            clock.step_time = 0.5  # ten times slower, a sixth of the way in
        return lr_at(step, seconds, cfg)

    monkeypatch.setattr(gpt, "lr_at", slower_after_step_100)
    result = gpt.main([f"--input={text_file}", *BUDGET, f"--out_dir={tmp_path}"])
    history, cfg = result["history"], result["config"]
    assert 30 <= history["seconds"][-1] <= 30.5 and 100 < history["step"][-1] < 160
    assert clock.lrs[-1] == pytest.approx(cfg.min_lr, rel=0.01)


def interrupted_at(step_to_stop, monkeypatch, flags):
    """Run gpt.main with flags and press Ctrl-C (a KeyboardInterrupt) before step step_to_stop."""
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
    flags = [f"--input={text_file}", *BUDGET, f"--out_dir={tmp_path}"]
    interrupted_at(250, monkeypatch, flags)
    saved = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert saved["history"]["step"][-1] == 240 and 12 < saved["history"]["seconds"][-1] < 12.2
    clock.lrs = []
    resumed = gpt.main([*flags, "--init_from=resume"])  # the budget goes on from 12.x s
    history = resumed["history"]
    assert resumed["config"].max_time == 30 and history["step"][:13] == saved["history"]["step"]
    assert 30 <= history["seconds"][-1] <= 30.05
    assert len(clock.lrs) < 0.6 * history["step"][-1]  # only the steps that the seconds left
    assert clock.lrs[-1] == pytest.approx(resumed["config"].min_lr, rel=0.01)


def test_max_iters_given_on_resume_turns_the_budget_off(tmp_path, text_file, monkeypatch):
    clock = FakeClock(monkeypatch, step_time=0.05, eval_time=0.01)
    flags = [f"--input={text_file}", *BUDGET, f"--out_dir={tmp_path}"]
    interrupted_at(250, monkeypatch, flags)
    clock.step_time = 1.0  # 1,000 steps would take far longer than the budget
    more = gpt.main([f"--input={text_file}", f"--out_dir={tmp_path}", "--init_from=resume",
                     "--max_iters=1240"])  # the saved max_time=30 is switched off
    assert more["config"].max_time == 0 and more["history"]["step"][-1] == 1240
    assert clock.lrs[-1] == pytest.approx(more["config"].min_lr, rel=0.01)  # by steps, to 1,240


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("flag,phrases", [
    ("--n_layr=2", ["error: unrecognized arguments: --n_layr=2"]),
    ("--max_iters=lots", ["--max_iters", "invalid number value: 'lots'"]),
    ("--dropout=x", ["--dropout", "invalid number value: 'x'"]),
    ("n_layer=2", ["unrecognized arguments: n_layer=2"]),
    ("--n_head=3", ["--n_embd=128 must be a multiple of --n_head=3"]),
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
    ("--prompt=To", ["unrecognized arguments: --prompt=To"]),  # a prompt: sample.py's
])
def test_bad_flags(flag, phrases, tmp_path, text_file, capsys):
    """On the laptop preset (a flag given later wins), so that --n_head=3 meets its 128 channels."""
    assert_error(["--preset=laptop", flag, f"--input={text_file}", f"--out_dir={tmp_path}"], capsys,
                 *phrases)
    assert not (tmp_path / "ckpt.pt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--n_layr=2", "--n_head=3"])
def test_bad_flags_in_a_terminal_are_one_line_and_no_traceback(flag, tmp_path):
    assert_clean_error(run("--preset=laptop", flag, f"--out_dir={tmp_path}"), flag.split("=")[0])


def test_a_flag_given_twice_the_last_wins_as_in_argparse(tmp_path):
    assert settings(tmp_path, "--max_iters=3", "--max_iters=4").max_iters == 4


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
@pytest.mark.parametrize("where", ["/proc/forbidden", "/proc", "a regular file"])
def test_an_out_dir_that_cannot_be_written_is_one_line_at_the_first_save(tmp_path, text_file,
                                                                         where):
    if where == "a regular file":
        where = str(tmp_path / "file")
        open(where, "w").close()
    result = run(f"--out_dir={where}", f"--input={text_file}", *TINY_FLAGS)
    assert_clean_error(result, where, "--out_dir")
    assert "step     0 | train" not in result.stdout  # the first evaluation: saved, then logged


def test_a_failed_first_run_leaves_no_empty_out_dir(tmp_path, text_file, capsys):
    flags = [f"--out_dir={tmp_path / 'out'}", f"--input={text_file}", *TINY_FLAGS]
    assert_error([*flags, "--block_size=100000"], capsys, "too short for --block_size=100000")
    assert not (tmp_path / "out").exists()


def test_bigram_refuses_a_learning_rate_that_is_not_finite(capsys):
    import bigram

    assert_error(["--learning_rate=inf"], capsys, "--learning_rate", main=bigram.main)


@pytest.mark.slow
def test_bad_input_files(tmp_path):
    missing = run(f"--input={tmp_path / 'nope.txt'}", f"--out_dir={tmp_path}")
    assert_clean_error(missing, "No such file", "nope.txt", "--input")
    (tmp_path / "empty.txt").write_text("")
    assert_clean_error(run(f"--input={tmp_path / 'empty.txt'}", f"--out_dir={tmp_path}"),
                       "too short")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait ".encode("latin-1") * 100)
    assert_clean_error(run(f"--input={tmp_path / 'latin1.txt'}", f"--out_dir={tmp_path}"),
                       "utf-8", "position 3")


def test_a_text_too_short_for_the_context(tmp_path, capsys):
    (tmp_path / "short.txt").write_text("a short text, " * 30)
    assert_error([f"--input={tmp_path / 'short.txt'}", "--n_layer=1", "--block_size=128",
                  f"--out_dir={tmp_path}"], capsys, "too short for --block_size=128")


def test_device_that_is_not_there(capsys, monkeypatch):
    monkeypatch.setattr(gpt.torch.cuda, "is_available", lambda: False)
    assert_error(["--device=cuda"], capsys, "--device=cuda", "no such device", "use auto or cpu")


def test_resume_without_a_checkpoint(tmp_path, capsys):
    assert_error(["--init_from=resume", f"--out_dir={tmp_path}"], capsys, "can't load", "ckpt.pt",
                 "FileNotFoundError", "train a model there first")


@pytest.fixture
def trained(tmp_path, text_file):
    """An out_dir holding the checkpoint of a tiny run, and that checkpoint's bytes."""
    out = tmp_path / "trained"
    gpt.main([f"--input={text_file}", f"--out_dir={out}", *TINY_FLAGS])
    return out, (out / "ckpt.pt").read_bytes()


def test_resume_from_a_corrupt_unsafe_or_foreign_checkpoint(trained, capsys):
    out, blob = trained
    (out / "ckpt.pt").write_bytes(blob[: len(blob) // 2])
    assert_error(["--init_from=resume", f"--out_dir={out}"], capsys, "can't load")
    torch.save({"model": object()}, out / "ckpt.pt")  # a pickled object: weights_only refuses it
    assert_error(["--init_from=resume", f"--out_dir={out}"], capsys, "can't load")
    torch.save({"model": {}, "config": {}}, out / "ckpt.pt")  # another program's
    assert_error(["--init_from=resume", f"--out_dir={out}"], capsys, "not saved by gpt.py")


def test_resume_with_a_value_that_diverges_keeps_the_checkpoint_and_its_settings(trained,
                                                                                capsys):
    """A flag given on resume applies to that run; a nan is never saved."""
    out, blob = trained
    assert_error(["--init_from=resume", f"--out_dir={out}", "--max_iters=40",
                  "--learning_rate=1e30", "--grad_clip=0", "--warmup_iters=0"], capsys,
                 "loss nan at step 30", "lower --learning_rate")
    assert (out / "ckpt.pt").read_bytes() == blob
    plain = gpt.main(["--init_from=resume", f"--out_dir={out}", "--max_iters=30"])
    assert plain["history"]["step"][-1] == 30


def test_resume_with_other_shapes_or_vocabulary_keeps_the_checkpoint(tmp_path, trained, capsys):
    out, blob = trained
    assert_error(["--init_from=resume", f"--out_dir={out}", "--n_embd=32"], capsys,
                 "does not fit this model", "drop the flags that change its shape")
    other = tmp_path / "other.txt"
    other.write_text("0123456789 abcdef\n" * 500)
    assert_error(["--init_from=resume", f"--out_dir={out}", f"--input={other}", "--max_iters=40"],
                 capsys, "other characters")
    assert (out / "ckpt.pt").read_bytes() == blob


def test_bad_input_never_touches_an_existing_checkpoint(trained, text_file, capsys):
    out, blob = trained
    for args in (["--n_layr=1"], ["--n_embd=31"], ["--input=/no/such/file"], ["--dropout=2"],
                 ["--block_size=100000"]):
        with pytest.raises((SystemExit, OSError)):
            gpt.main([f"--out_dir={out}", f"--input={text_file}", *args])
        assert (out / "ckpt.pt").read_bytes() == blob and os.listdir(out) == ["ckpt.pt"], args


def test_loss_turning_nan_stops_and_keeps_the_last_good_checkpoint(tmp_path, text_file, capsys):
    out = tmp_path / "out"
    flags = [f for f in TINY_FLAGS if not f.startswith("--warmup_iters")]
    assert_error([f"--input={text_file}", f"--out_dir={out}", *flags, "--learning_rate=1e30",
                  "--warmup_iters=0", "--grad_clip=0"], capsys, "loss nan at step 10",
                 "lower --learning_rate")
    ckpt = torch.load(out / "ckpt.pt", weights_only=True)  # saved at step 0, before it diverged
    assert ckpt["history"]["step"] == [0] and all(torch.isfinite(t).all() for t in ckpt["model"].values())


def sigint_as_a_terminal_sends_it():
    """A child started by a job in the background inherits an ignored SIGINT: restore Python's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX")
def test_ctrl_c_saves_a_checkpoint_and_says_how_to_resume(tmp_path, text_file):
    out = tmp_path / "out"
    flags = [f for f in TINY_FLAGS if not f.startswith(("--max_iters", "--eval_interval"))]
    proc = subprocess.Popen([sys.executable, "-u", GPT_PY, f"--input={text_file}",
                             f"--out_dir={out}", *flags, "--max_iters=1000000",
                             "--eval_interval=50"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=sigint_as_a_terminal_sends_it)
    for line in proc.stdout:  # wait until training is under way
        if line.startswith("step    50"):
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "interrupted" in err and "--init_from=resume" in err and "error" not in err
    step = torch.load(out / "ckpt.pt", weights_only=True)["history"]["step"][-1]  # whole
    assert step >= 50 and step % 50 == 0
    resumed = run("--init_from=resume", f"--out_dir={out}", f"--max_iters={step + 5}",
                  "--max_new_tokens=5")
    assert resumed.returncode == 0 and f"step {step + 5:5d}" in resumed.stdout
