"""`psyattrs data align` and `psyattrs data show-aligned`: the public release's sentence order.

`data align PUBLIC.csv --out ANNOTATED.csv [--iterations N] [--report R.jsonl]` reconstructs which
line(s) each label of the public release belongs to (`psyattrs.align.align_public`) and writes
the per-sentence layout with the final labels and `align_confidence`; the report holds one line per
conversation (log-likelihood, pause treatment, merged lines, ...; set-aside conversations with the
reason).

`data show-aligned ANNOTATED.csv --doc DOC_ID [--gold DIR]` prints one reconstructed conversation
as a two-column dialogue, persona on the left and user on the right, each sentence with its labels
and confidence (`?` marks an uncertain placement), for a reader to judge. With `--gold`, a folder of
hand-made reading orders (`psyattrs.align.gold`), every user sentence the readers place elsewhere is
marked `x` with where they place it, and a summary line gives the share of agreed user lines placed
as the readers place them.

Exit codes: 0 written / shown; 1 no conversation could be aligned; 2 the input cannot be used.
"""

from __future__ import annotations

import argparse
import difflib
import math
from pathlib import Path

from psyattrs.cli._options import add_tracking_uri
from psyattrs.errors import InputFileError

LOW_CONFIDENCE = 0.9
"""Sentences below this confidence are marked with `?` (uncertain placement) in `show-aligned`."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `align` and `show-aligned` to the `data` command group."""
    parser = subparsers.add_parser(
        "align",
        help="reconstruct the sentence order of the OPELA public release",
        description="Reconstructs which lines each label of the OPELA public release belongs to.",
    )
    parser.add_argument("path", help="the public release (CSV or Parquet, one row per conversation)")
    parser.add_argument("--out", required=True, metavar="ANNOTATED.csv", help="where to write the per-sentence table")
    parser.add_argument("--iterations", type=int, default=None, help="classifier rounds at most after the first, priors-only pass (default 15)")
    parser.add_argument("--report", default=None, metavar="R.jsonl", help="write the per-conversation report here")
    parser.add_argument("--model-kind", default=None, help="sentence classifier: tfidf (default), majority, lightgbm")
    parser.add_argument(
        "--label-model", default=None, metavar="MODEL",
        help="score sentences with this trained model (models:/ or runs:/ URI, or a model folder) "
        "instead of a classifier trained on the rounds' own alignments",
    )
    parser.add_argument("--max-lines", type=int, default=None, help="most lines one message may span (default 8)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the folds and solvers (default 0)")
    parser.add_argument("--schema", default=None, help="label schema: 'opela' (default) or a YAML file")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    add_tracking_uri(parser)
    parser.set_defaults(func=align_handler)

    show = subparsers.add_parser(
        "show-aligned",
        help="print one reconstructed conversation as a two-column dialogue",
        description="Prints one conversation of a `data align` output, persona left, user right.",
    )
    show.add_argument("path", help="the table `psyattrs data align` wrote")
    show.add_argument("--doc", required=True, metavar="DOC_ID", help="the conversation to print")
    show.add_argument("--width", type=int, default=None, help="line width (default: the terminal's, at least 80)")
    show.add_argument("--schema", default=None, help="label schema: 'opela' (default) or a YAML file")
    show.add_argument("--gold", default=None, metavar="DIR",
                      help="a folder of hand-made reading orders (reader*/DOC_ID.json): mark where the reconstruction differs")
    show.set_defaults(func=show_handler)


def _writable(path: str, what: str) -> None:
    if not Path(path).resolve().parent.is_dir():
        raise InputFileError(path, f"cannot write the {what}: its folder does not exist")


def align_handler(args: argparse.Namespace) -> int:
    """Runs `data align`; returns the exit code."""
    import shutil

    from psyattrs.data import load_corpus
    from psyattrs.align import AlignSettings, align_public, write_aligned, write_report
    from psyattrs.align.reconstruct import cached_alignment
    from psyattrs.data.output import atomic_output
    from psyattrs.serving.predict import Predictor

    _writable(args.out, "output")
    if args.report:
        _writable(args.report, "report")
    overrides = {
        k: v for k, v in (("iterations", args.iterations), ("model_kind", args.model_kind),
                          ("max_lines", args.max_lines), ("seed", args.seed)) if v is not None
    }
    corpus = load_corpus(args.path, format="public", schema=args.schema)
    if args.label_model is None:  # the cache `psyattrs train` on the same file uses
        import pandas as pd

        folder, result = cached_alignment(corpus, settings=AlignSettings(**overrides), progress=not args.quiet)
        if result is None:
            with atomic_output(args.out) as tmp:  # complete or absent, as every output
                shutil.copyfile(folder / "aligned.csv", tmp)
            table = pd.read_csv(args.out, usecols=["align_confidence"])
            report = pd.read_json(folder / "report.jsonl", lines=True, dtype={"doc_id": str})
            history = pd.read_csv(folder / "history.csv")
            print(f"(from the alignment cache: {folder})")
        else:
            write_aligned(result, args.out)
            table, report, history = result.utterances, result.report, result.history
    else:
        label_model = Predictor(args.label_model, tracking_uri=args.tracking_uri)
        result = align_public(corpus, progress=not args.quiet, label_model=label_model, **overrides)
        write_aligned(result, args.out)
        table, report, history = result.utterances, result.report, result.history
    aligned = report[report["status"] == "aligned"]
    print(f"{len(aligned)} of {len(report)} conversation(s) aligned; {len(report) - len(aligned)} set aside")
    print(f"{len(table)} sentence row(s) written to {args.out}")
    if len(aligned):
        counted = int((aligned["mode"] == "pauses counted").sum())
        conf = table["align_confidence"]
        print(
            f"pause treatment: {counted} counted, {len(aligned) - counted} not counted; merged lines: "
            f"{int(aligned['merged_lines'].sum())}; mean confidence {conf.mean():.3f}, "
            f"{(conf >= 0.9).mean():.1%} of sentences >= 0.9"
        )
    h = history
    rounds = ", ".join(
        f"{int(r.iteration)}: " + ("-" if math.isnan(r.changed) else f"{r.changed:.1%} / {r.moved:.1%}")
        for r in h.itertuples()
    )
    print(f"rounds (share of labels that changed unit / posterior mass moved): {rounds}")
    for _, r in report[report["status"] != "aligned"].head(5).iterrows():
        print(f"  set aside: {r['doc_id']}: {r['reason']}")
    if args.report:
        if result is None:
            shutil.copyfile(folder / "report.jsonl", args.report)
        else:
            write_report(result, args.report)
        print(f"report: {len(report)} conversation line(s) written to {args.report}")
    return 0 if len(aligned) else 1


def show_handler(args: argparse.Namespace) -> int:
    """Runs `data show-aligned`; returns the exit code."""
    from psyattrs.data.io import read_table, require_columns
    from psyattrs.data.table import final_column
    from psyattrs.schema import load_schema

    schema = load_schema(args.schema)
    heads = [final_column(h) for h in schema.head_names]
    table = read_table(args.path, str_columns=("doc_id", "text", "person_type"))
    require_columns(table.columns, ["doc_id", "person_type", "text", "align_confidence", *heads], args.path,
                    "a `psyattrs data align` output")
    docs = table["doc_id"].astype(str)
    rows = table[docs == args.doc]
    if rows.empty:
        close = difflib.get_close_matches(args.doc, list(dict.fromkeys(docs)), n=3, cutoff=0.5)
        hint = f"; did you mean {close}?" if close else f"; it has {docs.nunique()} conversation(s)"
        raise ValueError(f"no conversation {args.doc!r} in {args.path}{hint}")
    width = args.width or max(80, _terminal_width())
    if width < 60:
        raise ValueError(f"--width must be at least 60, got {width}")
    marks, summary = None, None
    if args.gold is not None:
        marks, summary = gold_marks(rows, args.gold, args.doc)
    print(format_dialogue(rows, schema, width, marks))
    if summary:
        print(summary)
    return 0


def gold_marks(rows, folder: str, doc: str) -> tuple[dict, str]:
    """Per row label of `rows` (a conversation of an aligned table), the mark of its user lines
    against the hand-made orders in `folder`, and a summary line."""
    import pandas as pd

    from psyattrs.align.gold import gold_counts, read_gold, reading_counts

    gold = read_gold(folder)
    if doc not in gold:
        raise ValueError(f"the gold folder {folder} has no reading of {doc!r} ({len(gold)} conversation(s))")
    for c in ("line_start", "line_end", "is_pause"):
        if c not in rows:
            raise ValueError(f"the table has no {c!r} column: it is not a `psyattrs data align` output")
    rows = rows.assign(
        line_start=pd.to_numeric(rows["line_start"], errors="coerce"), line_end=pd.to_numeric(rows["line_end"], errors="coerce"),
        is_pause=rows["is_pause"].astype(str).str.strip().str.lower().isin({"1", "true"}),
        align_confidence=pd.to_numeric(rows["align_confidence"], errors="coerce"),
    )
    units = rows[~rows["is_pause"] & rows["line_start"].notna()]
    persona = units[units["person_type"] == "persona"]
    used = {i for a, b in zip(persona["line_start"], persona["line_end"]) for i in range(int(a), int(b))}
    size = max([i for who, i in next(iter(gold[doc].orders.values())) if who == "P"] + [-1] + list(used)) + 1
    blank = [i not in used for i in range(size)]
    readers = [gold_counts(o, blank) for o in gold[doc].orders.values()]
    got, _ = reading_counts(rows.reset_index(drop=True).assign(position=range(len(rows))))
    marks, right, total = {}, 0, 0
    for idx, r in units[units["person_type"] == "user"].iterrows():
        notes = []
        for j in range(int(r["line_start"]), int(r["line_end"])):
            values = {c.get(j) for c in readers}
            if len(values) != 1 or None in values:
                notes.append(f"U{j}: readers differ")
                continue
            want = values.pop()
            total += 1
            if got.get(j) == want:
                right += 1
            else:
                notes.append(f"U{j}: readers put it after {want} persona line(s), here {got.get(j)}")
        if notes:
            marks[idx] = "x " + "; ".join(notes)
    share = f"{right / total:.1%}" if total else "n/a"
    summary = (f"gold ({', '.join(sorted(gold[doc].orders))}): {right} of {total} agreed user line(s) placed as the "
               f"readers place them ({share}); x marks the others")
    return marks, summary


def _terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((120, 40)).columns


def format_dialogue(rows, schema, width: int, marks: dict | None = None) -> str:
    """One conversation as text: a header, then one block per sentence in two columns.

    Args:
        rows: the conversation's rows of an aligned table (chronological).
        schema: the heads (labels are shown as `head=value`, abbreviated to three letters).
        width: total line width (>= 60).
        marks: optional {row label: note}, printed under the sentence (e.g. where the hand-made
            order differs).

    Returns:
        The dialogue; persona sentences in the left column, user sentences in the right one,
        pauses as a centred marker; each sentence's last line ends with its labels and
        confidence (`?` below `LOW_CONFIDENCE`: an uncertain placement).
    """
    import pandas as pd

    from psyattrs.data.table import final_column

    label_w = 4 * len(schema.head_names) + 12
    col = max(20, (width - label_w - 9) // 2)
    first = rows.iloc[0]
    n = len(rows)
    conf = pd.to_numeric(rows["align_confidence"], errors="coerce")
    out = [
        f"{first['doc_id']}: {n} sentence(s), mean confidence {conf.mean():.3f}"
        + (f", {rows['align_mode'].iloc[0]}" if "align_mode" in rows else ""),
        "labels: " + " ".join(f"{h[:3]}={h}" for h in schema.head_names),
        f"{'#':>4} {_pad('persona', col)} | {_pad('user', col)} | labels / confidence",
        "-" * min(width, 4 + 2 * col + label_w + 7),
    ]
    for k, (idx, r) in enumerate(rows.iterrows(), start=1):
        labels = " ".join(
            f"{h[:3]}={'-' if pd.isna(r[final_column(h)]) else int(r[final_column(h)])}" for h in schema.head_names
        )
        c = r["align_confidence"]
        tag = "  n/a" if pd.isna(c) else f"{float(c):.2f}" + ("?" if float(c) < LOW_CONFIDENCE else " ")
        pause = str(r.get("is_pause", 0)).strip().lower() in {"1", "true"}
        text = "" if pd.isna(r["text"]) else str(r["text"])
        if pause:
            body = [_pad("~ pause ~".center(col), col)]
            lines = [f"{k:>4} {body[0]} | {_pad('', col)} | {labels} {tag}"]
        else:
            wrapped = [w for part in text.split("\n") for w in _wrap(part, col)] or [""]
            lines = []
            for j, w in enumerate(wrapped):
                left, right = (w, "") if r["person_type"] == "persona" else ("", w)
                end = f" | {labels} {tag}" if j == len(wrapped) - 1 else " |"
                lines.append(f"{k if j == 0 else '':>4} {_pad(left, col)} | {_pad(right, col)}{end}")
        if marks and idx in marks:
            lines.append(f"{'':>4} {marks[idx]}")
        out.extend(lines)
    return "\n".join(out)


def _cell(ch: str) -> int:
    import unicodedata

    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _width(text: str) -> int:
    return sum(_cell(ch) for ch in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _wrap(text: str, width: int) -> list[str]:
    """Splits text into pieces of at most `width` display cells (wide characters count two),
    breaking at spaces where possible."""
    pieces, current = [], ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if _width(candidate) <= width:
            current = candidate
            continue
        if current:
            pieces.append(current)
        current = ""
        for ch in word:
            if _width(current + ch) > width:
                pieces.append(current)
                current = ""
            current += ch
    pieces.append(current)
    return pieces
