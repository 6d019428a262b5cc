"""Each sentence's label distribution from forward-backward: soft training targets (issue 27).

The best reading (`AlignResult.utterances`) gives each sentence the labels of the one position it
holds. Forward-backward knows more: the posterior probability that exactly these lines hold each
label position. Weighting the positions' label vectors by it gives, per head, a distribution over
the classes: what training on the posterior instead of the best reading's labels uses.
"""

from __future__ import annotations

import numpy as np

from psyattrs.align.conversations import Conversation
from psyattrs.align.output import conversation_rows
from psyattrs.schema import Schema


def _unit_weights(fit, row: dict) -> np.ndarray | None:
    """(T,) posterior of each label position holding the row's unit (None: an unlabelled pause)."""
    post, mode = fit.post, fit.mode
    if row["t"] is None:
        return None
    if row["line_start"] is None:  # a phantom pause: every phantom is the same unit
        return np.asarray(post.phantom, dtype=float)
    items = mode.p_items if row["speaker"] == "persona" else mode.u_items
    start = int(np.searchsorted(items, row["line_start"]))
    if row["is_pause"]:
        return np.asarray(post.pause[:, start], dtype=float)
    k = int(row["line_end"]) - int(row["line_start"])
    arr = post.persona if row["speaker"] == "persona" else post.user
    return np.asarray(arr[:, start, k - 1], dtype=float)


def label_posteriors(convs: list[Conversation], fits: list, schema: Schema) -> dict[str, np.ndarray]:
    """Per head, (n_rows, n_classes): each row of `output.utterance_table(convs, fits, schema)` (same
    order) its posterior label distribution: the label vectors of the positions, weighted by the
    posterior that the row's lines hold each of them (given the conversation's pause treatment).
    Rows without labels (pauses the release left out) are NaN; a row whose unit has no posterior
    mass (cannot happen for a best reading, but the arithmetic is guarded) gets its own labels."""
    out: dict[str, list[np.ndarray]] = {h.name: [] for h in schema.heads}
    for c, f in zip(convs, fits):
        if f is None:
            continue
        onehot = [np.eye(h.n_classes)[c.labels[:, col]] for col, h in enumerate(schema.heads)]
        for row in conversation_rows(c, f):
            w = _unit_weights(f, row)
            for col, h in enumerate(schema.heads):
                if w is None:
                    out[h.name].append(np.full(h.n_classes, np.nan))
                elif w.sum() > 0:
                    out[h.name].append(w @ onehot[col] / w.sum())
                else:
                    out[h.name].append(onehot[col][row["t"]])
    return {h.name: np.array(out[h.name]).reshape(-1, h.n_classes) for h in schema.heads}
