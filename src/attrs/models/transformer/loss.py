"""The training loss: per head, cross-entropy against the target distribution, masked and weighted.

The targets a model gets are `lambda x one-hot(final) + (1 - lambda) x labelers' distribution`
(`psyattrs.labels.soft.mixed_targets`, `targets.lambda` of the config). Cross-entropy is linear in
its target, so CE(mixed) = lambda x CE(final) + (1 - lambda) x CE(soft): the loss of the issue's
formula, computed once. Per head:

- `linear` heads: -sum_c w_c t_c log p_c per row (w: class weights), mean over the batch's rows
  that have a target;
- `ordinal` heads: binary cross-entropy of each cumulative logit against T_k = sum_{c>k} t_c
  (CORAL's loss, soft targets allowed), summed over the K-1 cut points, class weights ignored;
- `labelers` heads: each labeler's output against that labeler's own label where they gave one
  (NaN = no label), mean over the given labels.
- `annotators` heads (annotator embeddings): the average annotator's output against the row's
  target distribution (as a `linear` head) plus each rating's annotator output against the label
  that annotator gave (`labeler_loss` over the vote slots, NaN = empty slot); every rating counts
  once, whoever gave it.

Rows without a target (all-NaN: unlabelled rows and every pause row, see
`psyattrs.models.base.check_targets`) and labels that are missing contribute nothing, not even a
gradient. The total is sum_h head_weight_h x loss_h.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean soft cross-entropy over rows with a target (NaN rows masked); 0 when there is none."""
    rows = ~torch.isnan(targets).any(dim=1)
    if not rows.any():
        return logits.sum() * 0.0
    t = targets[rows]
    if class_weights is not None:
        t = t * class_weights[None, :]
    logp = F.log_softmax(logits[rows].float(), dim=-1)
    return -(t * logp).sum(dim=1).mean()


def ordinal_loss(cumulative_logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """CORAL loss against soft targets (NaN rows masked)."""
    rows = ~torch.isnan(targets).any(dim=1)
    if not rows.any():
        return cumulative_logits.sum() * 0.0
    t = targets[rows]
    above = torch.flip(torch.cumsum(torch.flip(t, [1]), 1), [1])[:, 1:]  # T_k = sum_{c>k} t_c
    bce = F.binary_cross_entropy_with_logits(cumulative_logits[rows].float(), above.clamp(0, 1), reduction="none")
    return bce.sum(dim=1).mean()


def labeler_loss(logits: torch.Tensor, labels: torch.Tensor, class_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Per-labeler cross-entropy: logits (B, L, K), labels (B, L) float with NaN = no label."""
    given = ~torch.isnan(labels)
    if not given.any():
        return logits.sum() * 0.0
    picked = logits[given].float()
    y = labels[given].long()
    return F.cross_entropy(picked, y, weight=class_weights)


def total_loss(
    outputs: dict[str, torch.Tensor],
    targets: dict[str, torch.Tensor],
    head_specs: dict[str, tuple[str, int]],
    *,
    head_weights: dict[str, float],
    class_weights: dict[str, torch.Tensor | None],
    labeler_labels: dict[str, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The weighted sum over heads; returns (loss, head -> that head's loss value)."""
    parts: dict[str, float] = {}
    total = None
    for name, (kind, _) in head_specs.items():
        if kind == "linear":
            loss = soft_cross_entropy(outputs[name], targets[name], class_weights.get(name))
        elif kind == "ordinal":
            loss = ordinal_loss(outputs[name], targets[name])
        elif kind == "annotators":
            z = outputs[name]
            labels = labeler_labels[name].clone()
            labels[torch.isnan(targets[name]).any(dim=1)] = float("nan")  # pauses, unlabelled rows
            loss = soft_cross_entropy(z[:, 0], targets[name], class_weights.get(name)) + \
                labeler_loss(z[:, 1:], labels, class_weights.get(name))
        else:
            labels = labeler_labels[name].clone()
            labels[torch.isnan(targets[name]).any(dim=1)] = float("nan")  # pauses, unlabelled rows
            loss = labeler_loss(outputs[name], labels, class_weights.get(name))
        parts[name] = float(loss.detach())
        weighted = head_weights.get(name, 1.0) * loss
        total = weighted if total is None else total + weighted
    return total, parts
