"""check_your_gpt.py on learner files of our own: a correct file at each stage of the video
(tests/learner_files) passes every check that applies; each mistake, written from a stage file by
the small edit in VARIANTS, is caught by its own check with its sentence and nothing else; tips are
tips, and bad input is one line; plus the measuring parts against oracles, in-process. The tests
marked slow start a Python per file."""
import ast
import hashlib
import os
import re
import subprocess
import sys
import time

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import check_your_gpt as checker
from conftest import ROOT

CHECKER = os.path.join(ROOT, "tests", "check_your_gpt.py")
LEARNER = os.path.join(ROOT, "tests", "learner_files")
CHECKS = 11  # the checks the report lists, at every stage


def snapshot(folder):
    """Every file of a folder with the hash of its bytes: what a check must leave as it was."""
    hashes = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            hashes[name] = hashlib.sha256(f.read()).hexdigest()
    return hashes


def check(path):
    """Runs the checker on a file as a learner does: exit status and the lines it printed."""
    folder = os.path.dirname(path)
    before = snapshot(folder) if folder != ROOT else None  # the root holds folders and others' work
    start = time.perf_counter()
    result = subprocess.run([sys.executable, CHECKER, path], capture_output=True, text=True,
                            timeout=60)
    seconds = time.perf_counter() - start
    assert seconds < 20, f"{os.path.basename(path)} took {seconds:.1f} s"
    assert result.stderr == "", result.stderr
    if before is not None:
        assert snapshot(folder) == before, "the learner's folder changed"
    return result.returncode, result.stdout.splitlines()


def labelled(lines, label):
    """The report's lines with this label (passed, FAILED, not yet, skipped, tip)."""
    return [line for line in lines if line.startswith(f"  {label} ")]


def line_of(path, text):
    """The number of the one line of a learner file that holds text."""
    with open(path) as f:
        numbers = [n for n, line in enumerate(f, start=1) if text in line]
    assert len(numbers) == 1, (path, text, numbers)
    return numbers[0]


# A learner file with one mistake, tip or bad line: the stage file it starts from and the edits a
# learner would make to it, (old text, new text), each old text standing exactly once in the stage;
# an old text that ends in REST takes the rest of the file with it (the learner stopped there).
REST = " <and the rest of the file>"
VARIANTS = {
    # forward's targets has no default, so model(idx) alone raises
    "mistake_forward_needs_targets.py": ("stage1_bigram.py", [
        ("def forward(self, idx, targets=None):", "def forward(self, idx, targets):")]),
    # generate feeds the whole sequence, past the position table's block_size rows
    "mistake_generate_not_cropped.py": ("stage3_one_head.py", [
        ("idx_cond = idx[:, -block_size:]  # the position table has block_size rows\n"
         "            logits, loss = self(idx_cond)", "logits, loss = self(idx)")]),
    # the mask zeroes the weights after the softmax, so the rows no longer sum to 1
    "mistake_mask_after_softmax.py": ("stage4_several_heads.py", [
        ("wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))  # (B, T, T)\n"
         "        wei = F.softmax(wei, dim=-1)  # (B, T, T)",
         "wei = F.softmax(wei, dim=-1)  # (B, T, T)\n"
         "        wei = wei.masked_fill(self.tril[:T, :T] == 0, 0.0)  # (B, T, T)")]),
    # no triangular mask: every position sees the future
    "mistake_mask_missing.py": ("stage4_several_heads.py", [
        ("        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))  # (B, T, T)\n",
         "")]),
    # divided by head_size ** -0.5, that is multiplied by sqrt(head_size)
    "mistake_scale_inverted.py": ("stage4_several_heads.py", [
        ("* k.shape[-1] ** -0.5", "/ k.shape[-1] ** -0.5")]),
    # scaled by the embedding width C, the video's own slip
    "mistake_scale_n_embd.py": ("stage4_several_heads.py", [
        ("* k.shape[-1] ** -0.5", "* C ** -0.5")]),
    # the scores left unscaled
    "mistake_scale_none.py": ("stage4_several_heads.py", [(" * k.shape[-1] ** -0.5", "")]),
    # F.cross_entropy given probabilities instead of logits
    "mistake_softmax_before_cross_entropy.py": ("stage2_positions.py", [
        ("loss = F.cross_entropy(logits, targets)",
         "probs = F.softmax(logits, dim=-1)\n            loss = F.cross_entropy(probs, targets)")]),
    # the softmax runs over dim=1 of the (B, T, T) scores (the queries), not over the keys
    "mistake_softmax_dim1.py": ("stage4_several_heads.py", [
        ("wei = F.softmax(wei, dim=-1)", "wei = F.softmax(wei, dim=1)")]),
    # the full block_size mask, so an input shorter than block_size fails
    "mistake_tril_not_cut.py": ("stage3_one_head.py", [
        ("self.tril[:T, :T] == 0", "self.tril == 0")]),
    # position indices made without device=, so on a GPU they stay on the CPU (a tip)
    "tip_arange_without_device.py": ("stage2_positions.py", [
        ("torch.arange(T, device=device)", "torch.arange(T)")]),
    # LayerNorm after the residual add, as in the 2017 paper (a tip: it trains)
    "tip_post_norm.py": ("stage7_layernorm.py", [
        ("x = x + self.sa(self.ln1(x))", "x = self.ln1(x + self.sa(x))"),
        ("x = x + self.ffwd(self.ln2(x))", "x = self.ln2(x + self.ffwd(x))")]),
    # samples in training mode, dropout on, as the video's file does (its loop's `iter` too; a tip)
    "tip_sampling_with_dropout.py": ("stage9_scaled.py", [
        ("model.eval()  # dropout off while sampling\n", ""),
        ("for step in range(max_iters):", "for iter in range(max_iters):"),
        ("if step % eval_interval == 0 or step == max_iters - 1:",
         "if iter % eval_interval == 0 or iter == max_iters - 1:"),
        ('print(f"step {step}: ', 'print(f"step {iter}: ')]),
    # a colon missing after def forward(...): the file does not parse
    "bad_syntax.py": ("stage1_bigram.py", [
        ("def forward(self, idx, targets=None):", "def forward(self, idx, targets=None)")]),
    # waits at import for a download that never comes
    "bad_sleeps_at_import.py": ("stage1_bigram.py", [
        ("torch.manual_seed(1337)\n", "torch.manual_seed(1337)\n\nimport time\n\n"
         "while True:  # wait for the download\n    time.sleep(1)\n")]),
    # moves the model with .cuda(), which a CPU cannot do
    "bad_needs_cuda.py": ("stage1_bigram.py", [("m = model.to(device)", "m = model.cuda()")]),
    # reads the text under another name than input.txt
    "bad_missing_file.py": ("stage1_bigram.py", [
        ("open('input.txt'", "open('shakespeare.txt'")]),
    # only the data part typed so far: the file defines no model yet
    "bad_no_model.py": ("stage1_bigram.py", [
        ("\n@torch.no_grad()\ndef estimate_loss():" + REST,
         "xb, yb = get_batch('train')\nprint(xb.shape, yb.shape)\n")]),
    # a name misspelt in the notebook's third code cell: running it raises NameError
    "bad_error_cell.ipynb": ("stage3_one_head.ipynb", [
        ("vocab_size = len(chars)", "vocab_size = len(char)")]),
}


def variant(name):
    """The text of a variant: its stage file with its edits, each old text found exactly once."""
    base, edits = VARIANTS[name]
    with open(os.path.join(LEARNER, base), encoding="utf-8", newline="") as f:
        text = f.read()
    for old, new in edits:
        cut = old.endswith(REST)
        old = old.removesuffix(REST)
        assert text.count(old) == 1, f"{name}: {old!r} stands {text.count(old)} times in {base}"
        if cut:
            text = text[:text.index(old)] + new
        else:
            text = text.replace(old, new)
    return text


def learner_file(name, folder):
    """The path of a learner file: one of tests/learner_files, or a variant written to folder."""
    if name not in VARIANTS:
        return os.path.join(LEARNER, name)
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(variant(name))
    return path


def test_every_variant_s_edits_still_apply_to_its_stage_file():
    for name, (base, _) in VARIANTS.items():
        assert not os.path.exists(os.path.join(LEARNER, name)), f"{name} is a file and a variant"
        assert base.startswith("stage"), base
        variant(name)  # each old text stands exactly once in the stage file


# (file, the stage it reached, how many checks come with later chapters)
STAGES = [
    pytest.param("stage1_bigram.py", "bigram", 4, marks=pytest.mark.slow),
    pytest.param("stage2_positions.py", "positions", 4, marks=pytest.mark.slow),
    pytest.param("stage3_one_head.py", "one head", 2, marks=pytest.mark.slow),
    pytest.param("stage3_one_head.ipynb", "one head", 2),  # a Colab notebook: !wget, %, %%time
    pytest.param("stage4_several_heads.py", "several heads", 2, marks=pytest.mark.slow),
    pytest.param("stage5_feed_forward.py", "feed-forward", 2, marks=pytest.mark.slow),
    pytest.param("stage6_blocks.py", "blocks and residuals", 2, marks=pytest.mark.slow),
    pytest.param("stage7_layernorm.py", "LayerNorm", 2, marks=pytest.mark.slow),
    pytest.param("stage8_dropout.py", "dropout", 1, marks=pytest.mark.slow),
    pytest.param("stage9_scaled.py", "the scaled model", 0, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name, stage, later", STAGES)
def test_a_correct_file_at_each_stage_passes_every_check_that_applies(name, stage, later):
    status, lines = check(os.path.join(LEARNER, name))
    assert status == 0, "\n".join(lines)
    assert lines[0].startswith(f'{name} has reached the stage "{stage}" (chapter "'), lines[0]
    assert len(labelled(lines, "passed ")) == CHECKS - later, "\n".join(lines)
    assert len(labelled(lines, "not yet")) == later, "\n".join(lines)
    assert not labelled(lines, "FAILED ") and not labelled(lines, "skipped")
    assert not labelled(lines, "tip    "), "\n".join(lines)
    assert lines[-1].startswith(f"Summary: {CHECKS - later} passed, 0 failed"), lines[-1]


# (file, the check that must fail, words its sentence must hold, a line it must name or None)
MISTAKES = [
    ("mistake_scale_n_embd.py", "the attention scores are scaled by 1/sqrt(head_size)",
     "1/sqrt(n_embd) = 1/sqrt(48), not 1/sqrt(head_size) = 1/sqrt(12); the video made the same "
     "slip", None),
    ("mistake_scale_none.py", "the attention scores are scaled by 1/sqrt(head_size)",
     "your attention scores are not scaled", None),
    ("mistake_scale_inverted.py", "the attention scores are scaled by 1/sqrt(head_size)",
     "multiplied by sqrt(head_size)", None),
    ("mistake_tril_not_cut.py", "inputs shorter than block_size",
     "the mask is not cut to the input's length", "out = wei @ v"),
    ("mistake_softmax_dim1.py", "the future does not leak into the past",
     "your softmax runs over dim=1", None),
    ("mistake_mask_missing.py", "the future does not leak into the past",
     "without the triangular mask", None),
    ("mistake_mask_after_softmax.py", "the future does not leak into the past",
     "your mask comes after the softmax", None),
    ("mistake_generate_not_cropped.py", "generate goes past block_size",
     "idx_cond = idx[:, -block_size:]", "position_embedding_table(torch.arange"),
    ("mistake_forward_needs_targets.py", "model(idx) without targets",
     "def forward(self, idx, targets=None)", None),
    ("mistake_softmax_before_cross_entropy.py", "the loss is the cross-entropy of the logits",
     "the cross-entropy of softmax(logits)", None),
]
QUICK_MISTAKE = "mistake_softmax_dim1.py"


@pytest.mark.parametrize("name, check_name, words, named_line", [
    pytest.param(*m, marks=() if m[0] == QUICK_MISTAKE else pytest.mark.slow) for m in MISTAKES])
def test_each_mistake_is_caught_by_its_own_check_and_nothing_else(name, check_name, words,
                                                                   named_line, tmp_path):
    path = learner_file(name, tmp_path)
    status, lines = check(path)
    assert status == 1, "\n".join(lines)
    failed = labelled(lines, "FAILED ")
    assert len(failed) == 1, "\n".join(lines)
    assert failed[0].startswith(f"  FAILED   {check_name}: "), failed[0]
    assert words in failed[0], failed[0]
    assert re.search(r'\(chapters? ".+"\)\.$', failed[0]), failed[0]  # ends naming a chapter
    if named_line is not None:
        assert f"{name}, line {line_of(path, named_line)} raised " in failed[0], failed[0]
    assert not labelled(lines, "tip    "), "\n".join(lines)
    skipped = labelled(lines, "skipped")
    if name == "mistake_forward_needs_targets.py":  # generate calls model(idx) itself
        assert [line.split(":")[0] for line in skipped] == ["  skipped  generate goes past "
                                                            "block_size"]
    else:
        assert not skipped, "\n".join(lines)
    assert re.match(r"Summary: \d+ passed, 1 failed", lines[-1]), lines[-1]


@pytest.mark.slow
@pytest.mark.parametrize("name, words, named_line", [
    ("tip_sampling_with_dropout.py", "samples with dropout still on, as the video's file does",
     "print(decode(m.generate("),
    ("tip_post_norm.py", "post-norm, as in the 2017 paper): this differs from the video", None),
    ("tip_arange_without_device.py", "makes position indices without device=",
     "torch.arange(T))"),
])
def test_a_tip_is_a_tip_not_a_failure(name, words, named_line, tmp_path):
    path = learner_file(name, tmp_path)
    status, lines = check(path)
    assert status == 0, "\n".join(lines)
    tips = labelled(lines, "tip    ")
    assert len(tips) == 1 and words in tips[0], "\n".join(lines)
    if named_line is not None:
        assert f"{name}, line {line_of(path, named_line)} " in tips[0], tips[0]
    assert not labelled(lines, "FAILED ") and not labelled(lines, "skipped")


# (file, the start of the one line after 'cannot check: ', the text of the line it names)
BAD = [
    ("bad_syntax.py", "bad_syntax.py, line {}: SyntaxError: expected ':'",
     "def forward(self, idx, targets=None)"),
    ("bad_empty.py", "bad_empty.py is empty", None),
    ("bad_no_model.py", "bad_no_model.py defines no model yet", None),
    ("bad_sleeps_at_import.py", "bad_sleeps_at_import.py, line {}: still running after 10 s",
     "time.sleep(1)"),
    ("bad_needs_cuda.py", "bad_needs_cuda.py, line {}: your file needs a GPU there",
     "model.cuda()"),
    ("bad_missing_file.py", "bad_missing_file.py, line {}: FileNotFoundError: [Errno 2] No such "
     "file or directory: 'shakespeare.txt'", "shakespeare.txt"),
    ("bad_error_cell.ipynb", "bad_error_cell.ipynb, code cell 3, line 7: NameError: name 'char' "
     "is not defined", None),
]
QUICK_BAD = ("bad_syntax.py", "bad_empty.py")


@pytest.mark.parametrize("name, start, named_line", [
    pytest.param(*b, marks=() if b[0] in QUICK_BAD else pytest.mark.slow) for b in BAD])
def test_bad_input_is_one_line_and_status_2(name, start, named_line, tmp_path):
    path = learner_file(name, tmp_path)
    status, lines = check(path)
    assert status == 2
    assert len(lines) == 1, "\n".join(lines)
    if named_line is not None:
        start = start.format(line_of(path, named_line))
    assert lines[0].startswith(f"cannot check: {start}"), lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("name, stage, later", [("gpt.py", "the scaled model", 0),
                                                ("bigram.py", "bigram", 4)])
def test_the_repository_s_own_gpt_py_and_bigram_py_pass(name, stage, later):
    status, lines = check(os.path.join(ROOT, name))  # gpt.py: its Config and GPT, no adapter
    assert status == 0, "\n".join(lines)
    assert lines[0].startswith(f'{name} has reached the stage "{stage}"'), lines[0]
    assert len(labelled(lines, "passed ")) == CHECKS - later, "\n".join(lines)


def test_a_notebook_loses_its_shell_and_magic_lines_and_keeps_its_cell_numbers():
    path = os.path.join(LEARNER, "stage3_one_head.ipynb")
    code, origin = checker.read_code(path)
    lines = code.splitlines()
    assert not [line for line in lines if line.lstrip().startswith(("!", "%"))]
    assert lines[0] == "pass" and lines[1] == "pass"  # !wget and %matplotlib
    head = lines.index("class Head(nn.Module):") + 1
    assert checker.where(path, origin, head) == "stage3_one_head.ipynb, code cell 4, line 2"
    ast.parse(code)


def test_shrink_keeps_the_file_but_cuts_its_sizes_its_training_and_its_sampling():
    with open(os.path.join(LEARNER, "stage9_scaled.py")) as f:
        tree = ast.parse(f.read())
    shrink = checker.Shrink()
    text = ast.unparse(shrink.rewrite(tree))
    for line in ("block_size = 8", "n_embd = 48", "n_head = 4", "n_layer = 2", "batch_size = 4",
                 "eval_iters = 1", "device = 'cpu'", "dropout = 0.2"):
        assert f"\n{line}\n" in text, line
    assert "for step in _checker_first(range(max_iters)):" in text
    assert "\nprint(decode(m.generate(" not in text  # the sampling line is gone
    assert shrink.written == dict(batch_size=64, block_size=256, max_iters=5000, eval_interval=500,
                                  learning_rate=3e-4, device=None, eval_iters=200, n_embd=384,
                                  n_head=6, n_layer=6)


def test_a_training_while_loop_runs_once_and_what_follows_it_still_runs():
    source = ("class Loss:\n    def backward(self):\n        pass\n\n"
              "steps = 0\nwhile True:\n    Loss().backward()\n    steps += 1\nafter = steps\n")
    tree = checker.Shrink().rewrite(ast.parse(source))
    namespace = dict(_checker_first_time=checker.checker_first_time)
    exec(compile(tree, "loop.py", "exec"), namespace)
    assert namespace["after"] == 1


class Attention(nn.Module):
    """Four heads of 12 channels whose scores carry a given scale: the oracle for the probe."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.key = nn.Linear(48, 48, bias=False)
        self.query = nn.Linear(48, 48, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x).view(B, T, 4, 12).transpose(1, 2)  # (B, nh, T, hs)
        q = self.query(x).view(B, T, 4, 12).transpose(1, 2)  # (B, nh, T, hs)
        wei = q @ k.transpose(-2, -1) * self.scale  # (B, nh, T, T)
        wei = wei.masked_fill(torch.ones(T, T).tril() == 0, float("-inf"))
        return F.softmax(wei, dim=-1)  # (B, nh, T, T)


@pytest.mark.parametrize("scale", [12 ** -0.5, 48 ** -0.5, 1.0, 12 ** 0.5])
def test_the_scale_the_probe_measures_is_the_scale_the_scores_carry(scale):
    model = Attention(scale).double()
    session = checker.Session.__new__(checker.Session)  # only its measuring methods
    with checker.Probe(model, __file__) as probe:
        probe.T = 8
        model(torch.randn(2, 8, 48, dtype=torch.float64))
    assert [event["heads"] for event in probe.attention] == [4]
    measured, head_size, width = session.measure(probe.attention[0], probe, 0)
    assert measured == pytest.approx(scale, rel=1e-9)
    assert (head_size, width) == (12, 48)
