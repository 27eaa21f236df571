"""Shared fixtures: the repository on sys.path, the real data, and tiny configs for fast tests; one thread; and
the switch that runs the suite as on a CPU without native bfloat16."""
import os
import runpy
import sys

import pytest

# Tiny test models run fastest on one thread, and a second thread only adds contention when the
# machine is busy; subprocesses (gpt.py runs, notebook kernels) inherit this too.
os.environ["OMP_NUM_THREADS"] = "1"
import torch  # noqa: E402  (after OMP_NUM_THREADS, which torch reads when it loads)

torch.set_num_threads(1)

# `GPT_TEST_CPU_BF16=absent python -m pytest` runs the suite as on a CPU without native bfloat16 (AVX2 only):
# this process and every Python it starts (gpt.py runs, torchrun ranks, notebook kernels) import
# tests/without_bf16/sitecustomize.py, which makes torch report neither AVX512-BF16 nor AMX.
if os.environ.get("GPT_TEST_CPU_BF16") == "absent":
    WITHOUT_BF16 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "without_bf16")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [WITHOUT_BF16, os.environ.get("PYTHONPATH")]))
    runpy.run_path(os.path.join(WITHOUT_BF16, "sitecustomize.py"))  # and this process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


@pytest.fixture(scope="session")
def shakespeare_path():
    """Tiny Shakespeare as the repository ships it: input.txt at its root."""
    path = os.path.join(ROOT, "input.txt")
    assert os.path.exists(path), f"{path} is missing: the repository ships it (git checkout input.txt)"
    return path


@pytest.fixture
def text_file(tmp_path):
    """About 6,000 characters of made-up verse: enough for a block of 8 in both splits."""
    words = "to be or not that is the question whether tis nobler in mind suffer slings arrows".split()
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(8)).capitalize() + "," for i in range(120)]
    path = tmp_path / "verse.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)
