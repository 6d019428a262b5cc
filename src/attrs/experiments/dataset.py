"""Builds the dataset of an experiment config: config in, table + schema + splits out.

`build_dataset(config)` is everything `train` knows about data:

1. the schema: `data.schema`, or a LeWiDi file's own heads under the default `opela`
   (`config_schema`);
2. the corpus: `data.path` (any format `psyattrs.data.load_corpus` reads; the public release is
   first given its sentence order, `psyattrs.align.aligned_corpus`), the explicit
   `data.train`/`valid`/`test` files, or the embedded synthetic corpus (`data.synthetic`);
3. the final labels the corpus lacks, resolved from its labelers with `targets.resolve`
   (`fill_final_labels`);
4. the splits: a LeWiDi `X_train.json` with its `X_dev`/`X_test` siblings, a file's own `split`
   column when it names a test split, else grouped splits by `split.by` (`split.valid`,
   `split.test`, `seed`); with `split.folds` the whole table, cut into folds by `Dataset.folds`.

Nothing here logs to MLflow; the runner logs what a `Dataset` says about its sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psyattrs.data import load_corpus
from psyattrs.data.io import detect_format
from psyattrs.data.lewidi import file_schema, sibling_splits
from psyattrs.data.splits import kfold, train_valid_test
from psyattrs.data.table import final_column, labeler_columns
from psyattrs.errors import InputFileError
from psyattrs.experiments.config import ExperimentConfig
from psyattrs.experiments.provenance import note_alignment, note_input_file
from psyattrs.labels.resolve import resolve_final_labels
from psyattrs.schema import Schema, load_schema


@dataclass
class Dataset:
    """The tables a model is fitted and scored on, and where each came from.

    Attributes:
        schema: the heads.
        train: the fitting split (with `split.folds`: the whole corpus, index 0..n-1).
        valid: the validation split (calibration, thresholds, early stopping), or None.
        test: the scored split, or None (with `split.folds`: the folds hold it).
        sources: part (`train`, `valid`, `test`) -> the file it came from, or the synthetic
            corpus' description (a dict).
        set_aside: the records the readers set aside, as dicts with `source`.
        resolved: the heads whose final labels were resolved from the labelers' labels
            (`targets.resolve`), in schema order.
    """

    schema: Schema
    train: pd.DataFrame
    valid: pd.DataFrame | None
    test: pd.DataFrame | None
    sources: dict[str, Any]
    set_aside: list[dict[str, Any]] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)

    def folds(self, config: ExperimentConfig) -> list[tuple[np.ndarray, np.ndarray]]:
        """`split.folds` grouped folds of `train` (by `split.by`, seeded): (train rows, test rows)
        positions per fold."""
        return kfold(self.train, k=config.split.folds, by=config.split.by, seed=config.seed, schema=self.schema)

    def fold(self, config: ExperimentConfig, train_rows: np.ndarray, test_rows: np.ndarray) -> "Dataset":
        """One fold of a cross-validation dataset: its training rows (less the validation
        carved off them, `split.valid`) and its test rows, checked not to be empty."""
        train, valid = carve_valid(self.train.iloc[train_rows], config, self.schema)
        threshold = config.data.min_align_confidence
        train, valid = keep_confident(train, threshold, "train"), keep_confident(valid, threshold, "valid")
        source = self.sources["train"]
        part = Dataset(self.schema, train, valid, self.train.iloc[test_rows], {p: source for p in ("train", "valid", "test")},
                       resolved=self.resolved)
        check_not_empty(part, config)
        return part


def build_dataset(config: ExperimentConfig, schema: Schema | None = None) -> Dataset:
    """The dataset of a config (see the module docstring).

    Args:
        config: a resolved config.
        schema: its schema when already known (`config_schema(config)` otherwise).

    Returns:
        A `Dataset`; with `split.folds` its `train` is the whole corpus (`valid`, `test` None).

    Raises:
        ValueError: a corpus with nothing to train on, heads with no labels at all, or a split
            that comes out empty.
        InputFileError: a data file that cannot be read.
    """
    schema = schema if schema is not None else config_schema(config)
    if config.split.folds:
        table, source, set_aside, resolved = load_table(config, schema)
        return Dataset(schema, table.reset_index(drop=True), None, None, {"train": source}, set_aside, resolved)
    dataset = split_dataset(config, schema)
    threshold = config.data.min_align_confidence
    dataset.train = keep_confident(dataset.train, threshold, "train")
    dataset.valid = keep_confident(dataset.valid, threshold, "valid")
    check_not_empty(dataset, config)
    return dataset


def keep_confident(table: pd.DataFrame | None, threshold: float | None, split: str) -> pd.DataFrame | None:
    """The sentences of a fitting split whose `align_confidence` is at least `threshold`
    (`data.min_align_confidence`; every row when None). Sentences without a confidence go too.

    Raises:
        ValueError: the table has no `align_confidence` column (the option applies to the public
            release, aligned as it is read, or to what `psyattrs data align` wrote), or no
            sentence of the split reaches the threshold.
    """
    if threshold is None or table is None:
        return table
    if "align_confidence" not in table.columns:
        raise ValueError(
            f"data.min_align_confidence={threshold} needs the order reconstruction's align_confidence, and the "
            f"{split} data has no such column: the option applies to a public-release file or to what "
            "`psyattrs data align` wrote"
        )
    confidence = pd.to_numeric(table["align_confidence"], errors="coerce")
    kept = table[confidence >= threshold]
    if kept.empty:
        raise ValueError(
            f"data.min_align_confidence={threshold}: no sentence of the {split} split is that confident "
            f"(the highest align_confidence is {confidence.max():.3f})"
        )
    return kept


def check_files(config: ExperimentConfig) -> None:
    """Raises `InputFileError` for a data file of the config that does not exist (`data.path`,
    `data.train`, `data.valid`, `data.test`)."""
    for key in ("path", "train", "valid", "test"):
        path = getattr(config.data, key)
        if path is not None and not Path(path).is_file():
            raise InputFileError(path, f"data.{key}: corpus file not found")


def config_schema(config: ExperimentConfig) -> Schema:
    """The config's schema; for a LeWiDi corpus under the default `opela`, the file's own."""
    if config.data.schema == "opela":
        first = config.data.path or config.data.train
        if first is not None and Path(first).is_file() and _is_lewidi(first, config):
            return file_schema(first)
    return load_schema(config.data.schema)


def run_schema(run_id: str, config: ExperimentConfig, extras: dict[str, Any]) -> Schema:
    """The schema a run trained with: its `schema.json` (`load_run_config`'s extras), else, for a
    run from before that artifact, what its config says (`data.schema`, or a LeWiDi file's own)."""
    if extras.get("schema"):
        return Schema.from_dict(extras["schema"], source=f"run {run_id} schema.json")
    return config_schema(config)


def fill_final_labels(table: pd.DataFrame, schema: Schema, *, method: str, source: str = "the corpus"
                      ) -> tuple[pd.DataFrame, list[str]]:
    """Resolves the final labels of the heads a corpus has labelers for but no final labels.

    Args:
        table: an utterance table.
        schema: its heads.
        method: the resolution method (`targets.resolve`: opela, opela-weighted, majority,
            dawid-skene; see `psyattrs.labels.resolve.resolve_final_labels`).
        source: how to name the corpus in errors.

    Returns:
        (table, heads): the table with `labeler_{head}` filled for those heads (the same object when
        there were none), and their names in schema order.

    Raises:
        ValueError: a head with neither a final label nor a labeler's label (names the heads).
    """
    def labelled(column: str) -> bool:
        return column in table.columns and bool(table[column].notna().any())

    no_final = [h for h in schema if not labelled(final_column(h.name))]
    neither = [h.name for h in no_final if not any(labelled(c) for c in labeler_columns(table.columns, h.name))]
    if neither:
        raise ValueError(
            f"{source}: head(s) {neither} have neither final labels ({final_column('<head>')}) nor labelers' "
            f"labels (labeler<k>_<head>): there is nothing to train or score them on"
        )
    if not no_final:
        return table, []
    subset = Schema(schema.name, tuple(no_final), schema.language)
    return resolve_final_labels(table, subset, method=method, seed=0), [h.name for h in no_final]


def _is_lewidi(path: str, config: ExperimentConfig) -> bool:
    if config.data.format != "auto":
        return config.data.format == "lewidi"
    try:
        return detect_format(path) == "lewidi"
    except InputFileError:
        return False  # reported when the file is read


def read_corpus(path: str, config: ExperimentConfig, schema: Schema) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The utterance table of a corpus file (read with `data.format`; the public release given
    its sentence order) and the records its reader set aside (as dicts with `source`).

    Raises:
        ValueError: a format without per-sentence labels, or no sentence left.
        InputFileError: a file that cannot be read.
    """
    fmt = None if config.data.format == "auto" else config.data.format
    corpus = load_corpus(path, format=fmt, schema=schema)

    note_input_file(path, corpus.encoding)  # digest and encoding, logged with the active run (if any)
    if corpus.format == "public":  # the public release: its sentence order reconstructed (cached)
        import sys

        # lazy: align/ adds ~6% to importing experiments/; only public-release data needs it
        from psyattrs.align import aligned_corpus_summary

        corpus, summary = aligned_corpus_summary(corpus)
        note_alignment(path, summary, corpus.utterances)  # the run says what its labels rest on
        for warning in summary.warnings:  # printed: the run's MLflow calls silence Python warnings
            print(f"psyattrs: warning: {path}: {warning}", file=sys.stderr, flush=True)
    if corpus.record_kind not in ("sentence", "item", "rating"):
        raise ValueError(
            f"{path}: a {corpus.format!r} corpus has no per-sentence labels to train on; "
            "use the annotated or the generic format"
        )
    if len(corpus.utterances) == 0:
        raise ValueError(f"{path}: no sentence left to train on ({len(corpus.problems)} set aside)")
    return corpus.utterances, [{"source": str(path), **p.to_dict()} for p in corpus.problems]


def read_labelled(path: str, config: ExperimentConfig, schema: Schema
                  ) -> tuple[pd.DataFrame, list[dict[str, Any]], list[str]]:
    """`read_corpus`, then the final labels the corpus lacks resolved from its labelers
    (`fill_final_labels` with `targets.resolve`); also returns the heads resolved."""
    table, set_aside = read_corpus(path, config, schema)
    table, resolved = fill_final_labels(table, schema, method=config.targets.resolve, source=str(path))
    return table, set_aside, resolved


def load_table(config: ExperimentConfig, schema: Schema) -> tuple[pd.DataFrame, Any, list[dict[str, Any]], list[str]]:
    """The single corpus of `data.path` or `data.synthetic`, its source description, the
    records set aside while reading it and the heads whose final labels were resolved."""
    if config.data.synthetic is not None:
        # lazy: synth/ adds ~2% to importing experiments/; only synthetic data needs it
        from psyattrs.synth import synthesize

        syn = config.data.synthetic
        result = synthesize(syn.dialogues, seed=config.synthetic_seed, rare_boost=syn.rare_boost)
        source = {"generator": "psyattrs.synth.synthesize", "dialogues": syn.dialogues,
                  "seed": config.synthetic_seed, "rare_boost": syn.rare_boost}
        return result.utterances, source, [], []
    table, set_aside, resolved = read_labelled(config.data.path, config, schema)
    return table, config.data.path, set_aside, resolved


def _split_one(table: pd.DataFrame, config: ExperimentConfig, schema: Schema, *, valid: float, test: float) -> pd.Series:
    return train_valid_test(table, by=config.split.by, valid=valid, test=test, seed=config.seed, schema=schema)


def carve_valid(table: pd.DataFrame, config: ExperimentConfig, schema: Schema) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Splits `split.valid` of the groups of `table` off as validation (None when 0)."""
    if config.split.valid == 0:
        return table, None
    parts = _split_one(table, config, schema, valid=config.split.valid, test=0.0)
    return table[parts.to_numpy() == "train"], table[parts.to_numpy() == "valid"]


def _official_files(config: ExperimentConfig) -> dict[str, str] | None:
    """`data.path` = a LeWiDi `X_train.json` with `X_test.json` (and `X_dev.json`) beside it:
    those files as train/valid/test; else None."""
    if config.data.path is None or not _is_lewidi(config.data.path, config):
        return None
    found = sibling_splits(config.data.path)
    return {k: str(v) for k, v in found.items()} if found else None


def _official_parts(table: pd.DataFrame) -> np.ndarray | None:
    """The file's own `split` column as train/valid/test, when it names a test split; else None."""
    if "split" not in table:
        return None
    values = table["split"].astype(str).str.strip().str.lower().replace({"dev": "valid", "val": "valid"})
    if not (values == "test").any() or not (values == "train").any():
        return None
    return values.where(values.isin(["train", "valid", "test"]), "train").to_numpy()


def split_dataset(config: ExperimentConfig, schema: Schema) -> Dataset:
    """The train/valid/test dataset of a config, ignoring `split.folds` (not checked for empty
    parts: `build_dataset` does that)."""
    official = _official_files(config) if config.data.source_kind == "path" else None
    if config.data.source_kind == "files" or official is not None:
        files = official or {k: getattr(config.data, k) for k in ("train", "valid", "test")}
        train, set_aside, resolved = read_labelled(files["train"], config, schema)
        test, more, resolved_test = read_labelled(files["test"], config, schema)
        sources = {"train": files["train"], "test": files["test"]}
        if files.get("valid") is not None:
            valid, extra, resolved_valid = read_labelled(files["valid"], config, schema)
            sources["valid"] = files["valid"]
        else:
            (train, valid), extra, resolved_valid = carve_valid(train, config, schema), [], []
            sources["valid"] = files["train"]
        heads = [h.name for h in schema if h.name in {*resolved, *resolved_test, *resolved_valid}]
        return Dataset(schema, train, valid, test, sources, set_aside + more + extra, heads)
    table, source, set_aside, resolved = load_table(config, schema)
    parts = _official_parts(table)
    if parts is not None:  # the file's own official split
        valid = table[parts == "valid"] if (parts == "valid").any() else None
        return Dataset(schema, table[parts == "train"], valid, table[parts == "test"],
                       {"train": source, "valid": source, "test": source}, set_aside, resolved)
    parts = _split_one(table, config, schema, valid=config.split.valid, test=config.split.test).to_numpy()
    valid = table[parts == "valid"] if config.split.valid > 0 else None
    return Dataset(schema, table[parts == "train"], valid, table[parts == "test"],
                   {"train": source, "valid": source, "test": source}, set_aside, resolved)


def check_not_empty(dataset: Dataset, config: ExperimentConfig) -> None:
    """Raises ValueError for an empty train, valid or test split (too few groups for the split)."""
    for name in ("train", "valid", "test"):
        part = getattr(dataset, name)
        if part is not None and len(part) == 0:
            raise ValueError(
                f"the {name} split is empty: too few {config.split.by} groups for split.valid="
                f"{config.split.valid}, split.test={config.split.test}"
            )
