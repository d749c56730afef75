"""STS pairs (vascl.txt Sec. 4.2.1): spec validation, tokenisation on the driver, and the
Spearman correlation a representation method reports as val/sts_spearman."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import loop_config, toy_tables
from scipy.stats import spearmanr

from contrasweep.data.sts import prepare_sts
from contrasweep.errors import DataError, SpecError
from contrasweep.spec.load import validate
from trainables.gather import StageContext
from trainables.loop import build_method
from trainables.sessions import LocalSession

PAIRS = [
    ("a good movie", "a good film", 4.8),
    ("the plot was bad", "a bad story", 3.9),
    ("the actor was very good", "the scene was long", 1.2),
    ("really bad", "really good", 0.4),
    ("the story", "the story", 5.0),
]


def write_pairs(path, rows=PAIRS, header="sentence1,sentence2,score"):
    path.write_text(header + "\n" + "\n".join(f"{a},{b},{s}" for a, b, s in rows) + "\n")
    return str(path)


def test_pairs_are_tokenised_with_row_order_kept(tmp_path, tiny_model_dir):
    sts = prepare_sts(write_pairs(tmp_path / "p.csv"), tiny_model_dir, 16)
    assert sts["a"].num_rows == sts["b"].num_rows == len(PAIRS)
    assert sts["a"].column("labels").to_pylist() == list(range(len(PAIRS)))
    np.testing.assert_allclose(sts["scores"], [s for _, _, s in PAIRS])


@pytest.mark.parametrize("content, message", [
    ("sentence1,sentence2,sim\na,b,1\nc,d,2\n", "has no column 'score'"),
    ("sentence1,sentence2,score\na,b,high\nc,d,low\n", "column 'score' is not numeric"),
    ("sentence1,sentence2,score\na,b,1\n", "has 1 complete pairs; allowed: at least 2"),
])
def test_bad_pairs_give_one_line(tmp_path, tiny_model_dir, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=message) as err:
        prepare_sts(str(path), tiny_model_dir, 16)
    assert "\n" not in str(err.value)


def test_spec_evaluation_section(tmp_path):
    base = {"method": "simcse", "data": {"source": "bbc_news"}, "grid": {"lr": [3.0e-5]}}
    with pytest.raises(DataError, match="evaluation.sts file .* does not exist"):
        validate({**base, "evaluation": {"sts": str(tmp_path / "nope.csv")}})
    with pytest.raises(SpecError, match="unknown key evaluation.clustering; allowed: evaluation.sts"):
        validate({**base, "evaluation": {"clustering": 1}})
    with pytest.raises(SpecError, match="sweep.metric='val/sts_spearman' is not allowed"):
        validate({**base, "sweep": {"metric": "val/sts_spearman"}})  # no STS pairs given
    sweep = validate({**base, "evaluation": {"sts": write_pairs(tmp_path / "p.csv")}, "sweep": {"metric": "val/sts_spearman"}})
    assert sweep.metric == ["val/sts_spearman"] and sweep.evaluation["sts"].endswith("p.csv")


def test_representation_method_reports_spearman_of_cosines(tmp_path, tiny_model_dir):
    data = toy_tables(tiny_model_dir, n_per_class=4)
    data["sts"] = prepare_sts(write_pairs(tmp_path / "p.csv"), tiny_model_dir, 16)
    method = build_method({**loop_config(tiny_model_dir, probe_splits=0, eval_kmeans_runs=1), "method": "simcse"}, 2)
    context = StageContext(data["tables"], 2, 2, LocalSession(), seed=0, epoch=1, data=data)  # batch 2: several gathers
    val = method.evaluate(context, "validation")
    with torch.no_grad():
        method.eval()
        from trainables.batches import eval_batches, to_device

        emb = {}
        for side in ("a", "b"):  # eval_batches goes longest rows first: put rows back in order
            parts = [(idx, method.representation(to_device(b, torch.device("cpu"))))
                     for idx, b in eval_batches(data["sts"][side], 8)]
            order = np.argsort(np.concatenate([idx for idx, _ in parts]))
            emb[side] = torch.cat([e for _, e in parts])[torch.from_numpy(order)]
    cosine = torch.nn.functional.cosine_similarity(emb["a"], emb["b"]).numpy()
    assert val["sts_spearman"] == pytest.approx(spearmanr(cosine, data["sts"]["scores"]).statistic)
    assert "sts_spearman" not in method.evaluate(context, "test")
