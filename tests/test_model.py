"""The model and the data code, in-process, on tiny configs (each test well under a second or two)."""
import math

import pytest
import torch

from benchmarks.lecture import copy_attention, lecture_gpt
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


def test_sdpa_path_equals_explicit_path():
    model = tiny_model(attention="sdpa")
    explicit = GPT(Config(**{**TINY, "attention": "explicit"})).eval()
    explicit.load_state_dict(model.state_dict())
    idx = torch.randint(11, (3, 16))
    torch.testing.assert_close(model(idx)[0], explicit(idx)[0], atol=1e-5, rtol=1e-5)


def test_sdpa_and_explicit_paths_agree_in_training_with_dropout():
    """Both paths draw the same dropout masks (none on the attention weights), so with one seed they agree."""
    sdpa = GPT(Config(**{**TINY, "dropout": 0.3})).train()
    explicit = GPT(Config(**{**TINY, "dropout": 0.3, "attention": "explicit"})).train()
    explicit.load_state_dict(sdpa.state_dict())
    idx = torch.randint(11, (3, 16))
    outputs = []
    for model in (sdpa, explicit):
        torch.manual_seed(5)
        outputs.append(model(idx)[0])
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-5, rtol=1e-5)
    torch.manual_seed(6)
    assert not torch.allclose(sdpa(idx)[0], outputs[0])  # dropout is on: another seed, other logits


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


def test_generate_shape_crops_context_and_top_k_1_is_greedy():
    model = tiny_model()
    idx = torch.zeros((2, 1), dtype=torch.long)
    out = model.generate(idx, max_new_tokens=40)  # runs well past block_size=16
    assert out.shape == (2, 41)
    greedy = [model.generate(idx, 30, top_k=1) for _ in range(2)]
    assert torch.equal(greedy[0], greedy[1])
    # top_k=1 picks the argmax of the last position's logits, seeing only the last block_size tokens
    context = greedy[0][:, :20]
    logits, _ = model(context[:, -16:])
    assert torch.equal(model.generate(context, 1, top_k=1)[:, -1], logits[:, -1].argmax(-1))


def test_encode_decode_round_trip_and_vocabulary():
    text = "hello world\nHELLO!"
    tok = CharTokenizer.from_text(text)
    assert tok.chars == sorted(set(text))
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode("eh") == [tok.chars.index("e"), tok.chars.index("h")]


def test_split_is_90_10_and_y_is_x_shifted_by_one():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    tok = CharTokenizer.from_text(text)
    splits = split_data(text, tok, block_size=8)
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
    splits = split_data(text, tok, block_size=256)
    assert len(splits["train"]) == 1_003_854 and len(splits["val"]) == 111_540
