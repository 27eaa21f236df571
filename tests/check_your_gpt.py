"""Check your own GPT: `python tests/check_your_gpt.py PATH` checks a file typed along with the
lecture "Let's build GPT" (a .py file, or an .ipynb as Jupyter or Colab saves it) without training
it, and names each mistake with the video chapter that explains it.

How: a second Python runs the file in a temporary folder, on the CPU, with a made-up input.txt,
its hyperparameters shrunk, its training loop cut to one step and its sampling left out; it finds
the model by what it does (forward(idx, targets=None) -> (logits, loss), and generate), works out
which stage of the video the file has reached, and runs every check of behaviour that applies.
Exit status: 0 every check that applies passes, 1 one fails, 2 the file cannot be checked."""
import argparse
import ast
import dataclasses
import faulthandler
import inspect
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
import types

TIME_LIMIT = 10.0  # seconds the learner's file may take to run from the top (with one step)
CHECKS_LIMIT = 60.0  # seconds all the checks together may take
VOCAB = 65  # distinct characters of Tiny Shakespeare, and of the stand-in input.txt
LECTURE_PARAMETERS = 10_788_929  # the lecture's final gpt.py at its own sizes, vocabulary 65

# the names a hyperparameter goes by in learners' files: the first is the lecture's
ALIASES = {
    "block_size": ("block_size", "context_length", "context_size", "ctx_len", "seq_len"),
    "n_embd": ("n_embd", "n_embed", "n_embedding", "embed_dim", "d_model", "embedding_dim"),
    "n_head": ("n_head", "n_heads", "num_heads"),
    "n_layer": ("n_layer", "n_layers", "num_layers"),
    "batch_size": ("batch_size",),
    "max_iters": ("max_iters", "max_steps", "num_steps", "train_steps"),
    "eval_iters": ("eval_iters",),
    "eval_interval": ("eval_interval",),
    "max_new_tokens": ("max_new_tokens",),
    "device": ("device",),
    "learning_rate": ("learning_rate", "lr"),  # read, not shrunk: the memorising uses it
}
# tiny sizes for the checks: 4 heads of 12 channels tell 1/sqrt(12) from 1/sqrt(48)
SHRUNK = dict(block_size=8, n_embd=48, n_head=4, n_layer=2, batch_size=4, max_iters=1,
              eval_iters=1, eval_interval=1, max_new_tokens=3, device="cpu")
LECTURE = dict(block_size=256, n_embd=384, n_head=6, n_layer=6)  # the final gpt.py's sizes

# the video's chapter titles, as the notebooks name them
BIGRAM = "simplest baseline: bigram language model, loss, generation"
TRAINING = "training the bigram model"
SCRIPT = "port our code to a script"
SOFTMAX = "version 3: adding softmax"
CRUX = "THE CRUX OF THE VIDEO: version 4: self-attention"
NOTE6 = 'note 6: "scaled" self-attention. why divide by sqrt(head_size)'
POSITIONS = "positional encoding"
ONE_HEAD = "inserting a single self-attention block to our network"
HEADS = "multi-headed self-attention"
FEED_FORWARD = "feedforward layers of transformer block"
RESIDUAL = "residual connections"
LAYERNORM = "layernorm (and its relationship to our previous batchnorm)"
SCALING = "scaling up the model! creating a few variables. adding dropout"

STAGES = [  # (name, the chapter that brings it), in the video's order
    ("bigram", BIGRAM),
    ("positions", POSITIONS),
    ("one head", ONE_HEAD),
    ("several heads", HEADS),
    ("feed-forward", FEED_FORWARD),
    ("blocks and residuals", RESIDUAL),
    ("LayerNorm", LAYERNORM),
    ("dropout", SCALING),
    ("the scaled model", SCALING),
]
STAGE = {name: number for number, (name, _) in enumerate(STAGES)}


def chapters(*titles):
    """The closing words of a failure: the chapter or chapters that explain it."""
    quoted = " and ".join(f'"{title}"' for title in titles)
    return f"(chapter{'s' if len(titles) > 1 else ''} {quoted})"


# ---------------------------------------------------------------------- reading the learner's file
class CannotCheck(Exception):
    """The file cannot be checked: the message is the one line the learner reads."""


def read_code(path):
    """The file's Python code and, for a notebook, the (cell, line) each line came from."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise CannotCheck(f"{path}: no such file")
    except IsADirectoryError:
        raise CannotCheck(f"{path} is a folder: give the .py or .ipynb file you typed")
    except UnicodeDecodeError:
        raise CannotCheck(f"{path} is not UTF-8 text: give the .py or .ipynb file you typed")
    if not text.strip():
        raise CannotCheck(f"{os.path.basename(path)} is empty: there is nothing to check yet")
    if not path.endswith(".ipynb"):
        return text, None
    try:
        cells = json.loads(text)["cells"]
    except (ValueError, KeyError, TypeError):
        raise CannotCheck(f"{os.path.basename(path)} is not a notebook as Jupyter saves it")
    lines = []
    origin = []  # origin[k]: (code cell number, line in that cell) of the script's line k + 1
    code_cells = [cell for cell in cells if cell.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, start=1):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        cell_lines = source.splitlines()
        first = cell_lines[0].strip() if cell_lines else ""
        if first.startswith("%%") and not first.startswith(("%%time", "%%capture")):
            cell_lines = []  # %%bash, %%writefile, ...: not Python
        for k, line in enumerate(cell_lines, start=1):
            stripped = line.lstrip()
            if stripped.startswith(("!", "%")):  # shell and magic lines are Jupyter's, not Python
                line = line[: len(line) - len(stripped)] + "pass"
            lines.append(line)
            origin.append((number, k))
        lines.append("")
        origin.append((number, len(cell_lines) + 1))
    if not "".join(lines).strip():
        raise CannotCheck(f"{os.path.basename(path)} has no code cells: nothing to check yet")
    return "\n".join(lines) + "\n", origin


def where(path, origin, line):
    """'file.py, line 12' or 'notebook.ipynb, code cell 3, line 2': a place the learner finds."""
    name = os.path.basename(path)
    if origin is None or not 1 <= line <= len(origin):
        return f"{name}, line {line}"
    cell, cell_line = origin[line - 1]
    return f"{name}, code cell {cell}, line {cell_line}"


def parse(path):
    """The code, its syntax tree and the line origins; a file that does not parse: one line."""
    code, origin = read_code(path)
    try:
        tree = ast.parse(code, filename=path)
    except SyntaxError as e:
        place = where(path, origin, e.lineno or 1)
        raise CannotCheck(f"{place}: SyntaxError: {e.msg}; Python cannot read the file from "
                          "there, so nothing in it can run yet")
    return code, tree, origin


# -------------------------------------------------------------- running it without training it
def top_level(body):
    """The statements that run when the file runs: the module's, with if/for/with/try bodies."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from top_level(getattr(node, field, []))
        for handler in getattr(node, "handlers", []):
            yield from top_level(handler.body)


def calls_method(node, name):
    """Whether node holds a call of .name(...) outside any function or class it defines."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Call) and isinstance(item.func, ast.Attribute):
            if item.func.attr == name:
                return True
        for child in ast.iter_child_nodes(item):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.append(child)
    return False


class Shrink:
    """Rewrites the file: tiny hyperparameters, the training loops once, no sampling at the top."""

    def __init__(self):
        self.written = {}  # canonical hyperparameter name -> the value the file wrote
        self.sample_line = None  # the first top-level line that calls generate
        self.eval_lines = []  # top-level lines that call .eval()
        self.alias = {name: canonical for canonical, names in ALIASES.items() for name in names}

    def rewrite(self, tree):
        """The tree, changed in place where it runs at the top level."""
        for node in list(top_level(tree.body)):
            if calls_method(node, "eval") and not hasattr(node, "body"):
                self.eval_lines.append(node.lineno)
        self.visit_body(tree)
        ast.fix_missing_locations(tree)
        return tree

    def visit_body(self, node):
        """Rewrites the statements of one body and of the bodies inside it, not of functions."""
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if statements is None:
                continue
            setattr(node, field, [self.statement(s) for s in statements])
        for handler in getattr(node, "handlers", []):
            self.visit_body(handler)

    def statement(self, node):
        """One top-level statement, rewritten."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return node
        if not hasattr(node, "body"):
            return self.simple(node)
        if isinstance(node, (ast.For, ast.While)) and calls_method(node, "backward"):
            node = self.once(node)
        self.visit_body(node)
        return node

    def simple(self, node):
        """A statement without a body: a hyperparameter shrunk, a sampling line left out."""
        if calls_method(node, "generate"):
            if self.sample_line is None:
                self.sample_line = node.lineno
            return ast.copy_location(ast.Pass(), node)
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        if isinstance(target, ast.Name) and target.id in self.alias:
            canonical = self.alias[target.id]
            try:
                self.written[canonical] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError):
                self.written[canonical] = None  # an expression: not a size the file wrote
            if canonical in SHRUNK:
                node.value = ast.copy_location(ast.Constant(SHRUNK[canonical]), node.value)
        return node

    def once(self, loop):
        """The training loop, run for its first step only: what comes after it still runs."""
        if isinstance(loop, ast.For):
            loop.iter = ast.Call(ast.Name("_checker_first", ast.Load()), [loop.iter], [])
            return loop
        first = ast.Call(ast.Name("_checker_first_time", ast.Load()),
                         [ast.Constant(loop.lineno)], [])
        loop.test = ast.BoolOp(ast.And(), [first, loop.test])
        return loop


def checker_first(iterable):
    """The first item of an iterable: a training loop's first step."""
    for item in iterable:
        yield item
        return


SEEN_LOOPS = set()


def checker_first_time(line):
    """True the first time a while loop asks, False after: one step of a while loop."""
    if line in SEEN_LOOPS:
        return False
    SEEN_LOOPS.add(line)
    return True


def stand_in_text():
    """About 20,000 characters of made-up verse with the 65 characters of Tiny Shakespeare."""
    rng = random.Random(1337)
    words = ("the king and queen of this fair land shall speak no more to me what say you my "
             "lord good night sweet prince here comes our noble friend let us go hence").split()
    lines = []
    while sum(len(line) for line in lines) < 20000:
        name = rng.choice(words).upper()
        speech = " ".join(rng.choice(words) for _ in range(rng.randint(4, 10)))
        lines.append(f"{name}:\n{speech.capitalize()}{rng.choice(',.;:!?')}\n")
    every = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "\n".join(lines) + "\nZounds, Jaques: 3 $ & Quixote's-vex!\n" + every + "\n"


def learner_frame(tb_or_stack, path):
    """The line of the innermost frame that belongs to the learner's file, or None."""
    frames = traceback.extract_tb(tb_or_stack) if tb_or_stack is not None else []
    lines = [frame.lineno for frame in frames if frame.filename == path]
    return lines[-1] if lines else None


def describe(error, path, origin):
    """The learner's exception as one line: their file and line number, the type and message."""
    line = learner_frame(error.__traceback__, path)
    message = str(error).strip().splitlines()[0].rstrip(".") if str(error).strip() else ""
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    if line is None:
        return text, None
    return text, where(path, origin, line)


def needs_cuda(error):
    """Whether an exception is what torch raises when code asks for a GPU that is not there."""
    text = str(error)
    return "CUDA" in text or "NVIDIA" in text or "cuda" in text


def run_learner(path, code, tree, origin):
    """Runs the rewritten file as a module named 'learner'; returns it and what Shrink saw."""
    shrink = Shrink()
    tree = shrink.rewrite(tree)
    module = types.ModuleType("learner")
    module.__file__ = path
    module._checker_first = checker_first
    module._checker_first_time = checker_first_time
    sys.modules["learner"] = module
    compiled = compile(tree, path, "exec")
    try:
        exec(compiled, module.__dict__)
    except SystemExit as e:
        line = learner_frame(e.__traceback__, path)
        place = where(path, origin, line) if line else os.path.basename(path)
        raise CannotCheck(f"{place}: your file exits there (SystemExit {e.code}) before it "
                          "defines everything, so it cannot be checked")
    except Exception as e:
        text, place = describe(e, path, origin)
        place = place or os.path.basename(path)
        if isinstance(e, FileNotFoundError):
            raise CannotCheck(f"{place}: {text}; the checker gives your file one text, "
                              "input.txt in the folder it runs in, as the lecture names it")
        if needs_cuda(e):
            raise CannotCheck(f"{place}: your file needs a GPU there ({text}); the checker runs "
                              "on the CPU: pick the device with device = 'cuda' if "
                              "torch.cuda.is_available() else 'cpu' and move tensors with "
                              f".to(device) {chapters(SCRIPT)}")
        raise CannotCheck(f"{place}: {text}; your file stops there when it runs from the top, "
                          "so it cannot be checked")
    return module, shrink


# ------------------------------------------------------------------------------ finding the model
def is_model_class(value):
    """Whether value is an nn.Module class with forward and generate."""
    import torch.nn as nn
    if not isinstance(value, type) or not issubclass(value, nn.Module):
        return False
    return callable(getattr(value, "generate", None)) and value.forward is not nn.Module.forward


def find_dataclass(namespace):
    """The dataclass in the learner's namespace that holds model sizes (a GPTConfig), or None."""
    sizes = {name for names in ALIASES.values() for name in names} | {"vocab_size"}
    found = None
    for value in namespace.values():
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            fields = {f.name for f in dataclasses.fields(value)}
            if len(fields & sizes) >= 2:
                found = value
    return found


def with_sizes(config, sizes):
    """A copy of a config dataclass instance with the sizes set where it has those fields."""
    fields = {f.name for f in dataclasses.fields(config)}
    changes = {"vocab_size": VOCAB} if "vocab_size" in fields else {}
    for canonical, value in sizes.items():
        for name in ALIASES.get(canonical, ()):
            if name in fields:
                changes[name] = value
    return dataclasses.replace(config, **changes)


class Builder:
    """Makes a fresh model at given sizes, the way the learner's file makes one."""

    def __init__(self, module, cls, call=None):
        self.module = module
        self.cls = cls
        self.call = call  # the top-level call that made the file's model, if there is one
        self.config_class = find_dataclass(vars(module))

    def set_globals(self, sizes):
        """Sets the module's hyperparameters, which lecture-style classes read at run time."""
        namespace = vars(self.module)
        for canonical, value in sizes.items():
            for name in ALIASES.get(canonical, ()):
                if name in namespace:
                    namespace[name] = value

    def argument(self, value, sizes):
        """An argument of the file's own call, with a config dataclass resized."""
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return with_sizes(value, sizes)
        return value

    def build(self, sizes, seed=1337):
        """A fresh model: the file's call evaluated again, or the class called with sizes."""
        import torch
        self.set_globals(sizes)
        torch.manual_seed(seed)
        namespace = vars(self.module)
        if self.call is not None:
            func = eval(compile(ast.Expression(self.call.func), self.module.__file__, "eval"),
                        namespace)
            args = [self.evaluate(a, sizes) for a in self.call.args]
            kwargs = {k.arg: self.evaluate(k.value, sizes) for k in self.call.keywords}
            return func(*args, **kwargs)
        return self.cls(*self.class_arguments(sizes))

    def evaluate(self, node, sizes):
        """One argument of the file's call, evaluated in the file's namespace."""
        expression = ast.Expression(node)
        ast.fix_missing_locations(expression)
        value = eval(compile(expression, self.module.__file__, "eval"), vars(self.module))
        return self.argument(value, sizes)

    def class_arguments(self, sizes):
        """Arguments for the model class's __init__, by their names, or a config dataclass."""
        values = dict(sizes, vocab_size=VOCAB)
        alias = {name: canonical for canonical, names in ALIASES.items() for name in names}
        arguments = []
        parameters = list(inspect.signature(self.cls.__init__).parameters.values())[1:]
        for parameter in parameters:
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            name = alias.get(parameter.name, parameter.name)
            if name in values:
                arguments.append(values[name])
            elif self.config_class is not None and parameter.default is parameter.empty:
                arguments.append(with_sizes(self.config_class(), sizes))
            elif parameter.default is parameter.empty:
                raise CannotCheck(f"cannot make your model: {self.cls.__name__}.__init__ needs "
                                  f"'{parameter.name}', which the checker cannot guess; make "
                                  "the model at the top level of your file, as the lecture does")
        return arguments

    def written(self, shrink):
        """The sizes the file wrote: its hyperparameters, or its config dataclass's values."""
        wanted = list(LECTURE) + ["learning_rate"]
        sizes = {k: v for k, v in shrink.written.items() if k in wanted}
        config = None
        if self.call is not None:
            for node in list(self.call.args) + [k.value for k in self.call.keywords]:
                value = self.evaluate(node, {})
                if dataclasses.is_dataclass(value) and not isinstance(value, type):
                    config = value
        elif self.config_class is not None:
            try:
                config = self.config_class()
            except TypeError:
                config = None
        if config is not None:
            for canonical in wanted:
                for name in ALIASES[canonical]:
                    if hasattr(config, name):
                        sizes[canonical] = getattr(config, name)
        return sizes


def find_model(module, tree, path):
    """The Builder of the learner's model: found by what it does, not by its name."""
    import torch.nn as nn
    namespace = vars(module)
    instances = [v for v in namespace.values()
                 if isinstance(v, nn.Module) and callable(getattr(v, "generate", None))]
    made = []  # (line, call, class) for top-level calls that made a model
    for node in top_level(tree.body):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        call = node.value
        if not isinstance(call, ast.Call):
            continue
        while isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call):
            call = call.func.value  # GPTLanguageModel().to(device): the inner call makes it
        try:
            func = eval(compile(ast.Expression(call.func), path, "eval"), namespace)
        except Exception:
            continue
        if is_model_class(func) and any(isinstance(i, func) for i in instances):
            made.append((node.lineno, call, func))
    if made:
        line, call, cls = max(made, key=lambda item: item[0])
        return Builder(module, cls, call)
    classes = [v for v in namespace.values()
               if is_model_class(v) and v.__module__ == module.__name__]
    classes += [type(i) for i in instances if type(i) not in classes]
    if not classes:
        raise CannotCheck(f"{os.path.basename(path)} defines no model yet: the checker looks for "
                          "an nn.Module whose forward(idx, targets=None) returns (logits, loss) "
                          f"and that has generate(idx, max_new_tokens) {chapters(BIGRAM)}")
    lines = {cls: 0 for cls in classes}  # where each is defined: the last one is the latest
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for cls in classes:
                if cls.__name__ == node.name and cls.__module__ == module.__name__:
                    lines[cls] = node.lineno
    return Builder(module, max(classes, key=lambda cls: lines[cls]))


# ------------------------------------------------------------------------- watching a forward pass
class Probe:
    """Watches forward passes: attention maps, activations, norms, arange calls, module nesting."""

    def __init__(self, model, path):
        self.model = model
        self.path = path
        self.stack = []  # the modules whose forward is running, outermost first
        self.attention = []  # one dict per attention map computed (softmax or fused kernel)
        self.linears = []  # (owner module, input width, output) of every nn.Linear call
        self.inside = {}  # id(module) -> the kinds of event seen while it ran
        self.norm_outputs = []  # (output, ids of the modules running) of every layer norm
        self.returns_norm = set()  # ids of modules whose output is a norm made inside them
        self.aranges = []  # learner lines that made torch.arange without device=
        self.training = []  # model.training at each call of the model
        self.busy = False  # inside a patched function already (F.softmax calls Tensor.softmax)
        self.T = None  # the length of the input: scores of shape (..., T, T) are attention

    def __enter__(self):
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        self.saved = []
        for owner in (F, torch, torch.Tensor):
            self.patch(owner, "softmax", self.softmax)
        self.patch(F, "scaled_dot_product_attention", self.fused)
        for owner, name in ((F, "relu"), (F, "gelu"), (F, "silu"), (F, "leaky_relu"),
                            (torch, "relu"), (torch, "tanh"), (torch.Tensor, "relu")):
            self.patch(owner, name, self.event("activation"))
        self.patch(F, "dropout", self.event("dropout"))
        self.patch(F, "layer_norm", self.norm)
        self.patch(torch, "arange", self.arange)
        self.handles = []
        for module in self.model.modules():
            self.handles.append(module.register_forward_pre_hook(self.enter))
            self.handles.append(module.register_forward_hook(self.leave))
        self.Linear = nn.Linear
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        for handle in self.handles:
            handle.remove()
        return False

    def patch(self, owner, name, make):
        """Replaces owner.name by a wrapper that records a call and then makes it."""
        original = getattr(owner, name)
        self.saved.append((owner, name, original))
        setattr(owner, name, make(original))

    def enter(self, module, inputs):
        """A module's forward starts: push it; the model itself also records its mode."""
        if module is self.model:
            self.stack = []
            self.training.append(module.training)
        self.stack.append(module)

    def leave(self, module, inputs, output):
        """A module's forward ends: note a Linear's output or a norm returned, then pop it."""
        if isinstance(module, self.Linear) and len(self.stack) >= 2:
            self.linears.append((self.stack[-2], module.in_features, output.detach()))
        for made, running in self.norm_outputs:
            if output is made and id(module) in running:
                self.returns_norm.add(id(module))
        if self.stack and self.stack[-1] is module:
            self.stack.pop()

    def seen(self, kind):
        """Records that an event of this kind happened inside every module now running."""
        for module in self.stack:
            self.inside.setdefault(id(module), set()).add(kind)

    def learner_line(self):
        """The line of the learner's file that made the call being recorded, or None."""
        lines = [f.lineno for f in traceback.extract_stack() if f.filename == self.path]
        return lines[-1] if lines else None

    def guarded(self, original, record):
        """A wrapper that records (once, not again in nested patched calls) and then calls."""
        def wrapper(*args, **kwargs):
            if self.busy:
                return original(*args, **kwargs)
            self.busy = True
            try:
                out = original(*args, **kwargs)
                record(args, kwargs, out)
            finally:
                self.busy = False
            return out
        return wrapper

    def event(self, kind):
        """A maker of wrappers that only note that an event of this kind happened."""
        def record(args, kwargs, out):
            self.seen(kind)

        def make(original):
            return self.guarded(original, record)
        return make

    def softmax(self, original):
        """Records a softmax over a (..., T, T) tensor as an attention map."""
        def record(args, kwargs, out):
            scores = args[0]
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            shape = tuple(scores.shape)
            if len(shape) < 3 or shape[-1] != self.T or shape[-2] != self.T or dim is None:
                return
            self.seen("attention")
            self.attention.append(dict(
                kind="softmax", scores=scores.detach().clone(), weights=out.detach(),
                dim=dim % len(shape), line=self.learner_line(), owner=self.owner(),
                heads=shape[1] if len(shape) == 4 else 1, linears=len(self.linears)))
        return self.guarded(original, record)

    def owner(self):
        """The innermost module running now."""
        return self.stack[-1] if self.stack else None

    def fused(self, original):
        """Records F.scaled_dot_product_attention: its scale and its causal mask."""
        def record(args, kwargs, out):
            query = args[0] if args else kwargs["query"]
            self.seen("attention")
            causal = kwargs.get("is_causal", args[4] if len(args) > 4 else False)
            mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            self.attention.append(dict(
                kind="fused", scale=kwargs.get("scale"), causal=causal, mask=mask,
                head_size=query.shape[-1], heads=query.shape[1] if query.dim() == 4 else 1,
                line=self.learner_line(), owner=self.owner(), linears=len(self.linears)))
        return self.guarded(original, record)

    def norm(self, original):
        """Records a layer norm and its output, to tell pre-norm from post-norm."""
        def record(args, kwargs, out):
            self.seen("norm")
            self.norm_outputs.append((out, {id(m) for m in self.stack}))
        return self.guarded(original, record)

    def arange(self, original):
        """Records torch.arange made by the learner's forward without device=."""
        def record(args, kwargs, out):
            if "device" in kwargs or not self.stack:
                return
            line = self.learner_line()
            if line is not None:
                self.aranges.append(line)
        return self.guarded(original, record)


# ---------------------------------------------------------------------------------------- checks
class Failed(Exception):
    """A check failed: the message is the one sentence the learner reads."""


class Skipped(Exception):
    """A check could not run for a reason that an earlier line already gives."""


def default_dtype(dtype):
    """A context in which new tensors are made in dtype."""
    import contextlib
    import torch

    @contextlib.contextmanager
    def context():
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            yield
        finally:
            torch.set_default_dtype(previous)
    return context()


def close(value, expected, tolerance=2e-3):
    """Whether value is expected within a relative tolerance."""
    return abs(value - expected) <= tolerance * abs(expected)


class Session:
    """The checks of one learner's model at the shrunk sizes, and the tips."""

    def __init__(self, path, origin, code, tree, module, builder, shrink):
        self.path = path
        self.origin = origin
        self.lines = code.splitlines()
        self.tree = tree
        self.module = module
        self.builder = builder
        self.shrink = shrink
        self.T = SHRUNK["block_size"]
        self.needs_targets = False  # forward has no targets=None: checks pass targets anyway
        self.generate_ready = True  # model(idx) works, so generate can be tried
        self.probabilities = False  # the model returns probabilities where logits belong
        self.samples_with_dropout = False  # generate leaves the model in training mode
        self.precise_run = None

    # ----------------------------------------------------------------------------- helpers
    def fresh(self, seed=1337):
        """A new model at the shrunk sizes, made the way the file makes it."""
        return self.builder.build(SHRUNK, seed)

    def tokens(self, rows, length, seed=0):
        """A (rows, length) batch of random character ids."""
        import torch
        generator = torch.Generator().manual_seed(seed)
        return torch.randint(VOCAB, (rows, length), generator=generator)

    def forward(self, model, idx, targets=None):
        """(logits as (B, T, V), loss) from the model, with targets if its forward needs them."""
        import torch
        if targets is None and self.needs_targets:
            targets = torch.zeros_like(idx)
        out = model(idx) if targets is None else model(idx, targets)
        logits, loss = out
        return logits.reshape(idx.shape[0], idx.shape[1], -1), loss

    def place(self, error):
        """Where in the learner's file an exception came from, and what it says, in one line."""
        text, place = describe(error, self.path, self.origin)
        if place is None:
            raise error
        return f"{place} raised {text}"

    def source(self, line):
        """The text of a line of the learner's code (1-based), or ''."""
        return self.lines[line - 1] if line and 1 <= line <= len(self.lines) else ""

    # ------------------------------------------------------------------------------- stage
    def find_stage(self, model):
        """The stage of the video the model has reached, and a probe of one forward pass."""
        import torch.nn as nn
        model.eval()
        idx = self.tokens(2, self.T)
        try:
            model(idx)
        except TypeError as e:
            self.needs_targets = "positional argument" in str(e)  # checked, and said, below
        except Exception:
            pass  # model(idx, targets) below says what is wrong
        with Probe(model, self.path) as probe:
            probe.T = self.T
            try:
                out = model(idx, self.tokens(2, self.T, seed=1))
            except Exception as e:
                text, place = describe(e, self.path, self.origin)
                raise CannotCheck(f"{place or os.path.basename(self.path)}: {text}: "
                                  "model(idx, targets) fails on a batch of 2 x 8 characters, so "
                                  "nothing else can be checked")
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise CannotCheck(f"your model's forward returns {type(out).__name__}, not "
                              f"(logits, loss) as the lecture's does {chapters(BIGRAM)}")
        heads = sum(event["heads"] for event in probe.attention)
        kinds = probe.inside.get(id(model), set())
        stage = STAGE["bigram"]
        if heads == 0 and self.uses_positions(model):
            stage = STAGE["positions"]
        if heads >= 1:
            stage = STAGE["one head"] if heads == 1 else STAGE["several heads"]
        if "activation" in kinds:
            stage = max(stage, STAGE["feed-forward"])
        if self.blocks(model, probe):
            stage = max(stage, STAGE["blocks and residuals"])
        if "norm" in kinds or any(isinstance(m, nn.LayerNorm) for m in model.modules()):
            stage = max(stage, STAGE["LayerNorm"])
        if "dropout" in kinds or any(isinstance(m, nn.Dropout) for m in model.modules()):
            stage = max(stage, STAGE["dropout"])
        written = self.builder.written(self.shrink)
        if stage == STAGE["dropout"] and all(written.get(k) == v for k, v in LECTURE.items()):
            stage = STAGE["the scaled model"]
        return stage, probe

    def uses_positions(self, model):
        """Whether one character repeated gets different logits at different positions."""
        import torch
        idx = torch.full((1, self.T), 5, dtype=torch.long)
        logits = self.forward(model, idx)[0]
        return not torch.allclose(logits[0], logits[0, :1].expand_as(logits[0]))

    def blocks(self, model, probe):
        """The innermost modules inside which both attention and an activation ran."""
        both = {"attention", "activation"}
        holders = [m for m in model.modules()
                   if m is not model and both <= probe.inside.get(id(m), set())]
        return [m for m in holders
                if not any(d in holders for d in m.modules() if d is not m)]

    # ------------------------------------------------------------------------------ checks
    def run(self):
        """Every check that applies at the stage reached, then the tips: a report."""
        model = self.fresh()
        self.stage, self.probe = self.find_stage(model)
        plan = [
            ("the logits are numbers", 0, self.check_finite, BIGRAM),
            ("model(idx) without targets", 0, self.check_without_targets, BIGRAM),
            ("the loss is the cross-entropy of the logits", 0, self.check_loss, BIGRAM),
            (f"the loss at the start is near ln({VOCAB}) = {math.log(VOCAB):.2f}", 0,
             self.check_start, BIGRAM),
            ("inputs shorter than block_size", 0, self.check_short, ONE_HEAD),
            ("generate goes past block_size", 0, self.check_generate, ONE_HEAD),
            ("the future does not leak into the past", STAGE["one head"], self.check_leak, CRUX),
            ("the attention scores are scaled by 1/sqrt(head_size)", STAGE["one head"],
             self.check_scale, NOTE6),
            ("one small batch is memorised", 0, self.check_memorise, TRAINING),
            ("eval mode is deterministic", STAGE["dropout"], self.check_eval, SCALING),
            (f"{LECTURE_PARAMETERS:,} parameters at the lecture's sizes",
             STAGE["the scaled model"], self.check_count, SCALING),
        ]
        results = []
        for name, first, check, chapter in plan:
            if self.stage < first:
                results.append((name, "not yet", f'comes with chapter "{STAGES[first][1]}"'))
                continue
            if results and results[0][1] == "failed":
                results.append((name, "not checked", "it needs logits without NaN first"))
                continue
            try:
                results.append((name, "passed", check()))
            except Failed as e:
                results.append((name, "failed", str(e)))
            except Skipped as e:
                results.append((name, "not checked", str(e)))
            except Exception as e:
                text, place = describe(e, self.path, self.origin)
                if place is None:
                    results.append((name, "not checked", f"the checker could not run it: {text}"))
                else:
                    results.append((name, "failed", f"{place} raised {text} when the checker "
                                    f"called your model for this {chapters(chapter)}."))
        return dict(stage=self.stage, results=results, tips=self.tips(model))

    def check_finite(self):
        """The logits hold no NaN and no infinity."""
        import torch
        model = self.fresh().eval()
        logits = self.forward(model, self.tokens(2, self.T), self.tokens(2, self.T, seed=1))[0]
        if bool(torch.isfinite(logits).all()):
            return "no NaN or infinity in them"
        if self.stage >= STAGE["one head"]:
            raise Failed("your model's logits contain NaN or infinity: a mask filled with -inf "
                         "after the softmax does this; mask the scores before the softmax "
                         f"{chapters(SOFTMAX, CRUX)}.")
        raise Failed(f"your model's logits contain NaN or infinity {chapters(BIGRAM)}.")

    def check_without_targets(self):
        """model(idx) gives (logits (B, T, V), None)."""
        model = self.fresh().eval()
        idx = self.tokens(2, self.T)
        try:
            out = model(idx)
        except TypeError as e:
            if "positional argument" not in str(e):
                raise
            self.needs_targets = True
            self.generate_ready = False
            raise Failed(f"model(idx) raised TypeError ({e}): give forward a default, "
                         "def forward(self, idx, targets=None), and return loss None when no "
                         f"targets come, as generate needs {chapters(BIGRAM)}.")
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            self.generate_ready = False
            raise Failed(f"model(idx) returns {type(out).__name__}, not (logits, None) "
                         f"{chapters(BIGRAM)}.")
        logits, loss = out
        if loss is not None:
            raise Failed(f"model(idx) returns a loss ({loss}) without targets: set loss = None "
                         f"when targets is None {chapters(BIGRAM)}.")
        if tuple(logits.shape) != (2, self.T, VOCAB):
            self.generate_ready = False
            raise Failed(f"model(idx) returns logits of shape {tuple(logits.shape)}, not (B, T, "
                         f"vocab_size) = (2, {self.T}, {VOCAB}): reshape them to (B*T, C) only "
                         f"to compute the loss {chapters(BIGRAM)}.")
        return f"logits (2, {self.T}, {VOCAB}) and loss None"

    def check_loss(self):
        """The loss that forward returns is F.cross_entropy of the logits it returns."""
        import torch
        import torch.nn.functional as F
        model = self.fresh().eval()
        idx = self.tokens(4, self.T)
        targets = self.tokens(4, self.T, seed=1)
        logits, loss = self.forward(model, idx, targets)
        if not torch.is_tensor(loss) or loss.numel() != 1:
            raise Failed(f"model(idx, targets) returns {type(loss).__name__} as its loss, not "
                         f"one number: compute F.cross_entropy(logits, targets) "
                         f"{chapters(BIGRAM)}.")
        flat = logits.reshape(-1, VOCAB).float()
        ce = F.cross_entropy(flat, targets.reshape(-1)).item()
        probabilities = bool((flat >= 0).all()) and torch.allclose(flat.sum(-1), torch.ones(1))
        if probabilities:
            self.probabilities = True
            raise Failed("your model returns probabilities, softmax(logits), where the lecture "
                         "returns logits: F.cross_entropy applies the softmax itself, so give "
                         f"it, and return, the logits {chapters(BIGRAM)}.")
        if close(loss.item(), ce, 1e-4):
            return f"{loss.item():.4f} = F.cross_entropy(logits, targets)"
        soft = F.cross_entropy(F.softmax(flat, dim=-1), targets.reshape(-1)).item()
        if close(loss.item(), soft, 1e-4):
            raise Failed(f"your loss ({loss.item():.4f}) is the cross-entropy of softmax(logits) "
                         f"where it should be that of the logits ({ce:.4f}): F.cross_entropy "
                         "applies the softmax itself, so pass it the logits "
                         f"{chapters(BIGRAM)}.")
        raise Failed(f"your loss ({loss.item():.4f}) is not the cross-entropy of your logits "
                     f"({ce:.4f}): compute F.cross_entropy(logits.view(B*T, C), "
                     f"targets.view(B*T)) {chapters(BIGRAM)}.")

    def check_start(self):
        """Before any training the cross-entropy of the logits is about ln(vocab_size)."""
        import torch.nn.functional as F
        model = self.fresh().eval()
        idx = self.tokens(16, self.T)
        targets = self.tokens(16, self.T, seed=1)
        logits = self.forward(model, idx, targets)[0]
        ce = F.cross_entropy(logits.reshape(-1, VOCAB).float(), targets.reshape(-1)).item()
        uniform = math.log(VOCAB)
        if uniform - 0.3 < ce < uniform + 1.0:
            return f"{ce:.2f} before any training"
        raise Failed(f"before training the loss is {ce:.2f}, far from ln({VOCAB}) = "
                     f"{uniform:.2f}: the first predictions should be nearly uniform, so look "
                     f"at how the logits are made and initialised {chapters(BIGRAM)}.")

    def check_short(self):
        """Inputs shorter than block_size (T = 1 and T = block_size / 2) work."""
        model = self.fresh().eval()
        for length in (1, self.T // 2):
            idx = self.tokens(2, length)
            characters = "1 character" if length == 1 else f"{length} characters"
            with Probe(model, self.path) as probe:
                probe.T = self.T  # a (block_size, block_size) map here: a mask not cut to T
                try:
                    logits = self.forward(model, idx)[0]
                except Exception as e:
                    seen = self.place(e)
                    if probe.attention:
                        raise Failed(f"with an input of {characters}, shorter than block_size "
                                     f"= {self.T}, {seen}: the mask is not cut to the input's "
                                     "length, so the scores grow to block_size; use "
                                     f"self.tril[:T, :T] {chapters(CRUX, ONE_HEAD)}.")
                    raise Failed(f"with an input of {characters}, shorter than block_size = "
                                 f"{self.T}, {seen}: every size made from block_size must be cut "
                                 f"to the input's T {chapters(POSITIONS, ONE_HEAD)}.")
            if logits.shape[:2] != idx.shape:
                raise Failed(f"an input of {characters} gives logits of shape "
                             f"{tuple(logits.shape)} {chapters(BIGRAM)}.")
        return f"T = 1 and T = {self.T // 2} (block_size = {self.T})"

    def check_generate(self):
        """generate makes characters past block_size from a full context."""
        import torch
        if not self.generate_ready:
            raise Skipped("it needs model(idx) without targets to work first")
        model = self.fresh().eval()
        idx = self.tokens(1, self.T)
        new = 3
        try:
            out = model.generate(idx, new)
        except Exception as e:
            seen = self.place(e)
            try:
                self.forward(model, self.tokens(1, self.T + 1))
            except Exception:
                raise Failed(f"generating past block_size = {self.T}, {seen}: generate must "
                             "crop the context to its last block_size characters, idx_cond = "
                             f"idx[:, -block_size:] {chapters(ONE_HEAD)}.")
            raise Failed(f"generating {new} characters after {self.T}, {seen} "
                         f"{chapters(BIGRAM)}.")
        if not torch.is_tensor(out) or tuple(out.shape) != (1, self.T + new):
            shape = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
            raise Failed(f"generate(idx, {new}) with idx of shape (1, {self.T}) returns {shape}, "
                         f"not (1, {self.T + new}): it should return idx with the new characters "
                         f"appended {chapters(BIGRAM)}.")
        if not torch.equal(out[:, :self.T], idx) or out.min() < 0 or out.max() >= VOCAB:
            raise Failed("generate should return the context followed by new character ids "
                         f"from 0 to vocab_size - 1 {chapters(BIGRAM)}.")
        if self.stage >= STAGE["dropout"]:
            model.train()
            with Probe(model, self.path) as probe:
                model.generate(idx, 2)
            self.samples_with_dropout = any(probe.training)
        return f"{new} new characters after a context of block_size = {self.T}"

    def precise(self):
        """A fresh model in eval mode, float64 where it runs so: model, dtype, tolerance."""
        import torch
        if self.precise_run is not None:
            return self.precise_run
        idx = self.tokens(2, self.T)
        for dtype, tolerance in ((torch.float64, 1e-9), (torch.float32, 1e-5)):
            model = self.fresh().eval().to(dtype)
            try:
                with default_dtype(dtype), Probe(model, self.path) as probe:
                    probe.T = self.T
                    logits = self.forward(model, idx)[0]
            except Exception:
                if dtype is torch.float32:
                    raise
                continue
            self.precise_run = (model, dtype, tolerance, idx, logits, probe)
            return self.precise_run

    def check_leak(self):
        """Changing later characters leaves every earlier prediction as it was."""
        import torch
        model, dtype, tolerance, idx, logits, probe = self.precise()
        with default_dtype(dtype):
            again = self.forward(model, idx)[0]
        if not torch.equal(logits, again):
            raise Skipped("in eval mode two passes over the same input give different logits, "
                          "so a leak cannot be told from chance (is dropout on in eval mode?)")
        generator = torch.Generator().manual_seed(2)
        for cut in range(1, self.T):
            other = idx.clone()
            shift = torch.randint(1, VOCAB, other[:, cut:].shape, generator=generator)
            other[:, cut:] = (other[:, cut:] + shift) % VOCAB
            with default_dtype(dtype):
                changed = self.forward(model, other)[0]
            moved = (changed[:, :cut] - logits[:, :cut]).abs().amax(dim=(0, 2))  # (cut,)
            if (moved > tolerance).any():
                position = int((moved > tolerance).nonzero()[0])
                raise Failed(self.leak(probe, cut, position))
        where = "float64" if dtype is torch.float64 else "float32"
        return f"no earlier prediction moves, whichever later characters change ({where})"

    def leak(self, probe, cut, position):
        """The sentence for a leak: what was seen and its likely cause."""
        seen = (f"changing the characters from position {cut} on changed the prediction at "
                f"position {position}")
        for event in probe.attention:
            if event["kind"] == "fused":
                if not event["causal"] and event["mask"] is None:
                    return (f"{seen}: scaled_dot_product_attention runs without a mask; pass "
                            f"is_causal=True {chapters(CRUX)}.")
                continue
            weights = event["weights"]
            rows = weights.sum(-1)
            columns = weights.sum(-2)
            if event["dim"] == weights.dim() - 2 or (
                    not close_all(rows) and close_all(columns)):
                return (f"{seen}: your softmax runs over dim=1 of the (B, T, T) scores, so each "
                        "column sums to 1 and later rows leak into earlier ones; use dim=-1 "
                        f"{chapters(SOFTMAX, CRUX)}.")
            scores = event["scores"]
            upper = scores[..., ~self.lower_mask(scores)]  # what j > i scored
            if bool((upper > -1e4).all()):
                if self.masks_later(event["line"]):
                    return (f"{seen}: your mask comes after the softmax, so each row is still "
                            "normalised over the future; mask the scores with -inf before the "
                            f"softmax {chapters(SOFTMAX, CRUX)}.")
                return (f"{seen}: the scores reach the softmax without the triangular mask; add "
                        "wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf')) before "
                        f"it {chapters(SOFTMAX, CRUX)}.")
        return f"{seen}: something lets the future leak into the past {chapters(CRUX)}."

    def lower_mask(self, scores):
        """A (T, T) boolean mask of the positions a causal head may see: j <= i."""
        import torch
        size = scores.shape[-1]
        return torch.ones(size, size, dtype=torch.bool).tril()

    def masks_later(self, line):
        """Whether the function that runs the softmax on this line masks after it."""
        if line is None:
            return False
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef) and node.lineno <= line <= node.end_lineno:
                later = self.lines[line:node.end_lineno]
                return any(re.search(r"tril|mask", text) for text in later)
        return False

    def check_scale(self):
        """The attention scores carry 1/sqrt(head_size)."""
        model, dtype, tolerance, idx, logits, probe = self.precise()
        if not probe.attention:
            raise Skipped("no attention map of shape (T, T) was found in your forward")
        measured = []
        previous = 0
        for event in probe.attention:
            found = self.measure(event, probe, previous)
            previous = event["linears"]
            if found is not None:
                measured.append(found)
        if not measured:
            raise Skipped("the checker could not find the queries and keys of your attention")
        for scale, head_size, width in measured:
            if close(scale, head_size ** -0.5):
                continue
            if close(scale, width ** -0.5):
                raise Failed(f"your attention scores are scaled by 1/sqrt(n_embd) = 1/sqrt"
                             f"({width}), not 1/sqrt(head_size) = 1/sqrt({head_size}); the video "
                             "made the same slip (C**-0.5 with C = n_embd) and its repository "
                             "later fixed it: the corrected code multiplies by "
                             "k.shape[-1]**-0.5, which keeps each head's scores at unit "
                             f"variance {chapters(NOTE6)}.")
            if close(scale, 1.0):
                raise Failed("your attention scores are not scaled: multiply q @ "
                             "k.transpose(-2, -1) by head_size**-0.5, or the softmax turns "
                             f"peaky as head_size grows {chapters(NOTE6)}.")
            if close(scale, head_size ** 0.5) or close(scale, width ** 0.5):
                raise Failed(f"your attention scores are multiplied by sqrt(head_size) "
                             f"({scale:.3g}) where they should be divided by it: write "
                             f"* head_size**-0.5 {chapters(NOTE6)}.")
            raise Failed(f"your attention scores are scaled by {scale:.4g}, not 1/sqrt(head_size)"
                         f" = 1/sqrt({head_size}) = {head_size ** -0.5:.4g} {chapters(NOTE6)}.")
        head_size = measured[0][1]
        calls = "once" if len(measured) == 1 else f"{len(measured)} times"
        return f"1/sqrt({head_size}), each of the {calls} the model attends"

    def measure(self, event, probe, previous):
        """(scale, head_size, n_embd) of one attention map, or None if not found."""
        if event["kind"] == "fused":
            head_size = event["head_size"]
            scale = event["scale"] if event["scale"] is not None else head_size ** -0.5
            return scale, head_size, head_size * event["heads"]
        scores = event["scores"]
        lower = self.lower_mask(scores)
        wanted = scores[..., lower]
        candidates = []
        for owner, width, output in probe.linears[previous:event["linears"]]:
            for piece in self.pieces(output, scores):
                candidates.append((piece, width))
        for a, width in candidates:
            for b, _ in candidates:
                if a is b or a.shape != b.shape:
                    continue
                product = (a @ b.transpose(-2, -1))[..., lower]
                if product.shape != wanted.shape:
                    continue
                norm = (product * product).sum()
                if norm == 0:
                    continue
                scale = float((wanted * product).sum() / norm)
                error = (wanted - scale * product).abs().max() / wanted.abs().max()
                if error < 1e-5:
                    return scale, a.shape[-1], width
        return None

    def pieces(self, output, scores):
        """A Linear's output laid out as the queries or keys of these scores could be."""
        parts = [output]
        channels = output.shape[-1]
        if channels % 3 == 0:
            parts += list(output.split(channels // 3, dim=-1))  # one Linear for q, k and v
        laid = []
        for part in parts:
            if scores.dim() == 3 and part.dim() == 3:
                laid.append(part)
            elif scores.dim() == 4 and part.dim() == 3 and part.shape[-1] % scores.shape[1] == 0:
                B, T, C = part.shape
                heads = scores.shape[1]
                laid.append(part.view(B, T, heads, C // heads).transpose(1, 2))
        return laid

    def check_memorise(self):
        """A few hundred steps of AdamW memorise one small batch."""
        import torch
        import torch.nn.functional as F
        if self.probabilities:
            raise Skipped("it needs the model to return logits (see above)")
        model = self.fresh().eval()  # eval: no dropout, the batch is learnt as it is
        parameters = [p for p in model.parameters() if p.requires_grad]
        if not parameters:
            raise Failed("your model has no parameters that train: keep layers as attributes, "
                         f"in nn.ModuleList or nn.Sequential {chapters(TRAINING)}.")
        generator = torch.Generator().manual_seed(0)
        rows = 4
        if self.stage == STAGE["bigram"]:  # each character has one successor: a bigram learns it
            successor = torch.randperm(VOCAB, generator=generator)
            columns = [torch.randperm(VOCAB, generator=generator)[:rows]]
            for _ in range(self.T):
                columns.append(successor[columns[-1]])
        else:  # random text, every position's characters distinct across the rows
            columns = [torch.randperm(VOCAB, generator=generator)[:rows]
                       for _ in range(self.T + 1)]
        chunk = torch.stack(columns, dim=1)  # (B, T+1)
        x = chunk[:, :-1].contiguous()  # (B, T) as get_batch makes them: .view works
        y = chunk[:, 1:].contiguous()  # (B, T)
        rate = self.builder.written(self.shrink).get("learning_rate")
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not rate > 0:
            rate = 1e-3  # the lecture's, once attention comes in
        optimizer = torch.optim.AdamW(parameters, lr=rate, weight_decay=0.0)
        steps = 500
        for step in range(steps + 1):
            logits = self.forward(model, x, y)[0]
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
            if bool((logits.argmax(dim=-1) == y).all()):
                return (f"all {rows * self.T} next characters of a {rows} x {self.T} batch "
                        f"predicted after {step} steps at learning_rate = {rate:g}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        right = int((logits.argmax(dim=-1) == y).sum())
        raise Failed(f"after {steps} AdamW steps at your learning_rate = {rate:g} on one batch of "
                     f"{rows} x {self.T} characters the model predicts only {right} of its "
                     f"{rows * self.T} next characters (loss {loss.item():.2f}): if the loss "
                     "stalls, try a smaller learning_rate (the video takes 1e-3 once attention "
                     "comes in); if it does not move, a layer is not an attribute or not in "
                     f"nn.ModuleList, so it never trains {chapters(TRAINING, ONE_HEAD)}.")

    def check_eval(self):
        """In eval mode two passes over the same input give the same logits."""
        import torch
        model = self.fresh().eval()
        idx = self.tokens(2, self.T)
        first = self.forward(model, idx)[0]
        second = self.forward(model, idx)[0]
        if torch.equal(first, second):
            return "two passes give the same logits"
        raise Failed("in eval mode two passes over the same input gave different logits: use "
                     "nn.Dropout modules, which model.eval() turns off, not F.dropout without "
                     f"training=self.training {chapters(SCALING)}.")

    def check_count(self):
        """At the lecture's sizes the model has 10,788,929 parameters."""
        try:
            model = self.builder.build(LECTURE)
        finally:
            self.builder.set_globals(SHRUNK)
        count = sum(p.numel() for p in model.parameters())
        if count == LECTURE_PARAMETERS:
            return "n_embd 384, 6 heads, 6 layers, block_size 256, vocabulary 65"
        hints = {6912: ": 6,912 is what biases on key, query and value add (bias=False)",
                 -768: ": 768 fewer is one LayerNorm, the final ln_f",
                 -887040: ": 887,040 fewer is the projection after the heads, one per block"}
        hint = hints.get(count - LECTURE_PARAMETERS, "")
        raise Failed(f"at the lecture's sizes your model has {count:,} parameters, not "
                     f"{LECTURE_PARAMETERS:,}{hint} {chapters(SCALING)}.")

    # -------------------------------------------------------------------------------- tips
    def tips(self, model):
        """Things that work but differ from the video or fail elsewhere: one sentence each."""
        import torch.nn as nn
        tips = []
        if self.stage >= STAGE["positions"]:
            lines = [line for line in self.probe.aranges
                     if ".to(" not in self.source(line) and "device" not in self.source(line)]
            if lines:
                place = where(self.path, self.origin, lines[0])
                tips.append(f"{place} makes position indices without device=: fine on the "
                            "CPU, an error on a GPU; write torch.arange(T, device=idx.device) "
                            f"{chapters(POSITIONS)}.")
        if self.stage >= STAGE["LayerNorm"]:
            if any(id(m) in self.probe.returns_norm for m in self.blocks(model, self.probe)):
                tips.append("your blocks apply LayerNorm after the residual add (post-norm, as "
                            "in the 2017 paper): this differs from the video, which normalises "
                            "before each sub-layer, x = x + self.sa(self.ln1(x)) "
                            f"{chapters(LAYERNORM)}.")
        dropout = any(isinstance(m, nn.Dropout) and m.p > 0 for m in model.modules())
        sample = self.shrink.sample_line
        if dropout and sample is not None and self.samples_with_dropout:
            if not any(line < sample for line in self.shrink.eval_lines):
                place = where(self.path, self.origin, sample)
                tips.append(f"{place} samples with dropout still on, as the video's file does "
                            "(the model is in training mode after the loop); call model.eval() "
                            f"before generate and every sample uses the whole network "
                            f"{chapters(SCALING)}.")
        return tips


def close_all(sums):
    """Whether every entry of a tensor of sums is 1."""
    import torch
    return bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-6))


# ------------------------------------------------------------------------ the two processes
def child(path, folder, limit):
    """Runs in the second Python: the learner's file, then the checks; writes result.json."""
    stuck = open(os.path.join(folder, "stuck.txt"), "w")
    sys.path[0] = os.path.dirname(path)  # as when the learner runs it: imports beside it work
    sys.argv = [path]
    import torch
    torch.set_num_threads(1)  # tiny models: one thread is fastest, and fair to a busy machine
    torch.compile = identity  # a compiled model would spend minutes compiling
    try:
        code, tree, origin = parse(path)
        faulthandler.dump_traceback_later(limit, exit=True, file=stuck)
        module, shrink = run_learner(path, code, tree, origin)
        faulthandler.cancel_dump_traceback_later()
        with open(os.path.join(folder, "checking"), "w") as f:
            f.write("the file ran; the checks started\n")
        faulthandler.dump_traceback_later(CHECKS_LIMIT, exit=True, file=stuck)
        builder = find_model(module, tree, path)
        report = Session(path, origin, code, tree, module, builder, shrink).run()
    except CannotCheck as e:
        report = dict(error=str(e))
    faulthandler.cancel_dump_traceback_later()
    with open(os.path.join(folder, "result.json"), "w") as f:
        json.dump(report, f)
    return 0


def identity(model, *args, **kwargs):
    """torch.compile's stand-in in the checks: the model as it is."""
    return model


def stuck_line(path, folder, limit):
    """The one line for a second Python that ran out of time: where the learner's file was."""
    with open(os.path.join(folder, "stuck.txt")) as f:
        dump = f.read()
    code, origin = read_code(path)
    lines = [int(n) for name, n in re.findall(r'File "(.*)", line (\d+)', dump) if name == path]
    place = where(path, origin, lines[0]) if lines else os.path.basename(path)
    if os.path.exists(os.path.join(folder, "checking")):
        return (f"{place}: the checks did not finish in {CHECKS_LIMIT:.0f} s; your model was "
                "there, at tiny sizes, when time ran out")
    return (f"{place}: still running after {limit:.0f} s; the checker runs your file from the "
            "top with one training step and no sampling, and something at that line loops or "
            "waits (a sleep, input(), a loop other than the training loop); if it only needs "
            "longer, give it --time-limit 60")


def second_python(path, folder, limit):
    """Runs the checks in a second Python with a time limit; returns its report."""
    with open(os.path.join(folder, "input.txt"), "w", encoding="utf-8") as f:
        f.write(stand_in_text())
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", MPLBACKEND="Agg",
               PYTHONDONTWRITEBYTECODE="1")  # no __pycache__ beside the learner's files
    command = [sys.executable, os.path.abspath(__file__), path, "--child", folder,
               "--time-limit", str(limit)]
    with open(os.path.join(folder, "stderr.txt"), "w") as stderr:
        try:
            subprocess.run(command, cwd=folder, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=stderr,
                           timeout=limit + CHECKS_LIMIT + 30)
        except subprocess.TimeoutExpired:
            return dict(error=f"{os.path.basename(path)}: the checks did not finish in "
                        f"{limit + CHECKS_LIMIT + 30:.0f} s")
    result = os.path.join(folder, "result.json")
    if os.path.exists(result):
        with open(result) as f:
            return json.load(f)
    if os.path.getsize(os.path.join(folder, "stuck.txt")):
        return dict(error=stuck_line(path, folder, limit))
    with open(os.path.join(folder, "stderr.txt")) as f:
        last = [line for line in f.read().splitlines() if line.strip()][-1:]
    return dict(error=f"the checker itself failed ({' '.join(last) or 'no message'}); "
                "please report it with your file")


LABELS = {"passed": "passed ", "failed": "FAILED ", "not yet": "not yet", "not checked": "skipped"}


def show(path, report):
    """The report for a person: the stage, a line per check, tips, a summary. Exit status."""
    stage, chapter = STAGES[report["stage"]]
    print(f'{os.path.basename(path)} has reached the stage "{stage}" (chapter "{chapter}").')
    for name, status, text in report["results"]:
        print(f"  {LABELS[status]}  {name}: {text}")
    for tip in report["tips"]:
        print(f"  tip      {tip}")
    counts = {status: 0 for status in LABELS}
    for name, status, text in report["results"]:
        counts[status] += 1
    parts = [f"{counts['passed']} passed", f"{counts['failed']} failed"]
    if counts["not checked"]:
        parts.append(f"{counts['not checked']} skipped")
    if counts["not yet"]:
        following = STAGES[report["stage"] + 1]
        parts.append(f'{counts["not yet"]} not yet at this stage (next: {following[0]}, chapter '
                     f'"{following[1]}")')
    tips = f"; {len(report['tips'])} tip(s)" if report["tips"] else ""
    print(f"Summary: {', '.join(parts)}{tips}.")
    return 1 if counts["failed"] else 0


def main(argv=None):
    """Checks one file; prints the report; returns the exit status."""
    parser = argparse.ArgumentParser(description="Checks a file typed along with the lecture "
                                     "\"Let's build GPT\" without training it.")
    parser.add_argument("path", help="your .py file, or an .ipynb as Jupyter or Colab saves it")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT,
                        help="seconds your file may take to run from the top (default 10)")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # the folder of a check under way
    args = parser.parse_args(argv)
    path = os.path.abspath(args.path)
    if args.child:
        return child(path, args.child, args.time_limit)
    try:
        parse(path)  # a file that cannot be read or parsed never starts torch
    except CannotCheck as e:
        print(f"cannot check: {e}")
        return 2
    folder = tempfile.mkdtemp(prefix="check_your_gpt_")
    try:
        report = second_python(path, folder, args.time_limit)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if "error" in report:
        print(f"cannot check: {report['error']}")
        return 2
    return show(path, report)


if __name__ == "__main__":
    sys.exit(main())
