"""The encoder and its heads: one output per schema head on the pooled target span.

`MultiHeadNetwork` wraps any `transformers` encoder (`AutoModel`): the mean of the last hidden
states over the target span (`inputs.collate`'s `target_mask`, the context's tokens excluded)
feeds one head per schema head:

- `linear`: K logits;
- `labelers`: L x K logits, one distribution per labeler (Davani et al. 2022, multi-task); the
  head's probabilities are the labelers' mean distribution;
- `annotators`: annotator embeddings for large crowds (LeWiDi corpora with hundreds of
  annotators): one embedding per annotator id is added to the pooled vector, one linear layer
  per head reads the sum, and a per-annotator class bias per head (zero at the start) is added
  to its logits, so every annotator has their own distribution at the cost of one vector and K
  numbers per head each. Row 0 of the embedding table is a learned "average annotator", trained on the item's
  target distribution. `forward` takes `annotators` (head -> (B, S) annotator indices 1.., -1 =
  empty slot) and returns (B, 1 + S, K) logits: the average annotator, then each slot; the
  head's probabilities are the mean over the item's known annotators, the average annotator's
  where none is known;
- `ordinal`: a cumulative-link (CORAL-style) head: one score s and K-1 ordered cut points b_k
  (b_0 free, the others b_0 - cumsum(softplus(d))), P(y > k) = sigmoid(s + b_k); the ordering
  makes every class probability non-negative.

Encoders are built and loaded only through `from_pretrained` on a folder (`backbone.py`).
"""

from __future__ import annotations

import torch
from torch import nn

HEAD_TYPES = ("linear", "labelers", "annotators", "ordinal")
GIVEN_SUFFIX = ":given"
BIAS_SUFFIX = "_annotator_bias"
"""`forward`'s outputs of an `annotators` head also hold `{head}:given`: (B, S) bool, the known slots."""


class OrdinalHead(nn.Module):
    """Cumulative-link head: scores (B, K-1) of P(y > k) as logits, rank-consistent."""

    def __init__(self, hidden: int, n_classes: int):
        super().__init__()
        self.score = nn.Linear(hidden, 1, bias=False)
        self.first = nn.Parameter(torch.zeros(1))
        self.gaps = nn.Parameter(torch.zeros(n_classes - 2))

    def cut_points(self) -> torch.Tensor:
        return torch.cat([self.first, self.first - torch.cumsum(nn.functional.softplus(self.gaps), 0)])

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.score(pooled) + self.cut_points()[None, :]


def ordinal_probabilities(cumulative_logits: torch.Tensor) -> torch.Tensor:
    """Class probabilities (B, K) from P(y > k) logits (B, K-1)."""
    above = torch.sigmoid(cumulative_logits)
    ones = torch.ones_like(above[:, :1])
    zeros = torch.zeros_like(above[:, :1])
    upper = torch.cat([ones, above], dim=1)
    lower = torch.cat([above, zeros], dim=1)
    return (upper - lower).clamp_min(0.0)


def annotator_mean(probs: torch.Tensor, given: torch.Tensor) -> torch.Tensor:
    """(B, K): the mean of the known annotators' distributions (`probs[:, 1:]` where `given`), the
    average annotator's (`probs[:, 0]`) on rows without a known annotator."""
    weights = given.to(probs.dtype)
    count = weights.sum(dim=1, keepdim=True)
    known = (probs[:, 1:] * weights[..., None]).sum(dim=1) / count.clamp_min(1.0)
    return torch.where(count > 0, known, probs[:, 0])


class MultiHeadNetwork(nn.Module):
    """Encoder + pooled target span + heads.

    Args:
        encoder: a `transformers.PreTrainedModel` returning `last_hidden_state`.
        heads: head name -> (type, number of classes), type one of `HEAD_TYPES`.
        n_labelers: outputs per `labelers` head; with `annotators` heads, the number of annotators
            (the embedding table has one row more: the average annotator).
        dropout: dropout on the pooled vector.
    """

    def __init__(self, encoder: nn.Module, heads: dict[str, tuple[str, int]], *, n_labelers: int = 0,
                 dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.head_specs = dict(heads)
        self.n_labelers = int(n_labelers)
        hidden = int(encoder.config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        layers = {}
        if any(kind == "annotators" for kind, _ in heads.values()):
            layers["annotator_embedding"] = nn.Embedding(self.n_labelers + 1, hidden)
            nn.init.normal_(layers["annotator_embedding"].weight, std=0.02)
        for name, (kind, k) in heads.items():
            if kind == "annotators":
                layers[name + BIAS_SUFFIX] = nn.Embedding(self.n_labelers + 1, k)
                nn.init.zeros_(layers[name + BIAS_SUFFIX].weight)
            if kind in ("linear", "annotators"):
                layers[name] = nn.Linear(hidden, k)
            elif kind == "labelers":
                layers[name] = nn.Linear(hidden, self.n_labelers * k)
            elif kind == "ordinal":
                layers[name] = OrdinalHead(hidden, k)
            else:
                raise ValueError(f"head type {kind!r} is not one of {list(HEAD_TYPES)}")
        self.heads = nn.ModuleDict(layers)

    def pooled(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, target_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        weights = target_mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, target_mask: torch.Tensor,
                annotators: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """Head name -> raw outputs: logits (B, K), labeler logits (B, L, K), annotator logits
        (B, 1 + S, K) (plus `{head}:given`) or cumulative logits (B, K-1)."""
        raw = self.pooled(input_ids, attention_mask, target_mask)
        pooled = self.dropout(raw)
        out = {}
        for name, (kind, k) in self.head_specs.items():
            if kind == "annotators":
                slots = (annotators or {}).get(name)
                if slots is None:
                    slots = torch.full((raw.shape[0], 0), -1, dtype=torch.long, device=raw.device)
                average = torch.zeros((raw.shape[0], 1), dtype=torch.long, device=raw.device)
                index = torch.cat([average, slots.long().clamp_min(0)], dim=1)  # empty slots: masked by given
                mixed = raw[:, None, :] + self.heads["annotator_embedding"](index).to(raw.dtype)
                out[name] = self.heads[name](self.dropout(mixed)) + self.heads[name + BIAS_SUFFIX](index).to(raw.dtype)
                out[name + GIVEN_SUFFIX] = slots >= 0
                continue
            z = self.heads[name](pooled)
            out[name] = z.view(z.shape[0], self.n_labelers, k) if kind == "labelers" else z
        return out

    def probabilities(self, outputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Head name -> class probabilities (B, K) from `forward`'s outputs."""
        probs = {}
        for name, (kind, _) in self.head_specs.items():
            z = outputs[name].float()
            if kind == "linear":
                probs[name] = torch.softmax(z, dim=-1)
            elif kind == "labelers":
                probs[name] = torch.softmax(z, dim=-1).mean(dim=1)
            elif kind == "annotators":
                probs[name] = annotator_mean(torch.softmax(z, dim=-1), outputs[name + GIVEN_SUFFIX])
            else:
                probs[name] = ordinal_probabilities(z)
        return probs
