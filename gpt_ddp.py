"""
gpt.py on several GPUs, or several CPU processes, with PyTorch's DistributedDataParallel (DDP).
Every process (a rank) holds the same model and draws its own batches; in the backward pass DDP
averages the gradients over the ranks (an all-reduce), so that every rank takes the same step.

    torchrun --standalone --nproc_per_node=N gpt_ddp.py [gpt.py's flags]

N CUDA GPUs talk through NCCL, otherwise N CPU processes through gloo. The flags are gpt.py's and
mean the same, except that --batch_size is per rank (the global batch is N times it) and there is
no time budget. Rank 0 alone evaluates, logs, saves gpt.py's own checkpoint and samples; a stop
on any rank (nan, Ctrl-C, an error) stops them all. --init_from=resume restores the weights, the
optimizer, the loss scale, the step and the loss history, but each rank then draws new batches
(seeded by seed, step and rank): a resumed run is not the uninterrupted one, step for step.
Notebook 10 shows what DDP does.
"""
import datetime, io, math, os, signal, sys, time
from contextlib import redirect_stderr, redirect_stdout

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import gpt

USAGE = "torchrun --standalone --nproc_per_node=N gpt_ddp.py [gpt.py's flags]"


def report(message):
    """Print an error line unless another rank already has: the first rank to fail says why."""
    try:  # torchrun's store counts the failures; ranks that fail because a partner is gone: quiet
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                              is_master=False, timeout=datetime.timedelta(seconds=10))
        first = store.add("gpt_ddp_failures", 1) == 1
    except Exception:  # no torchrun, or its store is gone: say it anyway
        first = True
    if first:
        print(message, file=sys.stderr, flush=True)


def check_flags(argv):
    """gpt.py's flags checked, less what this script does not do; the device they ask for."""
    flags = gpt.parse_flags(gpt.Config, argv)  # --help, typos: gpt.py's lines
    if flags.get("max_time"):
        gpt.fail("gpt_ddp.py has no time budget: drop --max_time and give --max_iters")
    if flags.get("compile"):
        gpt.fail("gpt_ddp.py does not compile the model: drop --compile (gpt.py has it)")
    if "LOCAL_RANK" not in os.environ:
        gpt.fail(f"start gpt_ddp.py with torchrun: {USAGE}")
    device = gpt.pick_hardware(flags.get("device", "auto"), "float32")[0]
    if device == "mps":
        gpt.fail("DDP runs on CUDA GPUs (NCCL) or CPU processes (gloo): give --device=cpu")
    gpus = int(os.environ["LOCAL_WORLD_SIZE"])  # one GPU per process on this machine
    if device == "cuda" and gpus > torch.cuda.device_count():
        gpt.fail(f"--nproc_per_node={gpus} but this machine has {torch.cuda.device_count()} GPUs")
    return device


class CtrlC:
    """Ctrl-C sets a flag instead of stopping at once: the ranks stop together, between steps."""

    def __init__(self):
        self.pressed = False
        signal.signal(signal.SIGINT, self.press)

    def press(self, signum, frame):
        self.pressed = True


def stop_together(nonfinite, ctrl_c, step, cfg):
    """Share every rank's stop flags; if one is set anywhere, every rank exits here, at once."""
    flags = torch.zeros(dist.get_world_size(), 2, device=cfg.device)  # (ranks, 2)
    flags[dist.get_rank(), 0] = nonfinite  # this rank's last loss was nan or inf
    flags[dist.get_rank(), 1] = float(ctrl_c.pressed)
    dist.all_reduce(flags)  # the sum over ranks: each rank filled only its own row
    flags = flags.tolist()  # the one wait for the device in a step
    bad = [str(rank) for rank, row in enumerate(flags) if row[0]]
    if not bad and not any(row[1] for row in flags):
        return
    if bad:
        message = (f"error: the loss became nan or inf on rank {', '.join(bad)} by step {step}; "
                   f"lower --learning_rate ({cfg.out_dir}/ckpt.pt keeps the last evaluation's "
                   "state)")
    else:
        message = ("interrupted; add --init_from=resume (and the same --out_dir) to go on from "
                   "the last evaluation")
    if dist.get_rank() == 0:
        report(message)
    raise SystemExit(1 if bad else 130)


def train(ddp, optimizer, scaler, splits, cfg, vocab, history, ctrl_c):
    """gpt.py's train() on every rank: rank 0 evaluates and saves, and all agree on each step."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = ddp.module  # the plain model: saved without DDP's "module." prefix
    step = history["step"][-1] if history["step"] else 0
    started = time.perf_counter() - (history["seconds"][-1] if history["step"] else 0.0)
    nonfinite, first, loop_started, eval_time = 0.0, step, time.perf_counter(), 0.0
    while True:
        losses = None
        is_eval_step = step % cfg.eval_interval == 0 or step == cfg.max_iters
        if rank == 0 and is_eval_step and step not in history["step"]:
            eval_started = time.perf_counter()
            losses = gpt.estimate_loss(model, splits, cfg, gpt.autocast(cfg))
            if step == cfg.max_iters:  # as gpt.py's train(): the last val is exact
                losses["val"] = gpt.whole_text_loss(model, splits["val"], cfg,
                                                    gpt.autocast(cfg))
            nonfinite = float(not all(math.isfinite(v) for v in losses.values()))
            eval_time += time.perf_counter() - eval_started
        stop_together(nonfinite, ctrl_c, step, cfg)  # nothing is saved unless every rank is fine
        if losses:
            seconds = time.perf_counter() - started
            for key, value in dict(step=step, seconds=seconds, **losses).items():
                history[key].append(value)
            gpt.save_checkpoint(model, optimizer, scaler, cfg, vocab, history,
                                finished=step == cfg.max_iters)
            print(f"step {step:5d} | train {losses['train']:.4f} | val {losses['val']:.4f} | "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
        if step >= cfg.max_iters:
            break
        lr = gpt.lr_at(step, 0.0, cfg)  # by steps: the ranks' clocks differ
        loss = gpt.train_step(ddp, optimizer, scaler, splits, cfg, lr)  # backward all-reduces
        nonfinite = torch.isfinite(loss).logical_not().float()  # stays on the device
        step += 1
    train_time = time.perf_counter() - loop_started - eval_time  # rank 0's, saves included
    if rank == 0 and step > first:
        tokens = (step - first) * world * cfg.batch_size * cfg.block_size
        print(f"{step - first} steps in {train_time:.1f} s without evaluations: "
              f"{tokens / train_time:,.0f} tokens/s, all ranks together", flush=True)
    return history


def main(argv=None):
    """Every rank: settings, model, DDP and training; then rank 0 samples."""
    ctrl_c = CtrlC()
    argv = sys.argv[1:] if argv is None else argv
    rank = int(os.environ.get("RANK", "0"))
    said = io.StringIO()  # a bad setting fails on every rank alike: report() prints it once
    try:
        with redirect_stderr(said), redirect_stdout(sys.stdout if rank == 0 else io.StringIO()):
            device = check_flags(argv)
            if device == "cuda":  # from here on "cuda" is this rank's own GPU
                torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            prepared = gpt.prepare([*argv, "--max_time=0"])  # a flag twice: the last wins
    except SystemExit as stop:
        if stop.code:
            report(said.getvalue().strip())
        raise
    print(said.getvalue(), end="", file=sys.stderr)  # what setting up had to say, if anything
    # gpt.py's model, optimizer, loss scale, step and history; not its random state:
    cfg, tokenizer, splits, model, optimizer, scaler, history = prepared
    local_rank, world = int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend)
    step = history["step"][-1] if history["step"] else 0
    torch.manual_seed(cfg.seed + world * step + rank)  # each rank draws its own batches
    if rank == 0:
        print(f"DDP, world size {world} ({backend}): batch {cfg.batch_size} per rank, global "
              f"batch {world * cfg.batch_size}", flush=True)
    if step < cfg.max_iters:
        ids = [local_rank] if device == "cuda" else None
        ddp = DistributedDataParallel(model, device_ids=ids)  # copies rank 0's weights to all
        train(ddp, optimizer, scaler, splits, cfg, tokenizer.chars, history, ctrl_c)
        # freed before the process group: freeing DDP's reducer last can deadlock with gloo's thread
        del ddp
    if rank == 0:
        print(gpt.sample(model, tokenizer, cfg), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except (OSError, UnicodeDecodeError) as e:  # a file that can't be read or written
        report(f"error: {e}; check --input and --out_dir")
        raise SystemExit(1)
    except Exception as e:  # any other failure on one rank: torchrun then stops the others
        lines = str(e).strip().splitlines() or [""]
        report(f"error: rank {os.environ.get('RANK', '0')}: {type(e).__name__}: {lines[0]}")
        raise SystemExit(1)
