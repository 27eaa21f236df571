"""Notebook 09 after `python gpt.py`: with a finished out/ckpt.pt beside it, the notebook loads it instead of
training its own model. The test runs that branch in smoke mode in a temporary copy of the repository, with a
tiny checkpoint that gpt.py itself trains, so that a developer's own out/ckpt.pt is never read or touched."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

NOTEBOOK = "09_sampling.ipynb"
# A tiny model that gpt.py trains to its end in seconds: context 16, 1 layer, 2 heads, 32 channels (about
# 17,000 parameters, under the 100,000 that notebook 09 loads in smoke mode). --device=cpu and --preset=laptop:
# the same run on any machine (auto picks none on a CUDA GPU), so the printed preset is known.
TINY_RUN = ["--block_size=16", "--n_layer=1", "--n_head=2", "--n_embd=32", "--max_iters=20", "--max_time=0",
            "--eval_interval=10", "--eval_iters=2", "--max_new_tokens=10", "--init_from=scratch", "--device=cpu",
            "--preset=laptop", "--out_dir=out"]


@pytest.mark.slow  # a gpt.py process and a Jupyter kernel
def test_notebook_09_runs_with_a_finished_checkpoint(tmp_path, shakespeare_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # The layout the notebook looks in: notebooks/ with input.txt and out/ckpt.pt one level up, as in the repository.
    (tmp_path / "notebooks").mkdir()
    shutil.copy(os.path.join(ROOT, "notebooks", NOTEBOOK), tmp_path / "notebooks")
    shutil.copy(os.path.join(ROOT, "gpt.py"), tmp_path)
    shutil.copy(shakespeare_path, tmp_path / "input.txt")
    trained = subprocess.run([sys.executable, "gpt.py", *TINY_RUN], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
    assert trained.returncode == 0, trained.stderr
    ckpt = tmp_path / "out" / "ckpt.pt"
    saved = ckpt.read_bytes()

    monkeypatch.setenv("GPT_SMOKE", "1")
    nb = nbformat.read(tmp_path / "notebooks" / NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path / "notebooks")}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "loaded ../out/ckpt.pt: preset laptop, step 20" in printed, "the notebook trained its own model instead"
    assert "train loss" not in printed  # no training of its own
    assert ckpt.read_bytes() == saved  # read, never written
