"""t-SNE of a sweep's registered model (LaCon Fig. 4): the test split's instance embeddings,
coloured by class, and the label embeddings of methods that learn them (LaCon's W_emb), in
one 2-D map (scikit-learn's ``TSNE``).

The checkpoint is the registered version (``contrasweep.tracking.models``: the best repeat of the best
configuration); its data are prepared again from the version's ``contrasweep.data`` tag and the
spec's encoder (a cache hit when the sweep ran on this machine). Vectors are L2-normalised
first: the methods compare them by cosine similarity, and label vectors have another scale.
"""

from __future__ import annotations

import json
import tempfile

import numpy as np

from contrasweep.data import DataConfig, load_splits, prepare
from contrasweep.tracking.models import DATA_TAG, SETTING_TAG, download, registered_versions, resolve
from contrasweep.tracking.store import get_client
from dashboards.plots import embedding
from dashboards.source import SweepRecord


def tsne_map(
    record: SweepRecord, path: str, version: str | None = None, max_points: int = 500, seed: int = 0
) -> tuple[str | None, str]:
    """(PNG path or None, a one-line caption saying what was drawn or why nothing was)."""

    client = get_client(record.tracking_uri)
    if not registered_versions(client, record.name):
        return None, f"no registered model for {record.name!r} (no complete configuration with a checkpoint)"
    chosen = resolve(client, record.name, version)
    data = json.loads(chosen.tags.get(DATA_TAG, "{}"))
    if data.get("task") == "multilabel":
        return None, "t-SNE is drawn for single-label data only (a multi-label instance has no one colour)"
    from trainables.loop import load_trained  # torch and transformers: only where embeddings are drawn

    with tempfile.TemporaryDirectory(prefix="contrasweep-model-") as folder:  # a copy of the weights per report
        method = load_trained(download(record.tracking_uri, chosen, folder))  # stayed in the temp folder (issue 57)
    table, names = _test_split(record, data, max_points, seed)
    x, y, labels = _embed(method, table)
    coords = _tsne(np.concatenate([x, labels]) if labels is not None else x, seed)
    label_coords = coords[len(x) :] if labels is not None else None
    setting = chosen.tags.get(SETTING_TAG, "")
    title = (
        f"{record.label} ({record.name} v{chosen.version}{', ' + setting if setting else ''}): "
        f"t-SNE of {len(x)} test rows"
    )
    caption = f"model {record.name} version {chosen.version} (run {chosen.run_id}); {len(x)} test rows" + (
        "; stars: label embeddings" if labels is not None else ""
    )
    return embedding(coords[: len(x)], y, names, label_coords, title, path), caption


def _test_split(record: SweepRecord, data: dict, max_points: int, seed: int):
    encoder = record.spec.get("encoder", {})
    prepared = prepare(
        DataConfig.from_dict(data),
        tokenizer=encoder.get("name", "default"),
        max_length=int(encoder.get("max_length", 128)),
    )
    table = load_splits(prepared.path)["test"]
    if table.num_rows > max_points:  # a fixed sample: t-SNE is quadratic in the points
        table = table.take(np.sort(np.random.default_rng(seed).choice(table.num_rows, max_points, replace=False)))
    return table, list(prepared.label_names)


def _embed(method, table):
    import torch

    from trainables.gather import split_outputs
    from trainables.sessions import LocalSession

    with torch.no_grad():
        x, y = split_outputs(method, table, 64, LocalSession(), method.instance_embeddings)
        labels = method.label_embeddings()
    return _unit(x), y, None if labels is None else _unit(labels.float().cpu().numpy())


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)


def _tsne(points: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.manifold import TSNE

    # perplexity must stay below the number of points; 30 (the default) for any real split
    perplexity = float(min(30.0, max(2.0, (len(points) - 1) / 3)))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(points)
