"""The transformer's input: one function builds it for training and for prediction.

For each row of an utterance table the token sequence is

    [CLS] role: previous_k [SEP] ... role: previous_1 [SEP] [TGT] role: target [/TGT] [SEP]

where `previous_i` are the row's previous `k` sentences in its conversation (pause rows skipped,
`psyattrs.features.context.previous_rows`), each preceded by its speaker role as text
(`persona:`, `user:` or the corpus's own `person_type` / name, as in EmoBERTa's speaker-aware
input; no prefix where the speaker is unknown), and the target sentence sits between the marker
tokens `[TGT]` and `[/TGT]` (`tokenizer.MARKERS`). The heads pool the target span only
(`target_span`), markers included.

When the sequence is longer than `max_length`, the oldest context goes first: whole sentences
from the oldest, then the start of the oldest one still partly kept; the target is never dropped
(a target longer than the budget alone is cut at its end). Every distinct sentence, role,
persona text and profile is tokenised once per call over the unique texts (the fast tokenizer's
own batch call, ids only; `tokenizer(..., add_special_tokens=False)` for other tokenizers).
`collate` pads a batch with array operations (no Python work per row).

Two optional prefixes (`persona_text`, `speaker_traits`) go between `[CLS]` and the context:

    [CLS] persona text [SEP] speaker profile [SEP] context ... [TGT] role: target [/TGT] [SEP]

- the persona text (`persona_texts`): the conversation's `persona_concept` column where the table
  has one (a user's own column, e.g. the synthetic corpus's `personas.concept` joined on
  `persona`), else the `person_name_original` of its persona rows (the OPELA annotated format and
  the synthetic corpus: the persona's full name, "Careful Ferret", the concept in short); nothing
  for a conversation without either.
- the target speaker's profile (`speaker_profiles`): the PersonalDialog reader's
  `speaker_gender`, `speaker_loc` and `speaker_tags` of the target row, as words
  (`male 福建 厦门 旅游 学生`); nothing where the row has none.

Truncation order with prefixes: the target claims its tokens first (cut at its end only when it
alone exceeds `max_length`); then the prefixes take at most `prefix_max_length` tokens of what is
left, their `[SEP]`s included, the profile first and the persona text from what remains (each
cut at its end); the context gets the rest, oldest sentences dropped first. So context goes
before the prefixes, the persona text before the profile, and the target never.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from psyattrs.data.personaldialog import TRAIT_COLUMNS
from psyattrs.features.context import prepare_table, previous_rows, speaker_keys
from psyattrs.models.transformer.tokenizer import TARGET_CLOSE, TARGET_OPEN

MIN_LENGTH = 8
PERSONA_COLUMN = "persona_concept"
"""A table column with the persona's concept text (per conversation; any row of it may hold it)."""
PERSONA_NAME_COLUMN = "person_name_original"


def _first_per_doc(doc_ids: pd.Series, values: pd.Series) -> pd.Series:
    """Per row, the first non-empty value of its conversation ("" when none)."""
    given = values != ""
    first = values[given].groupby(doc_ids[given], sort=False).first()
    return doc_ids.map(first).fillna("").astype(str)


def persona_texts(prepared: pd.DataFrame) -> pd.Series:
    """Per row, its conversation's persona text (see the module docstring); "" when none.

    Args:
        prepared: an utterance table as `prepare_table` returns it.

    Returns:
        str Series with a RangeIndex, row i for `prepared.iloc[i]`.
    """
    docs = prepared["doc_id"].astype(str).reset_index(drop=True)
    out = pd.Series([""] * len(prepared), dtype=object)
    if PERSONA_NAME_COLUMN in prepared.columns:
        names = prepared[PERSONA_NAME_COLUMN].fillna("").astype(str).str.strip().reset_index(drop=True)
        is_persona = prepared["person_type"].fillna("").astype(str).reset_index(drop=True) == "persona"
        out = _first_per_doc(docs, names.where(is_persona, ""))
    if PERSONA_COLUMN in prepared.columns:
        concept = _first_per_doc(docs, prepared[PERSONA_COLUMN].fillna("").astype(str).str.strip().reset_index(drop=True))
        out = concept.where(concept != "", out)
    return out.astype(str)


def speaker_profiles(table: pd.DataFrame) -> pd.Series:
    """Per row, its speaker's traits as words: gender, location, interest tags (`;` -> space),
    the non-empty ones in that order; "" when the row has none (see the module docstring).
    Returns a str Series with a RangeIndex, row i for `table.iloc[i]`."""
    parts = []
    for col in TRAIT_COLUMNS:
        if col in table.columns:
            values = table[col].fillna("").astype(str).str.replace(";", " ", regex=False).str.strip()
            parts.append(values.to_numpy(dtype=object))
    if not parts:
        return pd.Series([""] * len(table), dtype=object)
    return pd.Series([" ".join(p for p in row if p) for row in zip(*parts)], dtype=object)


def prefix_texts(table: pd.DataFrame, *, persona_text: bool, speaker_traits: bool) -> list[str]:
    """The distinct persona texts and profiles `build_inputs` would put before the rows of
    `table` (what a scratch tokenizer is trained on besides the sentences)."""
    prepared = prepare_table(table)
    out: list[str] = []
    if persona_text:
        out.extend(persona_texts(prepared).unique().tolist())
    if speaker_traits:
        out.extend(speaker_profiles(prepared).unique().tolist())
    return [t for t in dict.fromkeys(out) if t]


@dataclass
class EncodedRows:
    """Token sequences of table rows.

    Attributes:
        ids: one int64 array per row (the whole sequence, special tokens included).
        span: int64 array (n, 2): the [start, end) of the target span (markers included) per row.
        pad_id: the tokenizer's padding id.
    """

    ids: list[np.ndarray]
    span: np.ndarray
    pad_id: int

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.ids), dtype=np.int64, count=len(self.ids))


def _special_id(tokenizer, token: str | None, what: str) -> int:
    if token is None:
        raise ValueError(f"the tokenizer has no {what} token; psyattrs needs one")
    return int(tokenizer.convert_tokens_to_ids(token))


def _tokenise(tokenizer, texts: list[str]) -> list[list[int]]:
    if not texts:
        return []
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and backend.truncation is None and backend.padding is None:
        # the fast tokenizer's own batch call, ids only: the same ids as tokenizer(...) without
        # building a Python dict per text (half the time of tokenising, measured)
        encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
        return [e.ids for e in encode(texts, add_special_tokens=False)]
    return tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]


def build_inputs(
    table: pd.DataFrame, tokenizer, *, previous: int, max_length: int, speaker_roles: bool = True,
    persona_text: bool = False, speaker_traits: bool = False, prefix_max_length: int = 32,
) -> EncodedRows:
    """Token sequences of every row of an utterance table (see the module docstring).

    Args:
        table: an utterance table (prepared or not; whole conversations, in any row order).
        tokenizer: a `transformers` tokenizer with cls/sep/pad tokens and the target markers.
        previous: how many earlier sentences of the conversation to put before the target (>= 0).
        max_length: the longest sequence, special tokens included (>= `MIN_LENGTH`).
        speaker_roles: put each sentence's speaker role before it.
        persona_text: put the conversation's persona text first (`persona_texts`).
        speaker_traits: put the target speaker's profile first (`speaker_profiles`).
        prefix_max_length: the most tokens the two prefixes take together (>= 0).

    Returns:
        `EncodedRows`, row i for `table.iloc[i]`.

    Raises:
        ValueError: max_length below `MIN_LENGTH`, a negative prefix_max_length, or a tokenizer
            without the needed tokens.
    """
    if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) or max_length < MIN_LENGTH:
        raise ValueError(f"max_length must be an integer >= {MIN_LENGTH}, got {max_length!r}")
    if isinstance(prefix_max_length, bool) or not isinstance(prefix_max_length, (int, np.integer)) or prefix_max_length < 0:
        raise ValueError(f"prefix_max_length must be an integer >= 0, got {prefix_max_length!r}")
    prepared = prepare_table(table)
    cls_id = _special_id(tokenizer, tokenizer.cls_token, "cls")
    sep_id = _special_id(tokenizer, tokenizer.sep_token, "sep")
    pad_id = _special_id(tokenizer, tokenizer.pad_token, "pad")
    open_id = _special_id(tokenizer, TARGET_OPEN, TARGET_OPEN)
    close_id = _special_id(tokenizer, TARGET_CLOSE, TARGET_CLOSE)
    if open_id == tokenizer.unk_token_id or close_id == tokenizer.unk_token_id:
        raise ValueError("the tokenizer lacks the target markers [TGT] [/TGT] (tokenizer.add_markers adds them)")

    texts = prepared["text"].to_numpy(dtype=object)
    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), sort=False)
    pieces = _tokenise(tokenizer, [str(u) for u in uniques])
    if speaker_roles:
        roles = speaker_keys(prepared).to_numpy(dtype=object)
        role_codes, role_uniques = pd.factorize(pd.Series(roles, dtype=object), sort=False)
        role_pieces = [(_tokenise(tokenizer, [f"{r}:"])[0] if r else []) for r in role_uniques]
    else:
        role_codes, role_pieces = np.zeros(len(prepared), dtype=np.int64), [[]]
    prev = previous_rows(prepared, previous) if previous else np.zeros((len(prepared), 0), dtype=np.int64)
    prefixes = []  # (codes per row, pieces per code), the profile first: it claims its tokens first
    for on, values in ((speaker_traits, speaker_profiles), (persona_text, persona_texts)):
        if on:
            p_codes, p_uniques = pd.factorize(values(prepared), sort=False)
            p_pieces = _tokenise(tokenizer, [str(u) for u in p_uniques])
            prefixes.append((p_codes, [ids if str(u) else [] for ids, u in zip(p_pieces, p_uniques)]))

    def sentence(row: int) -> list[int]:
        return role_pieces[role_codes[row]] + pieces[codes[row]]

    budget_total = int(max_length) - 4  # [CLS] [TGT] [/TGT] [SEP]
    ids: list[np.ndarray] = []
    span = np.zeros((len(prepared), 2), dtype=np.int64)
    for row in range(len(prepared)):
        target = sentence(row)[:budget_total]
        budget = budget_total - len(target)
        head: list[list[int]] = []  # the prefixes, in claiming order (profile, persona text)
        room = min(budget, int(prefix_max_length))
        for p_codes, p_pieces in prefixes:
            piece = p_pieces[p_codes[row]]
            if not piece or room < 2:
                continue
            piece = piece[: room - 1] + [sep_id]
            head.append(piece)
            room -= len(piece)
            budget -= len(piece)
        context: list[list[int]] = []
        for j in range(prev.shape[1]):  # most recent first
            r = prev[row, j]
            if r < 0 or budget <= 1:
                break
            piece = sentence(r) + [sep_id]
            if len(piece) > budget:  # the oldest sentence kept: its start goes
                piece = piece[len(piece) - budget:]
            context.append(piece)
            budget -= len(piece)
        seq = [cls_id]
        for piece in reversed(head):  # persona text, then profile
            seq.extend(piece)
        for piece in reversed(context):
            seq.extend(piece)
        start = len(seq)
        seq.append(open_id)
        seq.extend(target)
        seq.append(close_id)
        span[row] = (start, len(seq))
        seq.append(sep_id)
        ids.append(np.asarray(seq, dtype=np.int64))
    return EncodedRows(ids, span, pad_id)


def _flat(encoded: EncodedRows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All rows' ids end to end, each row's start and length (built once per `EncodedRows`)."""
    cached = encoded.__dict__.get("_flat_cache")
    if cached is None or len(cached[1]) != len(encoded.ids):
        lengths = encoded.lengths
        starts = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        flat = np.concatenate(encoded.ids) if len(encoded.ids) else np.zeros(0, dtype=np.int64)
        cached = encoded.__dict__["_flat_cache"] = (flat, starts, lengths)
    return cached


def collate(encoded: EncodedRows, rows: np.ndarray) -> dict[str, np.ndarray]:
    """A padded batch of rows (no Python work per row).

    Returns:
        `input_ids` and `attention_mask` (int64, (B, L) with L the longest row of the batch) and
        `target_mask` (float32, (B, L): 1 on the target span).
    """
    flat, starts, lengths = _flat(encoded)
    rows = np.asarray(rows, dtype=np.int64)
    size = lengths[rows]
    width = int(size.max()) if len(rows) else 0
    cols = np.arange(width, dtype=np.int64)[None, :]
    inside = cols < size[:, None]
    input_ids = np.full((len(rows), width), encoded.pad_id, dtype=np.int64)
    input_ids[inside] = flat[(starts[rows][:, None] + cols)[inside]]
    span = encoded.span[rows]
    target = ((cols >= span[:, :1]) & (cols < span[:, 1:])).astype(np.float32)
    return {"input_ids": input_ids, "attention_mask": inside.astype(np.int64), "target_mask": target}


def length_sorted_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Row numbers in batches of similar length (prediction: little padding), at most
    `batch_size` rows and, with `max_tokens`, at most that many padded tokens (rows x the
    batch's longest row; a single row longer than that is a batch alone)."""
    order = np.argsort(lengths, kind="stable")
    if max_tokens is None:
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    ordered = np.asarray(lengths)[order]
    batches, i, n = [], 0, len(order)
    while i < n:
        j = min(i + batch_size, n)
        if (j - i) * ordered[j - 1] > max_tokens:  # k x ordered[i + k - 1] grows with k: a prefix fits
            fits = np.arange(1, j - i + 1) * ordered[i:j] <= max_tokens
            j = i + max(int(fits.sum()), 1)
        batches.append(order[i:j])
        i = j
    return batches


def shuffled_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator, *, pool: int = 50) -> list[np.ndarray]:
    """Training batches: rows shuffled, sorted by length within pools of `pool` batches, batches
    shuffled (less padding, still random)."""
    perm = rng.permutation(len(lengths))
    batches: list[np.ndarray] = []
    size = batch_size * pool
    for i in range(0, len(perm), size):
        chunk = perm[i : i + size]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size))
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]
