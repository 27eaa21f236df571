"""
A character-level GPT in one file: it reads a text, trains a decoder-only transformer on it and
writes more text like it (`python gpt.py`; `python gpt.py --help` lists every flag). The defaults
are the model of Karpathy's lecture "Let's build GPT" with a modern training recipe, not the
lecture's (the README lists each difference); without a CUDA GPU a smaller model trains for 10
minutes. Read the lecture part first: hyperparameters, data, model, training, sampling.
Shapes: B batch, T time (place in the context), C channels, V vocabulary, nh heads, hs = C // nh.
"""
import argparse, contextlib, dataclasses, math, os, sys, time
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
    """Every hyperparameter: the lecture's model, changed by a preset, then by the flags given."""
    input: str = flag("input.txt", "training text (UTF-8); input.txt beside gpt.py is downloaded")
    out_dir: str = flag("out", "folder for ckpt.pt: the latest training state, saved at each eval")
    preset: str = flag("auto", "auto: lecture on CUDA, else laptop, or laptop_float32 in float32",
                       ("auto", "lecture", "laptop", "laptop_float32"))
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
    eval_iters: int = flag(200, "batches per split for the last loss estimate; a fifth before it")
    seed: int = flag(1337, "random seed: the same seed repeats a run exactly on a CPU")
    device: str = flag("auto", "auto: cuda, mps or cpu", ("auto", "cpu", "cuda", "mps"))
    dtype: str = flag("auto", "auto: by hardware", ("auto", "bfloat16", "float16", "float32"))
    compile: bool = flag(False, "True: compile the model with torch.compile (faster on GPUs)")
    prompt: str = flag("", "text the sample starts from ('': the first character, a newline)")
    max_new_tokens: int = flag(500, "characters to generate at the end")

# The lecture's model takes hours on a CPU. Without CUDA, gpt.py trains a smaller one for the steps
# that fit in 10 minutes here, narrower in float32 (benchmarks/laptop_sweep.md: why these).
PRESETS = {
    "lecture": {},
    "laptop": dict(batch_size=32, block_size=128, n_layer=4, n_head=4, n_embd=256, dropout=0.0,
                   max_time=600.0, learning_rate=1e-3, min_lr=1e-4, eval_iters=50),
}
PRESETS["laptop_float32"] = dict(PRESETS["laptop"], n_embd=192, learning_rate=2e-3, min_lr=2e-4)

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
        # Dropout on this output, not on the (T, T) weights as in the lecture: on a CPU that takes
        # SDPA off its fused kernel (notebook 06: attention 2.74x slower). CUDA's take dropout_p.
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

def train_step(model, optimizer, scaler, splits, cfg, step):
    """One optimizer step on a random training batch; returns its loss (a tensor, not synced)."""
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step, cfg)
    x, y = get_batch(splits["train"], cfg.batch_size, cfg.block_size)  # (B, T), (B, T)
    x, y = x.to(cfg.device), y.to(cfg.device)
    with autocast(cfg):
        _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()  # just loss.backward() unless in float16
    if cfg.grad_clip > 0:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    scaler.step(optimizer)  # optimizer.step(), skipped if float16 gradients overflowed
    scaler.update()
    return loss.detach()

def train(model, optimizer, scaler, splits, cfg, vocab, step, history, clock):
    """Step the optimizer up to max_iters; every eval_interval steps log the losses and save."""
    path = os.path.join(cfg.out_dir, "ckpt.pt")
    while True:
        is_eval_step = step % cfg.eval_interval == 0 or step == cfg.max_iters
        if is_eval_step and step not in history["step"]:  # a resumed step is logged already
            batches = cfg.eval_iters if step == cfg.max_iters else max(1, cfg.eval_iters // 5)
            eval_cfg = dataclasses.replace(cfg, eval_iters=batches)  # the last is the result
            with clock.evaluating(batches):
                losses = estimate_loss(model, splits, eval_cfg, autocast(cfg))
            check_finite(losses["train"], step, cfg)  # a diverged model is never saved
            history["step"].append(step)
            history["train"].append(losses["train"])
            history["val"].append(losses["val"])
            save_checkpoint(path, model, optimizer, scaler, cfg, vocab, step, history)
            print(f"step {step:5d} | train {losses['train']:.4f} | val {losses['val']:.4f} | "
                  f"{clock.elapsed()}", flush=True)
        if step >= cfg.max_iters:
            return history
        loss = train_step(model, optimizer, scaler, splits, cfg, step)
        step += 1
        clock.tick(model, step, loss)  # a line every 10 s; with --max_time, it fits max_iters to it

# -------------------------------------------------------------------------------------- sampling

def sample(model, tokenizer, cfg):
    """Generate max_new_tokens characters after the prompt and return the whole text."""
    start = tokenizer.encode(cfg.prompt) or [0]  # id 0: the first character of the vocabulary
    idx = torch.tensor([start], dtype=torch.long, device=cfg.device)  # (1, T)
    model.eval()
    with autocast(cfg):
        out = model.generate(idx, cfg.max_new_tokens)  # (1, T + new)
    return tokenizer.decode(out[0].tolist())

# ------------------------------------------------------------- command line, devices and checks

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

def number(text):
    """A flag's real number: finite and not negative (nan, inf and -1 are refused)."""
    if not 0 <= float(text) < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more; got {text}")
    return float(text)

def boolean(text):
    """A flag's True or False, in any case."""
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"must be True or False, got {text!r}")
    return text.lower() == "true"

def parse_flags(config_class, argv=None, presets=None, here=None):
    """The '--name=value' flags given. --help shows each default as the preset used `here` sets
    it, and the other presets' values where they differ."""
    if argv is None:  # in Jupyter or Colab, sys.argv holds the kernel's own '-f kernel.json'
        argv = [] if "ipykernel" in sys.modules else sys.argv[1:]
    parser = FlagParser(usage="%(prog)s [--name=value ...]", description=config_class.__doc__,
                        allow_abbrev=False)
    for f in dataclasses.fields(config_class):
        values = {name: p.get(f.name, f.default) for name, p in (presets or {}).items()}
        default = repr(f.default)
        if len(set(values.values())) > 1:
            others = [f"{name}: {v!r}" for name, v in values.items() if name != here]
            default = f"{values[here]!r} here, the {here} preset's; {', '.join(others)}"
        if "help" in f.metadata:
            parser.add_argument(f"--{f.name}", type={int: int, float: number, bool: boolean,
                                str: str}[f.type], choices=f.metadata["choices"],
                                default=argparse.SUPPRESS, metavar=f.type.__name__.upper(),
                                help=f"{f.metadata['help']} (default: {default})")
    return vars(parser.parse_args(argv))

def check_config(cfg):
    """The checks that the flags' types cannot make, each with its fix."""
    at_least = dict(block_size=1, n_embd=1, n_head=1, n_layer=1, batch_size=1, eval_interval=1,
                    eval_iters=1, max_iters=0, warmup_iters=0, max_new_tokens=0, seed=0)
    for name, low in at_least.items():
        if getattr(cfg, name) < low:
            fail(f"--{name} must be at least {low}, got {getattr(cfg, name)}")
    if cfg.dropout >= 1:
        fail(f"--dropout must be below 1, got {cfg.dropout}")
    if cfg.n_embd % cfg.n_head:
        fail(f"--n_embd={cfg.n_embd} must be divisible by --n_head={cfg.n_head}, "
             f"e.g. --n_embd={cfg.n_head * 64}")
    if cfg.max_time and cfg.warmup_iters < 10:
        fail("--max_time measures the speed during the warm-up: give --warmup_iters=10 or more")
    if cfg.init_from == "scratch" and cfg.max_iters == 0:
        fail("--max_iters=0 trains nothing, and an untrained model writes noise; add "
             "--init_from=resume to sample from the checkpoint in --out_dir")

def check_finite(loss, step, cfg):
    """Stop when the loss is nan or inf, before it is saved: the last checkpoint stays good."""
    if not math.isfinite(loss):
        mps = "; on MPS this is often the backend: try --device=cpu" if cfg.device == "mps" else ""
        fail(f"the loss became {loss} by step {step}; lower --learning_rate{mps} "
             f"({cfg.out_dir}/ckpt.pt keeps the last evaluation's state)")

def load_text(path):
    """The whole file as a string; input.txt beside gpt.py is downloaded first when missing."""
    if path == os.path.join(HERE, "input.txt") and not os.path.exists(path):
        print(f"downloading Tiny Shakespeare to {path}")
        try:  # PyTorch's downloader checks the sha256 and writes nothing unless it matches
            torch.hub.download_url_to_file(DATA_URL, path, hash_prefix=DATA_SHA256, progress=False)
        except (OSError, RuntimeError, ValueError) as e:
            fail(f"downloading {DATA_URL} failed ({e}); save that file as {path} by hand, "
                 "or pass any UTF-8 text with --input=FILE")
    with open(path, encoding="utf-8") as f:  # errors: the handler under main() reports them
        return f.read()

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
        return "bfloat16", "the CPU has native bfloat16 (AVX512-BF16 or AMX)"
    return "float32", f"no native half precision on this {device}"

def autocast(cfg):
    """Matmuls in cfg.dtype (bfloat16 or float16) where it is safe, the rest in float32."""
    dtype = getattr(torch, cfg.dtype)
    return torch.autocast(cfg.device, dtype=dtype, enabled=dtype != torch.float32)

class Clock:
    """A line every 10 s and, with --max_time, the step count that fits in the time left."""

    def __init__(self, cfg, step, started):
        self.cfg, self.started = cfg, started  # --max_time counts from main()'s start, so
        self.deadline = 0.99 * cfg.max_time  # 1% is left for Python's start-up before it
        self.plan_at = max(cfg.warmup_iters, step + 10) if cfg.max_time else -1
        self.timed_step = step + min(10, (self.plan_at - step) // 2)  # after one-off set-up costs
        self.timed_from = self.eval_time = self.final_eval = self.end = 0.0  # end: both last
        self.last_step = self.last_line = time.perf_counter()
        self.losses = []  # the losses since the last line, as tensors: reading one waits for a GPU

    def elapsed(self):
        return f"{time.perf_counter() - self.started:.0f} s"

    @contextlib.contextmanager
    def evaluating(self, batches):
        start = time.perf_counter()
        yield
        self.last_step = self.last_line = time.perf_counter()  # the steps are timed apart
        self.eval_time = self.last_step - start  # the next ones, with as many batches
        self.final_eval = self.eval_time * self.cfg.eval_iters / batches  # the last: all of them
        self.losses = []

    def tick(self, model, step, loss):
        """After each step: time the steps, fit max_iters at plan_at, then stop in time."""
        now = time.perf_counter()
        if step == self.timed_step:
            self.timed_from = now
        if step == self.plan_at:  # evaluations inside the timed steps only make the plan safer
            self.plan(model, step, (now - self.timed_from) / (step - self.timed_step))
        next_step = now - self.last_step  # as long as the last one: the machine may have slowed
        self.last_step = now
        due = self.eval_time if step % self.cfg.eval_interval == 0 else 0.0  # before the next step
        late = now - self.started + due + next_step + self.end > self.deadline
        if self.cfg.max_time and late and self.plan_at < step < self.cfg.max_iters:
            print(f"time budget: stopping at step {step} of {self.cfg.max_iters}, so the repeat "
                  "flag above no longer holds", flush=True)
            self.cfg.max_iters = step
        self.losses.append(loss)
        if now - self.last_line >= 10:
            recent = torch.stack(self.losses).mean().item()  # the one wait for the GPU in 10 s
            check_finite(recent, step, self.cfg)
            tokens = len(self.losses) * self.cfg.batch_size * self.cfg.block_size
            print(f"step {step:5d} | loss {recent:.4f} | {tokens / (now - self.last_line):,.0f} "
                  f"tok/s | {self.elapsed()}", flush=True)
            self.last_line, self.losses = now, []

    @torch.no_grad()
    def plan(self, model, step, step_time):
        """Set max_iters to the last step that fits: the steps, their evaluations, the end."""
        model = getattr(model, "_orig_mod", model).eval()  # the plain model, as sample() runs it
        idx = torch.zeros((1, self.cfg.block_size), dtype=torch.long, device=self.cfg.device)
        with autocast(self.cfg):
            for _ in range(2):  # the second forward is free of a new shape's one-off costs
                start = time.perf_counter()
                float(model(idx)[0][0, -1, 0])  # a sampled character's cost; float() syncs
        model.train()
        sample_time = self.cfg.max_new_tokens * (time.perf_counter() - start)
        self.end = self.final_eval + sample_time
        left = self.deadline - (time.perf_counter() - self.started) - self.end
        every = self.cfg.eval_interval
        fit = int(left / (step_time + self.eval_time / every))  # steps, with a share of the evals
        evals = (step + fit) // every - step // every  # the evaluations those steps really meet
        fit = min(fit, int((left - evals * self.eval_time) / step_time))
        self.cfg.max_iters = max(step, min(self.cfg.max_iters, step + fit))
        print(f"budget: {self.cfg.max_iters} steps fit (a step {step_time:.3f} s, an evaluation "
              f"{self.eval_time:.1f} s, the last {self.final_eval:.1f} s, the sample "
              f"{sample_time:.1f} s); repeat this run with --max_iters={self.cfg.max_iters} "
              "--max_time=0", flush=True)

def save_checkpoint(path, model, optimizer, scaler, cfg, vocab, step, history):
    """The whole training state, written to a temp file and renamed: never half-written."""
    model = getattr(model, "_orig_mod", model)  # the model inside torch.compile's wrapper
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), vocab=vocab,
                 scaler=scaler.state_dict(), config=dataclasses.asdict(cfg), step=step,
                 history=history, rng=torch.get_rng_state())  # batches, dropout go on exactly
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state()
    os.makedirs(os.path.dirname(path), exist_ok=True)  # made at the first save: no empty out/
    with open(path + ".tmp", "wb") as f:  # an OSError if out_dir can't be written
        torch.save(state, f)
    os.replace(path + ".tmp", path)

def load_checkpoint(path):
    """Read a checkpoint with weights_only=True, so that loading one can never run code."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        assert {"model", "optimizer", "config", "vocab", "step", "history", "rng"} <= ckpt.keys()
    except Exception as e:  # missing, not a zip, truncated, code inside (refused), keys missing
        fail(f"can't resume from {path} ({type(e).__name__}): train a model there first, "
             "or pick another --out_dir")
    return ckpt

def pick_hardware(device_flag, dtype_flag):
    """The device and the autocast dtype that these two flags' values give here, and why that."""
    device = pick_device(device_flag)
    if dtype_flag != "auto":
        return device, dtype_flag, "--dtype"
    capability = torch.cuda.get_device_capability() if device == "cuda" else None
    cpu_bf16 = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return (device, *pick_precision(device, capability, cpu_bf16))

def auto_preset(device, dtype):
    """--preset=auto: the lecture's model on CUDA, else a 10-minute model for the precision."""
    if device == "cuda":
        return "lecture", "a CUDA GPU"
    if dtype == "float32":
        return "laptop_float32", f"no CUDA GPU, and float32 on this {device}"
    return "laptop", f"no CUDA GPU, and {dtype} on this {device}"

def make_settings(argv=None):
    """The one place that decides the run: a preset or a checkpoint, then the flags on top.
    Returns the Config, the checkpoint to resume from (or None), and what runs and why."""
    here = auto_preset(*pick_hardware("auto", "auto")[:2])[0]  # what --preset=auto picks here
    flags = parse_flags(Config, argv, PRESETS, here)
    device, dtype, dtype_why = pick_hardware(flags.get("device", "auto"),
                                             flags.get("dtype", "auto"))
    path = os.path.join(flags.get("out_dir", Config.out_dir), "ckpt.pt")
    ckpt = None
    if flags.get("init_from") == "resume":
        ckpt = load_checkpoint(path)
        saved = {k: v for k, v in ckpt["config"].items() if k in Config.__dataclass_fields__}
        if ckpt["step"] >= saved["warmup_iters"] or "max_iters" in flags:
            saved["max_time"] = 0.0  # the plan was made, or --max_iters sets the count: no budget
        cfg = Config(**{**saved, **flags})
        why = f"resuming {path} at step {ckpt['step']}"
    else:
        if "init_from" not in flags and os.path.exists(path):
            fail(f"{path} exists and a new run would replace it: --init_from=resume goes on "
                 "from it, --init_from=scratch trains over it, --out_dir=DIR trains elsewhere")
        preset = flags.get("preset", "auto")
        why = "--preset"
        if preset == "auto":
            preset, why = auto_preset(device, dtype)
        cfg = Config(**{**PRESETS[preset], **flags, "preset": preset})
        why = f"preset {preset} ({why})"
    cfg = dataclasses.replace(cfg, device=device, dtype=dtype)  # from here on, what runs
    check_config(cfg)
    steps = f"up to step {cfg.max_iters}"
    if cfg.max_time:
        steps += f", as many as fit in {cfg.max_time:.0f} s"
    if ckpt and ckpt["step"] >= cfg.max_iters:
        steps = "no training, a sample only"
    return cfg, ckpt, (f"{why}: {cfg.n_layer} layers, {cfg.n_embd} channels, context "
                       f"{cfg.block_size}, {steps} | {device}, {dtype}: {dtype_why}")

# ------------------------------------------------------------------------------------------ main

def main(argv=None):
    """Settings, then data, model, training and a sample; returns what the run made."""
    started = time.perf_counter()
    cfg, ckpt, summary = make_settings(argv)
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
    print(summary)

    cfg = dataclasses.replace(cfg, vocab_size=len(tokenizer.chars))
    model = GPT(cfg).to(cfg.device)
    optimizer = make_optimizer(model, cfg)
    scaler = torch.amp.GradScaler(cfg.device, enabled=cfg.dtype == "float16")  # see autocast()
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    step, history = 0, {"step": [], "train": [], "val": []}  # every loss estimate so far
    if ckpt:
        try:
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
        except (RuntimeError, ValueError, KeyError):
            fail("the checkpoint does not fit this model: drop the flags that change its shape")
        if scaler.is_enabled() and ckpt.get("scaler"):
            scaler.load_state_dict(ckpt["scaler"])  # float16's loss scale, as it was
        torch.set_rng_state(ckpt["rng"])
        if "cuda_rng" in ckpt and torch.cuda.is_available():
            torch.cuda.set_rng_state(ckpt["cuda_rng"])
        step, history = ckpt["step"], ckpt["history"]

    if step < cfg.max_iters:  # resuming a finished run only samples
        trained = torch.compile(model) if cfg.compile else model  # the same weights, compiled
        clock = Clock(cfg, step, started)
        train(trained, optimizer, scaler, splits, cfg, tokenizer.chars, step, history, clock)
    generated = sample(model, tokenizer, cfg)
    print(generated)
    return dict(model=model, config=cfg, history=history, sample=generated)

if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C: ckpt.pt still holds the last evaluation's whole state
        print("\ninterrupted; add --init_from=resume (and the same --out_dir) to go on from the "
              "last evaluation", file=sys.stderr)
        raise SystemExit(130)
    except (OSError, UnicodeDecodeError) as e:  # a file that can't be read or written
        fail(f"{e}; check --input and --out_dir")
