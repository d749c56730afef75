"""What each method declares for a spec, without torch: its hyperparameters (validated like
the loop's own, ``trainables.params``), the labels it takes, the metrics it reports and the
check of a combination it cannot take (LaCon's heads against the encoder's width, VaSCL's
neighbours against the batch, ABALONE's ``init_from``), which its class runs when it is built
and the driver runs before a sweep.

May import: ``trainables.params``, ``trainables.errors`` (and ``trainables.warm_start``, torch,
only to look for an ABALONE ``init_from`` file).

Each method class takes these as its class attributes (``params = CE``), and the spec
(``contrasweep.spec``) reads them through ``trainables.registry.declaration`` without importing
the method's module, so a bad value is reported before torch is imported (well under a second;
importing a method's module took about 1 s). A method registered from outside this repository
(``registry.register``) declares them on its class only: the spec then imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainables.errors import UserError
from trainables.params import LOOP_PARAMS, Param

CLASSIFICATION_METRICS = ("accuracy", "macro_f1", "mcc", "f1")
PROBE_KS = (5, 10, 20)  # vascl.txt Table 3
REPRESENTATION_METRICS = ("cluster_acc", "nmi", *(f"probe{k}_acc" for k in PROBE_KS))
CONTRASTIVE = ("msc", "base", "bqueue", "bqproto")  # ABALONE's contrastive losses (Table 2)
BCE_FAMILY = ("bce", "focal", "asl")  # its BCE-based baselines (Sec. 4.2.2)

# trainables/methods/ce.py
CE: dict[str, Param] = {
    "classifier_dropout": Param("float", 0.1, 0.0, 1.0, high_open=True),
    "label_smoothing": Param("float", 0.0, 0.0, 1.0, high_open=True),
}

# trainables/methods/ce_scl.py
CE_SCL: dict[str, Param] = {
    **CE,
    "temperature": Param("float", 0.3, 0.0, 10.0, low_open=True, help="τ of the SCL term", symbol="τ"),
    "lam": Param("float", 0.9, 0.0, 1.0, help="λ: weight of SCL against CE", symbol="λ"),
}

# trainables/methods/scl_moo.py
SCL_MOO: dict[str, Param] = {
    **CE,
    "temperature": Param("float", 0.3, 0.0, 10.0, low_open=True, help="τ of Eq. 2-3 (Sec. 3: best 0.3)", symbol="τ"),
    "lam": Param("float", 0.3, 0.0, 1.0, help="λ of Eq. 4-5 (Sec. 3: best 0.3)", symbol="λ"),
    "r1": Param("float", 0.1, 0.0, 1.0, help="preference r = [r1, 1 - r1] (Sec. 3: best [0.1, 0.9])"),
    "moo": Param("str", "ls", choices=("ls", "epo"), help="linear scalarisation (Eq. 6) or EPO (Eq. 7)"),
    "epo_eps": Param("float", 1.0e-4, 0.0, 1.0, help="EPO: non-uniformity above which it balances"),
}

# trainables/methods/lacon.py
LACON: dict[str, Param] = {
    "temperature": Param("float", 0.1, 0.0, 10.0, low_open=True, help="τ (Sec. 4.4: best around 0.1–0.2)", symbol="τ"),
    "lam": Param("float", 0.5, 0.0, 100.0, help="λ, the weight of LER (Eq. 7)", symbol="λ"),
    "heads": Param("int", 6, 1, 4096, help="m heads of ICL′ (Eq. 4; Fig. 5b: 6 best); must divide d"),
    "use_icl": Param("bool", True),
    "use_lcl": Param("bool", True),
    "use_ler": Param("bool", True),
    "use_head": Param("bool", True, help="the projection head g (Table 3 'w/o g')"),
    "fusion": Param("bool", False, help="LaCon-fusion (Eq. 9)"),
    "fusion_window": Param("int", 3, 1, 65, help="token window of the fusion convolution (odd)"),
}

# trainables/methods/supcl_seq.py
SUPCL_SEQ: dict[str, Param] = {
    "dropouts": Param(
        "floats",
        [0.0, 0.1, 0.2],
        0.0,
        1.0,
        high_open=True,
        help="one view per dropout probability, duplicates included (Table 1)",
    ),
    "temperature": Param("float", 0.05, 0.0, 10.0, low_open=True, help="τ of Eq. 2 (Table 4: 0.05)", symbol="τ"),
    "probe_c": Param(
        "float",
        1.0,
        0.0,
        1.0e6,
        low_open=True,
        help="stage 2: inverse L2 strength of the linear layer (scikit-learn C)",
    ),
    "probe_max_iter": Param("int", 1000, 1, 100000, help="stage 2: L-BFGS iterations"),
}

# trainables/methods/representation.py
REPRESENTATION: dict[str, Param] = {
    "eval_kmeans_runs": Param("int", 10, 1, 1000, help="K-means runs averaged (Sec. 4.2.1: 10)"),
    "probe_splits": Param("int", 5, 0, 1000, help="few-shot probe splits per k (Sec. 4.2.1: 5); 0: no probe"),
    "probe_lr": Param("float", 1.0e-4, 0.0, 1.0, low_open=True, help="probe learning rate (Sec. 4.2.1)"),
    "probe_iterations": Param("int", 1000, 1, 1000000, help="probe iterations (Sec. 4.2.1: 1000)"),
}

# trainables/methods/simcse.py
SIMCSE: dict[str, Param] = {
    **REPRESENTATION,
    "temperature": Param("float", 0.05, 0.0, 10.0, low_open=True, help="τ of Eq. 1 (SimCSE: 0.05)", symbol="τ"),
}

# trainables/methods/vascl.py
VASCL: dict[str, Param] = {
    **REPRESENTATION,
    "temperature": Param("float", 0.05, 0.0, 10.0, low_open=True, help="τ of Eq. 1-2", symbol="τ"),
    "neighbours": Param("int", 16, 1, 100000, help="K of N(i), the in-batch nearest neighbours", symbol="K"),
    "delta": Param(
        "float", 15.0, 0.0, 1.0e6, low_open=True, help="Δ, the norm of δ* (App. A: 15 base, 30 large)", symbol="Δ"
    ),
    "ascent_steps": Param("int", 1, 0, 100, help="gradient-ascent steps of Eq. 3"),
    "head_lr": Param("float", 5.0e-4, 0.0, 1.0, low_open=True, help="learning rate of h (App. A: 5e-4)"),
    "head_dim": Param("int", 128, 1, 65536, help="output size of h (App. A: 128)"),
    "neighbour_grad": Param("bool", True, help="neighbourhood loss gradient reaches the encoder (Eq. 6)"),
    "clean_grad": Param(
        "bool",
        True,
        help="neighbourhood loss differentiates through the clean z too (Eq. 5 as "
        "written); false: clean z as constants (the authors' code)",
    ),
}

# trainables/methods/abalone.py
ABALONE: dict[str, Param] = {
    "loss": Param(
        "str",
        "msc",
        choices=(*CONTRASTIVE, *BCE_FAMILY),
        help="msc = L_MSC (Eq. 1-5); base/bqueue/bqproto = Table 2 ablations (Sec. 3.1, 4.2.1); "
        "bce/focal/asl = BCE-based baselines (Sec. 4.2.2)",
    ),
    "temperature": Param(
        "float",
        0.1,
        0.0,
        10.0,
        low_open=True,
        help="τ (Table 2 grid {0.07, 0.1, 0.2}; Sec. 5: 0.1 best, used for Table 3)",
        symbol="τ",
    ),
    "beta": Param(
        "float",
        0.1,
        0.0,
        1.0,
        low_open=True,
        help="β, weight of non-prototype repulsion terms (Eq. 1; App. A: 0.1, not searched)",
        symbol="β",
    ),
    "queue_size": Param("int", 512, 1, 10_000_000, help="K, the MoCo queue size (App. A: 512)", symbol="K"),
    "momentum": Param("float", 0.999, 0.0, 1.0, help="m of θ_k ← m·θ_k + (1 − m)·θ (App. A: 0.999)", symbol="m"),
    "proj_dim": Param("int", 256, 1, 65536, help="d, output size of the projection head (App. A: 256)"),
    "head_lr": Param(
        "float", 5.0e-5, 0.0, 1.0, low_open=True, help="learning rate of everything but the backbone (App. A: 5e-5)"
    ),
    "classifier_dropout": Param(
        "float", 0.1, 0.0, 1.0, high_open=True, help="dropout before the BCE-family classifier (App. A: dropout 0.1)"
    ),
    "focal_gamma": Param("float", 2.0, 0.0, 100.0, help="γ of L_FCL (App. A: 2)"),
    "asl_gamma_pos": Param("float", 0.0, 0.0, 100.0, help="γ+ of L_ASY (App. A: 0)"),
    "asl_gamma_neg": Param("float", 3.0, 0.0, 100.0, help="γ− of L_ASY (App. A: 3)"),
    "asl_clip": Param("float", 0.3, 0.0, 1.0, high_open=True, help="m, hard threshold of L_ASY (App. A: 0.3)"),
    "threshold": Param(
        "float",
        0.5,
        0.0,
        1.0,
        low_open=True,
        high_open=True,
        help="a label is predicted when its probability is >= threshold",
    ),
    "probe_lrs": Param(
        "floats",
        [1.0, 0.1, 0.01],
        0.0,
        100.0,
        low_open=True,
        help="linear evaluation: AdamW learning rates searched (App. A: {1, 1e-1, 1e-2})",
    ),
    "probe_weight_decays": Param(
        "floats",
        [1.0, 0.1, 0.01, 1.0e-4, 1.0e-6],
        0.0,
        100.0,
        help="linear evaluation: weight decays searched (App. A: {1, 1e-1, 1e-2, 1e-4, 1e-6})",
    ),
    "probe_epochs": Param("int", 40, 1, 100000, help="linear evaluation: epochs (App. A: 40)"),
    "probe_batch_size": Param(
        "int", 32, 1, 1_000_000, help="linear evaluation: batch size (not given by the paper; Sec. 4.3's 32)"
    ),
    "probe_restarts": Param(
        "int", 3, 1, 100, help="linear evaluation: logistic regressions per label, probabilities averaged (App. A: 3)"
    ),
    "probe_select": Param(
        "str",
        "label",
        choices=("label", "joint"),
        help="grid point per label by its validation F1 (App. A) or one for all labels by micro-F1",
    ),
    "cluster_keep_fraction": Param(
        "float",
        0.5,
        0.0,
        1.0,
        low_open=True,
        help="share of the label combinations (most frequent first) scored by Silhouette / "
        "Davies-Bouldin (Table 4: 50 %; App. D, Fig. 2 varies it)",
    ),
    "cluster_max_points": Param(
        "int", 10000, 2, 10_000_000, help="test embeddings scored by Silhouette / Davies-Bouldin (Table 4: 10^4)"
    ),
    "init_from": Param(
        "str",
        "",
        help="fine-tuning after contrastive learning (Sec. 5.2): a stage-1 checkpoint "
        "directory whose encoder.* weights start a bce/focal/asl run",
    ),
}


@dataclass(frozen=True)
class Declaration:
    name: str
    params: dict[str, Param]
    label_kind: str = "single"  # "single": class ids [B]; "multi": multi-hot [B, L] (data.task: multilabel)
    metric_names: tuple[str, ...] = CLASSIFICATION_METRICS  # what evaluate() reports per split
    sts_metric_names: tuple[str, ...] = ()  # ... and on validation when the spec gives STS pairs
    # ``check(hp, hidden_size)``, torch-free: what its class's ``check`` runs when it is built, and
    # what the driver runs on every value the searcher may give before a sweep
    # (``contrasweep.runner.checks.check_against_encoder``); ``reads_width``: it needs the encoder's
    # width, which the driver reads from the model's config.json (no transformers, no torch)
    check: Callable[[dict[str, Any], int], None] | None = None
    reads_width: bool = False
    # what its MLflow model returns per row (trainables.inference.OUTPUTS)
    serving_output: str = "probabilities"


def check_lacon(hp: dict[str, Any], hidden_size: int) -> None:
    """ICL′'s m heads split the encoder's d dimensions (Eq. 4): m must divide d; the fusion
    convolution's token window (Eq. 9) is centred, so odd."""
    heads = hp.get("heads", LACON["heads"].default)
    if hidden_size % heads:
        divisors = [k for k in range(1, min(hidden_size, 64) + 1) if hidden_size % k == 0]
        raise UserError(
            f"heads={heads} does not divide the encoder's hidden size {hidden_size}; "
            f"allowed: a divisor of {hidden_size} such as {', '.join(map(str, divisors))}"
        )
    window = hp.get("fusion_window", LACON["fusion_window"].default)
    if window % 2 == 0:
        raise UserError(f"fusion_window={window} is not allowed; allowed: an odd window")


def check_vascl(hp: dict[str, Any], hidden_size: int) -> None:
    """N(i) holds the K nearest neighbours of an example among the other rows of its batch."""
    k = hp.get("neighbours", VASCL["neighbours"].default)
    batch = hp.get("batch_size", LOOP_PARAMS["batch_size"].default)
    if not 1 <= k <= batch - 1:
        raise UserError(
            f"neighbours={k} is not allowed with batch_size={batch}; allowed: 1 <= neighbours <= batch_size - 1"
        )


def check_abalone_combination(hp: dict[str, Any]) -> None:
    """Fine-tuning after contrastive learning (Sec. 5.2) starts a BCE-family run, not a
    contrastive one, from a stage-1 checkpoint."""
    loss = hp.get("loss", ABALONE["loss"].default)
    if hp.get("init_from", "") and loss not in BCE_FAMILY:
        raise UserError(
            f"init_from is set with loss={loss!r}; allowed: init_from with loss bce, focal or asl "
            "(fine-tuning after contrastive learning, Sec. 5.2), or init_from ''"
        )


def check_abalone(hp: dict[str, Any], hidden_size: int) -> None:
    """The combination, and a stage-1 checkpoint that exists (torch is imported only to look
    for that file)."""
    check_abalone_combination(hp)
    if hp.get("init_from", ""):
        from trainables.warm_start import check_model_file  # torch: the declarations are torch-free

        check_model_file(hp["init_from"], "init_from")


DECLARATIONS: dict[str, Declaration] = {
    "ce": Declaration("ce", CE),
    "ce_scl": Declaration("ce_scl", CE_SCL),
    # after the classification metrics: the default sweep metric stays val/accuracy
    "scl_moo": Declaration("scl_moo", SCL_MOO, metric_names=CLASSIFICATION_METRICS + ("l1", "l2")),
    "lacon": Declaration("lacon", LACON, check=check_lacon, reads_width=True, serving_output="similarities"),
    "supcl_seq": Declaration("supcl_seq", SUPCL_SEQ),
    "simcse": Declaration(
        "simcse",
        SIMCSE,
        metric_names=REPRESENTATION_METRICS,
        sts_metric_names=("sts_spearman",),
        serving_output="embedding",
    ),
    "vascl": Declaration(
        "vascl",
        VASCL,
        metric_names=REPRESENTATION_METRICS,
        sts_metric_names=("sts_spearman",),
        check=check_vascl,
        serving_output="embedding",
    ),
    "abalone": Declaration(
        "abalone",
        ABALONE,
        label_kind="multi",
        check=check_abalone,
        serving_output="multilabel",
        metric_names=("micro_f1", "macro_f1", "hamming_loss", "head_macro_f1", "tail_macro_f1"),
    ),
}
