"""
A character-level GPT in one file: read a text, train a decoder-only transformer on it, and write
more text like it. `python gpt.py` trains on Tiny Shakespeare (downloaded when missing) and ends
with a sample; `python gpt.py --help` lists every flag.

Reading order: hyperparameters, data, model (small pieces to large), training, sampling: the
lecture. Then the command line, devices and safety checks, and main(): skip them at first.
Shapes: B batch, T time (position in the context), C channels (n_embd), V vocabulary, nh heads,
hs head size (C // nh).
"""
import argparse, contextlib, dataclasses, difflib, math, os, signal, sys, time
from dataclasses import dataclass, field

import torch
import torch.nn as nn
from torch.nn import functional as F

# ------------------------------------------------------------------------------ hyperparameters

def flag(default, help, choices=None):
    """A hyperparameter that is also a command-line flag: its help text is kept beside it."""
    return field(default=default, metadata={"help": help, "choices": choices})

@dataclass
class Config:
    """Every hyperparameter. The defaults are the lecture's; the laptop preset changes some."""
    input: str = flag("input.txt", "training text (UTF-8); input.txt beside gpt.py is downloaded")
    out_dir: str = flag("out", "folder for ckpt.pt: the latest training state, saved at each eval")
    preset: str = flag("auto", "auto: lecture on CUDA, else laptop", ("auto", "lecture", "laptop"))
    init_from: str = flag("scratch", "resume: go on from ckpt.pt", ("scratch", "resume"))
    block_size: int = flag(256, "context length: characters the model sees to predict the next")
    n_embd: int = flag(384, "channels: the size of every token's vector")
    n_head: int = flag(6, "attention heads per block; each has n_embd // n_head channels")
    n_layer: int = flag(6, "number of transformer blocks")
    dropout: float = flag(0.2, "fraction of activations zeroed in training, against overfitting")
    vocab_size: int = 65  # distinct characters: set from the text, not a flag
    batch_size: int = flag(64, "independent sequences per step")
    max_iters: int = flag(5000, "optimizer steps in total (with --max_time: at most)")
    max_time: float = flag(0.0, "seconds for the whole run, sample included (0: no limit)")
    learning_rate: float = flag(3e-4, "peak learning rate, reached after the warm-up")
    min_lr: float = flag(3e-5, "learning rate at the end of the cosine decay")
    warmup_iters: int = flag(100, "steps of linear warm-up from 0 to learning_rate")
    weight_decay: float = flag(0.1, "AdamW weight decay, on weight matrices only")
    grad_clip: float = flag(1.0, "clip the gradient norm to this (0: no clipping)")
    eval_interval: int = flag(500, "estimate the losses, log and save every this many steps")
    eval_iters: int = flag(200, "batches averaged per split for each loss estimate")
    seed: int = flag(1337, "random seed: the same seed repeats a run exactly on a CPU")
    device: str = flag("auto", "auto: cuda, mps or cpu", ("auto", "cpu", "cuda", "mps"))
    dtype: str = flag("auto", "auto: by hardware", ("auto", "bfloat16", "float16", "float32"))
    compile: bool = flag(False, "True: compile the model with torch.compile (faster on GPUs)")
    prompt: str = flag("", "text the sample starts from ('': the first character, a newline)")
    max_new_tokens: int = flag(500, "characters to generate at the end")

# The defaults are the lecture's model: on two CPU cores it would train for about 5 hours. Without
# a CUDA GPU, gpt.py trains this smaller model for as many steps as fit in 10 minutes on the
# machine at hand (benchmarks/laptop_sweep.md).
PRESETS = {
    "lecture": {},
    "laptop": dict(batch_size=32, block_size=128, n_layer=4, n_head=4, n_embd=256, dropout=0.0,
                   max_iters=5000, max_time=600.0, learning_rate=1e-3, min_lr=1e-4,
                   eval_interval=500, eval_iters=50),
}

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

def split_data(text, tokenizer, block_size):
    """The text as one tensor of ids, cut into the first 90% (train) and the last 10% (val)."""
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)  # (N,)
    n = int(0.9 * len(data))
    if len(data) - n <= block_size:
        fail(f"the text is too short for --block_size={block_size}: its last 10% has "
             f"{len(data) - n} characters; give a longer text or a smaller --block_size")
    return {"train": data[:n], "val": data[n:]}

def get_batch(data, batch_size, block_size):
    """Random chunks of block_size + 1 tokens: x is a chunk's start, y the same shifted by one."""
    ix = torch.randint(len(data) - block_size, (batch_size,))  # (B,) where each chunk starts
    chunk = data[ix[:, None] + torch.arange(block_size + 1)]  # (B, T+1)
    return chunk[:, :-1], chunk[:, 1:]  # (B, T) inputs, (B, T) targets

# ----------------------------------------------------------------------------------------- model

class CausalSelfAttention(nn.Module):
    """All heads at once: each position takes a weighted mix of earlier positions' values."""

    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        # one matrix makes the queries, keys and values of every head: 3 x C outputs
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
        self.proj = nn.Linear(config.n_embd, config.n_embd)  # mixes the heads' outputs
        # Dropout acts on this layer's output, not on the (T, T) attention weights as in the
        # lecture: on a CPU, weight dropout takes SDPA off its fused kernel (2x slower per step).
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        # softmax(q @ k^T / sqrt(hs)) @ v with the future masked out, in one fused kernel
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
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

def lr_at(step, cfg):
    """Linear warm-up to learning_rate, then cosine decay down to min_lr at max_iters."""
    if step < cfg.warmup_iters:
        return cfg.learning_rate * (step + 1) / cfg.warmup_iters
    progress = (step - cfg.warmup_iters) / max(1, cfg.max_iters - cfg.warmup_iters)
    progress = min(1.0, progress)  # 0 after the warm-up, 1 at the end
    cosine = 0.5 * (1 + math.cos(math.pi * progress))  # 1 -> 0
    return cfg.min_lr + cosine * (cfg.learning_rate - cfg.min_lr)

def make_optimizer(model, cfg):
    """AdamW that decays weight matrices (and embeddings) but not biases or LayerNorm gains."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    # fused=True: one kernel updates every parameter, instead of a loop of small ones
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(0.9, 0.99), fused=True)

@torch.no_grad()
def estimate_loss(model, splits, cfg, ctx):
    """Mean loss over eval_iters random batches of each split, with dropout off."""
    model.eval()
    device, out = next(model.parameters()).device, {}
    for name, data in splits.items():
        losses = torch.zeros(cfg.eval_iters)
        for k in range(cfg.eval_iters):
            x, y = get_batch(data, cfg.batch_size, cfg.block_size)  # (B, T), (B, T)
            with ctx:
                losses[k] = model(x.to(device), y.to(device))[1].item()
        out[name] = losses.mean().item()
    model.train()
    return out

def train(model, optimizer, splits, cfg, vocab, step=0, history=None, started=None):
    """Step the optimizer on random batches; every eval_interval steps log the losses and save."""
    ckpt_path = os.path.join(cfg.out_dir, "ckpt.pt")
    if history is None:
        history = {"step": [], "train": [], "val": []}  # every loss estimate so far
    ctx = autocast(cfg)
    scaler = torch.amp.GradScaler(cfg.device, enabled=cfg.dtype == "float16")  # see autocast()
    progress = Progress(cfg, step, started)
    with ctrl_c_caught() as ctrl_c:
        while True:
            if cfg.max_time and step == cfg.warmup_iters:  # the speed is measured: fit the steps
                progress.plan(model, step)
            if cfg.max_time and progress.out_of_time(step):  # a backstop, should the machine slow
                print(f"time budget: stopping at step {step} of {cfg.max_iters}", flush=True)
                cfg.max_iters = step
            if ctrl_c:  # checked here, between two steps, so the saved state is whole
                save_checkpoint(ckpt_path, model, optimizer, cfg, vocab, step, history)
                fail(f"interrupted at step {step}: saved {ckpt_path}; continue with "
                     f"python gpt.py --init_from=resume --out_dir={cfg.out_dir}", code=130)
            is_eval_step = step % cfg.eval_interval == 0 or step == cfg.max_iters
            if is_eval_step and step not in history["step"]:  # a resumed step is logged already
                with progress.evaluating():
                    losses = estimate_loss(model, splits, cfg, ctx)
                    history["step"].append(step)
                    history["train"].append(losses["train"])
                    history["val"].append(losses["val"])
                    save_checkpoint(ckpt_path, model, optimizer, cfg, vocab, step, history)
                print(f"step {step:5d} | train {losses['train']:.4f} | val {losses['val']:.4f} | "
                      f"{progress.report(step)}", flush=True)
            if step >= cfg.max_iters:
                return history
            lr = lr_at(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = get_batch(splits["train"], cfg.batch_size, cfg.block_size)  # (B, T), (B, T)
            x = x.to(cfg.device, non_blocking=True)
            y = y.to(cfg.device, non_blocking=True)
            with ctx:
                _, loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()  # just loss.backward() unless in float16
            if cfg.grad_clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            if not math.isfinite(loss.item()):
                fail(f"the loss became {loss.item()} at step {step}; lower --learning_rate "
                     f"({ckpt_path} keeps the state of step {history['step'][-1]})")
            scaler.step(optimizer)  # optimizer.step(), skipped if float16 gradients overflowed
            scaler.update()
            step += 1

# -------------------------------------------------------------------------------------- sampling

def sample(model, tokenizer, cfg):
    """Generate max_new_tokens characters after the prompt and return the whole text."""
    start = tokenizer.encode(cfg.prompt) or [0]  # id 0: the first character of the vocabulary
    idx = torch.tensor([start], dtype=torch.long, device=cfg.device)  # (1, T)
    model.eval()
    with autocast(cfg):
        out = model.generate(idx, cfg.max_new_tokens)  # (1, T + new)
    return tokenizer.decode(out[0].tolist())

# ---------------------------------------------------------- command line, devices, safety checks
# What keeps a run safe: typed flags, one clear line for every bad input, whole checkpoints.

DATA_URL = ("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
            "tinyshakespeare/input.txt")
DATA_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
HERE = os.path.dirname(os.path.abspath(globals().get("__file__", "gpt.py")))

def fail(message, code=1):
    """Stop with one line on stderr and a non-zero exit: bad input never ends in a traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)

class FlagParser(argparse.ArgumentParser):
    def error(self, message):  # one line naming the problem, not argparse's usage block
        fail(f"{message}; see --help", code=2)

def boolean(text):
    """The value of a True/False flag such as --compile=True."""
    if text not in ("True", "False"):
        raise ValueError(text)  # argparse turns this into "invalid boolean value"
    return text == "True"

def parse_flags(config_class, argv=None):
    """The '--name=value' flags given, for the fields of config_class that have a help text."""
    if argv is None:  # in Jupyter or Colab, sys.argv holds the kernel's own '-f kernel.json'
        argv = [] if "ipykernel" in sys.modules else sys.argv[1:]
    parser = FlagParser(usage="%(prog)s [--name=value ...]", description=config_class.__doc__,
                        allow_abbrev=False)
    fields = [f for f in dataclasses.fields(config_class) if "help" in f.metadata]
    for f in fields:
        parser.add_argument(f"--{f.name}", type=boolean if f.type is bool else f.type,
                            choices=f.metadata["choices"], default=argparse.SUPPRESS,
                            metavar=f.type.__name__.upper(),
                            help=f"{f.metadata['help']} (default: {f.default!r})")
    flags, unknown = parser.parse_known_args(argv)
    for arg in unknown:
        if not arg.startswith("--"):
            fail(f"can't read {arg!r}: write flags as --name=value, e.g. --max_iters=100", code=2)
        close = difflib.get_close_matches(arg[2:].split("=")[0], [f.name for f in fields], n=1)
        hint = f"did you mean --{close[0]}?" if close else "see --help for the list"
        fail(f"unknown flag {arg.split('=')[0]}; {hint}", code=2)
    given = [arg.split("=")[0] for arg in argv if arg.startswith("--")]
    for name in given:
        if given.count(name) > 1:
            fail(f"{name} is given {given.count(name)} times; keep one", code=2)
    return vars(flags)

def check_config(cfg):
    """Reject settings that cannot train, each with its fix, before anything is loaded."""
    for name in ("block_size", "n_embd", "n_head", "n_layer", "batch_size", "eval_interval",
                 "eval_iters"):
        if getattr(cfg, name) < 1:
            fail(f"--{name} must be at least 1, got {getattr(cfg, name)}")
    for name in ("max_iters", "warmup_iters", "max_new_tokens"):
        if getattr(cfg, name) < 0:
            fail(f"--{name} must be at least 0, got {getattr(cfg, name)}")
    for name in ("learning_rate", "min_lr", "weight_decay", "grad_clip", "max_time"):
        if not 0 <= getattr(cfg, name) < math.inf:  # false for nan too
            fail(f"--{name} must be a finite number, at least 0; got {getattr(cfg, name)}")
    if not 0 <= cfg.dropout < 1:
        fail(f"--dropout must be in [0, 1), got {cfg.dropout}")
    if cfg.max_time and cfg.warmup_iters < 10:
        fail("--max_time measures the speed during the warm-up: give --warmup_iters=10 or more")
    if cfg.n_embd % cfg.n_head:
        fail(f"--n_embd={cfg.n_embd} must be divisible by --n_head={cfg.n_head}, "
             f"e.g. --n_embd={cfg.n_head * 64}")
    # training keeps about 34 four-byte numbers per position, channel and layer (Korthikanti et
    # al. 2022, with fused attention)
    need = cfg.n_layer * cfg.batch_size * cfg.block_size * 34 * cfg.n_embd * 4
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if cfg.device == "cuda":
        have = torch.cuda.get_device_properties(0).total_memory
    if need > have:
        fail(f"training this model needs about {need / 2**30:,.0f} GiB and {cfg.device} has "
             f"{have / 2**30:,.0f} GiB; lower --batch_size, --block_size or --n_layer")
    try:  # write in out_dir now, rather than fail after the data and the model have loaded
        os.makedirs(cfg.out_dir, exist_ok=True)
        with open(os.path.join(cfg.out_dir, "write_test.tmp"), "w") as f:
            f.write("ok")
        os.remove(os.path.join(cfg.out_dir, "write_test.tmp"))
    except OSError as e:
        fail(f"can't write to --out_dir={cfg.out_dir} ({e.strerror}); pick a writable folder")

def load_text(path):
    """The whole file as a string; input.txt beside gpt.py is downloaded first when missing."""
    if path == os.path.join(HERE, "input.txt") and not os.path.exists(path):
        print(f"downloading Tiny Shakespeare to {path}")
        try:  # PyTorch's downloader checks the sha256 and writes nothing unless it matches
            torch.hub.download_url_to_file(DATA_URL, path, hash_prefix=DATA_SHA256, progress=False)
        except (OSError, RuntimeError, ValueError) as e:
            fail(f"{path} is missing and downloading it failed ({e}); "
                 "put a UTF-8 text there or pass --input=FILE")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        fail(f"{path} is not UTF-8 text (bad byte at offset {e.start}); "
             "save it as UTF-8 or pick another --input")
    except OSError as e:  # missing, a folder, no permission
        fail(f"can't read input file {path} ({e.strerror}); check the path given to --input")
    if not text:
        fail(f"{path} is empty; pass a text file with some content via --input")
    return text

def pick_device(name):
    """The device asked for, or for 'auto' the best one here: cuda, then mps, then cpu."""
    present = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if not present.get(name, True):
        fail(f"--device={name} but PyTorch finds no {name.upper()} device here; "
             "use --device=auto or --device=cpu")
    if name == "auto":
        return "cuda" if present["cuda"] else "mps" if present["mps"] else "cpu"
    return name

def pick_precision(device, capability=None, cpu_bf16=False):
    """The dtype for autocast on this hardware, and why: native bfloat16, else float16 or 32."""
    if device == "cuda" and capability >= (8, 0):  # Ampere and newer: bfloat16 tensor cores
        return "bfloat16", f"compute capability {capability[0]}.{capability[1]} has bfloat16"
    if device == "cuda":  # T4, V100: fast float16 only, whose small range needs a GradScaler
        return "float16", f"compute capability {capability[0]}.{capability[1]} lacks bfloat16"
    if device == "cpu" and cpu_bf16:
        return "bfloat16", "the CPU has bfloat16 matmuls (AVX512-BF16 or AMX)"
    return "float32", f"no fast half precision on this {device}"

def autocast(cfg):
    """Matmuls in cfg.dtype (bfloat16 or float16) where it is safe, the rest in float32."""
    dtype = getattr(torch, cfg.dtype)
    return torch.autocast(cfg.device, dtype=dtype, enabled=dtype != torch.float32)

@contextlib.contextmanager
def ctrl_c_caught():
    """Inside `with`, Ctrl-C appends to a list instead of stopping the program mid-step."""
    pressed = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)

class Progress:
    """The run's clock: times steps and evaluations, and fits the step count into --max_time."""

    def __init__(self, cfg, step, started=None):
        self.cfg = cfg
        self.first_step = step
        self.begin = time.perf_counter()
        self.started = started or self.begin  # when main() began: --max_time counts from there
        self.eval_seconds = 0.0
        self.evals = 0
        self.sample_seconds = 0.0

    @contextlib.contextmanager
    def evaluating(self):
        start = time.perf_counter()
        yield
        self.eval_seconds += time.perf_counter() - start
        self.evals += 1

    def step_time(self, step):
        train_seconds = time.perf_counter() - self.begin - self.eval_seconds
        return train_seconds / max(1, step - self.first_step)

    def time_to_finish(self):
        """What the run still costs after its last step: one evaluation, then the sample."""
        return self.eval_seconds / max(1, self.evals) + self.sample_seconds

    def plan(self, model, step):
        """Set max_iters to the last step that fits in the time left, from the speed so far."""
        if step == self.first_step or not self.evals:  # resumed here: nothing measured yet
            return
        self.sample_seconds = self.time_sample(model)
        step_time = self.step_time(step)
        eval_time = self.eval_seconds / self.evals
        left = self.cfg.max_time - (time.perf_counter() - self.started) - self.time_to_finish()
        fit = steps_in_budget(left, step, step_time, eval_time, self.cfg.eval_interval)
        self.cfg.max_iters = max(step, min(self.cfg.max_iters, fit))
        print(f"budget: {self.cfg.max_iters} steps fit in --max_time={self.cfg.max_time:.0f} here "
              f"(a step {step_time:.3f} s, an evaluation {eval_time:.1f} s, the sample "
              f"{self.sample_seconds:.1f} s); repeat this run with --max_iters={self.cfg.max_iters}"
              " --max_time=0", flush=True)

    def time_sample(self, model):
        """Time a trial sample: the first block_size characters, then 8 at a full context."""
        first = min(self.cfg.max_new_tokens, self.cfg.block_size)
        idx = torch.zeros((1, 1), dtype=torch.long, device=self.cfg.device)  # (1, 1)
        rng_device = "mps" if self.cfg.device == "mps" else "cuda"
        with torch.random.fork_rng(device_type=rng_device), autocast(self.cfg):  # the run's own
            start = time.perf_counter()  # random numbers are restored after this trial
            idx = model.eval().generate(idx, first)  # (1, 1 + first)
            middle = time.perf_counter()
            model.generate(idx, 8)  # each further character costs about the same
            end = time.perf_counter()
        model.train()
        return middle - start + (self.cfg.max_new_tokens - first) * (end - middle) / 8

    def out_of_time(self, step):
        """Would one more step, then the end (evaluation and sample), overrun --max_time?"""
        if step == self.first_step or not self.evals:
            return False
        need = self.step_time(step) + self.time_to_finish()
        return time.perf_counter() - self.started + need > self.cfg.max_time

    def report(self, step):
        elapsed = time.perf_counter() - self.started
        line = f"{elapsed:5.0f}s elapsed"
        if self.cfg.max_time:
            line = f"{elapsed:5.0f}s of {self.cfg.max_time:.0f}s"
        if step == self.first_step:  # no training step timed yet
            return line
        tokens_per_s = self.cfg.batch_size * self.cfg.block_size / self.step_time(step)
        return f"{line} | {tokens_per_s:6.0f} tok/s"

def steps_in_budget(seconds, step, step_time, eval_time, eval_interval):
    """The last step that training from `step` reaches in `seconds`, its evaluations included."""
    last = step + int(seconds / step_time)
    while last > step:
        evals = last // eval_interval - step // eval_interval  # at multiples of eval_interval
        if last % eval_interval:
            evals += 1  # and one at the end
        if (last - step) * step_time + evals * eval_time <= seconds:
            return last
        last -= 1
    return step

def save_checkpoint(path, model, optimizer, cfg, vocab, step, history):
    """The whole training state, written to a temp file and renamed: never half-written."""
    model = getattr(model, "_orig_mod", model)  # the model inside torch.compile's wrapper
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), vocab=vocab,
                 config=dataclasses.asdict(cfg), step=step, history=history,
                 rng=torch.get_rng_state())  # so that batches and dropout go on where they were
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state()
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)

def load_checkpoint(path):
    """Read a checkpoint with weights_only=True, so that loading one can never run code."""
    if not os.path.exists(path):
        fail(f"no checkpoint at {path} to resume from; train one first "
             "(drop --init_from=resume) or set --out_dir")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        assert {"model", "optimizer", "config", "vocab", "step", "history", "rng"} <= ckpt.keys()
    except Exception as e:  # not a zip, truncated, code inside (refused), keys missing
        fail(f"{path} is not a readable checkpoint ({type(e).__name__}); "
             "delete it or pick another --out_dir")
    return ckpt

def make_settings(argv=None):
    """The one place that decides the run: a preset or a checkpoint, then the flags on top."""
    flags = parse_flags(Config, argv)
    device = pick_device(flags.get("device", "auto"))
    ckpt = None
    if flags.get("init_from") == "resume":
        ckpt_path = os.path.join(flags.get("out_dir", Config.out_dir), "ckpt.pt")
        ckpt = load_checkpoint(ckpt_path)
        saved = {k: v for k, v in ckpt["config"].items() if k in Config.__dataclass_fields__}
        for name in ("block_size", "n_layer", "n_head", "n_embd"):
            if name in flags and flags[name] != saved[name]:
                fail(f"--{name}={flags[name]} but {ckpt_path} has {name}={saved[name]}; "
                     "drop the flag or use another --out_dir")
        cfg = Config(**{**saved, "dtype": "auto", **flags})
        why = f"resuming {ckpt_path} at step {ckpt['step']}"
    else:
        preset = flags.get("preset", "auto")
        why = "--preset"
        if preset == "auto":
            preset = "lecture" if device == "cuda" else "laptop"
            why = "a CUDA GPU" if device == "cuda" else "no CUDA GPU, and the lecture's takes hours"
        cfg = Config(**{**PRESETS[preset], **flags, "preset": preset})
        why = f"preset {preset} ({why})"
    capability = torch.cuda.get_device_capability() if device == "cuda" else None
    dtype, dtype_why = pick_precision(device, capability, torch.backends.mkldnn.is_available()
                                      and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if cfg.dtype != "auto":
        dtype, dtype_why = cfg.dtype, "--dtype"
    cfg = dataclasses.replace(cfg, device=device, dtype=dtype)  # from here on, what runs
    check_config(cfg)
    steps = f"{cfg.max_iters} steps"
    if cfg.max_time:
        steps = f"the steps that fit in {cfg.max_time:.0f} s (at most {cfg.max_iters})"
    print(f"{why}: {cfg.n_layer} layers, {cfg.n_embd} channels, context {cfg.block_size}, "
          f"{steps} | {device}, {dtype} ({dtype_why})")
    return cfg, ckpt

# ------------------------------------------------------------------------------------------ main

def main(argv=None):
    """Settings, then data, model, training and a sample; returns what the run made."""
    started = time.perf_counter()
    cfg, ckpt = make_settings(argv)
    torch.manual_seed(cfg.seed)
    torch.set_float32_matmul_precision("high")  # TF32 matmuls on GPUs that have them
    path = os.path.join(HERE, "input.txt") if cfg.input == Config.input else cfg.input
    text = load_text(path)
    tokenizer = CharTokenizer.from_text(text)
    if ckpt and ckpt["vocab"] != tokenizer.chars:
        fail(f"{path} has other characters than the checkpoint's text; resume with that text")
    unknown = sorted(set(cfg.prompt) - set(tokenizer.chars))
    if unknown:
        fail(f"the prompt has characters outside the vocabulary: {''.join(unknown)!r}; "
             "remove them from --prompt")
    splits = split_data(text, tokenizer, cfg.block_size)

    cfg = dataclasses.replace(cfg, vocab_size=len(tokenizer.chars))
    model = GPT(cfg).to(cfg.device)
    optimizer = make_optimizer(model, cfg)
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    step, history = 0, None
    if ckpt:
        try:
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
        except (RuntimeError, ValueError, KeyError) as e:
            fail(f"the checkpoint does not fit this model ({str(e).splitlines()[0][:80]})")
        torch.set_rng_state(ckpt["rng"])
        if "cuda_rng" in ckpt and torch.cuda.is_available():
            torch.cuda.set_rng_state(ckpt["cuda_rng"])
        step, history = ckpt["step"], ckpt["history"]

    if history is None or step < cfg.max_iters:  # resuming with --max_iters=0 only samples
        trained = torch.compile(model) if cfg.compile else model  # the same weights, compiled
        history = train(trained, optimizer, splits, cfg, tokenizer.chars, step, history, started)
    generated = sample(model, tokenizer, cfg)
    print(generated)
    return dict(model=model, config=cfg, history=history, sample=generated)

if __name__ == "__main__":
    main()
