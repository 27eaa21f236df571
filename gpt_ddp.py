"""
gpt.py on several GPUs, or several CPU processes, with PyTorch's DistributedDataParallel (DDP).
Every process (a rank) holds the same model and draws its own batches; in the backward pass DDP
averages the gradients over the ranks (an all-reduce), so that every rank takes the same step.

    torchrun --standalone --nproc_per_node=N gpt_ddp.py [gpt.py's flags]

N CUDA GPUs talk through NCCL, otherwise N CPU processes through gloo. The flags are gpt.py's and
mean the same, except that --batch_size is per rank (the global batch is N times it) and training
counts steps: there is no time budget. Rank 0 alone prints, evaluates, saves gpt.py's checkpoint
and samples; if any rank fails, torchrun ends them all. Notebook 10 shows what DDP does.
"""
import math
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import gpt


def train(ddp, optimizer, scaler, splits, cfg, vocab, history):
    """gpt.py's loop on every rank, by steps; rank 0 evaluates and saves while the others wait."""
    model = ddp.module  # the plain model: evaluated outside DDP, saved without "module."
    step = history["step"][-1] if history["step"] else 0  # resumed: the checkpoint's step
    started = time.perf_counter() - (history["seconds"][-1] if history["step"] else 0.0)
    while True:
        evaluate = step % cfg.eval_interval == 0 or step == cfg.max_iters
        if evaluate and step not in history["step"] and dist.get_rank() == 0:
            seconds = time.perf_counter() - started
            losses = gpt.estimate_loss(model, splits, cfg, gpt.autocast(cfg))
            if not math.isfinite(losses["train"]):  # nan or inf: keep the last good ckpt.pt
                gpt.fail(f"loss {losses['train']} at step {step}: lower --learning_rate")
            for key, value in dict(step=step, seconds=seconds, **losses).items():
                history[key].append(value)
            gpt.save_checkpoint(model, optimizer, scaler, cfg, vocab, history)
            print(f"step {step:5d} | train {losses['train']:.4f} | val {losses['val']:.4f} | "
                  f"{seconds:.0f} s", flush=True)
        if step >= cfg.max_iters:
            return history
        # the backward pass inside train_step all-reduces: here the ranks wait for rank 0
        gpt.train_step(ddp, optimizer, scaler, splits, cfg, gpt.lr_at(step, 0.0, cfg))
        step += 1


def main(argv=None):
    """Every rank: gpt.py's settings and model, wrapped in DDP, trained; then rank 0 samples."""
    if "LOCAL_RANK" not in os.environ:
        gpt.fail("start gpt_ddp.py with torchrun: torchrun --standalone --nproc_per_node=N "
                 "gpt_ddp.py [gpt.py's flags]")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if rank != 0:  # every rank runs the same code on the same flags: rank 0 speaks for all
        sys.stdout = sys.stderr = open(os.devnull, "w")
    argv = sys.argv[1:] if argv is None else argv
    if gpt.parse_flags(gpt.Config, argv).get("max_time"):
        gpt.fail("gpt_ddp.py trains by steps: drop --max_time and give --max_iters")
    if torch.cuda.is_available():  # from here on "cuda" is this rank's own GPU
        torch.cuda.set_device(local_rank)
    cfg, tokenizer, splits, model, optimizer, scaler, history = gpt.prepare([*argv, "--max_time=0"])
    if cfg.device == "mps":
        gpt.fail("DDP runs on CUDA GPUs (NCCL) or CPU processes (gloo): give --device=cpu")
    dist.init_process_group("nccl" if cfg.device == "cuda" else "gloo")
    world = dist.get_world_size()
    print(f"DDP on {world} ranks: batch {cfg.batch_size} per rank, {world * cfg.batch_size} in all")
    step = history["step"][-1] if history["step"] else 0
    torch.manual_seed(cfg.seed + world * step + rank)  # each rank draws its own batches
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cfg.device == "cuda" else None)
    train(ddp, optimizer, scaler, splits, cfg, tokenizer.chars, history)
    del ddp  # DDP's hooks go before the process group does
    dist.destroy_process_group()  # the ranks are done together; rank 0 goes on alone
    if rank == 0:  # as gpt.py's main(): the last val made exact, saved, then a sample
        history["val"][-1] = gpt.whole_text_loss(model, splits["val"], cfg, gpt.autocast(cfg))
        gpt.save_checkpoint(model, optimizer, scaler, cfg, tokenizer.chars, history, finished=True)
        print(f"done: {history['step'][-1]} steps | val {history['val'][-1]:.4f} on the whole "
              "validation text", flush=True)
        print(gpt.sample(model, tokenizer, cfg), flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # torchrun passes Ctrl-C to every rank; ckpt.pt is the last eval's
        sys.stderr.write("\ninterrupted: --init_from=resume goes on from the last evaluation\n")
        raise SystemExit(130)
    except (OSError, RuntimeError) as e:  # a file, or a rank that another rank's failure ended
        gpt.fail(f"{type(e).__name__}: {str(e).strip().splitlines()[0]}")
