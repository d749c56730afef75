"""A trial's MLflow model (contrasweep.tracking.model_flavor) for every method: built from a
best checkpoint the real loop wrote, loaded with ``mlflow.pyfunc.load_model``, it predicts the
documented columns for 3 texts, equal to what ``trainables`` predicts for the same texts
tokenised as the sweep's data is (a representation method's sentence-transformers folder
encodes to the same vectors); the signature refuses a frame without ``text``, and a model of
a sweep whose data named other columns takes those as well. (The sweep's
own models in a real store and registry, and a real ``mlflow models serve``: test_sweep_e2e.py,
test_model_serving.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import LABELS, loop_config, multilabel_tables, toy_tables

from trainables.batches import to_device
from trainables.checkpoints import best_folder
from trainables.collate import collate_numpy
from trainables.loop import load_trained, train
from trainables.registry import get_method, method_names
from trainables.sessions import LocalSession

CASES = [  # one per method (test_methods_contract.py has their variants), LaCon with its fusion block
    ("ce", {}),
    ("ce_scl", {}),
    ("lacon", {"heads": 2, "fusion": True}),
    ("supcl_seq", {"dropouts": [0.0, 0.1, 0.1]}),
    ("scl_moo", {"moo": "ls"}),
    ("simcse", {"eval_kmeans_runs": 1, "probe_splits": 0}),
    ("vascl", {"neighbours": 3, "delta": 1.0, "eval_kmeans_runs": 1, "probe_splits": 0}),
    ("abalone", {"loss": "msc", "queue_size": 16, "proj_dim": 16, "probe_lrs": [0.1], "probe_weight_decays": [1e-2],
                 "probe_epochs": 2, "probe_restarts": 1, "threshold": 0.4}),
]
TEXTS = ["the movie was good really good", "a bad plot and a bad actor", "alpha news today beta"]
MAX_LENGTH = 16


def test_every_registered_method_has_a_case():
    assert {name for name, _ in CASES} == set(method_names())


@pytest.fixture(scope="module")
def tables(tiny_model_dir):
    return {"single": toy_tables(tiny_model_dir, n_per_class=8), "multi": multilabel_tables(tiny_model_dir)}


def _keys(path) -> set[str]:
    from safetensors import safe_open

    with safe_open(str(path), "np") as f:
        return set(f.keys())


def _expected(method, kind: str, names: list[str], tokenizer) -> dict:
    """What trainables predicts for TEXTS tokenised and padded as a sweep's data is
    (contrasweep.data.tokens.tokenize_splits, trainables.collate.collate_numpy)."""
    import pyarrow as pa

    enc = tokenizer(TEXTS, truncation=True, max_length=MAX_LENGTH, return_token_type_ids=True)
    table = pa.table({"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"], "labels": [0, 0, 0]})
    batch = {k: torch.as_tensor(v) for k, v in collate_numpy(table, range(3)).items() if k != "labels"}
    batch = to_device(batch, torch.device("cpu"))
    with torch.no_grad():
        if kind == "embedding":
            return {"embedding": method.representation(batch).numpy()}
        scores = method.predict(batch).float()
    if kind == "probabilities":
        scores = torch.softmax(scores, dim=-1)
    return {"scores": scores.numpy()}


@pytest.mark.parametrize("name, hp", CASES, ids=[c[0] for c in CASES])
def test_a_trials_mlflow_model_predicts_what_trainables_predicts(name, hp, tables, tiny_model_dir, tmp_path):
    import mlflow.pyfunc
    from mlflow.exceptions import MlflowException
    from transformers import AutoTokenizer

    from contrasweep.tracking.model_flavor import build_model

    multi = get_method(name).label_kind == "multi"
    data = tables["multi" if multi else "single"]
    names = LABELS if multi else ["negative", "positive"]
    metric = f"val/{get_method(name).metric_names[0]}"
    session = LocalSession(str(tmp_path / "trial"))
    train({**loop_config(tiny_model_dir, epochs=1, **hp), "method": name, "metric": metric,
           "num_labels": data["num_labels"]}, data, session)
    best = best_folder(session.checkpoints[-1])
    info = {"label_names": names, "is_pair": False, "max_length": MAX_LENGTH}

    folder = build_model(tmp_path / "build", best, info, tiny_model_dir, name)
    # the model's weights are the checkpoint's but the backbone's pooler (no method reads it, in
    # any encoder copy)
    trained, served = _keys(best / "model.safetensors"), _keys(folder / "artifacts" / "checkpoint" / "model.safetensors")
    pooler = {k for k in trained if "backbone.pooler." in k}
    assert pooler and served == trained - pooler
    model = mlflow.pyfunc.load_model(str(folder))
    out = model.predict(pd.DataFrame({"text": TEXTS}))

    kind = get_method(name).serving_output
    method = load_trained(str(best), num_labels=len(names))
    expected = _expected(method, kind, names, AutoTokenizer.from_pretrained(tiny_model_dir))
    assert len(out) == 3
    if kind == "embedding":
        assert list(out.columns) == ["embedding"]
        got = np.stack([np.asarray(e, dtype=np.float32) for e in out["embedding"]])
        assert got.shape == expected["embedding"].shape == (3, 32)
        np.testing.assert_allclose(got, expected["embedding"], rtol=1e-4, atol=1e-5)
        # its sentence-transformers folder encodes to the same vectors
        from sentence_transformers import SentenceTransformer

        encoder = SentenceTransformer(str(folder / "artifacts" / "sentence_transformer"), device="cpu")
        np.testing.assert_allclose(encoder.encode(TEXTS), got, rtol=1e-4, atol=1e-5)
        assert encoder.max_seq_length == MAX_LENGTH
    else:
        prefix = "prob_" if kind == "probabilities" else "score_"
        columns = [f"{prefix}{n}" for n in names]
        scores = out[columns].to_numpy()
        np.testing.assert_allclose(scores, expected["scores"], rtol=1e-4, atol=1e-5)
        if kind == "multilabel":
            assert list(out.columns) == ["labels", "threshold", *columns]
            assert (out["threshold"] == 0.4).all()
            assert [list(s) for s in out["labels"]] == [[n for n, s in zip(names, row) if s >= 0.4] for row in scores]
        else:
            assert list(out.columns) == ["label", *columns]
            assert list(out["label"]) == [names[i] for i in expected["scores"].argmax(1)]
            if kind == "probabilities":
                np.testing.assert_allclose(scores.sum(1), 1.0, rtol=1e-5)
    # the signature is MLflow's: its input and output columns, and its schema check before the model
    sig = model.metadata.get_input_schema().input_names(), model.metadata.get_output_schema().input_names()
    assert sig == (["text"], list(out.columns))
    with pytest.raises(MlflowException, match="text"):
        model.predict(pd.DataFrame({"sentence": TEXTS}))


def test_a_pair_task_model_takes_text_and_text_pair(tables, tiny_model_dir, tmp_path):
    """Pair tasks (NLI-style data): the second text is the pair's second segment, as the data
    was tokenised; the signature asks for both columns."""
    import mlflow.pyfunc
    from mlflow.exceptions import MlflowException
    from transformers import AutoTokenizer

    from contrasweep.tracking.model_flavor import build_model

    session = LocalSession(str(tmp_path / "trial"))
    train({**loop_config(tiny_model_dir, epochs=1), "method": "ce"}, tables["single"], session)
    best = best_folder(session.checkpoints[-1])
    names = ["entailment", "contradiction"]
    folder = build_model(tmp_path / "build", best, {"label_names": names, "is_pair": True, "max_length": MAX_LENGTH},
                         tiny_model_dir, "ce")
    model = mlflow.pyfunc.load_model(str(folder))
    pairs = ["a good movie", "the plot was bad", "news about beta"]
    out = model.predict(pd.DataFrame({"text": TEXTS, "text_pair": pairs}))
    assert model.metadata.get_input_schema().input_names() == ["text", "text_pair"]
    enc = AutoTokenizer.from_pretrained(tiny_model_dir)(TEXTS, pairs, truncation=True, max_length=MAX_LENGTH,
                                                         padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = torch.softmax(load_trained(str(best), num_labels=2).predict(dict(enc)), -1).numpy()
    np.testing.assert_allclose(out[["prob_entailment", "prob_contradiction"]].to_numpy(), expected, rtol=1e-4, atol=1e-6)
    with pytest.raises(MlflowException, match="text_pair"):
        model.predict(pd.DataFrame({"text": TEXTS}))

    # load_trained accepts the missing pooler and nothing else: a checkpoint without its classifier
    # is refused in one message naming the missing weight
    from safetensors.numpy import load_file, save_file

    broken = tmp_path / "broken"
    shutil.copytree(folder / "artifacts" / "checkpoint", broken)
    weights = load_file(str(broken / "model.safetensors"))
    dropped = next(k for k in weights if not k.startswith("encoder."))
    save_file({k: v for k, v in weights.items() if k != dropped}, str(broken / "model.safetensors"))
    with pytest.raises(RuntimeError, match=f"the weights do not fit the method 'ce' \\(missing \\['{dropped}'\\]"):
        load_trained(str(broken), num_labels=2)


def test_the_model_takes_the_sweeps_column_names_as_well_as_text(tables, tiny_model_dir, tmp_path):
    """Issue 70 (3): a sweep whose data named its columns (``data.text: message``,
    ``data.text_pair: question``) records them in the model's info (``Artifacts.model_info``);
    the model takes the user's names or ``text`` / ``text_pair`` with the same predictions,
    MLflow's schema check passes either (both optional in the signature), and a frame with
    neither is one MLflow error naming both."""
    import json

    import mlflow.pyfunc
    from mlflow.exceptions import MlflowException

    from contrasweep.folder.record import TrackingState
    from contrasweep.spec.static import SweepStatic, VariantStatic
    from contrasweep.tracking.artifacts import Artifacts
    from contrasweep.tracking.model_flavor import build_model

    names = ["entailment", "contradiction"]
    variant = VariantStatic(data={"source": "tickets.csv", "text": "message", "text_pair": "question"},
                            label_names=tuple(names), is_pair=True)
    static = SweepStatic(method="ce", variants=(variant,), max_length=MAX_LENGTH)
    info = Artifacts(None, TrackingState(tmp_path / "tracking.json"), static).model_info({"variant": 0})
    assert info == {"label_names": names, "is_pair": True, "max_length": MAX_LENGTH, "text_column": "message",
                    "text_pair_column": "question"}
    session = LocalSession(str(tmp_path / "trial"))
    train({**loop_config(tiny_model_dir, epochs=1), "method": "ce"}, tables["single"], session)
    folder = build_model(tmp_path / "build", best_folder(session.checkpoints[-1]), info, tiny_model_dir, "ce")
    assert json.loads((folder / "artifacts" / "info.json").read_text()) == info
    model = mlflow.pyfunc.load_model(str(folder))
    schema = model.metadata.get_input_schema()
    assert schema.input_names() == ["message", "text", "question", "text_pair"]
    assert not any(spec.required for spec in schema.inputs)
    pairs = ["a good movie", "the plot was bad", "news about beta"]
    theirs = model.predict(pd.DataFrame({"message": TEXTS, "question": pairs}))
    ours = model.predict(pd.DataFrame({"text": TEXTS, "text_pair": pairs}))
    assert list(theirs["label"]) == list(ours["label"]) and len(theirs) == 3
    pd.testing.assert_frame_equal(theirs, ours)
    pd.testing.assert_frame_equal(model.predict(pd.DataFrame({"message": TEXTS, "text_pair": pairs})), ours)
    for frame, missing in ((pd.DataFrame({"sentence": TEXTS, "question": pairs}), "'message' or 'text'"),
                           (pd.DataFrame({"message": TEXTS}), "'question' or 'text_pair'")):
        with pytest.raises(MlflowException) as raised:
            model.predict(frame)
        assert str(raised.value) == f"Model is missing inputs: a column {missing}"

    # a single-text task: the user's column or text; the default name (data.text unset) stays required
    single = {"label_names": names, "is_pair": False, "max_length": MAX_LENGTH, "text_column": "message"}
    model = mlflow.pyfunc.load_model(str(build_model(tmp_path / "single", best_folder(session.checkpoints[-1]), single,
                                                     tiny_model_dir, "ce")))
    assert model.metadata.get_input_schema().input_names() == ["message", "text"]
    pd.testing.assert_frame_equal(model.predict(pd.DataFrame({"message": TEXTS})),
                                  model.predict(pd.DataFrame({"text": TEXTS})))
    # a sweep whose columns are the other role's names: each role reads its own column only
    from contrasweep.tracking.model_flavor import input_names, signature

    swapped = {"label_names": names, "is_pair": True, "max_length": MAX_LENGTH, "text_column": "text_pair",
               "text_pair_column": "text"}
    assert input_names(swapped) == {"text": ("text_pair",), "text_pair": ("text",)}
    assert [(c.name, c.required) for c in signature(swapped, "probabilities").inputs.inputs] == [
        ("text_pair", True), ("text", True)]
    plain = Artifacts(None, TrackingState(tmp_path / "t2.json"), SweepStatic(
        method="ce", variants=(VariantStatic(data={"source": "x.csv"}, label_names=tuple(names)),))).model_info({})
    assert plain["text_column"] == "text" and "text_pair_column" not in plain


def test_the_driver_builds_a_trials_model_without_torch_or_transformers(tables, tiny_model_dir, tmp_path):
    """The driver logs a model for trials it tracks: it writes the weights, the encoder's files
    and the signature (``trainables.outputs``) without importing torch or transformers, each
    2-5 s of CPU in every driver process (a classifier's model and a representation method's,
    whose sentence-transformers folder is written with safetensors' numpy API)."""
    import subprocess
    import sys

    session = LocalSession(str(tmp_path / "trial"))
    train({**loop_config(tiny_model_dir, epochs=1), "method": "ce"}, tables["single"], session)
    best = best_folder(session.checkpoints[-1])
    code = ("import sys\nfrom pathlib import Path\nfrom contrasweep.tracking.model_flavor import build_model\n"
            "info = {'label_names': ['negative', 'positive'], 'is_pair': False, 'max_length': 16}\n"
            "for method in ('ce', 'simcse'):\n"
            f"    print(build_model(Path({str(tmp_path)!r}) / method, Path({str(best)!r}), info, {tiny_model_dir!r}, method))\n"
            "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'sklearn') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "HEAVY []" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert (tmp_path / "ce" / "model" / "MLmodel").is_file()
    assert (tmp_path / "simcse" / "model" / "artifacts" / "sentence_transformer" / "modules.json").is_file()


def test_the_encoder_folder_has_the_fast_tokenizer_only(tmp_path):
    """The bundled MiniLM ships both tokenizers; the model keeps tokenizer.json (not vocab.txt)
    and tokenises exactly as the encoder's own folder does, pairs and truncation included."""
    from transformers import AutoTokenizer

    from contrasweep.tracking.model_flavor import encoder_files
    from trainables.encoder_names import resolve_model_path

    source = Path(resolve_model_path("default"))
    folder = encoder_files("default", tmp_path / "encoder")
    assert (source / "vocab.txt").is_file() and not (folder / "vocab.txt").exists()
    assert {p.name for p in folder.iterdir()} == {"config.json", "tokenizer.json", "tokenizer_config.json",
                                                  "special_tokens_map.json"}
    ours, theirs = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(source)
    texts, pairs = ["Naïve café au lait, 3 000 km!", "a plot so long " * 20], ["Was it good?", "no"]
    for kwargs in ({}, {"text_pair": pairs, "truncation": True, "max_length": 16}):
        assert ours(texts, **kwargs) == theirs(texts, **kwargs)


def test_a_model_that_cannot_be_built_is_one_line_and_the_weights_stay_logged(tmp_path, capsys):
    """A model that cannot be built (here: its data variant has no label names): the trial's
    weights are logged as plain files, the run says why it has no model, the summary says it in
    one line, and the registry still finds the weights."""
    from contrasweep.console.summary import model_errors
    from contrasweep.tracking.artifacts import Artifacts, logged_weights
    from contrasweep.folder.record import TrackingState
    from contrasweep.tracking.store import get_client

    client = get_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("x", artifact_location=str(tmp_path / "art"))).info.run_id
    best = tmp_path / "best-e0002"
    best.mkdir()
    (best / "model.safetensors").write_bytes(b"weights")
    (best / "meta.json").write_text("{}")
    state = TrackingState(tmp_path / "tracking.json")
    entry = state.data["trials"]["t0"] = {"run_id": run_id, "name": "ce lr=0.001 · seed=0", "variant": 0}
    from contrasweep.spec.static import SweepStatic

    Artifacts(client, state, SweepStatic(method="ce")).log_checkpoint(entry, best)
    state.save()

    assert {a.path for a in client.list_artifacts(run_id, "best_checkpoint")} == {
        "best_checkpoint/model.safetensors", "best_checkpoint/meta.json"}
    assert not client.list_artifacts(run_id, "model") and logged_weights(client, run_id) == "best_checkpoint"
    assert entry["model_error"] == "ValueError: data variant 0 has no label names in the sweep's fixed part"
    assert model_errors(tmp_path) == [entry["model_error"]]
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[contrasweep]")]
    assert lines == [f"[contrasweep] ce lr=0.001 · seed=0: no MLflow model ({entry['model_error']}); its best weights "
                    "are logged as files (best_checkpoint/)"]


def test_a_user_methods_model_carries_its_code_and_loads_where_the_file_is_not(tables, tiny_model_dir, tmp_path):
    """Issue 56: the model of a method named by its file (``examples/ce_supcon.py`` copied to a
    folder of its own) carries that file (MLflow ``code_paths``); loaded in a fresh process after
    the folder is gone, it predicts what the trained method predicts."""
    import json
    import subprocess
    import sys

    from contrasweep.tracking.model_flavor import build_model

    source = tmp_path / "lab"
    source.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "ce_supcon.py", source / "ce_supcon.py")
    method = f"{source}/ce_supcon.py:CESupCon"
    session = LocalSession(str(tmp_path / "trial"))
    train({**loop_config(tiny_model_dir, epochs=1), "method": method}, tables["single"], session)
    best = best_folder(session.checkpoints[-1])
    info = {"label_names": ["negative", "positive"], "is_pair": False, "max_length": MAX_LENGTH}
    folder = build_model(tmp_path / "build", best, info, tiny_model_dir, method)
    assert (folder / "code" / "ce_supcon.py").read_text() == (source / "ce_supcon.py").read_text()
    import mlflow.pyfunc

    expected = mlflow.pyfunc.load_model(str(folder)).predict(pd.DataFrame({"text": TEXTS}))
    shutil.rmtree(source)
    script = ("import json, sys, mlflow.pyfunc, pandas as pd; m = mlflow.pyfunc.load_model(sys.argv[1]); "
              "print(json.dumps(m.predict(pd.DataFrame({'text': json.loads(sys.argv[2])}))"
              "[['prob_negative', 'prob_positive']].values.tolist()))")
    done = subprocess.run([sys.executable, "-c", script, str(folder), json.dumps(TEXTS)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    mlflow_predict = np.array(json.loads(done.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(mlflow_predict, expected[["prob_negative", "prob_positive"]].to_numpy(), rtol=1e-5)
