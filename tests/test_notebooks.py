"""The notebooks: each runs top to bottom in smoke mode, cells marked `# same as FILE` still match FILE, a
cell that defines one of gpt.py's names says whether it is gpt.py's, and every piece of gpt.py's model and
training code is in a marked cell of some notebook; notebook 02's comparison helper gives the intervals worked
by hand, and the notebooks that judge by it hold marked copies of it; the README's table quotes what the
notebooks print; each notebook has at most 2,000 words of prose, a figure per 300 words, and saved outputs
with no error and no machine path."""
import ast
import glob
import json
import os
import re

import pytest

from conftest import ROOT

NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
MARKER = re.compile(r"^# same as (\S+)")
GPT_PY = os.path.join(ROOT, "gpt.py")
SAME_AS_GPT = "# same as gpt.py"
CHANGED_FROM_GPT = "# changed from gpt.py:"


def code_cells(path):
    with open(path, encoding="utf-8") as f:
        return ["".join(c["source"]) for c in json.load(f)["cells"] if c["cell_type"] == "code"]


def normalise(text):
    """Lines with runs of whitespace collapsed, blank lines dropped: layout may differ, code may not."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def defined_names(code):
    """The names of the top-level classes and functions a piece of code defines (none if it does not parse)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # e.g. a cell with IPython magics: it defines nothing we check
        return []
    return [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def gpt_sections():
    """gpt.py's top-level class and function names, each with the section comment it sits under."""
    with open(GPT_PY, encoding="utf-8") as f:
        source = f.read()
    section_at = {}  # line number -> section name, from comments like '# ------ model'
    for number, line in enumerate(source.splitlines(), start=1):
        match = re.match(r"^# -{3,} (.+)$", line)
        if match:
            section_at[number] = match.group(1).strip()
    names = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            above = [number for number in section_at if number < node.lineno]
            names[node.name] = section_at[max(above)] if above else None
    return names


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 5, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_marked_cells_match_their_source(path):
    marked = [cell for cell in code_cells(path) if MARKER.match(cell)]
    for cell in marked:
        source_file = os.path.join(ROOT, MARKER.match(cell).group(1))
        assert os.path.exists(source_file), f"{os.path.basename(path)} names {source_file}, which does not exist"
        body = normalise(cell)[1:]  # the code after the marker line
        if source_file.endswith(".ipynb"):  # a copy of a whole cell of another notebook, after its first line
            found = any(normalise(other)[1:] == body for other in code_cells(source_file))
        else:
            with open(source_file, encoding="utf-8") as f:
                source = normalise(f.read())
            found = any(source[i : i + len(body)] == body for i in range(len(source) - len(body) + 1))
        assert body and found, f"a cell of {os.path.basename(path)} no longer matches {source_file}:\n{cell}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_setup_cell_is_the_same_everywhere(path):
    """The first code cell (find the data, pick a device, seed) is one piece of code, not many."""
    assert code_cells(path)[0] == code_cells(NOTEBOOKS[0])[0]


@pytest.mark.slow  # a Jupyter kernel each
@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_runs_top_to_bottom_in_smoke_mode(path, shakespeare_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("GPT_SMOKE", "1")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_cells_that_define_a_gpt_py_name_say_so(path):
    """A cell defining a class or function that gpt.py also defines is marked as gpt.py's or says how it differs."""
    gpt_names = set(gpt_sections())
    unmarked = []
    for cell in code_cells(path):
        clashes = sorted(set(defined_names(cell)) & gpt_names)
        if clashes and not (cell.startswith(SAME_AS_GPT) or cell.startswith(CHANGED_FROM_GPT)):
            unmarked.append(f"{', '.join(clashes)} in the cell starting {cell.splitlines()[0][:60]!r}")
    assert not unmarked, (f"{os.path.basename(path)} defines gpt.py's names without '{SAME_AS_GPT}' or "
                          f"'{CHANGED_FROM_GPT} <what and why>' on the first line: " + "; ".join(unmarked))


def test_gpt_py_model_and_training_code_is_in_marked_cells():
    """Every class and function of gpt.py's model and training sections appears in a `# same as gpt.py` cell."""
    sections = gpt_sections()
    wanted = sorted(name for name, section in sections.items() if section in ("model", "training"))
    assert {"GPT", "train"} <= set(wanted), f"gpt.py's section comments moved: found {wanted}"
    marked = set()
    for path in NOTEBOOKS:
        for cell in code_cells(path):
            if cell.startswith(SAME_AS_GPT):
                marked.update(defined_names(cell))
    missing = [name for name in wanted if name not in marked]
    assert not missing, f"no notebook has a '{SAME_AS_GPT}' cell defining {missing}"


def saved_output_text(path):
    """Everything a notebook's saved code cells printed or displayed as text."""
    with open(path, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    parts = []
    for cell in cells:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            parts.append("".join(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def readme_notebook_rows():
    """The README's notebook table: {notebook file name: the val-loss column's text}."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    rows = {}
    for line in lines:
        match = re.match(r"^\| \[\w+\]\(notebooks/(\w+\.ipynb)\) \|.*\| ([^|]*) \|$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_readme_quotes_the_val_losses_the_notebooks_print():
    """Each val loss the README's table gives for a notebook (a number like 2.4897) is in its saved outputs."""
    rows = readme_notebook_rows()
    assert sorted(rows) == [os.path.basename(path) for path in NOTEBOOKS], "README's notebook table is incomplete"
    missing = []
    for name, column in rows.items():
        printed = saved_output_text(os.path.join(ROOT, "notebooks", name))
        missing += [f"{name}: {number}" for number in re.findall(r"\d\.\d{4}", column) if number not in printed]
    assert not missing, "README quotes val losses its notebooks do not print: " + "; ".join(missing)


def prose_words_and_figures(path):
    """Markdown words (whitespace-separated, as `wc -w` counts) and PNG figures (outputs and attachments)."""
    with open(path, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    words = sum(len("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
    outputs = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
    attachments = sum("image/png" in a for c in cells for a in c.get("attachments", {}).values())
    return words, outputs + attachments


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_prose_within_2000_words_and_a_figure_per_300(path):
    """STYLE.md 10-11: at most 2,000 words of markdown and at least one figure per 300 of them."""
    words, figures = prose_words_and_figures(path)
    name = os.path.basename(path)
    assert words <= 2000, f"{name} has {words} words of markdown"
    assert figures * 300 >= words, f"{name} has {figures} figures for {words} words"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_saved_outputs_hold_no_error_and_no_machine_path(path):
    """The committed outputs name no folder of the machine they ran on and hold no error."""
    with open(path, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    errors = [o for c in cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, f"{os.path.basename(path)} was saved with an error"
    paths = re.findall(r"(?:/work|/tmp|/home|/root|/Users|/content)/\S*", saved_output_text(path))
    assert not paths, f"{os.path.basename(path)} prints machine paths: {paths[:3]}"


HELPER_HOME = os.path.join(ROOT, "notebooks", "02_bigram.ipynb")
HELPER_COPY = "# same as notebooks/02_bigram.ipynb"
USE_THE_HELPER = ["02", "03", "04", "05", "06", "07", "08", "09", "10"]  # notebooks whose verdicts come from compare()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_the_comparison_helper_is_notebook_02s(path):
    """compare() is defined in notebook 02's main text; a later notebook that uses it holds a marked copy."""
    cells = code_cells(path)
    defining = [cell for cell in cells if "compare" in defined_names(cell)]
    uses = any(re.search(r"\bcompare\(", cell) for cell in cells)
    if path == HELPER_HOME:
        assert len(defining) == 1, "notebook 02 should define compare() in one cell"
    elif uses or defining:
        assert defining and all(cell.startswith(HELPER_COPY) for cell in defining), (
            f"{os.path.basename(path)} uses compare() without a cell starting '{HELPER_COPY}'")


@pytest.mark.parametrize("number", USE_THE_HELPER)
def test_verdicts_come_from_the_helper(number):
    """The notebooks that judge differences call compare() (not only copy it)."""
    (path,) = [p for p in NOTEBOOKS if os.path.basename(p).startswith(number + "_")]
    assert any(re.search(r"\bcompare\(", cell) and "def compare" not in cell for cell in code_cells(path)), (
        f"{os.path.basename(path)} never calls compare()")


def helper_from_notebook_02():
    """The names notebook 02's compare() cell defines, run as the notebook runs it."""
    (cell,) = [cell for cell in code_cells(HELPER_HOME) if "compare" in defined_names(cell)]
    namespace = {}
    exec(cell, namespace)
    return namespace


def test_compare_paired_interval_by_hand(capsys):
    """Differences 2, 3, 4: mean 3, standard error 1/sqrt(3), t(2) = 4.30, so 3 -/+ 2.4826."""
    compare = helper_from_notebook_02()["compare"]
    mean, low, high, words = compare([12.0, 13.0, 14.0], [10.0, 10.0, 10.0], paired=True, names=("A", "B"))
    assert (mean, low, high) == pytest.approx((3.0, 3.0 - 4.30 / 3 ** 0.5, 3.0 + 4.30 / 3 ** 0.5))
    assert words == "B is lower by 3.0000 (interval 0.5174 to 5.4826)"
    assert "A - B: +3.0000, 95% interval +0.5174 to +5.4826" in capsys.readouterr().out


def test_compare_welch_interval_by_hand():
    """Two groups of 3 with variances 1 and 4: se = sqrt(1/3 + 4/3), Welch df = 2.94 -> the table's df 2."""
    compare = helper_from_notebook_02()["compare"]
    a = [1.0, 2.0, 3.0]  # mean 2, variance 1
    b = [-2.0, 0.0, 2.0]  # mean 0, variance 4
    mean, low, high, words = compare(a, b, paired=False)
    se = (1 / 3 + 4 / 3) ** 0.5
    assert (mean, low, high) == pytest.approx((2.0, 2.0 - 4.30 * se, 2.0 + 4.30 * se))
    assert words == "no difference measurable with 3 seeds"


def test_compare_calls_fewer_than_three_seeds_suggestive():
    """Two seeds a side: the interval's words come, but marked as suggestive only."""
    compare = helper_from_notebook_02()["compare"]
    words = compare([2.0, 2.1], [1.0, 1.05], paired=True, names=("A", "B"))[3]
    assert words.startswith("suggestive") and "B is lower by 1.0250" in words


SCORER_HOME = os.path.join(ROOT, "notebooks", "08_bpe_and_the_companion_design.ipynb")


def scorer_from_notebook_08():
    """Notebook 08's bits_per_char, defined as the notebook defines it (the function alone)."""
    import math

    import torch
    from torch.nn import functional as F

    (cell,) = [cell for cell in code_cells(SCORER_HOME) if "bits_per_char" in defined_names(cell)]
    (node,) = [n for n in ast.parse(cell).body if getattr(n, "name", None) == "bits_per_char"]
    namespace = {"torch": torch, "F": F, "math": math}
    exec(ast.get_source_segment(cell, node), namespace)
    return namespace["bits_per_char"]


def tiny_char_model(block_size):
    """A random one-layer gpt.py model on 65 characters, dropout off, and its tokenizer."""
    import torch

    import gpt

    torch.manual_seed(0)
    cfg = gpt.Config(vocab_size=65, block_size=block_size, n_embd=16, n_head=2, n_layer=1,
                     dropout=0.0)
    with open(os.path.join(ROOT, "input.txt"), encoding="utf-8") as f:
        tokenizer = gpt.CharTokenizer.from_text(f.read())
    return gpt.GPT(cfg).eval(), tokenizer


def test_notebook_08_scorer_with_stride_one_gives_each_target_a_full_window():
    """Stride 1: each target is predicted from the (up to) T tokens that end just before it, as a loop
    over the targets, one forward pass each, computes it."""
    import contextlib
    import math

    import torch
    from torch.nn import functional as F

    bits_per_char = scorer_from_notebook_08()
    T = 8
    model, tok = tiny_char_model(T)
    ids = torch.randint(65, (45,))  # (45,) 44 targets: not a multiple of T
    nats = 0.0
    with torch.no_grad():
        for i in range(len(ids) - 1):  # target ids[i + 1], after ids[max(0, i - T + 1)] .. ids[i]
            window = ids[max(0, i - T + 1):i + 1]  # (t,) t <= T
            logits, _ = model(window[None])  # (1, t, V)
            nats += F.cross_entropy(logits[0, -1], ids[i + 1]).item()
    bpc, _ = bits_per_char(model, ids, tok, contextlib.nullcontext(), stride=1, batch_size=5)
    assert bpc == pytest.approx(nats / (len(ids) - 1) / math.log(2), rel=1e-5)


def test_notebook_08_scorer_with_stride_T_restarts_every_window():
    """Stride T on a text of whole windows: back-to-back windows, each starting with no context, and the
    mean cost at each place in the window."""
    import contextlib
    import math

    import torch
    from torch.nn import functional as F

    bits_per_char = scorer_from_notebook_08()
    T = 8
    model, tok = tiny_char_model(T)
    ids = torch.randint(65, (6 * T + 1,))  # (49,) six whole windows of targets
    with torch.no_grad():
        logits, _ = model(ids[:-1].view(6, T))  # (6, T, V)
    losses = F.cross_entropy(logits.transpose(1, 2), ids[1:].view(6, T), reduction="none")  # (6, T)
    bpc, by_place = bits_per_char(model, ids, tok, contextlib.nullcontext(), stride=T, batch_size=4)
    assert bpc == pytest.approx(losses.mean().item() / math.log(2), rel=1e-5)
    assert torch.allclose(by_place, losses.mean(0), atol=1e-5)
