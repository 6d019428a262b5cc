"""Dialogue context of every sentence, as functions of the utterance table.

Training and prediction build their inputs with these same functions (the serving code too), so the
two cannot drift apart. Everything is vectorised (sort, groupby, cumulative counts); a sentence's
context never crosses into another conversation.

The input is the utterance table of `psyattrs.data.table` with ALL rows of each conversation, pause
rows and unlabelled rows included. Only `doc_id` and `text` are required; `position` (else the row
order within the conversation), `is_pause` (else False) and the speaker columns `person_type`,
`person_name`, `person_id` (else unknown) are used when present. A single sentence is a
conversation of one.

Conventions:
- Rows are addressed by their 0-based position in the table as given (`table.iloc`), not by its
  index; results come back in the table's row order.
- "Previous sentences" skip pause rows by default (a pause only declares a time gap); the pauses
  show up as `since_pause` / `pauses_before` instead.
- The speaker of a row is its `person_type`, else `person_name`, else `person_id`; empty means
  unknown, and a relation to an unknown speaker is NaN.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

REQUIRED_COLUMNS: tuple[str, ...] = ("doc_id", "text")
SPEAKER_COLUMNS: tuple[str, ...] = ("person_type", "person_name", "person_id")

_LAUGH = re.compile(r"[ㅋㅎ]+")
_CRY = re.compile(r"[ㅠㅜ]+")
_EMOTICON = re.compile(
    r"\^\^+|\^[_.\-o]\^|[ㅠㅜ][_.][ㅠㅜ]|ㅎ[_.]ㅎ|ㅋ[_.]ㅋ|[>][_.]?[<]|-_-+|[TtOo]_[TtOo]"
    r"|ㅇㅅㅇ|ㅇㅂㅇ|ㅇㅁㅇ|ㅡㅡ+|[:;]-?[)(DPpOo/]|♡|♥|❤|☆|★|♪"
    "|[\U0001F300-\U0001FAFF\u2600-\u27BF]"
)

SURFACE_COLUMNS: tuple[str, ...] = (
    "n_chars",
    "n_words",
    "n_question",
    "n_exclaim",
    "n_tilde",
    "has_ellipsis",
    "laugh_count",
    "laugh_run",
    "cry_count",
    "cry_run",
    "n_emoticons",
    "jamo_share",
)
PREV_SURFACE_COLUMNS: tuple[str, ...] = ("n_chars", "n_question", "laugh_run", "cry_run", "n_emoticons")
POSITION_COLUMNS: tuple[str, ...] = (
    "is_pause",
    "position",
    "n_in_conversation",
    "relative_position",
    "is_first",
    "is_last",
    "since_pause",
    "pauses_before",
    "speaker_change",
    "speaker_run",
)


def prepare_table(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of the table with the columns the context code reads, filled where absent.

    Args:
        table: an utterance table (see module docstring); other columns pass through.

    Returns:
        A DataFrame with a fresh RangeIndex (row i = `table.iloc[i]`) and the columns `doc_id`
        (str), `text` (str, missing -> ""), `position` (int64; row order within the conversation
        when absent), `is_pause` (bool), `person_type`, `person_name`, `person_id` (str, "" when
        unknown).

    Raises:
        TypeError: `table` is not a DataFrame.
        ValueError: a required column is missing (names it), or `position` / `is_pause` hold
            values that are not numbers / booleans (names the first bad rows).
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"expected an utterance table (pandas DataFrame), got {type(table).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"the utterance table lacks column(s) {missing}; required: {list(REQUIRED_COLUMNS)}")
    out = table.reset_index(drop=True).copy()
    out["doc_id"] = out["doc_id"].astype(str)
    out["text"] = out["text"].fillna("").astype(str)
    if "position" in out.columns:
        pos = pd.to_numeric(out["position"], errors="coerce")
        bad = np.flatnonzero(pos.isna().to_numpy())
        if len(bad):
            raise ValueError(f"column 'position' must hold integers; rows {bad[:5].tolist()} do not")
        out["position"] = pos.astype("int64")
    else:
        out["position"] = out.groupby("doc_id", sort=False).cumcount().astype("int64")
    if "is_pause" in out.columns:
        pause = pd.to_numeric(out["is_pause"].astype("object").replace({True: 1, False: 0}), errors="coerce")
        bad = np.flatnonzero(~pause.fillna(0).isin([0, 1]).to_numpy())
        if len(bad):
            raise ValueError(f"column 'is_pause' must hold 0/1 or booleans; rows {bad[:5].tolist()} do not")
        out["is_pause"] = pause.fillna(0).astype(bool)
    else:
        out["is_pause"] = False
    for col in SPEAKER_COLUMNS:
        out[col] = out[col].fillna("").astype(str) if col in out.columns else ""
    return out


def _chronological(prepared: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, doc codes, within-doc rank): `order` sorts rows by conversation, then position."""
    codes, _ = pd.factorize(prepared["doc_id"], sort=False)
    order = np.lexsort((np.arange(len(prepared)), prepared["position"].to_numpy(), codes))
    sorted_codes = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1] if len(order) else np.array([], int)
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    return order, codes, rank


def speaker_keys(table: pd.DataFrame) -> pd.Series:
    """The speaker of each row: `person_type`, else `person_name`, else `person_id`, else "".

    Args:
        table: an utterance table (prepared or not).

    Returns:
        str Series aligned with `table` ("" = unknown speaker).
    """
    prepared = table if all(c in table.columns for c in SPEAKER_COLUMNS) else prepare_table(table)
    key = pd.Series([""] * len(prepared), index=prepared.index, dtype=object)
    for col in reversed(SPEAKER_COLUMNS):  # later columns are fallbacks: fill type last so it wins
        values = prepared[col].fillna("").astype(str)
        key = key.where(values == "", values)
    return key.astype(str)


def previous_rows(table: pd.DataFrame, k: int, *, skip_pauses: bool = True) -> np.ndarray:
    """Row numbers of the previous k sentences of each row's conversation.

    Args:
        table: the utterance table.
        k: how many earlier sentences (>= 0).
        skip_pauses: count only non-pause rows as previous sentences.

    Returns:
        int64 array (len(table), k): column i-1 holds the row number (`table.iloc`) of the i-th
        previous sentence, -1 where the conversation has fewer earlier sentences.

    Raises:
        ValueError: k is not a non-negative integer.
    """
    k = _check_k(k)
    prepared = prepare_table(table)
    n = len(prepared)
    out = np.full((n, k), -1, dtype=np.int64)
    if n == 0 or k == 0:
        return out
    order, codes, rank = _chronological(prepared)
    sorted_codes = codes[order]
    eligible = ~prepared["is_pause"].to_numpy()[order] if skip_pauses else np.ones(n, bool)
    # number of eligible rows strictly before each row within its conversation
    cum = np.cumsum(eligible) - eligible
    doc_start = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1]
    doc_of_row = np.repeat(np.arange(len(doc_start)), np.diff(np.r_[doc_start, n]))
    before = cum - cum[doc_start][doc_of_row]
    eligible_rows = order[eligible]  # original row numbers of eligible rows, chronological per doc
    eligible_offset = cum[doc_start][doc_of_row]  # index in eligible_rows of the doc's first one
    for i in range(1, k + 1):
        has = before - i >= 0
        prev_sorted = np.full(n, -1, dtype=np.int64)
        prev_sorted[has] = eligible_rows[(eligible_offset + before - i)[has]]
        out[order, i - 1] = prev_sorted
    return out


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"the number of previous sentences must be an integer >= 0, got {k!r}")
    return int(k)


def _longest_run(texts: pd.Series, pattern: re.Pattern) -> np.ndarray:
    unique = pd.unique(texts)
    runs = {t: max((len(m) for m in pattern.findall(t)), default=0) for t in unique}
    return texts.map(runs).to_numpy(dtype=np.float32)


def surface_features(texts: "pd.Series | list[str]") -> pd.DataFrame:
    """Surface features of sentences, computed on the text as stored (quirks included).

    Args:
        texts: sentences.

    Returns:
        float32 DataFrame, one row per sentence (same index when `texts` is a Series), columns
        `SURFACE_COLUMNS`: `n_chars` (characters, spaces excluded), `n_words` (space-separated
        words), `n_question` / `n_exclaim` / `n_tilde` (count of ? / ! / ~, fullwidth included),
        `has_ellipsis` (.. or …), `laugh_count` / `laugh_run` (ㅋ ㅎ jamo: count and longest run),
        `cry_count` / `cry_run` (ㅠ ㅜ), `n_emoticons` (^^, ㅠ.ㅠ, ㅎ.ㅎ, -_-, :), ♡, emoji ...),
        `jamo_share` (share of characters that are compatibility jamo).
    """
    s = pd.Series(texts, dtype=object) if not isinstance(texts, pd.Series) else texts
    s = s.fillna("").astype(str)
    n_chars = s.str.count(r"\S").astype(np.float32)
    feats = {
        "n_chars": n_chars,
        "n_words": s.str.count(r"\S+"),
        "n_question": s.str.count(r"[?？]"),
        "n_exclaim": s.str.count(r"[!！]"),
        "n_tilde": s.str.count(r"[~～]"),
        "has_ellipsis": s.str.contains(r"\.\.|…", regex=True),
        "laugh_count": s.str.count(r"[ㅋㅎ]"),
        "laugh_run": _longest_run(s, _LAUGH),
        "cry_count": s.str.count(r"[ㅠㅜ]"),
        "cry_run": _longest_run(s, _CRY),
        "n_emoticons": s.str.count(_EMOTICON.pattern),
        "jamo_share": s.str.count(r"[\u3131-\u318E]") / n_chars.where(n_chars > 0, 1.0),
    }
    return pd.DataFrame({k: np.asarray(v, dtype=np.float32) for k, v in feats.items()}, index=s.index)[
        list(SURFACE_COLUMNS)
    ]


def position_features(table: pd.DataFrame) -> pd.DataFrame:
    """Where each sentence sits in its conversation and who spoke before it.

    Args:
        table: the utterance table.

    Returns:
        float32 DataFrame with a RangeIndex (row i = `table.iloc[i]`) and columns
        `POSITION_COLUMNS`: `is_pause`; `position` (0-based chronological index in the
        conversation, pauses counted); `n_in_conversation`; `relative_position` (position / (n-1),
        0 for a conversation of one); `is_first`, `is_last`; `since_pause` (sentences since the last
        pause before this row, or since the start when none: the first sentence after a pause has
        1); `pauses_before` (pause rows before this one); `speaker_change` (1 when the previous
        non-pause sentence is by the other speaker, 0 same, NaN first sentence or unknown
        speaker); `speaker_run` (1-based index of this sentence in its speaker's current run of
        consecutive non-pause sentences).
    """
    prepared = prepare_table(table)
    n = len(prepared)
    out = pd.DataFrame(index=pd.RangeIndex(n), columns=list(POSITION_COLUMNS), dtype=np.float32)
    if n == 0:
        return out
    order, codes, rank = _chronological(prepared)
    sorted_codes = codes[order]
    doc_start = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1]
    sizes = np.diff(np.r_[doc_start, n])
    doc_of_row = np.repeat(np.arange(len(doc_start)), sizes)
    size = sizes[doc_of_row]
    pause = prepared["is_pause"].to_numpy()[order]

    # pauses strictly before the row, and the rank of the last such pause (-1 = none)
    cum_pause = np.cumsum(pause) - pause
    pauses_before = cum_pause - cum_pause[doc_start][doc_of_row]
    pause_rank = np.where(pause, rank, -1)
    last_pause_incl = pd.Series(pause_rank).groupby(doc_of_row).cummax().to_numpy()
    last_pause_before = pd.Series(last_pause_incl).groupby(doc_of_row).shift(1, fill_value=-1).to_numpy()
    since_pause = np.where(last_pause_before >= 0, rank - last_pause_before, rank + 1)

    # speaker relation to the previous non-pause sentence, and the current run of one speaker
    speakers = speaker_keys(prepared).to_numpy()
    prev = previous_rows(prepared, 1)[:, 0]
    prev_sorted = prev[order]
    spk_sorted = speakers[order]
    prev_spk = np.where(prev_sorted >= 0, speakers[np.maximum(prev_sorted, 0)], "")
    known = (prev_sorted >= 0) & (spk_sorted != "") & (prev_spk != "")
    change = np.where(known, (spk_sorted != prev_spk).astype(np.float32), np.nan)
    # runs over non-pause rows: a new run starts where the speaker changes (or is unknown/first)
    nonpause = ~pause
    starts_run = nonpause & ~(change == 0)
    run_id = np.cumsum(starts_run)
    run_id_np = pd.Series(np.where(nonpause, run_id, np.nan))
    run_pos = run_id_np.groupby(run_id_np).cumcount().to_numpy() + 1
    speaker_run = np.where(nonpause, run_pos, np.nan)

    values = np.column_stack(
        [
            pause.astype(np.float32),
            rank,
            size,
            np.where(size > 1, rank / np.maximum(size - 1, 1), 0.0),
            rank == 0,
            rank == size - 1,
            since_pause,
            pauses_before,
            change,
            speaker_run,
        ]
    ).astype(np.float32)
    out.iloc[order] = values
    return out.astype(np.float32)


def context_features(
    table: pd.DataFrame,
    k: int,
    *,
    skip_pauses: bool = True,
    prev_surface: "tuple[str, ...] | list[str]" = SURFACE_COLUMNS,
) -> pd.DataFrame:
    """The numeric context window of every sentence: its own position and surface features and
    those of the previous k sentences.

    Args:
        table: the utterance table.
        k: how many previous sentences (>= 0).
        skip_pauses: previous sentences skip pause rows (see `previous_rows`).
        prev_surface: which `SURFACE_COLUMNS` to give for each previous sentence (all by
            default; `PREV_SURFACE_COLUMNS` is a compact choice).

    Returns:
        float32 DataFrame with a RangeIndex (row i = `table.iloc[i]`): the `POSITION_COLUMNS`, the
        `SURFACE_COLUMNS` of the sentence itself, then for i = 1..k: `prev{i}_exists` (0/1),
        `prev{i}_same_speaker` (1 same speaker as this sentence, 0 other, NaN unknown or no such
        sentence), `prev{i}_distance` (how many rows back, pauses counted; NaN when none) and
        `prev{i}_{surface column}` for the `prev_surface` columns (NaN when none).

    Raises:
        ValueError: k is not a non-negative integer, or an unknown surface column is asked for.
    """
    k = _check_k(k)
    unknown = [c for c in prev_surface if c not in SURFACE_COLUMNS]
    if unknown:
        raise ValueError(f"unknown surface column(s) {unknown}; allowed: {list(SURFACE_COLUMNS)}")
    prepared = prepare_table(table)
    pos = position_features(prepared)
    surf = surface_features(prepared["text"]).reset_index(drop=True)
    parts = [pos, surf]
    if k:
        prev = previous_rows(prepared, k, skip_pauses=skip_pauses)
        speakers = speaker_keys(prepared).to_numpy()
        rank = pos["position"].to_numpy()
        surf_values = surf[list(prev_surface)].to_numpy()
        for i in range(1, k + 1):
            rows = prev[:, i - 1]
            has = rows >= 0
            safe = np.maximum(rows, 0)
            other = speakers[safe]
            known = has & (speakers != "") & (other != "")
            block = {
                f"prev{i}_exists": has.astype(np.float32),
                f"prev{i}_same_speaker": np.where(known, (speakers == other).astype(np.float32), np.nan),
                f"prev{i}_distance": np.where(has, rank - rank[safe], np.nan),
            }
            prev_surf = np.where(has[:, None], surf_values[safe], np.nan)
            block.update({f"prev{i}_{c}": prev_surf[:, j] for j, c in enumerate(prev_surface)})
            parts.append(pd.DataFrame(block, index=pos.index))
    return pd.concat(parts, axis=1).astype(np.float32)


def gather_rows(matrix, rows: np.ndarray):
    """Rows of a feature matrix picked by row number, zeros (sparse) or NaN (dense) where row is -1.

    Args:
        matrix: (n, d) scipy sparse matrix or numpy array (features of every table row).
        rows: int array of row numbers, -1 for "no such sentence" (e.g. a column of
            `previous_rows`).

    Returns:
        Same kind as `matrix`, shape (len(rows), d): sparse as CSR with empty rows for -1; dense
        as float with NaN rows for -1.
    """
    import scipy.sparse as sp

    rows = np.asarray(rows, dtype=np.int64)
    has = rows >= 0
    if sp.issparse(matrix):
        matrix = sp.csr_matrix(matrix)
        picked = matrix[np.maximum(rows, 0)]
        if not has.all():
            picked = sp.diags(has.astype(matrix.dtype)) @ picked
            picked.eliminate_zeros()
        return sp.csr_matrix(picked)
    dense = np.asarray(matrix, dtype=float)
    out = dense[np.maximum(rows, 0)].copy()
    out[~has] = np.nan
    return out
