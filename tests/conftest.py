"""Shared fixtures: the repository on sys.path, the real data, and tiny configs for fast tests."""
import os
import shutil
import sys

import pytest

# Tiny test models run fastest on one thread, and a second thread only adds contention when the
# machine is busy; subprocesses (gpt.py runs, notebook kernels) inherit this too.
os.environ["OMP_NUM_THREADS"] = "1"
import torch  # noqa: E402  (after OMP_NUM_THREADS, which torch reads when it loads)

torch.set_num_threads(1)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHARED_DATA = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")


@pytest.fixture(scope="session")
def shakespeare_path():
    """input.txt at the repository root (copied from ../shared/data when missing); CI fails without it."""
    path = os.path.join(ROOT, "input.txt")
    if not os.path.exists(path) and os.path.exists(SHARED_DATA):
        shutil.copyfile(SHARED_DATA, path)
    if not os.path.exists(path):
        message = f"Tiny Shakespeare not found at {path} or {SHARED_DATA}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def text_file(tmp_path):
    """About 6,000 characters of made-up verse: enough for a block of 8 in both splits."""
    words = "to be or not that is the question whether tis nobler in mind suffer slings arrows".split()
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(8)).capitalize() + "," for i in range(120)]
    path = tmp_path / "verse.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)
