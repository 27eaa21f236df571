"""
Benchmark gpt.py against the lecture-style reference on this machine, and print a table + write JSON.

  python benchmarks/bench.py                  # everything, ~15 min on 2 CPU cores (the quality run is ~10)
  python benchmarks/bench.py --no-quality     # skip the time-to-quality run of `python gpt.py`

What it measures:
  train   ms per iteration (median after warm-up), tokens/s and peak memory of one training step, for
          gpt.py's model (batched heads, SDPA, bf16 autocast where the CPU has it) and for the reference
          (one Head module per head, explicit mask, float32, as the notebooks build it), at the
          lecture's scaled configuration and at the laptop default. Each measurement runs in its own
          process (so peak memory is its own), alternating A, B, A, B, and the table reports ratios.
  sample  tokens/s generating 500 new tokens from a one-token prompt, both models, both configs.
  quality `python gpt.py` with no flags (the laptop default without a GPU): wall time and final val loss.
"""
import argparse
import dataclasses
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from benchmarks.lecture import lecture_gpt  # noqa: E402
from gpt import GPT, PRESETS, Config, autocast, get_batch, make_optimizer, pick_hardware  # noqa: E402

CONFIGS = {"scaled": Config(vocab_size=65), "laptop": Config(vocab_size=65, **PRESETS["laptop"])}


def build(model_name, cfg, device):
    """The model, its optimizer and its precision context, each as its own code would set them up."""
    torch.manual_seed(0)
    if model_name == "gpt.py":
        model = GPT(cfg).to(device)
        dtype = pick_hardware(device, "auto")[1]
        return model, make_optimizer(model, cfg), autocast(dataclasses.replace(cfg, device=device, dtype=dtype))
    model = lecture_gpt(cfg).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate), nullcontext()


def cpu_has_bf16():
    """Native bfloat16 on this CPU (AVX512-BF16, which CPUs with AMX have too), as gpt.py tests it."""
    return bool(torch.cpu._is_avx512_bf16_supported())


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def worker(model_name, config_name, iters, warmup, device):
    """One measurement in this process: training step times, then sampling speed, and peak memory."""
    cfg = CONFIGS[config_name]
    model, optimizer, ctx = build(model_name, cfg, device)
    data = torch.randint(cfg.vocab_size, (100_000,))  # speed does not depend on the text
    times = []
    for i in range(warmup + iters):
        sync(device)
        t = time.perf_counter()
        x, y = get_batch(data, cfg.batch_size, cfg.block_size)  # (B, T), (B, T)
        with ctx:
            _, loss = model(x.to(device), y.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        sync(device)
        times.append(time.perf_counter() - t)
    step = statistics.median(times[warmup:])
    model.eval()
    idx = torch.zeros((1, 1), dtype=torch.long, device=device)  # (1, 1)
    with ctx:
        model.generate(idx, 10)  # warm-up
        sync(device)
        t = time.perf_counter()
        model.generate(idx, 500)
        sync(device)
    sample_s = time.perf_counter() - t
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return dict(model=model_name, config=config_name, ms_per_iter=step * 1000,
                tokens_per_s=cfg.batch_size * cfg.block_size / step, peak_mem_mb=peak / 2**20,
                sample_tokens_per_s=500 / sample_s, iters=iters)


def measure(model_name, config_name, iters, warmup, device):
    """Run worker() in a fresh process and return its result."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", model_name, config_name,
           f"--iters={iters}", f"--warmup={warmup}", f"--device={device}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def quality_run(device, flags, plot_path):
    """`python gpt.py` as a learner runs it (no flags unless given): wall time, val loss, loss plot."""
    out_dir = os.path.join(ROOT, "out", "bench_quality")
    t = time.perf_counter()
    result = subprocess.run([sys.executable, os.path.join(ROOT, "gpt.py"), f"--out_dir={out_dir}", "--init_from=scratch", *flags],
                            capture_output=True, text=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - t
    vals = re.findall(r"^step\s+(\d+) \| train ([\d.]+) \| val ([\d.]+)", result.stdout, re.MULTILINE)
    history = torch.load(os.path.join(out_dir, "ckpt.pt"), weights_only=True)["history"]
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for split in ("train", "val"):
        ax.plot(history["step"], history[split], marker="o", label=split)
    ax.set(xlabel="step", ylabel="loss (step 0's 4.2 above the frame)", ylim=(1.1, 2.6),
           title=f"python gpt.py {' '.join(flags)}".strip())
    ax.legend()
    fig.savefig(plot_path, dpi=100)
    return dict(command=" ".join(["python gpt.py", *flags]), wall_s=wall, final_step=int(vals[-1][0]),
                final_train=float(vals[-1][1]), final_val=history["val"][-1],  # exact
                best_val=min(float(v[2]) for v in vals), first_line=result.stdout.splitlines()[0],
                log=[line for line in result.stdout.splitlines() if line.startswith(("step", "done"))],
                sample=result.stdout.split(" on the whole validation text\n", 1)[1].strip("\n"),
                stdout=result.stdout)


def cpu_model():
    """The CPU's model name and family from /proc/cpuinfo (speed on a CPU depends on it)."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return platform.processor()
    name = re.search(r"^model name\s*: (.*)$", info, re.MULTILINE)
    family = re.search(r"^cpu family\s*: (.*)$", info, re.MULTILINE)
    flags = re.search(r"^flags\s*: (.*)$", info, re.MULTILINE)
    isa = [f for f in ("avx512_bf16", "amx_bf16") if flags and f in flags.group(1).split()]
    return f"{name.group(1) if name else '?'} (family {family.group(1) if family else '?'}; {', '.join(isa) or 'no bf16 ISA'})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="scaled,laptop", help="comma-separated: scaled, laptop")
    parser.add_argument("--iters", type=int, default=3, help="timed training iterations per measurement")
    parser.add_argument("--warmup", type=int, default=1, help="untimed iterations before them")
    parser.add_argument("--rounds", type=int, default=2, help="A/B rounds per configuration (results: median)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-quality", action="store_true", help="skip the time-to-quality run of python gpt.py")
    parser.add_argument("--no-speed", action="store_true", help="only the quality run; keep the speed rows in --json")
    parser.add_argument("--gpt-flags", default="", help="flags for the quality run, e.g. '--dtype=float32'")
    parser.add_argument("--plot", default=os.path.join(ROOT, "benchmarks", "laptop_loss.png"), help="its loss plot")
    parser.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "results.json"), help="where to write")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "CONFIG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker, args.iters, args.warmup, args.device)))
        return
    machine = dict(device=args.device, cpu=platform.processor() or platform.machine(), cores=os.cpu_count(),
                   torch_threads=torch.get_num_threads(), torch=torch.__version__, python=platform.python_version(),
                   gpu=torch.cuda.get_device_name() if args.device == "cuda" else None,
                   cpu_bf16=cpu_has_bf16(), cpu_model=cpu_model())
    rows = []
    for config_name in [] if args.no_speed else args.configs.split(","):
        runs = {"gpt.py": [], "reference": []}
        for _ in range(args.rounds):  # interleaved: A, B, A, B, so drifts in machine speed hit both
            for name in runs:
                runs[name].append(measure(name, config_name, args.iters, args.warmup, args.device))
                print(f"  measured {name:9s} {config_name}: {runs[name][-1]['ms_per_iter']:.0f} ms/iter", flush=True)
        for name, results in runs.items():
            row = {k: statistics.median(r[k] for r in results) for k in results[0] if isinstance(results[0][k], float)}
            rows.append(dict(model=name, config=config_name, rounds=len(results), **row,
                             shape=dataclasses.asdict(CONFIGS[config_name])))
    print(f"\nmachine: {machine}\n")
    if rows:
        print(f"{'config':8s} {'model':10s} {'ms/iter':>9s} {'tokens/s':>9s} {'vs ref':>7s} {'peak MB':>8s} "
              f"{'sample tok/s':>13s} {'vs ref':>7s}")
    for row in rows:
        ref = next(r for r in rows if r["config"] == row["config"] and r["model"] == "reference")
        row["speedup_train"] = row["tokens_per_s"] / ref["tokens_per_s"]
        row["speedup_sample"] = row["sample_tokens_per_s"] / ref["sample_tokens_per_s"]
        print(f"{row['config']:8s} {row['model']:10s} {row['ms_per_iter']:9.0f} {row['tokens_per_s']:9.0f} "
              f"{row['speedup_train']:6.2f}x {row['peak_mem_mb']:8.0f} {row['sample_tokens_per_s']:13.0f} "
              f"{row['speedup_sample']:6.2f}x")
    report = dict(machine=machine, date=time.strftime("%Y-%m-%d"), train_and_sample=rows)
    if os.path.exists(args.json):  # keep what this run does not measure, with its own machine
        with open(args.json) as f:
            previous = json.load(f)
        if args.no_speed:
            report = previous
        elif "quality_runs" in previous:
            report["quality_runs"] = previous["quality_runs"]
    if not args.no_quality:
        quality = quality_run(args.device, args.gpt_flags.split(), args.plot)
        runs = report.get("quality_runs", {})
        runs[quality["command"]] = dict(machine=machine, date=time.strftime("%Y-%m-%d"),
                                        **{k: v for k, v in quality.items() if k != "stdout"})
        report["quality_runs"] = runs
        print(f"\ntime to quality: `python gpt.py` ran {quality['wall_s']:.0f} s, ended at step {quality['final_step']} "
              f"with val {quality['final_val']:.4f} (best {quality['best_val']:.4f})")
    with open(args.json, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
