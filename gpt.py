"""A character-level GPT in one file: `python gpt.py` trains a decoder-only transformer on a text
and writes more like it. The values at the top are the model of the lecture "Let's build GPT"
with a modern recipe; without CUDA, a smaller preset replaces some (the run's first line says).
In a notebook: main(["--max_iters=500"]). Shapes: B batch, T time, C channels, V vocab, nh heads."""
import argparse
import contextlib
import dataclasses
import io
import math
import os
import sys
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

# ------------------------------------------------------------------------------ hyperparameters
def flag(default, help, choices=None):
    """A hyperparameter that is also a command-line flag: its help text is kept beside it."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})

@dataclasses.dataclass
class Config:
    """Every hyperparameter: these values, a preset's (PRESETS, below), then the flags given."""
    input: str = flag("input.txt", "training text (UTF-8); the default is fetched if missing")
    out_dir: str = flag("out", "folder for ckpt.pt, saved at each evaluation")
    preset: str = flag("auto", "auto: by hardware; none: these", ("auto", "none", "laptop", "slow"))
    init_from: str = flag("scratch", "resume: go on from ckpt.pt", ("scratch", "resume"))
    block_size: int = flag(256, "context length: characters the model sees to predict the next")
    n_embd: int = flag(384, "channels: the size of every token's vector")
    n_head: int = flag(6, "attention heads per block; each has n_embd // n_head channels")
    n_layer: int = flag(6, "number of transformer blocks")
    dropout: float = flag(0.2, "fraction of activations zeroed in training, against overfitting")
    vocab_size: int = 65  # distinct characters: set from the text, not a flag
    batch_size: int = flag(64, "independent sequences per step")
    max_iters: int = flag(5000, "optimizer steps in total (with --max_time: at most)")
    max_time: float = flag(0.0, "seconds of training, evaluations included (0: no limit)")
    learning_rate: float = flag(3e-4, "peak learning rate, reached after the warm-up")
    min_lr: float = flag(3e-5, "learning rate at the end of the cosine decay")
    warmup_iters: int = flag(100, "steps of linear warm-up from 0 to learning_rate")
    weight_decay: float = flag(0.1, "AdamW weight decay, on weight matrices only")
    grad_clip: float = flag(1.0, "clip the gradient norm to this (0: no clipping)")
    eval_interval: int = flag(500, "estimate the losses, log and save every this many steps")
    eval_iters: int = flag(200, "random batches per split for each estimate")
    seed: int = flag(1337, "random seed: the same seed repeats a step-counted run on a CPU")
    device: str = flag("auto", "auto: cuda, mps or cpu", ("auto", "cpu", "cuda", "mps"))
    dtype: str = flag("auto", "auto: by hardware", ("auto", "bfloat16", "float16", "float32"))
    max_new_tokens: int = flag(500, "characters to generate at the end")

# ------------------------------------------------------------------------------------------ data
class CharTokenizer:
    """Each distinct character is one token; its id is its place in the sorted vocabulary."""

    def __init__(self, chars):
        self.chars = list(chars)  # id -> character
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}  # character -> id

    @classmethod
    def from_text(cls, text):
        return cls(sorted(set(text)))

    def encode(self, s):
        return [self.stoi[c] for c in s]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)

def split_data(text, tokenizer):
    """The text as one tensor of ids, cut into the first 90% (train) and the last 10% (val)."""
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)  # (N,)
    n = int(0.9 * len(data))
    return {"train": data[:n], "val": data[n:]}

def get_batch(data, batch_size, block_size):
    """Random chunks of block_size + 1 tokens: x is a chunk's start, y the same shifted by one."""
    ix = torch.randint(len(data) - block_size, (batch_size,))  # (B,) where each chunk starts
    chunk = data[ix[:, None] + torch.arange(block_size + 1)]  # (B, T+1)
    return chunk[:, :-1], chunk[:, 1:]  # (B, T) inputs, (B, T) targets

# ----------------------------------------------------------------------------------------- model
class CausalSelfAttention(nn.Module):
    """All heads at once: each position takes a weighted mix of earlier positions' values."""
    fused = True  # False: the lecture's four lines below instead of one fused kernel, slower

    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)  # q, k, v: all heads
        self.proj = nn.Linear(config.n_embd, config.n_embd)  # mixes the heads' outputs
        self.resid_dropout = nn.Dropout(config.dropout)  # not on the (T, T) weights: faster
        tril = torch.tril(torch.ones(config.block_size, config.block_size))  # (T, T)
        self.register_buffer("tril", tril, persistent=False)  # 1 where a position may look

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        if self.fused:  # the same result as the four lines below, in one kernel
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        else:
            wei = q @ k.transpose(-2, -1) * hs**-0.5  # (B, nh, T, T) affinities, scaled
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # no future
            wei = F.softmax(wei, dim=-1)  # (B, nh, T, T) each row sums to 1
            y = wei @ v  # (B, nh, T, hs) a weighted mix of the values
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C) heads side by side
        return self.resid_dropout(self.proj(y))  # (B, T, C)

class FeedForward(nn.Module):
    """The same small MLP on every position: after attention gathers, each token thinks alone."""

    def __init__(self, config):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),  # 4x wider inside
            nn.ReLU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
            nn.Dropout(config.dropout),
        )

    def forward(self, x):
        return self.net(x)  # (B, T, C)

class Block(nn.Module):
    """Communication (attention) followed by computation (feed-forward), each a residual step."""

    def __init__(self, config):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.ffwd = FeedForward(config)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))  # (B, T, C)
        x = x + self.ffwd(self.ln2(x))  # (B, T, C)
        return x

class GPT(nn.Module):
    """Token and position embeddings, a stack of blocks, and a linear map to next-token logits."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.n_embd)
        self.position_embedding = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.Sequential(*[Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        # small normal weights and zero biases keep the first logits near 0: loss ≈ ln(V)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        tok = self.token_embedding(idx)  # (B, T, C)
        pos = self.position_embedding(torch.arange(T, device=idx.device))  # (T, C)
        x = self.blocks(tok + pos)  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(B * T, -1).float(), targets.reshape(B * T))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens):
        """Extend idx (B, T) one sampled token at a time, seeing at most the last block_size."""
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.config.block_size:])  # (B, T, V)
            logits = logits[:, -1, :].float()  # (B, V) only the last position predicts
            probs = F.softmax(logits, dim=-1)  # (B, V)
            next_id = torch.multinomial(probs, num_samples=1)  # (B, 1)
            idx = torch.cat((idx, next_id), dim=1)  # (B, T+1)
        return idx

# -------------------------------------------------------------------------------------- training
def autocast(cfg):
    """Matmuls in bfloat16 or float16 where that is safe, the rest in float32; float32: as is."""
    if cfg.dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(cfg.device, dtype=getattr(torch, cfg.dtype))

def lr_at(step, seconds, cfg):
    """Linear warm-up to learning_rate, then a cosine decay to min_lr by the end of training."""
    if step < cfg.warmup_iters:
        return cfg.learning_rate * (step + 1) / cfg.warmup_iters
    by_steps = (step - cfg.warmup_iters) / max(1, cfg.max_iters - cfg.warmup_iters)
    by_time = seconds / cfg.max_time if cfg.max_time > 0 else 0.0
    progress = min(1.0, max(by_steps, by_time))  # 0 -> 1: the share of steps, or of time, done
    cosine = 0.5 * (1 + math.cos(math.pi * progress))  # 1 -> 0
    return cfg.min_lr + cosine * (cfg.learning_rate - cfg.min_lr)

@torch.no_grad()
def estimate_loss(model, splits, cfg, ctx):
    """Mean loss over eval_iters random batches of each split, with dropout off."""
    model.eval()
    device = next(model.parameters()).device
    out = {}
    for name, data in splits.items():
        losses = torch.zeros(cfg.eval_iters)
        for k in range(cfg.eval_iters):
            x, y = get_batch(data, cfg.batch_size, cfg.block_size)  # (B, T), (B, T)
            with ctx:
                losses[k] = model(x.to(device), y.to(device))[1].item()
        out[name] = losses.mean().item()
    model.train()
    return out

def train_step(model, optimizer, scaler, splits, cfg, lr):
    """One optimizer step at learning rate lr on a random training batch."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    x, y = get_batch(splits["train"], cfg.batch_size, cfg.block_size)  # (B, T), (B, T)
    x, y = x.to(cfg.device), y.to(cfg.device)
    with autocast(cfg):
        _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()  # loss.backward(); in float16 the loss is scaled up first
    if cfg.grad_clip > 0:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    scaler.step(optimizer)  # optimizer.step(), skipped if float16 gradients overflowed
    scaler.update()

def save_checkpoint(model, optimizer, scaler, cfg, vocab, history, finished=False):
    """The whole training state, to a temporary file first: ckpt.pt is never half-written."""
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(),
                 scaler=scaler.state_dict(), config=dataclasses.asdict(cfg), vocab=vocab,
                 history=history, finished=finished, rng=torch.get_rng_state())
    path = os.path.join(cfg.out_dir, "ckpt.pt")
    buffer = io.BytesIO()  # in memory first: a full disk then fails as a plain OSError below
    torch.save(state, buffer)
    with open(path + ".tmp", "wb") as f:
        f.write(buffer.getbuffer())
    os.replace(path + ".tmp", path)  # the new file takes the old one's place in one step

def train(model, optimizer, scaler, splits, cfg, vocab, history):
    """Train, and every eval_interval steps and at the end estimate the losses and save."""
    step = history["step"][-1] if history["step"] else 0  # resumed: the checkpoint's step
    started = time.perf_counter() - (history["seconds"][-1] if history["step"] else 0.0)
    while True:
        seconds = time.perf_counter() - started  # of training, evaluations included
        done = step >= cfg.max_iters or (cfg.max_time > 0 and seconds >= cfg.max_time)
        if (done or step % cfg.eval_interval == 0) and step not in history["step"]:
            losses = estimate_loss(model, splits, cfg, autocast(cfg))
            if not math.isfinite(losses["train"]):  # nan or inf: keep the last good ckpt.pt
                sys.exit(f"error: loss {losses['train']} at step {step}: lower --learning_rate")
            for key, value in dict(step=step, seconds=seconds, **losses).items():
                history[key].append(value)
            save_checkpoint(model, optimizer, scaler, cfg, vocab, history)
            print(f"step {step:5d} | train {losses['train']:.4f} | val {losses['val']:.4f} | "
                  f"{seconds:.0f} s", flush=True)
        if done:
            return history
        train_step(model, optimizer, scaler, splits, cfg, lr_at(step, seconds, cfg))
        step += 1

# -------------------------------------------------------------------------------------- sampling
def sample(model, tokenizer, cfg):
    """Generate max_new_tokens characters after id 0 (a newline in Shakespeare); return them."""
    idx = torch.zeros((1, 1), dtype=torch.long, device=cfg.device)  # (1, 1)
    model.eval()
    with autocast(cfg):
        out = model.generate(idx, cfg.max_new_tokens)  # (1, 1 + new)
    return tokenizer.decode(out[0].tolist())

# ============ the machinery: command line, hardware, checkpoints, errors (a learner may skip it)

DATA_URL = ("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
            "tinyshakespeare/input.txt")
DATA_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
HERE = os.path.dirname(os.path.abspath(globals().get("__file__", "gpt.py")))  # pasted: cwd
MAY_BE_ZERO = ("max_iters", "warmup_iters", "max_new_tokens", "seed")  # other ints: 1 or more
LAPTOP = dict(batch_size=16, block_size=128, n_layer=4, n_head=4, n_embd=128, dropout=0.0,
              weight_decay=1.0, learning_rate=2e-3, min_lr=0.0, max_iters=100000, eval_iters=10,
              max_time=580)  # without CUDA: the best that 10 minutes train (laptop_sweep.md)
PRESETS = {"laptop": LAPTOP, "slow": dict(LAPTOP, n_layer=2, block_size=64, weight_decay=0.5)}

def make_optimizer(model, cfg):
    """AdamW that decays weight matrices (and embeddings) but not biases or LayerNorm gains."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(0.9, 0.99), fused=True)

def fail(message):
    """Stop with one line on stderr and a non-zero exit: bad input never ends in a traceback."""
    raise SystemExit(f"error: {message}") from None  # Python prints it; the exit status is 1

@torch.no_grad()
def whole_text_loss(model, data, cfg, ctx):
    """The mean loss on every target of data once, in windows of block_size: an exact score."""
    model.eval()
    chunks = data.unfold(0, cfg.block_size + 1, cfg.block_size)  # (n, T+1); a last < T targets drop
    total = 0.0
    for chunk in chunks.split(cfg.batch_size):  # (B, T+1) as in get_batch; the last B smaller
        x, y = chunk[:, :-1].to(cfg.device), chunk[:, 1:].to(cfg.device)  # (B, T), (B, T)
        with ctx:
            total += model(x, y)[1].item() * len(chunk)  # a batch's mean loss, times its windows
    model.train()
    return total / len(chunks)

def flag_type(f):
    """The argparse type of a field: it refuses what no run can use (nan, -1, a dropout of 1)."""
    low = 0 if f.type is float or f.name in MAY_BE_ZERO else 1
    high = 1 if f.name == "dropout" else math.inf
    def number(text):
        value = f.type(text)  # a ValueError: argparse says "invalid number value: 'x'"
        if not low <= value < high:  # nan fails every comparison
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}), got {text}")
        return value
    return str if f.type is str else number

def parse_flags(config_class, argv=None):
    """The '--name=value' flags given, as a dict; argparse's own error line for a bad one."""
    if argv is None:  # in Jupyter or Colab, sys.argv holds the kernel's own '-f kernel.json'
        argv = [] if "ipykernel" in sys.modules else sys.argv[1:]
    parser = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=config_class.__doc__,
                                     allow_abbrev=False, argument_default=argparse.SUPPRESS)
    for f in [f for f in dataclasses.fields(config_class) if "help" in f.metadata]:
        parser.add_argument(f"--{f.name}", type=flag_type(f), choices=f.metadata["choices"],
                            help=f"{f.metadata['help']} (default: {f.default!r})")
    return vars(parser.parse_args(argv))

def load_text(path):
    """The whole file as a string; input.txt beside gpt.py is downloaded first when missing."""
    if path == os.path.join(HERE, "input.txt") and not os.path.exists(path):
        print(f"downloading Tiny Shakespeare to {path}")
        try:  # PyTorch's downloader checks the sha256 and writes nothing unless it matches
            torch.hub.download_url_to_file(DATA_URL, path, hash_prefix=DATA_SHA256, progress=False)
        except (OSError, RuntimeError, ValueError) as e:
            fail(f"downloading {DATA_URL} failed ({e}); save it as {path}, or give --input=FILE")
    with open(path, encoding="utf-8") as f:  # errors: the handler under main() reports them
        return f.read()

def pick_hardware(device_flag, dtype_flag):
    """The device and autocast dtype these flags give here, and why: native bfloat16, else less."""
    present = [torch.cuda.is_available(), torch.backends.mps.is_available(), True]
    found = [name for name, ok in zip(("cuda", "mps", "cpu"), present) if ok]  # best first
    if device_flag not in ("auto", *found):
        fail(f"--device={device_flag}: PyTorch finds no such device here; use auto or cpu")
    device = found[0] if device_flag == "auto" else device_flag
    major, minor = torch.cuda.get_device_capability() if device == "cuda" else (0, 0)
    if dtype_flag != "auto":
        return device, dtype_flag, "--dtype"
    if major >= 7:  # tensor cores: bfloat16 from Ampere (8.0) on; T4, V100: float16, a scaler
        dtype = "bfloat16" if major >= 8 else "float16"
        return device, dtype, f"compute capability {major}.{minor} has {dtype} tensor cores"
    if device == "cpu" and torch.cpu._is_avx512_bf16_supported():  # Zen 4 on, Xeons with AMX
        return device, "bfloat16", "the CPU has native bfloat16 (AVX512-BF16)"
    return device, "float32", f"no fast half precision on this {device}"

def pick_laptop(budget, device, dtype, why, dtype_flag):
    """laptop, or slow where laptop's model sees under 6M tokens in time; and the faster dtype."""
    speeds = {}  # tokens a second in each precision timed: float32 too, where bfloat16 is native
    for d in [dtype, "float32"] if dtype == "bfloat16" and dtype_flag == "auto" else [dtype]:
        laptop = Config(**LAPTOP, device=device, dtype=d)  # its own shape, whatever the flags
        model = GPT(laptop).to(device)  # a throwaway copy, timed for 5 steps after 1 to warm up
        optimizer = make_optimizer(model, laptop)
        splits = {"train": torch.zeros(laptop.block_size + 1, dtype=torch.long)}  # any ids
        for step in range(6):
            if step == 1:
                started = time.perf_counter()
            train_step(model, optimizer, torch.amp.GradScaler(enabled=False), splits, laptop, 0.0)
        model.lm_head.weight.sum().item()  # on a GPU (MPS), wait until the steps are done
        speeds[d] = 5 * laptop.batch_size * laptop.block_size / (time.perf_counter() - started)
    best = max(speeds, key=speeds.get)  # on an AMX Xeon: float32, for a model this small
    preset = "laptop" if speeds[best] * budget >= 6e6 else "slow"  # laptop_sweep.md: why 6M
    print(f"measured {speeds[best]:,.0f} tokens/s at context {laptop.block_size}: preset {preset}")
    return preset, best, why if best == dtype else "timed faster than bfloat16 here"

def load_checkpoint(path):
    """Read a checkpoint with weights_only=True, so that loading one can never run code."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # missing, not a zip, truncated, code inside (refused)
        fail(f"can't load {path} ({type(e).__name__}): train a model there first")
    if not {"model", "optimizer", "scaler", "config", "vocab", "history", "rng"} <= ckpt.keys():
        fail(f"{path} was not saved by gpt.py: train a model there first")
    return ckpt

def make_settings(argv=None):
    """The Config: the top, a preset or a checkpoint's, then the flags; and the checkpoint."""
    flags = parse_flags(Config, argv)
    top = {**dataclasses.asdict(Config()), **flags}  # the values at the top, then the flags
    device, dtype, why = pick_hardware(top["device"], top["dtype"])
    path = os.path.join(top["out_dir"], "ckpt.pt")
    ckpt = load_checkpoint(path) if top["init_from"] == "resume" else None
    if ckpt:
        saved = {k: v for k, v in ckpt["config"].items() if k in Config.__dataclass_fields__}
        if "max_iters" in flags:
            saved["max_time"] = 0.0  # a step count given on resume: train to it, with no budget
        cfg = Config(**{**saved, **flags})
        print(f"resuming {path} at step {ckpt['history']['step'][-1]}")
    else:
        preset = "none" if top["preset"] == "auto" and device == "cuda" else top["preset"]
        budget = flags.get("max_time", LAPTOP["max_time"])  # seconds that the steps will fill
        if preset == "auto" and budget > 0:  # no CUDA: laptop or slow, and the dtype, timed
            preset, dtype, why = pick_laptop(budget, device, dtype, why, top["dtype"])
        preset = "laptop" if preset == "auto" else preset  # counted in steps: never the clock
        cfg = Config(**{**PRESETS.get(preset, {}), **flags, "preset": preset})
        replaced = [f"{k}={v}" for k, v in PRESETS.get(preset, {}).items()
                    if k not in flags and v != getattr(Config, k)]
        if replaced:
            print(f"preset {preset} replaces values at the top: {', '.join(replaced)} "
                  "(--preset=none, or preset 'none' at the top, keeps them)")
    cfg = dataclasses.replace(cfg, device=device, dtype=dtype)  # from here on, what runs
    if cfg.n_embd % cfg.n_head:
        fail(f"--n_embd={cfg.n_embd} must be a multiple of --n_head={cfg.n_head}")
    limit = f"{cfg.max_time:.0f} s of training or " if cfg.max_time else ""
    print(f"{cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd} channels, context "
          f"{cfg.block_size}, batch {cfg.batch_size} | at most {limit}{cfg.max_iters} steps | "
          f"{device}, {dtype}: {why}")
    return cfg, ckpt

def prepare(argv=None):
    """Settings, text and vocabulary, then the model and its training state, new or resumed."""
    cfg, ckpt = make_settings(argv)
    text = load_text(os.path.join(HERE, "input.txt") if cfg.input == "input.txt" else cfg.input)
    tokenizer = CharTokenizer.from_text(text)
    if ckpt and ckpt["vocab"] != tokenizer.chars:
        fail(f"{cfg.input} has other characters than the checkpoint's text; resume with that text")
    splits = split_data(text, tokenizer)
    if len(splits["val"]) <= cfg.block_size:
        fail(f"the text is too short for --block_size={cfg.block_size}: give a longer one")
    cfg = dataclasses.replace(cfg, vocab_size=len(tokenizer.chars))
    torch.manual_seed(cfg.seed)
    model = GPT(cfg).to(cfg.device)
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters", flush=True)
    optimizer = make_optimizer(model, cfg)
    scaler = torch.amp.GradScaler(cfg.device, enabled=cfg.dtype == "float16")
    history = {"step": [], "seconds": [], "train": [], "val": []}  # at each evaluation
    if not ckpt:  # a new run: an earlier run's ckpt.pt becomes ckpt-N.pt, the first N free
        os.makedirs(cfg.out_dir, exist_ok=True)
        path = os.path.join(cfg.out_dir, "ckpt")
        n = next(n for n in range(1, sys.maxsize) if not os.path.exists(f"{path}-{n}.pt"))
        if os.path.exists(f"{path}.pt"):
            os.replace(f"{path}.pt", f"{path}-{n}.pt")
            print(f"the earlier run's {path}.pt is now {path}-{n}.pt")
        return cfg, tokenizer, splits, model, optimizer, scaler, history
    try:  # resumed: the state at the checkpoint's step, its random numbers too
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    except (RuntimeError, ValueError, KeyError):
        fail("the checkpoint does not fit this model: drop the flags that change its shape")
    if ckpt["scaler"]:  # empty if saved without float16: a float16 run starts a new scale
        scaler.load_state_dict(ckpt["scaler"])
    torch.set_rng_state(ckpt["rng"])
    return cfg, tokenizer, splits, model, optimizer, scaler, ckpt["history"]

def main(argv=None):
    """Settings, data and model, then training, the exact score and a sample; returns them."""
    cfg, tokenizer, splits, model, optimizer, scaler, history = prepare(argv)
    train(model, optimizer, scaler, splits, cfg, tokenizer.chars, history)
    history["val"][-1] = whole_text_loss(model, splits["val"], cfg, autocast(cfg))  # made exact
    save_checkpoint(model, optimizer, scaler, cfg, tokenizer.chars, history, finished=True)
    val = history["val"][-1]
    print(f"done: {history['step'][-1]} steps in {history['seconds'][-1]:.0f} s | val {val:.4f} "
          f"({val / math.log(2):.3f} bits a character) on the whole validation text", flush=True)
    generated = sample(model, tokenizer, cfg)
    print(generated)
    return dict(model=model, config=cfg, history=history, sample=generated)

if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C: ckpt.pt still holds the last evaluation's whole state
        sys.stderr.write("\ninterrupted: --init_from=resume goes on from the last evaluation\n")
        raise SystemExit(130)
    except (OSError, UnicodeError) as e:  # a file that can't be read or written, or printed
        fail(f"{e}; check --input and --out_dir")
