"""The notebooks: each runs top to bottom in smoke mode, and cells marked `# same as FILE` still match FILE."""
import glob
import json
import os
import re

import pytest

from conftest import ROOT

NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
MARKER = re.compile(r"^# same as (\S+)")


def code_cells(path):
    with open(path, encoding="utf-8") as f:
        return ["".join(c["source"]) for c in json.load(f)["cells"] if c["cell_type"] == "code"]


def normalise(text):
    """Lines with runs of whitespace collapsed, blank lines dropped: layout may differ, code may not."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 5, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_marked_cells_match_their_source(path):
    marked = [cell for cell in code_cells(path) if MARKER.match(cell)]
    for cell in marked:
        source_file = os.path.join(ROOT, MARKER.match(cell).group(1))
        assert os.path.exists(source_file), f"{os.path.basename(path)} names {source_file}, which does not exist"
        body = normalise(cell)[1:]  # the code after the marker line
        with open(source_file, encoding="utf-8") as f:
            source = normalise(f.read())
        found = any(source[i : i + len(body)] == body for i in range(len(source) - len(body) + 1))
        assert body and found, f"a cell of {os.path.basename(path)} no longer matches {source_file}:\n{cell}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_setup_cell_is_the_same_everywhere(path):
    """The first code cell (find the data, pick a device, seed) is one piece of code, not many."""
    assert code_cells(path)[0] == code_cells(NOTEBOOKS[0])[0]


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
