"""gpt.py as a text for learners: the lecture part and the whole file fit their budgets, the lecture part
calls nothing defined below it, lines fit a screen, one statement per line, no walrus, and no definition of the
machinery longer than GPT; sample.py within 90 lines; the README within 1,800 words."""
import ast
import os
import re

from conftest import ROOT

GPT_PY = os.path.join(ROOT, "gpt.py")
MACHINERY = re.compile(r"^# =+ the machinery")  # the one marked line after the sampling section


def lines(path=GPT_PY):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def machinery_starts():
    """The number of gpt.py's marked line: the first line after the lecture part."""
    marked = [number for number, line in enumerate(lines(), start=1) if MACHINERY.match(line)]
    assert len(marked) == 1, marked
    return marked[0]


def test_the_lecture_part_ends_with_sampling_within_275_lines_and_the_file_within_480():
    headers = [line.split()[-1] for line in lines()[: machinery_starts()] if re.match(r"^# -{3,} ", line)]
    assert headers == ["hyperparameters", "data", "model", "training", "sampling"], headers
    assert machinery_starts() - 1 <= 275, machinery_starts() - 1
    assert len(lines()) <= 480, len(lines())


def test_the_lecture_part_calls_nothing_defined_below_it():
    """A learner reads the lecture part on its own: every name it calls is defined above the line."""
    tree = ast.parse("\n".join(lines()))
    below = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
             and node.lineno > machinery_starts()}
    above = [node for node in tree.body if node.lineno < machinery_starts()]
    called = {node.func.id for top in above for node in ast.walk(top)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert {"train", "sample", "GPT"} <= {n.name for n in above if hasattr(n, "name")}
    assert not called & below, sorted(called & below)


def test_no_definition_in_the_machinery_is_longer_than_gpt():
    tree = ast.parse("\n".join(lines()))
    sizes = {node.name: node.end_lineno - node.lineno + 1 for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    starts = {node.name: node.lineno for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    longer = {name: size for name, size in sizes.items() if starts[name] > machinery_starts() and size > sizes["GPT"]}
    assert not longer, f"longer than GPT ({sizes['GPT']} lines): {longer}"


def one_statement_a_line(path):
    """Line numbers that start two statements, and the uses of ';' and the walrus."""
    tree = ast.parse("\n".join(lines(path)))
    starts = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.stmt)]
    shared = sorted({n for n in starts if starts.count(n) > 1})
    walrus = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.NamedExpr)]
    return shared, walrus


def test_every_line_within_100_columns_one_statement_each_and_no_walrus():
    for path in (GPT_PY, os.path.join(ROOT, "sample.py"), os.path.join(ROOT, "bigram.py")):
        long = [number for number, line in enumerate(lines(path), start=1) if len(line) > 100]
        assert not long, f"{path}: lines over 100 columns: {long}"
        shared, walrus = one_statement_a_line(path)
        assert not shared and not walrus, f"{path}: two statements on lines {shared}, walrus on {walrus}"


def test_sample_py_within_90_lines():
    assert len(lines(os.path.join(ROOT, "sample.py"))) <= 90


def test_readme_within_1800_words_as_wc_counts_them():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        words = len(f.read().split())  # wc -w: runs of non-whitespace
    assert words <= 1800, words
