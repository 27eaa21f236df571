"""A character-level GPT in one file: `python gpt.py` trains a decoder-only transformer on a text
and writes more like it (sample.py samples the saved model again). Defaults: the model of the
lecture "Let's build GPT", a modern training recipe; without CUDA, one that trains in 10 minutes.
The lecture part ends at the marked line. Shapes: B batch, T time, C channels, V vocab, nh heads."""
import argparse, dataclasses, io, math, os, pathlib, sys, time

import torch
import torch.nn as nn
from torch.nn import functional as F

# ------------------------------------------------------------------------------ hyperparameters
def flag(default, help, choices=None):
    """A hyperparameter that is also a command-line flag: its help text is kept beside it."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})

@dataclasses.dataclass
class Config:
    """Every hyperparameter: the lecture's model, changed by a preset, then by the flags given."""
    input: str = flag("input.txt", "training text (UTF-8); the default is fetched if missing")
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
    max_time: float = flag(0.0, "seconds for training, evaluations and sample (0: no limit)")
    learning_rate: float = flag(3e-4, "peak learning rate, reached after the warm-up")
    min_lr: float = flag(3e-5, "learning rate at the end of the cosine decay")
    warmup_iters: int = flag(100, "steps of linear warm-up from 0 to learning_rate")
    weight_decay: float = flag(0.1, "AdamW weight decay, on weight matrices only")
    grad_clip: float = flag(1.0, "clip the gradient norm to this (0: no clipping)")
    eval_interval: int = flag(500, "estimate the losses, log and save every this many steps")
    eval_iters: int = flag(200, "random batches per split for each estimate (the last val: exact)")
    log_interval: int = flag(100, "print the training loss every this many steps")
    seed: int = flag(1337, "random seed: the same seed repeats a step-counted run on a CPU")
    device: str = flag("auto", "auto: cuda, mps or cpu", ("auto", "cpu", "cuda", "mps"))
    dtype: str = flag("auto", "auto: by hardware", ("auto", "bfloat16", "float16", "float32"))
    compile: bool = flag(False, "compile the model with torch.compile (faster on GPUs)")
    max_new_tokens: int = flag(500, "characters to generate at the end")

PRESETS = {  # laptop: without CUDA, the best that 10 minutes train (benchmarks/laptop_sweep.md)
    "lecture": {},
    "laptop": dict(batch_size=16, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0,
                   weight_decay=0.5, learning_rate=2e-3, min_lr=2e-4, max_iters=100000,
                   eval_iters=10, max_time=585),
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
        # dropout here, not on the (T, T) weights as in the lecture: faster (notebook 06)
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
def progress(step, seconds, cfg):
    """How far training is, 0 to 1: its share of the steps after the warm-up, or of max_time."""
    by_steps = (step - cfg.warmup_iters) / max(1, cfg.max_iters - cfg.warmup_iters)
    by_time = seconds / cfg.max_time if cfg.max_time > 0 else 0.0
    return min(1.0, max(by_steps, by_time))

def lr_at(step, seconds, cfg):
    """Linear warm-up to learning_rate, then a cosine decay to min_lr as progress goes to 1."""
    if step < cfg.warmup_iters:
        return cfg.learning_rate * (step + 1) / cfg.warmup_iters
    cosine = 0.5 * (1 + math.cos(math.pi * progress(step, seconds, cfg)))  # 1 -> 0
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

def train_step(model, optimizer, scaler, splits, cfg, lr):
    """One optimizer step at learning rate lr on a random training batch; returns its loss."""
    for group in optimizer.param_groups:
        group["lr"] = lr
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
    return loss.detach()  # a tensor: reading its value would wait for a GPU

def train(model, optimizer, scaler, splits, cfg, vocab, history):
    """Train until progress reaches 1; every eval_interval steps and at the end, evaluate, save."""
    step = history["step"][-1] if history["step"] else 0  # resumed: the checkpoint's step
    started = time.perf_counter() - (history["seconds"][-1] if history["step"] else 0.0)
    after = 0.0  # seconds the end takes (evaluation, exact val, sample): max_time holds it too
    while True:
        seconds = time.perf_counter() - started  # of training: evaluations and saves included
        done = step >= cfg.max_iters or progress(step, seconds + after, cfg) >= 1
        if (done or step % cfg.eval_interval == 0) and step not in history["step"]:
            losses = estimate_loss(model, splits, cfg, autocast(cfg))
            if done:  # the final score: val's every target once, not a sample (machinery, below)
                losses["val"] = whole_text_loss(model, splits["val"], cfg, autocast(cfg))
            for key, value in dict(step=step, seconds=seconds, **losses).items():
                history[key].append(value)
            save_checkpoint(model, optimizer, scaler, cfg, vocab, history, done)  # if finite
            print(f"step {step:5d} | train {losses['train']:.4f} | val {losses['val']:.4f} | "
                  f"{seconds:.0f} s", flush=True)
            evaluated = time.perf_counter() - started - seconds  # this evaluation's seconds
            rows = len(splits["val"]) / cfg.block_size + 2 * cfg.max_new_tokens  # 2 a character
            after = evaluated * (1 + rows / (2 * cfg.eval_iters * cfg.batch_size))  # at its pace
        if done:
            return history
        loss = train_step(model, optimizer, scaler, splits, cfg, lr_at(step, seconds + after, cfg))
        step += 1
        if step % cfg.log_interval == 0:  # this batch's loss, and the tokens a second so far
            tokens = step * cfg.batch_size * cfg.block_size
            print(f"step {step:5d} | loss {loss.item():.4f} | {tokens / seconds:,.0f} tok/s | "
                  f"{seconds:.0f} s", flush=True)

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
HERE = os.path.dirname(os.path.abspath(globals().get("__file__", "gpt.py")))
MAY_BE_ZERO = ("max_iters", "warmup_iters", "max_new_tokens", "seed")  # other ints: 1 or more

def fail(message):
    """Stop with one line on stderr and a non-zero exit: bad input never ends in a traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(1)

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
                                     allow_abbrev=False)
    for f in [f for f in dataclasses.fields(config_class) if "help" in f.metadata]:
        kind = dict(type=flag_type(f), choices=f.metadata["choices"])
        if f.type is bool:  # --compile and --no-compile
            kind = dict(action=argparse.BooleanOptionalAction)
        parser.add_argument(f"--{f.name}", default=argparse.SUPPRESS, **kind,
                            help=f"{f.metadata['help']} (default: {f.default!r})")
    return vars(parser.parse_args(argv))

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

def pick_hardware(device_flag, dtype_flag):
    """The device and autocast dtype that these flags' values give here, and why that dtype."""
    present = [torch.cuda.is_available(), torch.backends.mps.is_available(), True]
    found = [name for name, ok in zip(("cuda", "mps", "cpu"), present) if ok]  # best first
    if device_flag not in ("auto", *found):
        fail(f"--device={device_flag}: PyTorch finds no such device here; use auto or cpu")
    device = found[0] if device_flag == "auto" else device_flag
    if dtype_flag != "auto":
        return device, dtype_flag, "--dtype"
    capability = torch.cuda.get_device_capability() if device == "cuda" else None
    cpu_bf16 = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return (device, *pick_precision(device, capability, cpu_bf16))

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

def save_checkpoint(model, optimizer, scaler, cfg, vocab, history, finished=False):
    """The whole training state, written to a temp file and renamed; never a diverged model."""
    if not math.isfinite(history["train"][-1]):  # nan or inf: the last checkpoint stays good
        fail(f"the loss became {history['train'][-1]} by step {history['step'][-1]}; lower "
             f"--learning_rate ({cfg.out_dir}/ckpt.pt keeps the last evaluation's state)")
    model = getattr(model, "_orig_mod", model)  # the model inside torch.compile's wrapper
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), vocab=vocab,
                 scaler=scaler.state_dict(), config=dataclasses.asdict(cfg), finished=finished,
                 step=history["step"][-1], history=history, rng=torch.get_rng_state(),
                 cuda_rng=torch.cuda.get_rng_state() if torch.cuda.is_available() else None)
    path = os.path.join(cfg.out_dir, "ckpt.pt")
    os.makedirs(cfg.out_dir, exist_ok=True)  # made at the first save: no empty out/
    buffer = io.BytesIO()  # in memory first, so that writing it is one plain write
    torch.save(state, buffer)
    try:
        pathlib.Path(path + ".tmp").write_bytes(buffer.getbuffer())  # a full disk: an OSError
    except OSError as e:
        pathlib.Path(path + ".tmp").unlink(missing_ok=True)  # no half-written file fills the disk
        fail(f"can't save {path} ({e}): free space in {cfg.out_dir} or pick "
             "another --out_dir; an earlier ckpt.pt there stays as it was")
    os.replace(path + ".tmp", path)  # never half-written

def load_checkpoint(path):
    """Read a checkpoint with weights_only=True, so that loading one can never run code."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        assert {"model", "optimizer", "config", "vocab", "step", "rng"} <= ckpt.keys()
        assert "seconds" in ckpt["history"]  # older gpt.py's checkpoints lack it
    except Exception as e:  # missing, not a zip, truncated, code inside (refused), keys missing
        fail(f"can't load {path} ({type(e).__name__}): train a model there first with gpt.py, "
             "or pick another --out_dir")
    return ckpt

def make_settings(argv=None):
    """The Config from a preset or a checkpoint, then the flags; the checkpoint; what runs."""
    flags = parse_flags(Config, argv)
    device, dtype, why = pick_hardware(flags.get("device", "auto"), flags.get("dtype", "auto"))
    path = os.path.join(flags.get("out_dir", Config.out_dir), "ckpt.pt")
    ckpt = load_checkpoint(path) if flags.get("init_from") == "resume" else None
    if ckpt:
        saved = {k: v for k, v in ckpt["config"].items() if k in Config.__dataclass_fields__}
        if "max_iters" in flags:
            saved["max_time"] = 0.0  # a step count given on resume: train to it, with no budget
        cfg = Config(**{**saved, **flags})
        what = f"resuming {path} at step {ckpt['step']}"
    else:
        if "init_from" not in flags and os.path.exists(path):
            fail(f"{path} exists and a new run would replace it: --init_from=resume goes on "
                 "from it, --init_from=scratch trains over it, --out_dir=DIR trains elsewhere")
        preset = flags.get("preset", "auto")
        if preset == "auto":  # the lecture's model on a CUDA GPU; elsewhere one for 10 minutes
            preset = "lecture" if device == "cuda" else "laptop"
        cfg = Config(**{**PRESETS[preset], **flags, "preset": preset})
        what = f"preset {preset}"
    cfg = dataclasses.replace(cfg, device=device, dtype=dtype)  # from here on, what runs
    if cfg.n_embd % cfg.n_head:
        fail(f"--n_embd={cfg.n_embd} must be divisible by --n_head={cfg.n_head}, "
             f"e.g. --n_embd={cfg.n_head * 64}")
    if cfg.init_from == "scratch" and cfg.max_iters == 0:
        fail("--max_iters=0 trains nothing: give a step count (sample.py samples a saved model)")
    budget = f"{cfg.max_time:.0f} s, " if cfg.max_time else ""
    return cfg, ckpt, (f"{what}: {cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd} channels, "
                       f"context {cfg.block_size}, batch {cfg.batch_size} | at most {budget}"
                       f"{cfg.max_iters} steps | {device}, {dtype}: {why}")

def prepare(argv=None):
    """Settings, text and vocabulary, then the model and its training state, new or resumed."""
    cfg, ckpt, summary = make_settings(argv)
    text = load_text(os.path.join(HERE, "input.txt") if cfg.input == Config.input else cfg.input)
    tokenizer = CharTokenizer.from_text(text)
    if ckpt and ckpt["vocab"] != tokenizer.chars:
        fail(f"{cfg.input} has other characters than the checkpoint's text; resume with that text")
    splits = split_data(text, tokenizer, cfg.block_size)
    cfg = dataclasses.replace(cfg, vocab_size=len(tokenizer.chars))
    torch.manual_seed(cfg.seed)
    torch.set_float32_matmul_precision("high")  # TF32 matmuls on GPUs that have them
    model = GPT(cfg).to(cfg.device)
    optimizer = make_optimizer(model, cfg)
    scaler = torch.amp.GradScaler(cfg.device, enabled=cfg.dtype == "float16")  # see autocast()
    history = {"step": [], "seconds": [], "train": [], "val": []}  # at each evaluation
    if ckpt:  # resumed: the state at the checkpoint's step, its random numbers too
        try:  # a disabled scaler (not float16) ignores its state
            for name, part in dict(model=model, optimizer=optimizer, scaler=scaler).items():
                part.load_state_dict(ckpt[name])
        except (RuntimeError, ValueError, KeyError):
            fail("the checkpoint does not fit this model: drop the flags that change its shape")
        history = ckpt["history"]
        torch.set_rng_state(ckpt["rng"])
        if ckpt.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state(ckpt["cuda_rng"])
    print(f"{summary} | {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    return cfg, tokenizer, splits, model, optimizer, scaler, history

def main(argv=None):
    """Settings, data and model, then training and a sample; returns what the run made."""
    cfg, tokenizer, splits, model, optimizer, scaler, history = prepare(argv)
    trained = torch.compile(model) if cfg.compile else model  # the same weights, compiled
    train(trained, optimizer, scaler, splits, cfg, tokenizer.chars, history)
    print(f"trained {history['step'][-1]} steps in {history['seconds'][-1]:.0f} s: val "
          f"{history['val'][-1]:.4f} is exact (the whole validation text), train an estimate "
          f"(--max_iters={history['step'][-1]} --max_time=0 trains as many by count)", flush=True)
    torch.set_num_threads(1)  # one sequence at a time: on one thread, never held up by a busy core
    generated = sample(model, tokenizer, cfg)
    print(generated)
    return dict(model=model, config=cfg, history=history, sample=generated)

if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C: ckpt.pt still holds the last evaluation's whole state
        print("\ninterrupted: --init_from=resume goes on from the last evaluation", file=sys.stderr)
        raise SystemExit(130)
    except (OSError, UnicodeDecodeError) as e:  # a file that can't be read or written
        fail(f"{e}; check --input and --out_dir")
