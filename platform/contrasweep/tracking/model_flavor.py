"""A complete trial's best checkpoint as an MLflow Model (docs/architecture.md, "Use the best
model"): ``mlflow.pyfunc`` over ``trainables.inference.Predictor``, so
``mlflow.pyfunc.load_model("models:/<sweep>@best")`` and ``mlflow models serve`` work for anyone
with the project installed.

The model folder (the run's artifact ``model/``): ``MLmodel`` with a signature (``text``, plus
``text_pair`` for pair tasks → the columns of ``trainables.outputs.output_columns``; where the
sweep's ``data.text`` / ``data.text_pair`` name other columns, each role takes either name:
both optional in the signature, ``predict`` reads the one present and refuses a frame with
neither) and an input example; ``python_model.pkl`` (this module's ``ContrasweepModel``, pickled by reference);
``artifacts/checkpoint`` (the best weights but the backbone's unread pooler, and ``meta.json``:
the only copy the store keeps),
``artifacts/encoder`` (the encoder's ``config.json`` and tokenizer files, not its pretrained
weights: the checkpoint holds every weight), ``artifacts/info.json`` (label names, max length,
pair task, the sweep's column names); requirements pinned to the versions that trained it. A representation method's
model (SimCSE, VaSCL) also carries ``artifacts/sentence_transformer``, a folder
sentence-transformers loads (its encoder's weights a second time, in Hugging Face's layout).

A user's method (``trainables.user_methods``) travels in the model's ``code_paths`` (its file or
package), which MLflow puts on ``sys.path`` where the model loads.

May import: MLflow, pandas, ``contrasweep.tracking.store``, ``trainables`` (declarations, checkpoint
names, ``outputs``, ``user_methods``; ``inference`` inside the model).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import mlflow.pyfunc
import pandas as pd
from mlflow.pyfunc import PythonModel

from contrasweep.tracking.store import MODEL_PATH
from trainables.checkpoints import META_FILE, UNREAD_WEIGHTS, WEIGHTS_FILE
from trainables.encoder_names import resolve_model_path
from trainables.outputs import output_columns
from trainables.registry import declaration
from trainables.user_methods import shipped_sources

SENTENCE_TRANSFORMER = "sentence_transformer"  # in a representation method's model: artifacts/<this>
# the encoder folder's files a model needs besides the weights: its architecture and tokenizer
ENCODER_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)
# a slow tokenizer's vocabulary: tokenizer.json (the fast tokenizer, all transformers loads when
# it is there) holds the same, so a folder with it does not carry these as well
SLOW_VOCABULARY = ("vocab.txt", "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model")
EXAMPLE = ("The service was quick and the staff were friendly.", "Was the staff friendly?")
PINNED = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "mlflow",
    "pandas",
    "numpy",
    "cloudpickle",
    "contrasweep",
)


def input_names(info: dict) -> dict[str, tuple[str, ...]]:
    """Each input role (``text``, and ``text_pair`` for a pair task) → the column names it is read
    from: the sweep's own (``info``'s ``text_column`` / ``text_pair_column``, the data section's
    ``data.text`` / ``data.text_pair``) first, then the role's name; one name where they agree
    (and in a model built before info recorded them), and where the role's name is the other
    role's own column (``data.text: text_pair``), which it then means."""
    roles = ("text", "text_pair") if info["is_pair"] else ("text",)
    own = {role: str(info.get(f"{role}_column") or role) for role in roles}
    return {role: tuple(dict.fromkeys([own[role]] + ([role] if role not in own.values() else []))) for role in roles}


class ContrasweepModel(PythonModel):
    """``predict(DataFrame[text(, text_pair)])`` (or the sweep's own column names) → one row per
    input (see the module docstring)."""

    def load_context(self, context):
        from trainables.inference import Predictor  # torch: in the serving process only

        info = json.loads(Path(context.artifacts["info"]).read_text())
        self.predictor = Predictor(context.artifacts["checkpoint"], context.artifacts["encoder"], info)
        self.inputs = input_names(info)

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        inputs = getattr(self, "inputs", None) or input_names(self.predictor.info)
        columns = {role: _column(model_input, names) for role, names in inputs.items()}
        return pd.DataFrame(self.predictor.predict(columns["text"], columns.get("text_pair")))


def _column(frame: pd.DataFrame, names: tuple[str, ...]) -> list[str]:
    """The first of ``names`` the frame has, as strings; none of them: MLflow's one-line error
    (a 400 from ``mlflow models serve``)."""
    from mlflow.exceptions import MlflowException

    for name in names:
        if name in frame.columns:
            return [str(t) for t in frame[name]]
    given = " or ".join(repr(n) for n in names)
    # (MLflow's schema check has dropped the columns the signature does not name, with a warning)
    raise MlflowException.invalid_parameter_value(f"Model is missing inputs: a column {given}")


def signature(info: dict, kind: str):
    """MLflow's signature: each input role's column required where it has one name; where the
    sweep's column has another, both names optional (MLflow's schema check passes a frame with
    either; ``predict`` refuses one with neither)."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Array, ColSpec, DataType, Schema, TensorSpec

    types: dict[str, DataType | Array] = {
        "string": DataType.string,
        "double": DataType.double,
        "list<string>": Array(DataType.string),
        "list<float>": Array(DataType.float),
    }
    inputs: list[ColSpec | TensorSpec] = [
        ColSpec(DataType.string, name, required=len(names) == 1)
        for names in input_names(info).values()
        for name in names
    ]
    outputs: list[ColSpec | TensorSpec] = [
        ColSpec(types[t], name) for name, t in output_columns(kind, [str(n) for n in info["label_names"]]).items()
    ]
    return ModelSignature(inputs=Schema(inputs), outputs=Schema(outputs))


def requirements() -> list[str]:
    from importlib import metadata

    pins = []
    for name in PINNED:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return pins


def encoder_files(source: str, into: Path) -> Path:
    """The encoder folder's architecture and tokenizer files (never its weights; the fast
    tokenizer's ``tokenizer.json`` without the slow one's vocabulary) in ``into``."""
    folder = Path(resolve_model_path(source))
    into.mkdir(parents=True)
    fast = (folder / "tokenizer.json").is_file()
    for name in ENCODER_FILES:
        if (folder / name).is_file() and not (fast and name in SLOW_VOCABULARY):
            shutil.copy2(folder / name, into / name)
    if not (into / "config.json").is_file():
        raise FileNotFoundError(f"encoder {source!r} has no config.json in {folder}")
    return into


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def served_weights(source: Path, target: Path) -> None:
    """``source``'s weights at ``target`` without ``trainables.checkpoints.UNREAD_WEIGHTS`` (the
    backbone's pooler: 0.6 MB of MiniLM's 91 MB, about what the model's tokenizer files add),
    written with safetensors' numpy API; a link to ``source`` when there is nothing to leave out
    or numpy cannot hold its dtype (bf16): every weight is kept then."""
    from safetensors.numpy import load_file, save_file

    try:
        weights = load_file(str(source))
    except (TypeError, ValueError, KeyError):
        weights = {}
    kept = {k: v for k, v in weights.items() if not UNREAD_WEIGHTS.search(k)}
    if not weights or len(kept) == len(weights):
        _link_or_copy(source, target)
        return
    save_file(kept, str(target), metadata={"format": "pt"})


def build_model(tmp: Path, best: Path, info: dict, encoder: str, method: str) -> Path:
    """An MLflow pyfunc model of the best folder ``best`` in ``tmp/model`` (logged by the
    caller as the trial run's ``model/``)."""
    kind = declaration(method).serving_output  # torch-free for the built-in methods
    staged = tmp / "checkpoint"
    staged.mkdir(parents=True)
    served_weights(best / WEIGHTS_FILE, staged / WEIGHTS_FILE)
    _link_or_copy(best / META_FILE, staged / META_FILE)
    (tmp / "info.json").write_text(json.dumps(info, indent=1))
    example = {names[0]: [text] for names, text in zip(input_names(info).values(), EXAMPLE)}  # the sweep's names
    artifacts = {
        "checkpoint": str(staged),
        "encoder": str(encoder_files(encoder, tmp / "encoder")),
        "info": str(tmp / "info.json"),
    }
    if kind == "embedding":
        artifacts[SENTENCE_TRANSFORMER] = str(
            sentence_transformer(best, tmp / "encoder", tmp / SENTENCE_TRANSFORMER, int(info["max_length"]))
        )
    model = tmp / MODEL_PATH
    mlflow.pyfunc.save_model(
        str(model),
        python_model=ContrasweepModel(),
        signature=signature(info, kind),
        input_example=pd.DataFrame(example),
        pip_requirements=requirements(),
        artifacts=artifacts,
        metadata={"contrasweep.method": method, "contrasweep.output": kind},
        code_paths=shipped_sources(method) or None,  # a user's method: its module, importable where the model loads
    )
    return model


def sentence_transformer(best: Path, encoder_dir: Path, into: Path, max_length: int) -> Path:
    """A sentence-transformers folder of a representation method's encoder, as the run
    evaluated it (``SentenceTransformer(into).encode(texts)`` = the model's ``embedding``): the
    checkpoint's ``encoder.backbone.*`` weights as a Hugging Face model, its tokenizer and
    config, ``modules.json`` (Transformer → Pooling), the run's pooling (``cls`` or masked
    ``mean``, trainables.encoder.pool) and truncation at ``max_length``. The weights are read and
    written with safetensors' numpy API (the driver never imports torch for this)."""
    from safetensors.numpy import load_file, save_file

    pooling = json.loads((best / META_FILE).read_text())["config"].get("encoder", {}).get("pooling", "mean")
    prefix = "encoder.backbone."
    weights = {k[len(prefix) :]: v for k, v in load_file(str(best / WEIGHTS_FILE)).items() if k.startswith(prefix)}
    shutil.copytree(encoder_dir, into)
    save_file(weights, str(into / "model.safetensors"), metadata={"format": "pt"})
    width = int(json.loads((into / "config.json").read_text())["hidden_size"])
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (into / "modules.json").write_text(json.dumps(modules, indent=1))
    (into / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_length, "do_lower_case": False}))
    (into / "1_Pooling").mkdir()
    modes = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")
    config = {"word_embedding_dimension": width, **{f"pooling_mode_{m}": False for m in modes}, "include_prompt": True}
    config["pooling_mode_cls_token" if pooling == "cls" else "pooling_mode_mean_tokens"] = True
    (into / "1_Pooling" / "config.json").write_text(json.dumps(config, indent=1))
    return into
