"""The corpus summary that `psyattrs data validate` prints: what a reader kept, what it set aside
and by which field, the label counts per head and labeler, and for the public release its line
check (`summarize` -> a JSON-serialisable dict, `format_summary` -> text).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import numpy as np
import pandas as pd

from psyattrs.data.table import Corpus, final_column, labeler_ids
from psyattrs.data.validate import label_columns_of
from psyattrs.schema import Schema

LINE_CHECK_GROUPS = ("adds up", "pauses not counted", "extra lines", "fewer lines")


def summarize(corpus: Corpus) -> dict[str, Any]:
    """Describes a corpus for `psyattrs data validate`; plain JSON-serialisable values.

    Args:
        corpus: a corpus from any reader.

    Returns:
        A dict with keys:
        `source`, `format`, `schema`, `encoding` (of a text file; None for Parquet), `record_kind`;
        `records`: {`read`, `kept`, `set_aside`} with read == kept + set_aside;
        `set_aside_by_field`: {field: count};
        `conversations`, `utterances`, `pauses`: counts over the kept data;
        `labelers`: the labeler numbers k present as `labeler{k}_{head}` columns;
        `heads`: {head: {`final`: {class: count}, `final_missing`: n,
        `labelers`: {k: {`counts`: {class: count}, `missing`: n}}}}, classes as strings;
        `context_only`: sentences without any label (generic tables);
        for the public release `line_check`: {group: count} over `LINE_CHECK_GROUPS`,
        `line_check_detail`: {value: count}, `blank_user_line_rows`, `trailing_newline_rows`,
        `pause_count_mismatch_rows` (blank persona lines differ from `pause_count`),
        `label_positions` (elements of the kept label lists).
    """
    utt = corpus.utterances
    schema = corpus.schema
    n_set_aside = len(corpus.problems)
    summary: dict[str, Any] = {
        "source": str(corpus.source) if corpus.source is not None else None,
        "format": corpus.format,
        "schema": schema.name,
        "encoding": corpus.encoding,
        "record_kind": corpus.record_kind,
        "records": {"read": int(corpus.n_read), "kept": int(corpus.n_kept), "set_aside": n_set_aside},
        "set_aside_by_field": dict(Counter(p.field for p in corpus.problems).most_common()),
        "conversations": (
            int(utt["doc_id"].nunique()) if corpus.record_kind == "sentence" else int(len(corpus.conversations))
        ),
        "utterances": int(len(utt)),
        "pauses": int(utt["is_pause"].sum()) if "is_pause" in utt else 0,
    }
    labelled = corpus.label_sequences if corpus.label_sequences is not None else utt
    ks = labeler_ids(labelled.columns, schema.head_names) if corpus.annotations is None else []
    summary["labelers"] = ks
    heads: dict[str, Any] = {}
    for head in schema.heads:
        entry: dict[str, Any] = {}
        final = final_column(head.name)
        if final in labelled:
            entry["final"], entry["final_missing"] = _class_counts(labelled[final], head.values)
        per_labeler = {}
        for k in ks:
            col = f"labeler{k}_{head.name}"
            if col in labelled:
                counts, missing = _class_counts(labelled[col], head.values)
                per_labeler[str(k)] = {"counts": counts, "missing": missing}
        if per_labeler:
            entry["labelers"] = per_labeler
        if corpus.annotations is not None:
            part = corpus.annotations[corpus.annotations["head"] == head.name]
            entry["ratings"] = _class_counts(part["label"], head.values)[0]
        heads[head.name] = entry
    summary["heads"] = heads
    all_labels = _all_label_columns(labelled.columns, schema)
    label_cols = [c for c in labelled.columns if c in all_labels]
    if corpus.label_sequences is None and label_cols:
        summary["context_only"] = _count_unlabelled(utt, label_cols)
    if corpus.format == "public":
        summary.update(_public_summary(corpus))
    if corpus.annotations is not None:
        summary.update(_annotation_summary(corpus))
    return summary


def _annotation_summary(corpus: Corpus) -> dict[str, Any]:
    """`annotators` (distinct ids, ratings, ratings per rated utterance: min/median/max) and, when
    the file states them, `splits` (items per official split)."""
    ann = corpus.annotations
    per_item = ann.groupby("sent_id", sort=False).size() if len(ann) else pd.Series(dtype="int64")
    out: dict[str, Any] = {"annotators": {
        "distinct": int(ann["annotator"].nunique()),
        "ratings": int(len(ann)),
        "per_item_min": int(per_item.min()) if len(per_item) else 0,
        "per_item_median": float(per_item.median()) if len(per_item) else 0.0,
        "per_item_max": int(per_item.max()) if len(per_item) else 0,
    }}
    if "split" in corpus.conversations:
        counts = corpus.conversations["split"].astype(str).value_counts()
        out["splits"] = {str(k): int(v) for k, v in counts.items()}
    return out


def _count_unlabelled(table: pd.DataFrame, label_cols: list[str]) -> int:
    """Rows of `table` with every one of `label_cols` empty (none when some column has no gap)."""
    unlabelled = np.ones(len(table), dtype=bool)
    for col in label_cols:
        values = table[col]
        if not values.hasnans:
            return 0
        unlabelled &= values.isna().to_numpy()
    return int(unlabelled.sum())


def _all_label_columns(columns: Iterable[str], schema: Schema) -> set[str]:
    return {c for c in label_columns_of(columns, schema) if not c.startswith("true_")}


def _class_counts(values: pd.Series, classes: list[int]) -> tuple[dict[str, int], int]:
    """({class: count}, number of missing cells) of one label column."""
    missing = int(values.isna().sum())
    if pd.api.types.is_integer_dtype(values.dtype) and min(classes, default=0) >= 0:
        top = max(classes, default=0)
        ints = values.to_numpy(dtype="int64", na_value=top + 1)  # whole numbers already: count without hashing
        if len(ints) and ints.min() >= 0:  # missing cells land in a bin past the classes
            n = np.bincount(ints, minlength=top + 1)
        else:
            n = np.bincount(ints[(ints >= 0) & (ints <= top)], minlength=top + 1)
        return {str(c): int(n[c]) for c in classes}, missing
    counts = values.dropna().astype("int64").value_counts()
    return {str(c): int(counts.get(c, 0)) for c in classes}, missing


def _public_summary(corpus: Corpus) -> dict[str, Any]:
    conv = corpus.conversations
    out: dict[str, Any] = {}
    if "line_check" not in conv:
        return out
    checks = conv["line_check"].astype(str)
    groups = Counter()
    for value, n in checks.value_counts().items():
        group = value if value in ("adds up", "pauses not counted") else (
            "extra lines" if "extra" in value else "fewer lines"
        )
        groups[group] += int(n)
    out["line_check"] = {g: int(groups.get(g, 0)) for g in LINE_CHECK_GROUPS}
    out["line_check_detail"] = {str(k): int(v) for k, v in checks.value_counts().items()}
    out["blank_user_line_rows"] = int((conv["user_blank_lines"] > 0).sum())
    out["trailing_newline_rows"] = int((conv["persona_trailing_newline"] | conv["user_trailing_newline"]).sum())
    out["pause_count_mismatch_rows"] = int((conv["persona_blank_lines"] != conv["pause_count"]).sum())
    out["label_positions"] = int(len(corpus.label_sequences)) if corpus.label_sequences is not None else 0
    return out


def format_summary(summary: dict[str, Any]) -> str:
    """Renders `summarize`'s dict as plain text: counts, then one table row per head.

    Returns:
        A multi-line string (no colour codes), ending without a newline.
    """
    rec = summary["records"]
    kind = {"sentence": "sentences", "conversation": "conversations", "dialogue": "dialogues"}.get(
        summary["record_kind"], summary["record_kind"]
    )
    lines = [
        f"{summary['source'] or '(in memory)'}: format {summary['format']}, schema {summary['schema']}"
        + (f", encoding {summary['encoding']}" if summary.get("encoding") else ""),
        f"records ({kind}): read {rec['read']:,} = kept {rec['kept']:,} + set aside {rec['set_aside']:,}",
    ]
    if summary["set_aside_by_field"]:
        fields = ", ".join(f"{f} {n}" for f, n in summary["set_aside_by_field"].items())
        lines.append(f"set aside by field: {fields}")
    counts = f"conversations {summary['conversations']:,}, utterances {summary['utterances']:,}"
    counts += f", pauses {summary['pauses']:,}"
    if "label_positions" in summary:
        counts += f", labelled positions {summary['label_positions']:,}"
    if "context_only" in summary:
        counts += f", context-only (no label) {summary['context_only']:,}"
    lines.append(counts)
    if "line_check" in summary:
        lc = summary["line_check"]
        lines.append(
            "line check (persona + user lines vs total_sent): "
            + ", ".join(f"{g} {lc[g]}" for g in LINE_CHECK_GROUPS)
        )
        lines.append(
            f"  rows with blank user lines {summary['blank_user_line_rows']}, "
            f"with a trailing newline {summary['trailing_newline_rows']}, "
            f"blank persona lines != pause_count {summary['pause_count_mismatch_rows']}"
        )
    if "annotators" in summary:
        a = summary["annotators"]
        lines.append(
            f"annotators: {a['distinct']:,} distinct, {a['ratings']:,} ratings, per rated item "
            f"{a['per_item_min']}-{a['per_item_max']} (median {a['per_item_median']:g})"
        )
        if summary.get("splits"):
            lines.append("splits: " + ", ".join(f"{k or '(none)'} {v:,}" for k, v in summary["splits"].items()))
    else:
        labelers = summary["labelers"]
        lines.append("labelers: " + (", ".join(f"labeler{k}" for k in labelers) if labelers else "none"))
    lines.extend(_head_table(summary["heads"]))
    return "\n".join(lines)


def _head_table(heads: dict[str, Any]) -> list[str]:
    rows: list[list[str]] = []
    n_classes = max((len(e.get("final", {})) for e in heads.values()), default=0)
    for e in heads.values():
        for lab in e.get("labelers", {}).values():
            n_classes = max(n_classes, len(lab["counts"]))
        n_classes = max(n_classes, len(e.get("ratings", {})))
    if n_classes == 0:
        return ["labels: none"]
    header = ["head", "labels"] + [f"class {c}" for c in range(n_classes)] + ["missing"]
    for name, e in heads.items():
        sources = []
        if "final" in e:
            sources.append(("final", e["final"], e["final_missing"]))
        for k, lab in e.get("labelers", {}).items():
            sources.append((f"labeler{k}", lab["counts"], lab["missing"]))
        if "ratings" in e:
            sources.append(("ratings", e["ratings"], 0))
        for i, (label, counts, missing) in enumerate(sources):
            cells = [f"{counts[str(c)]:,}" if str(c) in counts else "" for c in range(n_classes)]
            rows.append([name if i == 0 else "", label] + cells + [f"{missing:,}"])
    if not rows:
        return ["labels: none"]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return ["label counts per head:", "  " + fmt(header)] + ["  " + fmt(r) for r in rows]
