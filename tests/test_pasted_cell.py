"""gpt.py pasted whole into a notebook cell, as the design card says learners use it in Colab: in a
real Jupyter kernel it runs, runs again after an edit at the top (the earlier model kept, and said
where), and leaves the kernel's thread count as it found it."""
import os
import re

import pytest
import torch

from conftest import ROOT

GPT_PY = os.path.join(ROOT, "gpt.py")
# The top as a learner might edit it for a quick run: a tiny model, 20 steps, no preset.
TOP = dict(input="verse.txt", preset="none", block_size=8, n_embd=16, n_head=2, n_layer=1,
           batch_size=4, max_iters=20, eval_interval=10, eval_iters=2, max_new_tokens=20)


def edited(**top):
    """gpt.py's source with the values at the top of Config changed, as an edit in a cell would."""
    source = open(GPT_PY, encoding="utf-8").read()
    for name, value in top.items():
        source, n = re.subn(rf"^(    {name}: \w+ = flag\()[^,]+,", rf"\g<1>{value!r},", source,
                            flags=re.M)
        assert n == 1, name
    return source


def test_the_docstring_says_how_to_run_it_small_from_a_cell():
    import gpt

    assert 'main(["--max_iters=500"])' in gpt.__doc__


@pytest.mark.slow
def test_pasted_into_a_kernel_it_runs_twice_after_an_edit_and_keeps_the_thread_count(
        tmp_path, text_file):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    os.rename(text_file, tmp_path / "verse.txt")
    cells = [
        "import torch\ntorch.set_num_threads(2)",  # the kernel's own setting, before the paste
        edited(**TOP),  # the first run
        edited(**{**TOP, "n_layer": 2}),  # edited, run again
        "print('threads', torch.get_num_threads())",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    printed = ["".join(o.get("text", "") for o in cell.outputs) for cell in nb.cells]
    assert "done: 20 steps" in printed[1] and "done: 20 steps" in printed[2]
    assert "preset" not in printed[1].splitlines()[0]  # the top is what ran, nothing replaced
    assert "the earlier run's out/ckpt.pt is now out/ckpt-1.pt" in printed[2]
    assert printed[3].strip() == "threads 2"
    for name, layers in (("ckpt-1.pt", 1), ("ckpt.pt", 2)):
        ckpt = torch.load(tmp_path / "out" / name, weights_only=True)
        assert ckpt["config"]["n_layer"] == layers and ckpt["finished"], name
