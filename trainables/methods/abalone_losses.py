"""ABALONE's ``loss`` hyperparameter (abalone_multilabel.txt) picks one row of Tables 2/3; this module
maps the name to the loss function (the losses themselves live in
``trainables.losses.multilabel_contrastive`` / ``multilabel_bce``) and says what each one needs:

==========  ==========================================  ============  ======  ==========
``loss``    loss                                        queue + key   protos  judged by
==========  ==========================================  ============  ======  ==========
msc         L_MSC, Eq. 1-5 (Sec. 3.3)                   yes           yes     linear eval
bqproto     L_BQProto (Sec. 4.2.1)                      yes           yes     linear eval
bqueue      L_BQueue (Sec. 4.2.1)                       yes           no      linear eval
base        L_Base, Jaccard SupCon (Sec. 3.1)           no            no      linear eval
bce         L_BCE (Sec. 4.2.2)                          no            no      its classifier
focal       L_FCL, γ = 2 (Sec. 4.2.2, App. A)           no            no      its classifier
asl         L_ASY, γ+ = 0, γ− = 3, m = 0.3 (App. A)     no            no      its classifier
==========  ==========================================  ============  ======  ==========

``contrastive_loss`` takes the projected batch z (plus queue and prototypes where the row says
so); ``bce_family_loss`` takes the classifier's logits. Hyperparameters come from the method's
``hp`` (τ, β, γ, ASL's clip), with the App. A defaults declared on the method.
"""

from __future__ import annotations

from typing import Any

import torch

from trainables.losses.multilabel_bce import asymmetric_loss, bce_loss, focal_loss
from trainables.losses.multilabel_contrastive import bqproto_loss, jaccard_supcon_loss, msc_loss
from trainables.methods.declarations import BCE_FAMILY, CONTRASTIVE  # noqa: F401 - the loss names, declared for the spec

WITH_QUEUE = ("msc", "bqueue", "bqproto")
WITH_PROTOTYPES = ("msc", "bqproto")


def contrastive_loss(
    hp: dict[str, Any],
    z: torch.Tensor,
    y: torch.Tensor,
    prototypes: torch.Tensor | None = None,
    queue_z: torch.Tensor | None = None,
    queue_y: torch.Tensor | None = None,
) -> torch.Tensor:
    """The stage-1 loss ``hp["loss"]`` (one of ``CONTRASTIVE``) of projections z [B, d] with
    multi-hot labels y [B, L]."""
    tau, loss = hp["temperature"], hp["loss"]
    if loss == "base":
        return jaccard_supcon_loss(z, y, tau)
    if loss == "bqueue":
        return jaccard_supcon_loss(z, y, tau, queue_z=queue_z, queue_y=queue_y)
    if loss == "bqproto":
        assert prototypes is not None  # the method makes them for every loss in WITH_PROTOTYPES
        return bqproto_loss(z, y, prototypes, tau, queue_z=queue_z, queue_y=queue_y)
    return msc_loss(z, y, tau, hp["beta"], prototypes=prototypes, queue_z=queue_z, queue_y=queue_y)


def bce_family_loss(hp: dict[str, Any], logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The classifier loss ``hp["loss"]`` (one of ``BCE_FAMILY``) of logits [B, L]."""
    if hp["loss"] == "bce":
        return bce_loss(logits, y)
    if hp["loss"] == "focal":
        return focal_loss(logits, y, hp["focal_gamma"])
    return asymmetric_loss(logits, y, hp["asl_gamma_pos"], hp["asl_gamma_neg"], hp["asl_clip"])
