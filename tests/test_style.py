"""gpt.py as a text for learners: the lecture part fits its budget, lines fit a screen, no walrus."""
import ast
import os
import re

from conftest import ROOT

GPT_PY = os.path.join(ROOT, "gpt.py")


def lines():
    with open(GPT_PY, encoding="utf-8") as f:
        return f.read().splitlines()


def test_the_lecture_part_ends_with_sampling_within_280_lines():
    """Top through the sampling section: the section header after sampling is the first machinery line."""
    headers = [(number, line) for number, line in enumerate(lines(), start=1) if re.match(r"^# -{3,} ", line)]
    names = [line.split()[-1] for _, line in headers]
    assert names[:5] == ["hyperparameters", "data", "model", "training", "sampling"], names
    first_machinery_line = headers[5][0]
    assert first_machinery_line - 1 <= 280, first_machinery_line - 1


def test_every_line_within_100_columns_and_no_walrus():
    long = [number for number, line in enumerate(lines(), start=1) if len(line) > 100]
    assert not long, f"gpt.py lines over 100 columns: {long}"
    tree = ast.parse("\n".join(lines()))
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.NamedExpr)]


def test_bigram_py_within_100_columns():
    with open(os.path.join(ROOT, "bigram.py"), encoding="utf-8") as f:
        long = [number for number, line in enumerate(f, start=1) if len(line.rstrip("\n")) > 100]
    assert not long, f"bigram.py lines over 100 columns: {long}"
