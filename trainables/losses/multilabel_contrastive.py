"""Multi-label supervised contrastive losses of ABALONE (abalone_multilabel.txt, Audibert et al.):
the Jaccard-weighted baseline L_Base (Sec. 3.1), its ablations L_BQueue and L_BQProto (Sec. 4.2.1)
and the balanced Multi-label Supervised Contrastive loss L_MSC (Sec. 3.3, Eq. 1–5).

Notation (Sec. 3). B is the batch, L the number of labels, ``z`` ``[B, d]`` the projections of
the batch, ``y`` ``[B, L]`` their multi-hot label vectors (float or bool). The optional queue Q
(``queue_z`` ``[K, d]``, ``queue_y`` ``[K, L]``) holds the momentum-encoder embeddings of the K
preceding instances (Sec. 3.2, App. B; see trainables/methods/momentum_queue.py); it is detached here,
so no gradient ever reaches it. H = I_B ∪ Q. The optional prototypes C (``prototypes``
``[L, d]``, row j = c_j) are trainable and do receive gradients. "·" is cosine similarity
(Sec. 3.1): batch, queue and prototype vectors are all L2-normalised here, so raw vectors are
fine. Anchors are the batch instances only (queue entries and prototypes are never anchors).

The four losses, from the simplest (Table 2 order), and exactly what separates them:

* ``jaccard_supcon_loss`` — L_Base (Sec. 3.1)::

      L_Base = −1/|B| Σ_i 1/N(i) Σ_{j≠i} J(y_i, y_j) · log( exp(z_i·z_j/τ) / Σ_{k≠i} exp(z_i·z_k/τ) )
      N(i)   = Σ_{j≠i} J(y_i, y_j),   J(a, b) = |a ∩ b| / |a ∪ b|  (Jaccard; J = 0 if a ∪ b = ∅)

  The Jaccard weight sits outside the log (App. C: inside it would not change the gradient).
* L_BQueue = ``jaccard_supcon_loss`` with ``queue_z``/``queue_y`` — Sec. 4.2.1: "L_Base with
  additional positive instances using a queue". The candidate set (positives j and denominator
  k) becomes H \\ {z_i} instead of I_B \\ {z_i}; nothing else changes.
* ``bqproto_loss`` = L_BQProto — Sec. 4.2.1: "integrating prototypes into the previous L_BQueue
  loss function". The candidate set becomes H ∪ C \\ {z_i}, and a prototype c_j is treated as
  one more candidate whose label vector is the one-hot e_j, so it gets the same Jaccard weight
  as an instance would: J(y_i, e_j) = 1/|y_i| if j ∈ y_i, else 0 (it is then a negative, in the
  denominator only). Still one log-softmax over an unweighted denominator (no g), still one
  sum over candidate instances per anchor (no per-label iteration, no f).
* ``msc_loss`` = L_MSC (Eq. 2–5). Relative to L_BQProto it changes the attraction AND the
  repulsion — the two "Attraction-Repulsion Imbalance" changes of Sec. 3.2:

      L_MSC   = 1/|B| Σ_i ℓ(z_i)                                                        (2)
      ℓ(z_i)  = −1/|y_i| Σ_{j∈Δ(z_i)} 1/N(i,j) Σ_{z_l∈P(j,i)∪{c_j}} f(z_i,z_l)
                    · log( exp(z_i·z_l/τ) / Σ_{z_k∈H∪C\\z_i} g_i(z_k,β) exp(z_i·z_k/τ) )  (3)
      g_i(z_k, β) = 1 if z_k ∈ C, β otherwise                                           (1)
      f(z_i, z_l) = 1 if z_l ∈ C, 1/|y_i ∪ y_l| otherwise                               (4)
      N(i,j)  = Σ_{z_l∈P(j,i)∪{c_j}} f(z_i, z_l)                                         (5)

  with Δ(z_i) the labels of i and P(j,i) the members of H with label j, minus z_i.
  (a) attraction: iterate over each positive label j of the anchor and normalise per label
  (1/|y_i| Σ_j 1/N(i,j)), each positive weighted by f instead of the Jaccard index;
  (b) repulsion: every non-prototype term of the denominator is multiplied by β.
  ``use_weights=False`` switches both weights off (f ≡ 1, g ≡ 1, β ignored) but keeps the
  per-label structure; it is a diagnostic, not a row of Table 2 (L_BQProto is ``bqproto_loss``).

Reading of the printed equations (decided here, tested in tests/test_loss_multilabel.py):

* τ in the denominator of Eq. 3. The printed Eq. 3 has exp(z_i·z_l/τ) above but
  g·exp(z_i·z_k) below (no /τ). We read it as a typo and divide by τ in both places: L_Base,
  whose extension L_MSC is, has /τ in both; App. B passes τ to the loss once; the text claims
  Eq. 4 makes the loss "coincide with the Jaccard similarity in scenarios where labels are
  balanced", which is only possible with the same τ (see the reduction below); and without it
  the ratio is not a (weighted) softmax and can exceed 1 (negative loss).
* Eq. 3 prints f(z_i, z_j) inside the sum over z_l; Eq. 5 shows it must be f(z_i, z_l).
* "Balanced" reduction (Sec. 3.3 remark). For an anchor i, if N(i,j) (without prototypes) is
  the same for all its labels j that have a positive, then with no prototypes and β = 1
  ℓ(z_i) equals L_Base's term for i: summing Eq. 3 over j gives the weight
  |y_i ∩ y_l| / |y_i ∪ y_l| / (n_i · N') on each z_l, and n_i · N' = Σ_j N(i,j) = N(i).
  This holds for every mono-label batch (N(i,j) = number of other instances of i's class), and
  e.g. for label sets {0,1},{0,1},{0},{1}. Without prototypes, β only adds log β to every
  term of Eq. 3 (the weights of a term sum to one), so msc(β) = msc(1) + log β: same gradient.

Edge cases (a finite, documented convention; the paper leaves them undefined):

* An anchor with no positive at all — no label, or no candidate sharing a label with it (and
  no prototypes) — has 1/N(i) = 1/0 (L_Base) or |y_i| = 0 (L_MSC). It contributes 0.
* A label j of an anchor with no positive — a label seen once in the batch, not in the queue,
  and no prototypes — gives 1/N(i,j) = 1/0: the (i, j) term contributes 0. With prototypes
  c_j is always a positive, so N(i,j) ≥ 1 and every labelled anchor has a term (Sec. 3.2:
  prototypes guarantee "at least as many positive instances as the number of labels").
* ``reduction="mean"`` (default) averages over what is defined: in L_MSC, ℓ(z_i) averages its
  (i, j) terms over the labels of i that have a positive (1/|y_i| when all do), and the loss
  averages ℓ over the anchors that have at least one such term (1/|B| when all do). The same
  holds for L_Base and ablations (anchors with N(i) > 0). This keeps the scale of the loss (and
  of its gradient) independent of how many tail-label anchors happen to lack positives in a
  batch, and is the convention of the sibling ``supcon_loss`` (Khosla et al.'s reference
  code). With prototypes every labelled anchor is defined, so the only difference from Eq. 2
  is that label-less instances are not counted. ``reduction="paper"`` is Eq. 2 / Sec. 3.1
  verbatim: 1/|B| over all anchors and 1/|y_i| over all labels, undefined terms counted as 0.
* A batch where nothing is defined gives a loss of 0 that still depends on ``z`` (and the
  prototypes), so autograd and DDP see every parameter used. A single instance with no queue
  and no prototypes (empty denominator) also gives 0.
* Label-less instances, and instances sharing no label with the anchor, are negatives: they
  stay in every denominator. Two label-less instances are not positives of each other (J = 0).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from trainables.losses.common import masked_log_softmax, self_mask

_REDUCTIONS = ("mean", "paper")


def _candidates(z: torch.Tensor, y: torch.Tensor, queue_z, queue_y, prototypes, temperature):
    """Normalised anchors [B, d], candidate embeddings [M, d] (batch, queue, prototypes in that
    order), their label matrix [M, L] (one-hot rows for prototypes) and a prototype flag [M]."""
    if not temperature > 0:
        raise ValueError(f"temperature={temperature}; allowed: τ > 0")
    if z.dim() != 2 or y.dim() != 2 or y.shape[0] != z.shape[0]:
        raise ValueError(f"z {tuple(z.shape)} and y {tuple(y.shape)}; allowed: z [B, d] and y [B, L]")
    if (queue_z is None) != (queue_y is None):
        raise ValueError("queue_z and queue_y; allowed: both given or both None")
    n_labels = y.shape[1]
    y = y.to(z.dtype)
    zn = F.normalize(z, dim=-1)
    parts_z, parts_y = [zn], [y]
    if queue_z is not None:
        if queue_z.shape[0] != queue_y.shape[0] or queue_z.shape[1:] != z.shape[1:] or queue_y.shape[1] != n_labels:
            raise ValueError(
                f"queue_z {tuple(queue_z.shape)}, queue_y {tuple(queue_y.shape)}; "
                f"allowed: [K, {z.shape[1]}] and [K, {n_labels}]"
            )
        parts_z.append(F.normalize(queue_z.detach().to(z.dtype), dim=-1))
        parts_y.append(queue_y.detach().to(z.dtype))
    n_inst = sum(p.shape[0] for p in parts_z)
    if prototypes is not None:
        if prototypes.shape != (n_labels, z.shape[1]):
            raise ValueError(f"prototypes {tuple(prototypes.shape)}; allowed: [L, d] = [{n_labels}, {z.shape[1]}]")
        parts_z.append(F.normalize(prototypes.to(z.dtype), dim=-1))
        parts_y.append(torch.eye(n_labels, dtype=z.dtype, device=z.device))
    cand_z, cand_y = torch.cat(parts_z), torch.cat(parts_y)
    is_proto = torch.arange(cand_z.shape[0], device=z.device) >= n_inst
    return zn, y, cand_z, cand_y, is_proto


def _zero(z: torch.Tensor, prototypes) -> torch.Tensor:
    """A 0 that still depends on every input that could carry a gradient."""
    out = z.sum() * 0.0
    return out + prototypes.sum() * 0.0 if prototypes is not None else out


def _prologue(z, y, temperature, queue_z, queue_y, prototypes, reduction):
    """Checked reduction, normalised anchors and candidates (batch, queue, prototypes) and the
    anchor-is-candidate mask; None when there is nothing to contrast with (one candidate)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction {reduction!r}; allowed: {', '.join(map(repr, _REDUCTIONS))}")
    zn, y, cand_z, cand_y, is_proto = _candidates(z, y, queue_z, queue_y, prototypes, temperature)
    if cand_z.shape[0] <= 1:
        return None
    return zn, y, cand_z, cand_y, is_proto, self_mask(zn.shape[0], cand_z.shape[0], z.device)


def _jaccard_contrast(z, y, temperature, queue_z, queue_y, prototypes, reduction):
    parts = _prologue(z, y, temperature, queue_z, queue_y, prototypes, reduction)
    if parts is None:
        return _zero(z, prototypes)
    zn, y, cand_z, cand_y, _, own = parts
    b = zn.shape[0]
    log_prob = masked_log_softmax(zn @ cand_z.T / temperature, ~own)  # [B, M], −inf at l = i
    inter = y @ cand_y.T  # |y_i ∩ y_l|
    union = y.sum(1, keepdim=True) + cand_y.sum(1)[None, :] - inter  # |y_i ∪ y_l|
    jacc = torch.where(own, 0.0, inter / union.clamp_min(1))  # J = 0 if a ∪ b = ∅
    norm = jacc.sum(1)  # N(i)
    valid = norm > 0
    # Σ_j J·log_prob, with the where keeping 0·(−inf) at the anchor's own column out
    weighted = torch.where(jacc > 0, jacc * log_prob, torch.zeros_like(log_prob)).sum(1)
    per_anchor = -torch.where(valid, weighted / norm.clamp_min(1e-12), torch.zeros_like(norm))
    count = valid.sum().clamp_min(1) if reduction == "mean" else b
    return per_anchor.sum() / count


def jaccard_supcon_loss(
    z: torch.Tensor,
    y: torch.Tensor,
    temperature: float = 0.1,
    queue_z: torch.Tensor | None = None,
    queue_y: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """L_Base (Sec. 3.1); with ``queue_z``/``queue_y`` the ablation L_BQueue (Sec. 4.2.1).

    Args:
        z: ``[B, d]`` batch projections (normalised here).
        y: ``[B, L]`` multi-hot labels, float or bool.
        temperature: τ > 0 (paper grid 0.07, 0.1, 0.2; Table 2).
        queue_z, queue_y: ``[K, d]``, ``[K, L]`` momentum-encoder embeddings of previous batches
            and their labels (detached here); they join positives and denominator, never anchors.
        reduction: ``"mean"`` over anchors with N(i) > 0 (default) or ``"paper"`` (1/|B|);
            see the module docstring.
    """
    return _jaccard_contrast(z, y, temperature, queue_z, queue_y, None, reduction)


def bqproto_loss(
    z: torch.Tensor,
    y: torch.Tensor,
    prototypes: torch.Tensor,
    temperature: float = 0.1,
    queue_z: torch.Tensor | None = None,
    queue_y: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """L_BQProto (Sec. 4.2.1): L_BQueue with the label prototypes C added to the candidates.

    Prototype c_j is a candidate with label vector e_j: a positive of weight
    J(y_i, e_j) = 1/|y_i| for each label j of the anchor, a plain negative otherwise. The
    denominator is the unweighted Σ over H ∪ C \\ {z_i} (no β). Arguments as in
    ``jaccard_supcon_loss``; ``prototypes`` ``[L, d]`` is trainable (gradients reach it).
    """
    return _jaccard_contrast(z, y, temperature, queue_z, queue_y, prototypes, reduction)


def msc_loss(
    z: torch.Tensor,
    y: torch.Tensor,
    temperature: float = 0.1,
    beta: float = 0.1,
    prototypes: torch.Tensor | None = None,
    queue_z: torch.Tensor | None = None,
    queue_y: torch.Tensor | None = None,
    use_weights: bool = True,
    reduction: str = "mean",
) -> torch.Tensor:
    """L_MSC (Sec. 3.3, Eq. 1–5), the balanced multi-label supervised contrastive loss.

    Args:
        z: ``[B, d]`` batch projections (normalised here).
        y: ``[B, L]`` multi-hot labels, float or bool.
        temperature: τ > 0, used in numerator and denominator of Eq. 3 (module docstring).
        beta: β > 0, weight g of every non-prototype term of the denominator (Eq. 1); the paper
            requires 0 < β < 1 and uses 0.1 (App. A, not searched). β = 1 disables Eq. 1. It only
            enters the denominator.
        prototypes: ``[L, d]`` trainable label prototypes C (row j = c_j), or None (no prototypes:
            positives come from H only, and the denominator runs over H \\ {z_i}).
        queue_z, queue_y: ``[K, d]``, ``[K, L]`` the momentum queue Q (detached here), or None.
        use_weights: False sets f ≡ 1 and g ≡ 1 (β ignored) — a diagnostic variant, not L_BQProto.
        reduction: ``"mean"`` (default) or ``"paper"``; see the module docstring.

    Vectorised: for the weight matrix W_il = f(z_i, z_l)·[l ≠ i] over all candidates l ∈ H ∪ C,
    Σ_l over P(j,i) ∪ {c_j} of W_il·x_il is (W ∘ X) @ Y_cand restricted to y_ij = 1, where Y_cand
    ``[|H|+L, L]`` holds the candidates' labels (one-hot e_j for c_j).
    """
    if not beta > 0:
        raise ValueError(f"beta={beta}; allowed: β > 0 (the paper uses 0 < β < 1, 0.1)")
    parts = _prologue(z, y, temperature, queue_z, queue_y, prototypes, reduction)
    if parts is None:
        return _zero(z, prototypes)
    zn, y, cand_z, cand_y, is_proto, own = parts
    b, m = own.shape
    if use_weights:
        log_g = (~is_proto).to(zn.dtype)[None, :] * math.log(beta)  # Eq. 1: log g
        union = y.sum(1, keepdim=True) + cand_y.sum(1)[None, :] - y @ cand_y.T  # |y_i ∪ y_l|
        f = torch.where(is_proto[None, :], 1.0, 1.0 / union.clamp_min(1))  # Eq. 4
    else:
        log_g, f = None, torch.ones(b, m, dtype=zn.dtype, device=z.device)
    log_prob = masked_log_softmax(zn @ cand_z.T / temperature, ~own, log_g)  # [B, M], Eq. 3's log
    w = torch.where(own, 0.0, f)  # l ≠ i
    # Σ over candidates carrying label j, for each anchor label j (the y factor keeps j ∈ Δ(z_i))
    norm = y * (w @ cand_y)  # N(i,j), Eq. 5
    attract = y * (torch.where(own, 0.0, w * log_prob) @ cand_y)  # Σ_l f·log(...)
    defined = (y > 0) & (norm > 0)
    term = torch.where(defined, attract / norm.clamp_min(1e-12), torch.zeros_like(norm))  # [B, L]
    if reduction == "mean":
        n_terms = defined.sum(1)
        per_anchor = -term.sum(1) / n_terms.clamp_min(1)
        loss = per_anchor.sum() / (n_terms > 0).sum().clamp_min(1)
    else:
        per_anchor = -term.sum(1) / y.sum(1).clamp_min(1)  # 1/|y_i|
        loss = per_anchor.sum() / b  # Eq. 2
    return loss
