"""Grouped train/valid/test and K-fold splits of an utterance table.

Rows are never split on their own: whole groups go to one part. Groups are conversations
(`by="doc"`: the `doc_id` column) or personas (`by="persona"`: the `persona` column, so that the
valid and test parts hold personas the training part never saw). Either way, one `doc_id` never
lands in two parts (a persona split checks that each conversation has one persona).

Stratification, as far as the groups allow: each group gets a stratum, the combination of which
rare classes occur in it (by default the up to three rarest classes with a row share under 5%,
over the final-label columns `labeler_{head}`, else the `true_{head}` columns), and the groups of
every stratum are spread over the parts in proportion. With few groups (personas) the proportions
are only approximate; with one group per stratum they cannot be kept at all.

All assignments are seeded: the same table, arguments and seed give the same split.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from psyattrs.data.table import final_column, true_column
from psyattrs.schema import OPELA, Schema

PARTS: tuple[str, ...] = ("train", "valid", "test")
GROUPINGS: dict[str, str] = {"doc": "doc_id", "persona": "persona"}
RARE_SHARE = 0.05
MAX_RARE = 3


def group_keys(df: pd.DataFrame, by: str) -> pd.Series:
    """The group of every row: its `doc_id` (`by="doc"`) or its `persona` (`by="persona"`).

    Raises:
        ValueError: `by` not in {doc, persona}, the column is missing or has empty values, or a
            conversation has more than one persona.
    """
    if by not in GROUPINGS:
        raise ValueError(f"by={by!r} is not one of {sorted(GROUPINGS)}")
    col = GROUPINGS[by]
    if col not in df.columns:
        raise ValueError(f"a split by {by} needs a {col!r} column")
    keys = df[col]
    empty = keys.isna() | (keys.astype(str).str.strip() == "")
    if empty.any():
        raise ValueError(f"column {col!r} is empty in {int(empty.sum())} row(s) (first at row {int(np.flatnonzero(empty.to_numpy())[0])}); cannot split by {by}")
    keys = keys.astype(str)
    if by == "persona":
        if "doc_id" not in df.columns:
            raise ValueError("a split by persona needs a 'doc_id' column too")
        per_doc = keys.groupby(df["doc_id"].astype(str)).nunique()
        mixed = per_doc.index[per_doc > 1].tolist()
        if mixed:
            raise ValueError(f"conversation(s) with more than one persona, cannot split by persona: {mixed[:5]}")
    return keys


def rare_strata(
    df: pd.DataFrame, groups: pd.Series, *, schema: Schema = OPELA, stratify: "str | Sequence[str] | None" = "auto"
) -> pd.Series:
    """One stratum label per group (index: group key, sorted).

    Args:
        df: the utterance table.
        groups: group key per row (from `group_keys`).
        schema: the heads to look at for `stratify="auto"`.
        stratify: "auto" (the rarest classes, see the module docstring), a column name or a list of
            them (a group's stratum is then the set of values its rows hold, joined), or None (one
            stratum).

    Returns:
        Series of strings indexed by group.

    Raises:
        ValueError: a named column is missing.
    """
    keys = pd.Index(sorted(groups.unique()))
    if stratify is None:
        return pd.Series("all", index=keys)
    if stratify == "auto":
        flags = _rare_flags(df, groups, schema)
        if flags.empty:
            return pd.Series("all", index=keys)
        strata = flags.astype(int).astype(str).agg("".join, axis=1)
        return strata.reindex(keys).fillna("0" * flags.shape[1])
    cols = [stratify] if isinstance(stratify, str) else list(stratify)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"stratify column(s) {missing} not in the table; columns: {list(df.columns)[:20]}")
    parts = []
    for c in cols:
        vals = df[c].astype(str).groupby(groups).agg(lambda s: ",".join(sorted(set(s))))
        parts.append(c + "=" + vals)
    out = parts[0]
    for p in parts[1:]:
        out = out + ";" + p
    return out.reindex(keys)


def _rare_flags(df: pd.DataFrame, groups: pd.Series, schema: Schema) -> pd.DataFrame:
    candidates = []
    for head in schema:
        col = final_column(head.name) if final_column(head.name) in df.columns else true_column(head.name)
        if col not in df.columns:
            continue
        values = pd.to_numeric(df[col], errors="coerce")
        shares = values.value_counts(normalize=True)
        for cls, share in shares.items():
            if share < RARE_SHARE:
                candidates.append((float(share), col, int(cls)))
    candidates.sort()
    flags = {}
    for _, col, cls in candidates[:MAX_RARE]:
        hit = pd.to_numeric(df[col], errors="coerce") == cls
        flags[f"{col}={cls}"] = hit.groupby(groups).any()
    return pd.DataFrame(flags)


def _assign(strata: pd.Series, counts: np.ndarray, rng: np.random.Generator) -> dict[str, int]:
    """Part index per group: exactly `counts[p]` groups in part p, each stratum spread in proportion.

    Strata are taken rarest first; a stratum of m groups gets quotas proportional to the room left
    in each part (largest remainders, ties broken at random), so the last stratum fills the
    parts exactly.
    """
    room = counts.astype(float).copy()
    out: dict[str, int] = {}
    sizes = strata.value_counts()
    for stratum in sorted(sizes.index, key=lambda s: (sizes[s], s)):
        members = strata.index[strata == stratum].to_numpy()
        members = members[rng.permutation(len(members))]
        ideal = len(members) * room / room.sum()
        quota = np.floor(ideal).astype(int)
        left = len(members) - int(quota.sum())
        if left:
            order = np.lexsort((rng.random(len(room)), -(ideal - quota)))
            quota[order[:left]] += 1
        parts = np.repeat(np.arange(len(room)), quota)
        for g, part in zip(members.tolist(), parts[rng.permutation(len(parts))].tolist()):
            out[g] = part
        room -= quota
    return out


def _check_share(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")


def train_valid_test(
    df: pd.DataFrame,
    *,
    by: str = "doc",
    valid: float = 0.1,
    test: float = 0.2,
    seed: int = 0,
    stratify: "str | Sequence[str] | None" = "auto",
    schema: Schema = OPELA,
) -> pd.Series:
    """Assigns every row to train, valid or test, whole groups at a time.

    Args:
        df: utterance table (needs `doc_id`, and `persona` for `by="persona"`).
        by: "doc" (conversation-grouped) or "persona" (unseen personas in valid and test).
        valid, test: shares of the groups for valid and test, each in [0, 1), together < 1; 0
            leaves that part empty. Every non-zero part gets at least one group.
        seed: seeds the shuffle.
        stratify: see `rare_strata`.
        schema: heads considered by `stratify="auto"`.

    Returns:
        Series of strings `train`/`valid`/`test`, same index as `df`, named `part`.

    Raises:
        ValueError: bad `by`, shares or seed, or fewer groups than non-empty parts (names both).
    """
    _check_share("valid", valid)
    _check_share("test", test)
    if valid + test >= 1:
        raise ValueError(f"valid + test must be < 1 so that training keeps some groups, got {valid} + {test}")
    groups = group_keys(df, by)
    keys = sorted(groups.unique())
    shares = np.array([1.0 - valid - test, valid, test])
    needed = int((shares > 0).sum())
    if len(keys) < needed:
        raise ValueError(
            f"a split by {by} into {needed} parts needs at least {needed} {GROUPINGS[by]} values, the table has {len(keys)}"
        )
    counts = _part_counts(len(keys), shares)
    rng = np.random.default_rng(_seed(seed))
    strata = rare_strata(df, groups, schema=schema, stratify=stratify)
    assignment = {g: PARTS[p] for g, p in _assign(strata, counts, rng).items()}
    return pd.Series(groups.map(assignment).to_numpy(), index=df.index, name="part", dtype=str)


def _part_counts(n: int, shares: np.ndarray) -> np.ndarray:
    """Whole numbers of groups per part: proportional, at least one for every non-zero share."""
    counts = np.floor(shares * n).astype(int)
    counts[(shares > 0) & (counts == 0)] = 1
    while counts.sum() < n:
        counts[int(np.argmax(shares * n - counts))] += 1
    while counts.sum() > n:  # only when the minimum of one group overshoots: take from the largest
        counts[int(np.argmax(counts))] -= 1
    return counts


def kfold(
    df: pd.DataFrame,
    *,
    k: int = 5,
    by: str = "doc",
    seed: int = 0,
    stratify: "str | Sequence[str] | None" = "auto",
    schema: Schema = OPELA,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """K grouped folds: every group is held out exactly once.

    Args:
        df: utterance table (see `train_valid_test`).
        k: number of folds (>= 2, at most the number of groups).
        by, seed, stratify, schema: as in `train_valid_test`.

    Returns:
        k pairs (train_rows, held_out_rows) of sorted 0-based row positions (use with `iloc`).

    Raises:
        ValueError: bad `by` or `k`, or fewer groups than folds.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise ValueError(f"k must be an integer >= 2, got {k!r}")
    groups = group_keys(df, by)
    keys = sorted(groups.unique())
    if len(keys) < k:
        raise ValueError(f"{k} folds by {by} need at least {k} {GROUPINGS[by]} values, the table has {len(keys)}")
    rng = np.random.default_rng(_seed(seed))
    strata = rare_strata(df, groups, schema=schema, stratify=stratify)
    counts = np.full(k, len(keys) // k)
    counts[rng.permutation(k)[: len(keys) % k]] += 1
    fold_of = _assign(strata, counts, rng)
    row_fold = groups.map(fold_of).to_numpy()
    return [(np.flatnonzero(row_fold != f), np.flatnonzero(row_fold == f)) for f in range(k)]


def _seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)
