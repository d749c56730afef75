"""LaCon as a method: matching prediction (Eq. 8), the heads check, the fusion block (Eq. 9)."""

from __future__ import annotations

import pytest
import torch

from trainables.encoder import load_encoder
from contrasweep.errors import UserError
from trainables.methods.lacon import LaCon, LabelFusion
from trainables.losses.lacon import cosine


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    return load_encoder(tiny_model_dir, "cls")


def batch():
    ids = torch.tensor([[101, 2204, 3185, 102, 0], [101, 2919, 102, 0, 0]])
    return {"input_ids": ids, "attention_mask": (ids > 0).long(), "token_type_ids": torch.zeros_like(ids),
            "labels": torch.tensor([0, 1])}


def test_prediction_is_matching_against_label_embeddings(encoder):
    model = LaCon(encoder, 3, {"heads": 2}).eval()
    b = batch()
    scores = model.predict(b)
    assert scores.shape == (2, 3)
    assert torch.allclose(scores, cosine(model.represent(b), model.label_emb))
    # no classifier layer: the only C-sized parameter is W_emb
    assert [n for n, p in model.named_parameters() if 3 in p.shape] == ["label_emb"]


def test_heads_must_divide_hidden_size(encoder):
    with pytest.raises(UserError, match=r"heads=6 does not divide the encoder's hidden size 32; allowed: a divisor of 32"):
        LaCon(encoder, 3, {"heads": 6})


def test_fusion_weights_ignore_padding():
    torch.manual_seed(0)
    fusion = LabelFusion(num_labels=3, window=3)
    tokens = torch.randn(1, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0]])
    labels = torch.randn(3, 8)
    z = fusion(tokens, mask, labels)
    changed = tokens.clone()
    changed[:, 3:] = 100.0  # padding positions
    assert torch.allclose(z, fusion(changed, mask, labels), atol=1e-6)
    assert z.shape == (1, 8)


def test_fusion_changes_the_representation(encoder):
    torch.manual_seed(0)
    vanilla = LaCon(encoder, 2, {"heads": 2}).eval()
    torch.manual_seed(0)
    fused = LaCon(encoder, 2, {"heads": 2, "fusion": True}).eval()
    fused.load_state_dict(vanilla.state_dict(), strict=False)
    assert not torch.allclose(vanilla.represent(batch()), fused.represent(batch()))
