"""The model and the data code, in-process, on tiny configs (each test well under a second or two)."""
import math

import pytest
import torch

from benchmarks.lecture import copy_attention, lecture_gpt
import gpt
from gpt import GPT, CharTokenizer, Config, get_batch, split_data

# Tiny on purpose: 2 layers of 32 channels and 4 heads are enough to exercise every code path.
TINY = dict(vocab_size=11, block_size=16, n_layer=2, n_head=4, n_embd=32, dropout=0.0)


def tiny_model(**overrides):
    torch.manual_seed(0)
    return GPT(Config(**{**TINY, **overrides})).eval()


def test_logits_shape_and_loss_at_init_is_about_ln_vocab():
    model = tiny_model(vocab_size=65)
    idx = torch.randint(65, (8, 16))  # (B, T)
    logits, loss = model(idx, idx)
    assert logits.shape == (8, 16, 65)
    assert abs(loss.item() - math.log(65)) < 0.1


def test_changing_a_future_token_leaves_earlier_logits_unchanged():
    model = tiny_model()
    idx = torch.randint(11, (2, 16))
    t = 9
    changed = idx.clone()
    changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % 11  # every token after position t
    before, _ = model(idx)
    after, _ = model(changed)
    torch.testing.assert_close(before[:, : t + 1], after[:, : t + 1])
    assert not torch.allclose(before[:, t + 1 :], after[:, t + 1 :])


def explicit_attention(attn, x):
    """The oracle: one head at a time, q @ k^T / sqrt(hs), the future masked out, softmax, @ v."""
    B, T, C = x.shape
    hs = C // attn.n_head
    q, k, v = attn.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T)
    heads = []
    for h in range(attn.n_head):
        channels = slice(h * hs, (h + 1) * hs)
        scores = q[..., channels] @ k[..., channels].transpose(1, 2) / math.sqrt(hs)  # (B, T, T)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # (B, T, T)
        heads.append(weights @ v[..., channels])  # (B, T, hs)
    return attn.proj(torch.cat(heads, dim=-1))  # (B, T, C)


def test_fused_attention_equals_an_explicit_masked_softmax():
    model = tiny_model()
    x = torch.randn(3, 16, 32)  # (B, T, C)
    for block in model.blocks:
        torch.testing.assert_close(block.attn(x), explicit_attention(block.attn, x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("T", [1, 7, 16])
def test_gpt_pys_written_out_attention_equals_its_fused_kernel_and_the_oracle(T):
    """The lecture's four lines in gpt.py (fused = False), at full and shorter lengths."""
    model = tiny_model()
    x = torch.randn(3, T, 32)  # (B, T, C)
    idx = torch.randint(11, (3, T))
    fused = model(idx)[0]
    for block in model.blocks:
        block.attn.fused = False
        torch.testing.assert_close(block.attn(x), explicit_attention(block.attn, x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(idx)[0], fused, atol=1e-5, rtol=1e-5)
    assert gpt.CausalSelfAttention.fused is True  # the default: one instance was changed, not the class


def test_dropout_is_on_in_training_and_off_in_eval():
    model = tiny_model(dropout=0.3)
    idx = torch.randint(11, (3, 16))
    torch.testing.assert_close(model.eval()(idx)[0], model(idx)[0])
    model.train()
    assert not torch.allclose(model(idx)[0], model(idx)[0])


def test_batched_attention_equals_the_lectures_per_head_loop():
    model = tiny_model()
    lecture = lecture_gpt(Config(**TINY)).eval()
    lecture.load_state_dict(model.state_dict(), strict=False)  # everything but attention has the same names
    for ours, theirs in zip(model.blocks, lecture.blocks):
        copy_attention(ours.attn, theirs.attn)
    x = torch.randn(3, 16, 32)  # (B, T, C)
    torch.testing.assert_close(model.blocks[0].attn(x), lecture.blocks[0].attn(x), atol=1e-5, rtol=1e-5)
    idx = torch.randint(11, (3, 16))
    torch.testing.assert_close(model(idx)[0], lecture(idx)[0], atol=1e-5, rtol=1e-5)


def lecture_param_count(V, T, C, L):
    """Closed form: embeddings, per block 12C^2 + 10C (q/k/v, proj, 4x MLP, 2 LayerNorms), final LN, head."""
    return V * C + T * C + L * (12 * C * C + 10 * C) + 2 * C + C * V + V


@pytest.mark.parametrize("V,T,C,L,H", [(65, 256, 384, 6, 6), (50, 32, 48, 3, 4)])
def test_parameter_count_matches_the_closed_form(V, T, C, L, H):
    model = GPT(Config(vocab_size=V, block_size=T, n_embd=C, n_layer=L, n_head=H))
    assert sum(p.numel() for p in model.parameters()) == lecture_param_count(V, T, C, L)


def test_the_lectures_scaled_model_has_10_79M_parameters():
    model = GPT(Config())  # the defaults are the lecture's scaled model
    assert sum(p.numel() for p in model.parameters()) == 10_788_929


def test_a_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    model = GPT(Config(**TINY))
    x = torch.randint(11, (4, 16))
    y = torch.randint(11, (4, 16))  # random targets: only memorising can fit them
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(300):
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1


def test_gpt_pys_own_recipe_overfits_one_batch(monkeypatch):
    """make_optimizer (fused AdamW, decay groups, the laptop preset's weight decay), train_step
    (clipping, the scaler) and the laptop preset's peak rate memorise one random batch."""
    cfg = Config(**{**TINY, "weight_decay": gpt.LAPTOP["weight_decay"], "batch_size": 4,
                    "device": "cpu", "dtype": "float32"})
    torch.manual_seed(0)
    model = GPT(cfg)
    x, y = torch.randint(11, (4, 16)), torch.randint(11, (4, 16))  # random: only memorising fits
    monkeypatch.setattr(gpt, "get_batch", lambda data, batch_size, block_size: (x, y))
    optimizer = gpt.make_optimizer(model, cfg)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    for _ in range(300):
        gpt.train_step(model, optimizer, scaler, {"train": None}, cfg, 2e-3)
    assert model(x, y)[1].item() < 0.1


def test_weight_decay_falls_on_every_matrix_and_embedding_and_on_nothing_else():
    model = GPT(Config(**TINY))
    optimizer = gpt.make_optimizer(model, Config(**TINY, weight_decay=0.5))
    decayed = {id(p) for g in optimizer.param_groups if g["weight_decay"] == 0.5 for p in g["params"]}
    kept = {id(p) for g in optimizer.param_groups if g["weight_decay"] == 0.0 for p in g["params"]}
    assert not decayed & kept and len(decayed) + len(kept) == len(list(model.parameters()))
    for name, p in model.named_parameters():  # the oracle: what each name is
        matrix = name.endswith("weight") and ("embedding" in name or "qkv" in name or "proj" in name
                                              or ".net." in name or "lm_head" in name)
        assert (id(p) in decayed) == matrix, name


def test_generate_shape_and_it_sees_only_the_last_block_size_tokens():
    model = tiny_model()
    idx = torch.zeros((2, 1), dtype=torch.long)
    out = model.generate(idx, max_new_tokens=40)  # runs well past block_size=16
    assert out.shape == (2, 41) and torch.equal(out[:, :1], idx)
    context = out[:, :30]
    torch.manual_seed(3)
    next_id = model.generate(context, 1)[:, -1]
    torch.manual_seed(3)  # the same draw, by hand, from the last 16 tokens only
    logits, _ = model(context[:, -16:])
    expected = torch.multinomial(torch.softmax(logits[:, -1].float(), dim=-1), num_samples=1)[:, 0]
    assert torch.equal(next_id, expected)


def test_encode_decode_round_trip_and_vocabulary():
    text = "hello world\nHELLO!"
    tok = CharTokenizer.from_text(text)
    assert tok.chars == sorted(set(text))
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode("eh") == [tok.chars.index("e"), tok.chars.index("h")]


def test_split_is_90_10_and_y_is_x_shifted_by_one():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    tok = CharTokenizer.from_text(text)
    splits = split_data(text, tok)
    assert len(splits["train"]) == 900 and len(splits["val"]) == 100
    assert tok.decode(splits["val"][:3].tolist()) == text[900:903]
    x, y = get_batch(splits["train"], batch_size=5, block_size=8)
    assert x.shape == y.shape == (5, 8)
    torch.testing.assert_close(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x, y):  # each row is a real chunk of the text
        start = text.index(tok.decode(row_x.tolist()))
        assert tok.decode(row_y.tolist()) == text[start + 1 : start + 9]


def test_real_data_vocabulary_and_split(shakespeare_path):
    with open(shakespeare_path, encoding="utf-8") as f:
        text = f.read()
    tok = CharTokenizer.from_text(text)
    assert len(text) == 1_115_394 and len(tok.chars) == 65
    splits = split_data(text, tok)
    assert len(splits["train"]) == 1_003_854 and len(splits["val"]) == 111_540
