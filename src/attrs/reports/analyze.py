"""What utterances tell about a conversation: attribute profiles against survey outcomes.

Each conversation gets an utterance-attribute profile (`conversation_profiles`), computed over its
non-pause sentences:

| feature          | value                                                                    |
|------------------|--------------------------------------------------------------------------|
| `engage_share`   | share of engaging sentences (engage = 1)                                 |
| `active_share`   | share of active sentences (active = 1)                                   |
| `strange_share`  | share of strange sentences (strange = 0: OPELA codes 0 as strange)       |
| `uneasy_share`   | share of uncomfortable sentences (uneasy = 0)                            |
| `self_level`     | mean self-disclosure level (0-2)                                         |
| `empathy_level`  | mean empathy level (1-4) over the sentences where empathy applies (> 0)  |

With the speaker of each label known (annotated files, aligned or predicted tables with
`person_type`), every feature is computed per speaker (`persona_engage_share`, ...,
`user_empathy_level`); otherwise for the whole conversation (the public release gives the label
lists of a whole conversation without any alignment; pause positions are unknown there, so its
pause sentences, a few per conversation, count as ordinary sentences with all-zero labels).
From predicted attributes (the output of `psyattrs predict`/`annotate`, with `{head}_proba_{k}`)
the shares and levels are expectations over the predicted probabilities.

`relate(profiles, outcomes)` regresses each survey outcome (`friend`, `attract` (= engaging),
`connect`, `respect`, `fun`, `natural`, 1-4, and the BLRI empathy score, 16-64; `*_persona` is the
user's rating of the persona, `*_user` the persona's rating of the user) on the standardised
profile with ridge regression, and reports:

- standardised coefficients (outcome and features in standard deviations) with percentile
  bootstrap confidence intervals (conversations resampled);
- cross-validated R² (repeated k-fold, pooled out-of-fold predictions, 1 - SSE/SST) against a
  mean-only baseline scored the same way (it predicts each training fold's mean, so its CV R² is
  slightly below 0), the gain over the baseline with a paired bootstrap interval over
  conversations, and `beats_baseline` (the interval's lower end is above 0);
- the number of conversations used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from psyattrs.data import load_corpus
from psyattrs.data.io import read_table
from psyattrs.data.table import final_column
from psyattrs.errors import InputFileError
from psyattrs.reports.plots import effects_figure

SURVEY_ITEMS: tuple[str, ...] = ("friend", "attract", "connect", "respect", "fun", "natural", "blri")
OUTCOME_NAMES: dict[str, str] = {
    "friend": "friendliness", "attract": "engagingness", "connect": "connection", "respect": "respect",
    "fun": "fun", "natural": "naturalness", "blri": "BLRI empathy",
}
SIDES: tuple[str, ...] = ("persona", "user")
OUTCOMES: tuple[str, ...] = tuple(f"{item}_{side}" for item in SURVEY_ITEMS for side in SIDES)
FEATURES: tuple[str, ...] = (
    "engage_share", "active_share", "strange_share", "uneasy_share", "self_level", "empathy_level",
)
FEATURE_HEADS: dict[str, str] = {
    "engage_share": "engage", "active_share": "active", "strange_share": "strange",
    "uneasy_share": "uneasy", "self_level": "self", "empathy_level": "empathy",
}
_SYNONYMS = {"engaging_persona": "attract_persona", "engaging_user": "attract_user"}


def outcome_label(name: str) -> str:
    """`attract_persona` -> "engagingness of the persona (user's rating)"."""
    item, side = name.rsplit("_", 1)
    rater = "user's rating" if side == "persona" else "persona's rating"
    return f"{OUTCOME_NAMES.get(item, item)} of the {side} ({rater})"


# ------------------------------------------------------------------------------------ profiles


def _level_columns(table: pd.DataFrame, head: str, n_classes: int, source: str) -> np.ndarray | None:
    """(rows, n_classes) class weights of one head: one-hot final labels or predicted probabilities;
    rows without a label are NaN. None when the table has no such head."""
    if source == "predicted":
        cols = [f"{head}_proba_{k}" for k in range(n_classes)]
        if all(c in table for c in cols):
            return table[cols].to_numpy(dtype=float)
        if head not in table:
            return None
        values = pd.to_numeric(table[head], errors="coerce").to_numpy(dtype=float)
    else:
        column = final_column(head)
        if column not in table:
            return None
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    out = np.full((len(values), n_classes), np.nan)
    ok = ~np.isnan(values) & (values >= 0) & (values < n_classes)
    out[ok] = np.eye(n_classes)[values[ok].astype(int)]
    return out


_N_CLASSES = {"engage": 2, "active": 2, "strange": 2, "uneasy": 2, "self": 3, "empathy": 5}


def _sentence_features(table: pd.DataFrame, source: str) -> pd.DataFrame:
    """Per sentence: the expected value of each feature (NaN where the head is unlabelled), and
    `empathy_applies` (the weight of empathy levels 1-4)."""
    out = {}
    w = {h: _level_columns(table, h, k, source) for h, k in _N_CLASSES.items()}
    missing = [h for h, v in w.items() if v is None]
    if missing:
        kind = "predicted columns ({head} or {head}_proba_k)" if source == "predicted" else "final labels (labeler_{head})"
        raise ValueError(f"the table has no {kind} for head(s) {missing}")
    out["engage_share"] = w["engage"][:, 1]
    out["active_share"] = w["active"][:, 1]
    out["strange_share"] = w["strange"][:, 0]
    out["uneasy_share"] = w["uneasy"][:, 0]
    out["self_level"] = w["self"] @ np.arange(3.0)
    emp = w["empathy"]
    applies = emp[:, 1:].sum(axis=1)
    out["empathy_weighted"] = emp[:, 1:] @ np.arange(1.0, 5.0)  # sum over levels 1-4 of level * weight
    out["empathy_applies"] = applies
    return pd.DataFrame(out, index=table.index)


def conversation_profiles(
    table: pd.DataFrame, *, source: str = "final", by_speaker: bool | None = None
) -> pd.DataFrame:
    """The attribute profile of each conversation (see the module docstring).

    Args:
        table: one row per sentence with `doc_id`, and either final labels `labeler_{head}`
            (`source="final"`: annotated or aligned tables, the public release's label sequences)
            or predictions `{head}` / `{head}_proba_{k}` (`source="predicted"`: the output of
            `Predictor.predict`, `psyattrs predict --out` or `psyattrs annotate`). Optional
            `is_pause` (pause rows are left out) and `person_type` or `speaker`
            (`persona`/`user`).
        source: `final` or `predicted`.
        by_speaker: per speaker (`persona_*`, `user_*`) or for the whole conversation; None = per
            speaker when every non-pause row's speaker is `persona` or `user`.

    Returns:
        DataFrame indexed by `doc_id` (str), columns `n_sentences` (non-pause sentences), then the
        features of `FEATURES` (prefixed `persona_`/`user_` per speaker, with `n_persona_sentences`
        and `n_user_sentences`). A share or level with no sentence to compute it on is NaN.

    Raises:
        ValueError: `source` is not one of the two, `doc_id` or a head is missing.
    """
    if source not in ("final", "predicted"):
        raise ValueError(f"source {source!r} is not one of ['final', 'predicted']")
    if "doc_id" not in table:
        raise ValueError("the table needs a 'doc_id' column")
    rows = table
    if "is_pause" in rows:
        pause = rows["is_pause"].fillna(False).astype(bool).to_numpy()
        rows = rows[~pause]
    per = _sentence_features(rows, source)
    per["doc_id"] = rows["doc_id"].astype(str).to_numpy()
    speaker_col = "person_type" if "person_type" in rows else ("speaker" if "speaker" in rows else None)
    speakers = rows[speaker_col].astype(str).to_numpy() if speaker_col else np.full(len(rows), "")
    known = bool(len(rows)) and bool(np.isin(speakers, SIDES).all())
    if by_speaker is None:
        by_speaker = known
    elif by_speaker and not known:
        raise ValueError("by_speaker needs person_type (or speaker) 'persona'/'user' on every non-pause row")
    order = pd.unique(per["doc_id"])
    if not by_speaker:
        return _aggregate(per, order)
    parts = [_aggregate(per[speakers == side], order).add_prefix(f"{side}_") for side in SIDES]
    whole = pd.DataFrame({"n_sentences": per.groupby("doc_id").size().reindex(order)})
    out = pd.concat([whole, *parts], axis=1)
    out = out.rename(columns={f"{s}_n_sentences": f"n_{s}_sentences" for s in SIDES})
    for col in out.columns:
        if col.startswith("n_"):
            out[col] = out[col].fillna(0).astype("int64")
    out.index.name = "doc_id"
    return out


def _aggregate(per: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    groups = per.groupby("doc_id", sort=False)
    means = groups[["engage_share", "active_share", "strange_share", "uneasy_share", "self_level"]].mean()
    sums = groups[["empathy_weighted", "empathy_applies"]].sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        empathy = sums["empathy_weighted"] / sums["empathy_applies"].where(sums["empathy_applies"] > 0)
    out = means.assign(empathy_level=empathy)
    out.insert(0, "n_sentences", groups.size())
    out = out.reindex(order)
    out["n_sentences"] = out["n_sentences"].fillna(0).astype("int64")
    out.index.name = "doc_id"
    return out[["n_sentences", *FEATURES]]


def feature_columns(profiles: pd.DataFrame) -> list[str]:
    """The feature columns of a profile table (whole-conversation or per-speaker), in order."""
    whole = [f for f in FEATURES if f in profiles]
    per = [f"{s}_{f}" for s in SIDES for f in FEATURES if f"{s}_{f}" in profiles]
    return whole + per


# ------------------------------------------------------------------------------------ outcomes


def outcome_table(conversations: pd.DataFrame) -> pd.DataFrame:
    """The survey outcomes of `conversations` (one row per conversation, with `doc_id`).

    Returns:
        DataFrame indexed by `doc_id` with the columns of `OUTCOMES` that are present (float,
        NaN where a cell is empty or not a number); `engaging_*` count as `attract_*`.

    Raises:
        ValueError: no `doc_id` column, or none of the survey columns.
    """
    if "doc_id" not in conversations:
        raise ValueError("the outcome table needs a 'doc_id' column")
    frame = conversations.rename(columns={k: v for k, v in _SYNONYMS.items() if v not in conversations})
    present = [c for c in OUTCOMES if c in frame]
    if not present:
        raise ValueError(f"no survey outcome column found; expected some of {list(OUTCOMES)}")
    out = frame[present].apply(pd.to_numeric, errors="coerce").astype(float)
    out.index = frame["doc_id"].astype(str).to_numpy()
    out.index.name = "doc_id"
    return out[~out.index.duplicated(keep="first")]


# ------------------------------------------------------------------------------------ analysis


@dataclass
class AnalysisResult:
    """What `relate` returns.

    Attributes:
        effects: one row per (outcome, feature): `outcome`, `feature`, `coef` (standardised),
            `ci_low`, `ci_high` (percentile bootstrap interval at `level`), `n`.
        fits: one row per outcome: `outcome`, `n` (conversations used), `n_features`, `cv_r2`,
            `baseline_cv_r2`, `gain` (cv_r2 - baseline_cv_r2), `gain_ci_low`, `gain_ci_high`,
            `beats_baseline` (bool: `gain_ci_low` > 0).
        profiles: the profile table analysed (index doc_id).
        outcomes: the outcome table analysed (index doc_id).
        dropped_features: features left out because they were constant (or all missing).
        settings: folds, repeats, bootstrap, alpha, level, seed.
    """

    effects: pd.DataFrame
    fits: pd.DataFrame
    profiles: pd.DataFrame
    outcomes: pd.DataFrame
    dropped_features: list[str] = field(default_factory=list)
    settings: dict[str, float] = field(default_factory=dict)

    def format(self) -> str:
        """Plain-text table: one line per outcome, CV R² beside the baseline and the strongest effect."""
        lines = [f"{'outcome':<17} {'n':>4} {'CV R2':>7} {'baseline':>8} {'gain [95% CI]':>24}  verdict   "
                 "largest standardised effect [CI]"]
        for row in self.fits.itertuples(index=False):
            eff = self.effects[self.effects["outcome"] == row.outcome]
            top = eff.loc[eff["coef"].abs().idxmax()] if len(eff) else None
            top_text = (f"{top['feature']} {top['coef']:+.2f} [{top['ci_low']:+.2f}, {top['ci_high']:+.2f}]"
                        if top is not None else "-")
            verdict = "beats" if row.beats_baseline else "no gain"
            gain = f"{row.gain:+.3f} [{row.gain_ci_low:+.3f}, {row.gain_ci_high:+.3f}]"
            lines.append(f"{row.outcome:<17} {row.n:>4} {row.cv_r2:>7.3f} {row.baseline_cv_r2:>8.3f} "
                         f"{gain:>24}  {verdict:<9} {top_text}")
        return "\n".join(lines)


def _standardise(x: np.ndarray) -> np.ndarray:
    sd = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _ridge_coef(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Ridge coefficients of standardised y on standardised x (no intercept needed)."""
    xs, ys = _standardise(x), _standardise(y[:, None])[:, 0]
    p = xs.shape[1]
    return np.linalg.solve(xs.T @ xs + alpha * np.eye(p), xs.T @ ys)


def _fit_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, alpha: float) -> np.ndarray:
    mu, sd = x_train.mean(axis=0), x_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    xs = (x_train - mu) / sd
    ym = y_train.mean()
    beta = np.linalg.solve(xs.T @ xs + alpha * np.eye(xs.shape[1]), xs.T @ (y_train - ym))
    return ym + ((x_test - mu) / sd) @ beta


def _cv_errors(x: np.ndarray, y: np.ndarray, *, folds: int, repeats: int, alpha: float,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per conversation: squared out-of-fold errors of the model and of the mean-only baseline,
    averaged over the repeats."""
    n = len(y)
    model_err = np.zeros(n)
    base_err = np.zeros(n)
    k = min(folds, n)
    for _ in range(repeats):
        fold_of = rng.permutation(np.arange(n) % k)
        for f in range(k):
            test = fold_of == f
            train = ~test
            pred = _fit_predict(x[train], y[train], x[test], alpha)
            model_err[test] += (y[test] - pred) ** 2
            base_err[test] += (y[test] - y[train].mean()) ** 2
    return model_err / repeats, base_err / repeats


def _impute(x: np.ndarray) -> np.ndarray:
    """Missing feature values -> that feature's mean over the conversations."""
    x = x.copy()
    means = np.nanmean(np.where(np.isnan(x), np.nan, x), axis=0) if len(x) else np.zeros(x.shape[1])
    rows, cols = np.where(np.isnan(x))
    x[rows, cols] = means[cols]
    return x


def relate(
    profiles: pd.DataFrame,
    outcomes: pd.DataFrame,
    *,
    features: Sequence[str] | None = None,
    folds: int = 5,
    repeats: int = 20,
    bootstrap: int = 1000,
    alpha: float = 1.0,
    level: float = 0.95,
    seed: int = 0,
    min_conversations: int = 10,
) -> AnalysisResult:
    """Relates conversation profiles to survey outcomes (see the module docstring).

    Conversations present in both tables are used; for each outcome, those with a value.
    A missing feature value (a speaker without an applicable sentence) is replaced by that
    feature's mean; a constant feature is left out (listed in `dropped_features`).

    Args:
        profiles: `conversation_profiles` output (index doc_id).
        outcomes: `outcome_table` output (index doc_id).
        features: the feature columns to use; None = all (`feature_columns`).
        folds, repeats: repeated k-fold cross-validation.
        bootstrap: resamples for the confidence intervals.
        alpha: ridge penalty on standardised features (0 = ordinary least squares).
        level: confidence level of the intervals.
        seed: for the folds and the resamples.
        min_conversations: outcomes with fewer conversations are skipped.

    Returns:
        An `AnalysisResult`.

    Raises:
        ValueError: bad settings, no feature, or no conversation shared by the two tables.
    """
    if folds < 2 or repeats < 1 or bootstrap < 10 or alpha < 0 or not 0 < level < 1:
        raise ValueError(f"bad settings: folds={folds} (>= 2), repeats={repeats} (>= 1), bootstrap={bootstrap} "
                         f"(>= 10), alpha={alpha} (>= 0), level={level} (0-1)")
    features = list(features) if features is not None else feature_columns(profiles)
    if not features:
        raise ValueError("the profile table has no feature column")
    unknown = [f for f in features if f not in profiles]
    if unknown:
        raise ValueError(f"unknown feature(s) {unknown}; the profile has {feature_columns(profiles)}")
    shared = profiles.index.intersection(outcomes.index)
    if len(shared) == 0:
        raise ValueError("no conversation (doc_id) is in both the profiles and the outcomes")
    x_all = profiles.loc[shared, features].to_numpy(dtype=float)
    keep = [j for j in range(len(features))
            if not np.isnan(x_all[:, j]).all() and np.nanstd(x_all[:, j]) > 0]
    dropped = [features[j] for j in range(len(features)) if j not in keep]
    features = [features[j] for j in keep]
    if not features:
        raise ValueError(f"every feature is constant over the {len(shared)} conversations: {dropped}")
    x_all = _impute(x_all[:, keep])
    rng = np.random.default_rng(seed)
    tail = (1 - level) / 2
    effects, fits = [], []
    for outcome in outcomes.columns:
        y_all = outcomes.loc[shared, outcome].to_numpy(dtype=float)
        rows = ~np.isnan(y_all)
        n = int(rows.sum())
        if n < max(min_conversations, folds) or np.std(y_all[rows]) == 0:
            continue
        x, y = x_all[rows], y_all[rows]
        coef = _ridge_coef(x, y, alpha)
        boots = np.empty((bootstrap, len(features)))
        for b in range(bootstrap):
            idx = rng.integers(0, n, n)
            xb, yb = x[idx], y[idx]
            boots[b] = _ridge_coef(xb, yb, alpha) if np.std(yb) > 0 else np.nan
        low, high = np.nanquantile(boots, [tail, 1 - tail], axis=0)
        for j, name in enumerate(features):
            effects.append({"outcome": outcome, "feature": name, "coef": float(coef[j]),
                            "ci_low": float(low[j]), "ci_high": float(high[j]), "n": n})
        model_err, base_err = _cv_errors(x, y, folds=folds, repeats=repeats, alpha=alpha, rng=rng)
        sst = float(((y - y.mean()) ** 2).sum())
        cv_r2 = 1 - model_err.sum() / sst
        base_r2 = 1 - base_err.sum() / sst
        diff = base_err - model_err  # per conversation: how much the model lowers the squared error
        gains = np.array([diff[idx].sum() / ((y[idx] - y[idx].mean()) ** 2).sum()
                          for idx in (rng.integers(0, n, n) for _ in range(bootstrap))
                          if np.std(y[idx]) > 0])
        g_low, g_high = np.quantile(gains, [tail, 1 - tail])
        fits.append({"outcome": outcome, "n": n, "n_features": len(features), "cv_r2": float(cv_r2),
                     "baseline_cv_r2": float(base_r2), "gain": float(cv_r2 - base_r2),
                     "gain_ci_low": float(g_low), "gain_ci_high": float(g_high),
                     "beats_baseline": bool(g_low > 0)})
    if not fits:
        raise ValueError(f"no outcome has {max(min_conversations, folds)} conversations with a value")
    settings = {"folds": folds, "repeats": repeats, "bootstrap": bootstrap, "alpha": alpha, "level": level,
                "seed": seed}
    return AnalysisResult(pd.DataFrame(effects), pd.DataFrame(fits), profiles.loc[shared], outcomes.loc[shared],
                          dropped, settings)


# ------------------------------------------------------------------------------------ inputs


@dataclass
class AnalysisInput:
    """Profiles and outcomes read from files, and how (`describe` says it in one line)."""

    profiles: pd.DataFrame
    outcomes: pd.DataFrame
    kind: str
    by_speaker: bool
    source: str

    def describe(self) -> str:
        scope = "per speaker" if self.by_speaker else "whole conversations"
        return (f"{self.source}: {self.kind}, {len(self.profiles)} conversations profiled ({scope}), "
                f"{len(self.outcomes)} with survey outcomes")


def _read_predictions(path: Path) -> pd.DataFrame | None:
    """A predictions table (parquet file or `annotate` folder, CSV) when `path` is one, else None."""
    if path.is_dir():
        frame = pd.read_parquet(path)
    elif path.suffix.lower() == ".parquet":
        frame = pd.read_parquet(path)
    elif path.suffix.lower() in (".csv", ".tsv"):
        head = pd.read_csv(path, nrows=0, sep="\t" if path.suffix.lower() == ".tsv" else ",")
        if not any(c.endswith("_proba_0") for c in head.columns):
            return None
        frame = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",", dtype={"doc_id": str})
    else:
        return None
    return frame if any(c.endswith("_proba_0") for c in frame.columns) else None


def load_analysis_input(path: "str | Path", *, outcomes: "str | Path | None" = None) -> AnalysisInput:
    """Reads what `psyattrs analyze` analyses.

    `path` may be:

    - the OPELA public release (labels and survey outcomes in one file; whole-conversation
      profiles, no alignment needed);
    - an annotated, aligned or generic sentence table with final labels (per speaker when
      `person_type` is known); outcomes from `outcomes`, or from its own conversation table
      where it has survey columns;
    - predicted attributes: a `psyattrs annotate` output folder, or a Parquet/CSV file written by
      `psyattrs predict --out` (columns `{head}_proba_{k}`); outcomes from `outcomes`.

    Args:
        path: the file or folder.
        outcomes: a file with `doc_id` and survey columns (the public release, a synthetic
            conversations table, any CSV/Parquet); overrides the outcomes found in `path`.

    Raises:
        InputFileError: a missing or unreadable file, or no outcomes anywhere.
    """
    p = Path(path)
    if not p.exists():
        raise InputFileError(p, "file not found")
    predictions = _read_predictions(p)
    found_outcomes = None
    if predictions is not None:
        profiles = conversation_profiles(predictions, source="predicted")
        kind = "predicted attributes"
    else:
        corpus = load_corpus(p)
        if corpus.format == "public":
            profiles = conversation_profiles(corpus.label_sequences, source="final", by_speaker=False)
            kind = "public release (final labels, whole conversations)"
        elif corpus.record_kind == "sentence":
            profiles = conversation_profiles(corpus.utterances, source="final")
            kind = f"{corpus.format} sentences (final labels)"
        else:
            raise InputFileError(p, f"a {corpus.format!r} file has no attributes to analyse; "
                                    "annotate it first (psyattrs annotate) and analyse the output")
        if any(c in corpus.conversations for c in OUTCOMES) and "doc_id" in corpus.conversations:
            found_outcomes = outcome_table(corpus.conversations)
    if outcomes is not None:
        q = Path(outcomes)
        if not q.is_file():
            raise InputFileError(q, "outcomes file not found")
        table = read_table(q, str_columns=("doc_id",))
        try:
            found_outcomes = outcome_table(table)
        except ValueError as exc:
            raise InputFileError(q, str(exc)) from None
    if found_outcomes is None:
        raise InputFileError(p, "no survey outcomes: pass --outcomes FILE (a table with doc_id and "
                                f"survey columns such as {OUTCOMES[0]}, e.g. the public release)")
    profiles = match_doc_ids(profiles, found_outcomes)
    by_speaker = any(c.startswith("persona_") for c in profiles.columns)
    return AnalysisInput(profiles, found_outcomes, kind, by_speaker, str(p))


def match_doc_ids(profiles: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    """`profiles` re-indexed to the outcome table's ids where they name the same conversation.

    The annotated data's `doc_id` is `persona_user_turns_sentences_labelers`; the public release's
    (which holds the survey) lacks the labelers and may count the sentences without the pauses.
    When no profile id is an outcome id, the ids are matched on `persona_user_turns` (where that
    key is unique on both sides) and the matched profiles take the outcome ids; otherwise the
    profiles are returned unchanged.
    """
    if profiles.index.isin(outcomes.index).any():
        return profiles

    def key(ids: pd.Index) -> pd.Index:
        return pd.Index(["_".join(str(doc).split("_")[:3]) if str(doc).count("_") >= 3 else str(doc) for doc in ids])

    mine, theirs = key(profiles.index), key(outcomes.index)
    if not (mine.is_unique and theirs.is_unique) or not mine.isin(theirs).any():
        return profiles
    lookup = pd.Series(outcomes.index, index=theirs)
    out = profiles[mine.isin(theirs)].copy()
    out.index = pd.Index(lookup.loc[mine[mine.isin(theirs)]].to_numpy(), name="doc_id")
    return out


def analyze_path(
    path: "str | Path",
    *,
    outcomes: "str | Path | None" = None,
    out: "str | Path | None" = None,
    **settings,
) -> AnalysisResult:
    """`load_analysis_input` + `relate` + (with `out`) `write_analysis`."""
    data = load_analysis_input(path, outcomes=outcomes)
    result = relate(data.profiles, data.outcomes, **settings)
    result.settings["input"] = data.describe()  # type: ignore[assignment]
    if out is not None:
        write_analysis(result, out)
    return result


def write_analysis(result: AnalysisResult, out: "str | Path") -> dict[str, Path]:
    """Writes `profiles.csv`, `effects.csv`, `fits.csv`, `summary.txt` and `plots/{outcome}.png`.

    Returns:
        name -> path of what was written (`plots` is the folder).
    """
    folder = Path(out)
    (folder / "plots").mkdir(parents=True, exist_ok=True)
    paths = {"profiles": folder / "profiles.csv", "effects": folder / "effects.csv",
             "fits": folder / "fits.csv", "summary": folder / "summary.txt", "plots": folder / "plots"}
    result.profiles.to_csv(paths["profiles"])
    result.effects.to_csv(paths["effects"], index=False, float_format="%.4f")
    result.fits.to_csv(paths["fits"], index=False, float_format="%.4f")
    header = [str(result.settings.get("input", ""))] if result.settings.get("input") else []
    if result.dropped_features:
        header.append(f"constant features left out: {', '.join(result.dropped_features)}")
    paths["summary"].write_text("\n".join([*header, result.format(), ""]), encoding="utf-8")
    for outcome in result.fits["outcome"]:
        fig = outcome_figure(result, outcome)
        fig.savefig(folder / "plots" / f"{outcome}.png", dpi=110)
    return paths


def outcome_figure(result: AnalysisResult, outcome: str):
    """The forest plot of one outcome's standardised coefficients, titled with its CV R² against
    the mean-only baseline (`psyattrs.reports.plots.effects_figure`)."""
    fit = result.fits[result.fits["outcome"] == outcome]
    if fit.empty:
        raise ValueError(f"outcome {outcome!r} was not analysed; analysed: {result.fits['outcome'].tolist()}")
    fit = fit.iloc[0]
    verdict = "beats" if fit["beats_baseline"] else "does not beat"
    title = (f"{outcome_label(outcome)}\nn={fit['n']}, CV R² {fit['cv_r2']:.3f} vs mean-only "
             f"{fit['baseline_cv_r2']:.3f}: {verdict} the baseline")
    return effects_figure(result.effects[result.effects["outcome"] == outcome], title=title)

