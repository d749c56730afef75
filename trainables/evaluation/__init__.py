"""Evaluation of frozen sentence representations as in VaSCL (vascl.txt Sec. 4.1, 4.2.1):
STS Spearman correlation, K-means short text clustering and few-shot linear probing.

Every function takes precomputed representations: the caller encodes each evaluation set
once with the frozen encoder and reuses the result for every K-means seed and probe split.
``few_shot_probe`` trains all its probes (splits × K) as one batched computation
(``linear_probes``) on the device it is given; ``linear_probe`` is the one-probe reference.
"""

from trainables.evaluation.clustering import clustering_accuracy, kmeans_scores
from trainables.evaluation.probe import few_shot_probe, linear_probes, probe_splits
from trainables.evaluation.probe_reference import linear_probe
from trainables.evaluation.sts import sts_spearman

__all__ = [
    "clustering_accuracy",
    "few_shot_probe",
    "kmeans_scores",
    "linear_probe",
    "linear_probes",
    "probe_splits",
    "sts_spearman",
]
