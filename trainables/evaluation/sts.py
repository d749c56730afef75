"""Semantic textual similarity of frozen sentence representations (vascl.txt Sec. 4.2.1,
"Semantic Textual Similarity", footnote 3, Table 1): the Spearman rank correlation between
the cosine similarity of each sentence pair's representations and its gold score.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr


def sts_spearman(emb1, emb2, scores) -> float:
    """Spearman correlation between ``cos(emb1[i], emb2[i])`` and ``scores[i]``.

    Footnote 3 (as Reimers and Gurevych 2019; Gao et al. 2021): the pairs of all topics of a
    task are concatenated and one overall correlation is reported, so the caller passes every
    pair of the task at once; this function computes exactly one correlation over them.

    Args:
        emb1: ``[N, d]`` representations of the first sentence of each pair (numpy or CPU torch).
        emb2: ``[N, d]`` representations of the second sentence.
        scores: ``[N]`` gold similarity scores (e.g. 0-5).

    Returns:
        Spearman's rho in ``[-1, 1]`` (ties get average ranks, scipy's default); NaN when the
        cosines or the scores are constant. A zero representation has cosine 0 with anything.
    """
    a = np.asarray(emb1, dtype=np.float64)
    b = np.asarray(emb2, dtype=np.float64)
    y = np.asarray(scores, dtype=np.float64).ravel()
    if a.ndim != 2 or a.shape != b.shape or len(a) != len(y):
        raise ValueError(f"emb1 {a.shape} and emb2 {b.shape} must both be [N, d] with N = len(scores) = {len(y)}")
    if len(y) < 2:
        raise ValueError("a rank correlation needs at least two pairs")
    tiny = np.finfo(np.float64).tiny
    norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), tiny)
    cosine = np.einsum("nd,nd->n", a, b) / norms
    return float(spearmanr(cosine, y).statistic)
