"""A character-level GPT in one file: read a text, train a decoder-only transformer on it, write more
text like it. Reading order: hyperparameters, data, model (small pieces to large), training, main().
Importing this file does nothing; `python gpt.py --help` lists every flag. Shape comments use B batch,
T time (position in the context), C channels (n_embd), V vocabulary, nh heads, hs head size (C // nh)."""
import dataclasses, difflib, hashlib, inspect, math, os, re, sys, time, urllib.request
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

@dataclass
class Config:
    input: str = "input.txt"  # training text (UTF-8); the default means the one beside gpt.py, downloaded if missing
    out_dir: str = "out"  # folder for ckpt.pt (best model so far) and loss.png (the loss curves)
    init_from: str = "scratch"  # 'scratch' trains a new model; 'resume' continues from out_dir/ckpt.pt
    block_size: int = 256  # context length: how many characters the model sees to predict the next one
    n_embd: int = 384  # channels: the size of every token's vector
    n_head: int = 6  # attention heads per block; each has n_embd // n_head channels
    n_layer: int = 6  # number of transformer blocks
    dropout: float = 0.2  # fraction of activations zeroed during training, against overfitting
    attention: str = "sdpa"  # 'sdpa' (PyTorch's fused kernel) or 'explicit' (q @ k^T, mask, softmax: to read)
    vocab_size: int = 65  # number of distinct characters; set from the data, not a flag
    batch_size: int = 64  # independent sequences per step
    max_iters: int = 5000  # optimizer steps in total
    learning_rate: float = 3e-4  # peak learning rate, reached after warm-up
    min_lr: float = 3e-5  # learning rate at the end of the cosine decay
    warmup_iters: int = 100  # steps of linear warm-up from 0 to learning_rate
    weight_decay: float = 0.1  # AdamW weight decay, applied to weight matrices only
    grad_clip: float = 1.0  # clip the gradient norm to this (0 turns clipping off)
    eval_interval: int = 500  # estimate the losses, log, and save a checkpoint every this many steps
    eval_iters: int = 200  # batches averaged per split for each loss estimate
    device: str = "auto"  # 'auto' (cuda, then mps, then cpu), 'cpu', 'cuda' or 'mps'
    dtype: str = "auto"  # 'auto' (bfloat16 autocast where the hardware has it), 'bfloat16' or 'float32'
    seed: int = 1337  # random seed: the same seed repeats a run exactly on CPU
    prompt: str = ""  # text that generation starts from ('': the vocabulary's first character, a newline here)
    max_new_tokens: int = 500  # characters to generate at the end
    temperature: float = 1.0  # <1 makes samples safer, >1 wilder
    top_k: int = 0  # sample only among the k likeliest characters (0: all of them)

# Without a CUDA GPU and with no size flag given, train this instead: the full model needs ~5 h on 2 CPU cores.
LAPTOP = dict(batch_size=32, block_size=128, n_layer=4, n_head=4, n_embd=256, dropout=0.0,
              max_iters=1700, learning_rate=1e-3, min_lr=1e-4, eval_interval=500, eval_iters=50)
CHOICES = dict(init_from=("scratch", "resume"), attention=("sdpa", "explicit"),
               device=("auto", "cpu", "cuda", "mps"), dtype=("auto", "bfloat16", "float32"))
SIZE_FLAGS = ("batch_size", "block_size", "n_layer", "n_head", "n_embd")  # any of these: no preset
SHAPE_FIELDS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")  # fixed by a checkpoint
DATA_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
DATA_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
DEFAULT_INPUT = os.path.join(os.path.dirname(os.path.abspath(globals().get("__file__", "gpt.py"))), "input.txt")

def fail(message):
    """Stop with one line on stderr and exit code 1: bad input never ends in a traceback."""
    raise SystemExit(f"error: {message}")

def parse_args(cls, argv=None):
    """Read '--name=value' flags into a dict, each value checked against the field's type."""
    if argv is None:  # in Jupyter or Colab, sys.argv holds the kernel's own '-f kernel.json'
        argv = [] if "ipykernel" in sys.modules else sys.argv[1:]
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.name != "vocab_size"}
    overrides = {}
    for arg in argv:
        if arg in ("-h", "--help"):  # each flag with its default and the comment beside it in the source
            comments = dict(re.findall(r"^\s+(\w+): \w+ = .*?  # (.*)$", inspect.getsource(cls), re.MULTILINE))
            print("\n".join(f"  {f'--{k}={v!r}':<26}{comments.get(k, '')}" for k, v in defaults.items()))
            raise SystemExit(0)
        name, eq, text = arg[2:].partition("=")
        if not arg.startswith("--") or not eq:
            fail(f"can't read {arg!r}: write flags as --name=value, e.g. --max_iters=2000")
        if name not in defaults:
            close = difflib.get_close_matches(name, defaults, n=1)
            fail(f"unknown flag --{name}; " + (f"did you mean --{close[0]}?" if close else "see --help for the list"))
        kind = type(defaults[name])
        try:
            overrides[name] = kind(text)
        except ValueError:
            fail(f"--{name}={text} is not a valid {kind.__name__} (the default is {defaults[name]!r})")
        if text not in CHOICES.get(name, [text]):
            fail(f"--{name} must be one of {', '.join(CHOICES[name])}; got {text!r}")
    return overrides

def check_config(cfg):
    """Reject settings that cannot train, each with the fix (fields cfg lacks are skipped)."""
    positive = ("block_size", "n_embd", "n_head", "n_layer", "batch_size", "eval_interval", "eval_iters")
    for name, value in vars(cfg).items():  # sizes at least 1, every other number (but the seed) at least 0
        if name not in ("seed", "dropout") and type(value) in (int, float) and value < (low := int(name in positive)):
            fail(f"--{name} must be at least {low}, got {value}")
    if not 0 <= getattr(cfg, "dropout", 0) < 1:
        fail(f"--dropout must be in [0, 1), got {cfg.dropout}")
    if not getattr(cfg, "temperature", 1) > 0:
        fail(f"--temperature must be above 0, got {cfg.temperature}")
    if getattr(cfg, "n_embd", 0) % getattr(cfg, "n_head", 1):
        fail(f"--n_embd={cfg.n_embd} must be divisible by --n_head={cfg.n_head}, e.g. --n_embd={cfg.n_head * 64}")

def download(url, path, sha256):
    """Fetch url into path after checking its sha256; nothing is written unless it matches."""
    try:
        blob = urllib.request.urlopen(url, timeout=30).read()
    except (OSError, ValueError) as e:
        fail(f"{path} is missing and downloading it failed ({e}); put a UTF-8 text there or pass --input=FILE")
    if hashlib.sha256(blob).hexdigest() != sha256:
        fail(f"the file from {url} has the wrong sha256; put Tiny Shakespeare at {path} or pass --input=FILE")
    with open(path + ".tmp", "wb") as f:
        f.write(blob)
    os.replace(path + ".tmp", path)

def load_text(path):
    """The whole file as a string; the default input.txt is downloaded first when missing."""
    if path == DEFAULT_INPUT and not os.path.exists(path):
        print(f"downloading Tiny Shakespeare to {path}")
        download(DATA_URL, path, DATA_SHA256)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        fail(f"{path} is not UTF-8 text (bad byte at offset {e.start}); save it as UTF-8 or pick another --input")
    except OSError as e:  # missing, a folder, no permission
        fail(f"can't read input file {path} ({e.strerror}); check the path given to --input")
    if not text:
        fail(f"{path} is empty; pass a text file with some content via --input")
    return text

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
        fail(f"the text is too short for --block_size={block_size}: its last 10% has {len(data) - n} "
             f"characters; give a longer text or a smaller --block_size")
    return {"train": data[:n], "val": data[n:]}

def get_batch(data, batch_size, block_size):
    """Random chunks of block_size + 1 tokens: x is a chunk's first block_size, y the same shifted by one."""
    ix = torch.randint(len(data) - block_size, (batch_size,))  # (B,) where each chunk starts
    chunk = data[ix[:, None] + torch.arange(block_size + 1)]  # (B, T+1)
    return chunk[:, :-1], chunk[:, 1:]  # (B, T) inputs, (B, T) targets

class CausalSelfAttention(nn.Module):
    """All heads at once: each position mixes the values of earlier positions, weighted by query-key match."""
    def __init__(self, config):
        super().__init__()
        self.n_head, self.attention = config.n_head, config.attention
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)  # queries, keys, values of every head
        self.proj = nn.Linear(config.n_embd, config.n_embd)  # mixes the heads' outputs back together
        # Dropout acts on this sublayer's output, not on the (T, T) attention weights as in the lecture: on a CPU,
        # weight dropout forces SDPA off its fused kernel and cost 2x per step (benchmarks/laptop_sweep.md).
        self.resid_dropout = nn.Dropout(config.dropout)
        mask = torch.tril(torch.ones(config.block_size, config.block_size, dtype=torch.bool))  # (T, T) may attend
        self.register_buffer("mask", mask, persistent=False)
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # 3 x (B, nh, T, hs)
        if self.attention == "explicit":
            att = q @ k.transpose(-2, -1) * k.size(-1) ** -0.5  # (B, nh, T, T) query-key affinities
            att = att.masked_fill(~self.mask[:T, :T], float("-inf"))  # (B, nh, T, T) no peeking ahead
            att = F.softmax(att, dim=-1)  # (B, nh, T, T) each row sums to 1
            y = att @ v  # (B, nh, T, hs)
        else:  # the same computation in one fused kernel
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C) heads side by side
        return self.resid_dropout(self.proj(y))  # (B, T, C)

class FeedForward(nn.Module):
    """The same small MLP on every position: after attention gathers, each token thinks alone."""
    def __init__(self, config):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.ReLU(),  # 4x wider inside
                                 nn.Linear(4 * config.n_embd, config.n_embd), nn.Dropout(config.dropout))
    def forward(self, x):
        return self.net(x)  # (B, T, C)

class Block(nn.Module):
    """Communication (attention) followed by computation (feed-forward), each as a residual step."""
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
        # small normal weights and zero biases keep the logits near 0 at the start: loss ≈ ln(vocab_size)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
    def forward(self, idx, targets=None):
        B, T = idx.shape
        tok = self.token_embedding(idx)  # (B, T, C)
        pos = self.position_embedding(torch.arange(T, device=idx.device))  # (T, C)
        x = self.blocks(tok + pos)  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None if targets is None else F.cross_entropy(logits.view(B * T, -1).float(), targets.reshape(B * T))
        return logits, loss
    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """Extend idx (B, T) one sampled token at a time, seeing at most the last block_size."""
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.config.block_size:])  # (B, T, V)
            logits = logits[:, -1, :].float() / temperature  # (B, V) only the last position predicts
            if top_k:
                kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]  # (B, 1)
                logits = logits.masked_fill(logits < kth, float("-inf"))  # (B, V)
            next_id = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)  # (B, 1)
            idx = torch.cat((idx, next_id), dim=1)  # (B, T+1)
        return idx

def lr_at(step, cfg):
    """Linear warm-up to learning_rate, then cosine decay down to min_lr at max_iters."""
    if step < cfg.warmup_iters:
        return cfg.learning_rate * (step + 1) / cfg.warmup_iters
    progress = min(1.0, (step - cfg.warmup_iters) / max(1, cfg.max_iters - cfg.warmup_iters))
    return cfg.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (cfg.learning_rate - cfg.min_lr)

def make_optimizer(model, cfg):
    """AdamW that decays weight matrices (and embeddings) but not biases or LayerNorm gains."""
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(0.9, 0.99), fused=True)  # one kernel for all

def autocast(device, dtype):
    """bfloat16 autocast where the chip has fast bfloat16 matmuls (dtype 'auto'), else plain float32."""
    if dtype == "auto":  # on a CPU only where oneDNN has native bfloat16 kernels (AVX512-BF16, AMX)
        cpu_bf16 = device == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported()
        dtype = "bfloat16" if (torch.cuda.is_bf16_supported() if device == "cuda" else cpu_bf16) else "float32"
    return torch.autocast(device, torch.bfloat16, enabled=dtype == "bfloat16")

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

def save_checkpoint(path, model, optimizer, cfg, tokenizer, step, best_val, history):
    """Tensors and plain values only, written to a temp file and renamed: never half-written."""
    torch.save(dict(model=model.state_dict(), optimizer=optimizer.state_dict(), config=dataclasses.asdict(cfg),
                    vocab=tokenizer.chars, step=step, best_val_loss=best_val, history=history), path + ".tmp")
    os.replace(path + ".tmp", path)

def load_checkpoint(path):
    """Read a checkpoint with weights_only=True, so that loading one can never run code."""
    if not os.path.exists(path):
        fail(f"no checkpoint at {path} to resume from; train one first (drop --init_from=resume) or set --out_dir")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        assert {"model", "optimizer", "config", "vocab", "step", "best_val_loss", "history"} <= ckpt.keys()
    except Exception as e:  # not a zip, truncated, code inside (refused), missing keys
        fail(f"{path} is not a readable checkpoint ({type(e).__name__}); delete it or pick another --out_dir")
    return ckpt

def plot_losses(history, path):
    """Train and val loss against step, saved as a PNG (a Figure needs no display)."""
    from matplotlib.figure import Figure
    ax = (fig := Figure(figsize=(6, 4))).subplots()
    for split in ("train", "val"):
        ax.plot(history["step"], history[split], label=split)
    ax.set(xlabel="step", ylabel="loss", title="cross-entropy loss")
    ax.legend(), fig.savefig(path, dpi=100)

def train(model, optimizer, splits, cfg, tokenizer, ctx, step, best_val, history):
    """Sample a batch, step the optimizer; every eval_interval steps log, plot and keep the best model."""
    device, ckpt_path = next(model.parameters()).device, os.path.join(cfg.out_dir, "ckpt.pt")
    history = history or dict(step=[], train=[], val=[])  # loss estimates so far, for loss.png
    t0, start, train_time, tokens = time.time(), step, 1e-9, 0
    try:
        while True:
            if step % cfg.eval_interval == 0 or step == cfg.max_iters:
                losses = estimate_loss(model, splits, cfg, ctx)
                for key, value in dict(step=step, **losses).items():
                    history[key].append(value)
                elapsed = time.time() - t0
                eta = elapsed / max(1, step - start) * (cfg.max_iters - step)  # seconds, at the pace so far
                print(f"step {step:5d} | train {losses['train']:.4f} | val {losses['val']:.4f} | "
                      f"{tokens / train_time:6.0f} tok/s | {elapsed:5.0f}s elapsed | ETA {eta:5.0f}s", flush=True)
                if losses["val"] < best_val:
                    best_val = losses["val"]
                    save_checkpoint(ckpt_path, model, optimizer, cfg, tokenizer, step, best_val, history)
                plot_losses(history, os.path.join(cfg.out_dir, "loss.png"))
                train_time, tokens = 1e-9, 0
            if step >= cfg.max_iters:
                return best_val
            t = time.time()
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, cfg)
            x, y = get_batch(splits["train"], cfg.batch_size, cfg.block_size)  # (B, T), (B, T)
            with ctx:
                _, loss = model(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            if not math.isfinite(loss.item()):
                fail(f"the loss became {loss.item()} at step {step}; lower --learning_rate ({ckpt_path} is kept)")
            optimizer.step()
            step, tokens, train_time = step + 1, tokens + x.numel(), train_time + time.time() - t
    except KeyboardInterrupt:
        save_checkpoint(ckpt_path, model, optimizer, cfg, tokenizer, step, best_val, history)
        print(f"\ninterrupted at step {step}: saved {ckpt_path}; continue with: python gpt.py --init_from=resume"
              f" --out_dir={cfg.out_dir}", file=sys.stderr)
        raise SystemExit(130)

def pick_device(name):
    """The requested device, or for 'auto' the best one present: cuda, then mps, then cpu."""
    has = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available(), "cpu": True}
    if not has.get(name, True):
        fail(f"--device={name} but PyTorch finds no {name.upper()} device here; use --device=auto or --device=cpu")
    return next(d for d in has if has[d]) if name == "auto" else name

def make_config(flags, device, ckpt, ckpt_path):
    """The run's settings: a checkpoint's when resuming, else the defaults (or LAPTOP), with the flags on top."""
    if ckpt:
        for name in [n for n in SHAPE_FIELDS if n in flags and flags[n] != ckpt["config"][n]]:
            fail(f"--{name}={flags[name]} but {ckpt_path} has {name}={ckpt['config'][name]}; drop the flag or "
                 "use another --out_dir")
        return Config(**{**ckpt["config"], **flags})
    if device == "cuda" or any(name in flags for name in SIZE_FLAGS):
        return Config(**flags)
    cfg = Config(**{**LAPTOP, **flags})
    print(f"no CUDA GPU: training a laptop-sized model ({cfg.n_layer} layers, {cfg.n_embd} channels, context "
          f"{cfg.block_size}, {cfg.max_iters} steps); any size flag (e.g. --n_layer=6) gives the lecture's full model")
    return cfg

def main(argv=None):
    """Parse flags, load the text, build (or resume) a model, train it, and print a sample."""
    flags = parse_args(Config, argv)
    device = pick_device(flags.get("device", Config.device))
    ckpt_path = os.path.join(flags.get("out_dir", Config.out_dir), "ckpt.pt")
    ckpt = load_checkpoint(ckpt_path) if flags.get("init_from") == "resume" else None
    check_config(cfg := make_config(flags, device, ckpt, ckpt_path))
    torch.manual_seed(cfg.seed)
    tokenizer = CharTokenizer(ckpt["vocab"]) if ckpt else None
    if train_more := ckpt is None or ckpt["step"] < cfg.max_iters:  # resuming with --max_iters=0 only samples
        text = load_text(DEFAULT_INPUT if cfg.input == Config.input else cfg.input)
        if tokenizer and tokenizer.chars != sorted(set(text)):
            fail(f"{cfg.input} has other characters than the text {ckpt_path} was trained on; resume with that text")
        tokenizer = tokenizer or CharTokenizer.from_text(text)
        splits = split_data(text, tokenizer, cfg.block_size)
    if unknown := sorted(set(cfg.prompt) - set(tokenizer.chars)):
        fail(f"the prompt has characters outside the vocabulary: {''.join(unknown)!r}; remove them from --prompt")
    model = GPT(cfg := dataclasses.replace(cfg, vocab_size=len(tokenizer.chars))).to(device)
    optimizer = make_optimizer(model, cfg)
    try:
        if ckpt:
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
    except (RuntimeError, ValueError, KeyError) as e:
        fail(f"{ckpt_path} does not fit this model ({str(e).splitlines()[0][:80]}); delete it or use another --out_dir")
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters on {device}")
    ctx = autocast(device, cfg.dtype)
    if train_more:
        os.makedirs(cfg.out_dir, exist_ok=True)
        resume = (ckpt["step"], ckpt["best_val_loss"], ckpt["history"]) if ckpt else (0, float("inf"), None)
        train(model, optimizer, splits, cfg, tokenizer, ctx, *resume)
        model.load_state_dict((ckpt := load_checkpoint(ckpt_path))["model"])  # sample from the best model, not the last
    idx = torch.tensor([tokenizer.encode(cfg.prompt) or [0]], dtype=torch.long, device=device)  # (1, T)
    with ctx:
        out = model.eval().generate(idx, cfg.max_new_tokens, cfg.temperature, cfg.top_k or None)  # (1, T + new)
    print(sample := tokenizer.decode(out[0].tolist()))
    return dict(model=model, config=cfg, best_val_loss=ckpt["best_val_loss"], sample=sample)

if __name__ == "__main__":
    main()
