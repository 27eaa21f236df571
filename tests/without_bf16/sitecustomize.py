"""Imported by every Python whose PYTHONPATH starts here (conftest.py puts it there when the environment has
GPT_TEST_CPU_BF16=absent): the CPU reports no native bfloat16, as an AVX2-only CPU does, so that the suite can be
checked on a machine that has it. gpt.py then picks float32 (and times the laptop preset in it)."""
import torch

torch.cpu._is_avx512_bf16_supported = lambda: False
torch.cpu._is_amx_tile_supported = lambda: False
