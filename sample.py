"""
Sample from a model that gpt.py trained: load out_dir/ckpt.pt and write text after a prompt.
    python sample.py --prompt="ROMEO:" --num_samples=3 --temperature=0.8 --top_k=20
--temperature divides the logits before the softmax (below 1: safer choices, above 1: wilder ones;
0: always the likeliest character); --top_k=K samples among the K likeliest characters only.
"""
import argparse, os

import torch
from torch.nn import functional as F

import gpt

def count(text, least=0):
    """A flag's whole number of `least` or more."""
    if int(text) < least:
        raise argparse.ArgumentTypeError(f"must be {least} or more, got {text}")
    return int(text)

def positive(text):
    """A flag's whole number of 1 or more: no sample, or no new character, makes no text."""
    return count(text, least=1)

def number(text):
    """A flag's real number: finite and 0 or more."""
    if not 0 <= float(text) < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of 0 or more, got {text}")
    return float(text)

def parse_args(argv=None):
    """The flags, with argparse's own error line for a bad one."""
    parser = argparse.ArgumentParser(description=__doc__, usage=argparse.SUPPRESS,
                                     allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out_dir", default="out", help="the folder of gpt.py's ckpt.pt (out)")
    parser.add_argument("--prompt", default="\n", help="the samples' first characters (a newline)")
    parser.add_argument("--num_samples", type=positive, default=1, help="how many samples (1)")
    parser.add_argument("--max_new_tokens", type=positive, default=500, help="new characters (500)")
    parser.add_argument("--temperature", type=number, default=1.0, help="0: greedy (1)")
    parser.add_argument("--top_k", type=count, default=0, help="0 by default: every character")
    parser.add_argument("--seed", type=count, default=1337, help="random seed (1337)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda", "mps"))
    return parser.parse_args(argv)

@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=0):
    """GPT.generate with a temperature (0: the likeliest token) and top-k."""
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -model.config.block_size:])  # (B, T, V)
        logits = logits[:, -1, :].float()  # (B, V) only the last position predicts
        if temperature == 0:
            next_id = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            logits = logits / temperature  # (B, V)
            if top_k:
                kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]  # (B, 1)
                logits = logits.masked_fill(logits < kth, float("-inf"))  # (B, V)
            next_id = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)  # (B, 1)
        idx = torch.cat((idx, next_id), dim=1)  # (B, T+1)
    return idx

def main(argv=None):
    """Load the checkpoint, then write the samples; returns them."""
    args = parse_args(argv)
    ckpt = gpt.load_checkpoint(os.path.join(args.out_dir, "ckpt.pt"))
    tokenizer = gpt.CharTokenizer(ckpt["vocab"])
    unknown = sorted(set(args.prompt) - set(tokenizer.chars))
    if unknown:
        gpt.fail(f"the prompt has characters outside the checkpoint's vocabulary: "
                 f"{''.join(unknown)!r}; remove them from --prompt")
    device, dtype, _ = gpt.pick_hardware(args.device, "auto")
    saved = {k: v for k, v in ckpt["config"].items() if k in gpt.Config.__dataclass_fields__}
    cfg = gpt.Config(**{**saved, "device": device, "dtype": dtype})
    model = gpt.GPT(cfg).to(device).eval()
    model.load_state_dict(ckpt["model"])  # copied onto the device
    torch.manual_seed(args.seed)
    start = tokenizer.encode(args.prompt) or [0]  # an empty prompt: id 0, as gpt.py starts
    idx = torch.tensor([start] * args.num_samples, device=device)  # (B, T)
    with gpt.autocast(cfg):
        out = generate(model, idx, args.max_new_tokens, args.temperature, args.top_k)  # (B, T+new)
    samples = [tokenizer.decode(row.tolist()) for row in out]
    print("\n---------------\n".join(samples))
    return samples

if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130)
