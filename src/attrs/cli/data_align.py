"""`psyattrs data align` and `psyattrs data show-aligned`: the public release's sentence order.

`data align PUBLIC.csv --out ANNOTATED.csv [--iterations N] [--report R.jsonl] [--model URI]` reconstructs which
line(s) each label of the public release belongs to (`psyattrs.align.align_public`) and writes
the per-sentence layout with the final labels and `align_confidence`; the report holds one line per
conversation (log-likelihood, pause treatment, merged lines, ...; set-aside conversations with the
reason). It prints what the reconstruction knows (`psyattrs.align.AlignSummary`: conversations
settled and still changing, mean confidence, share of sentences >= 0.9) and, on standard error, a
warning with the reason when it is not to be trusted (the table is still written, exit 0).
`--model URI` scores the lines with a model trained elsewhere (a small file cannot teach the
classifier); the priors, turn structure and coherence are learnt from the file as without it.

`data show-aligned ANNOTATED.csv [--doc DOC_ID] [--gold DIR]` prints one reconstructed conversation
as a two-column dialogue, persona on the left and user on the right, each sentence with its labels
and confidence (`?` marks an uncertain placement), for a reader to judge (`psyattrs.align.show`). With `--gold`, a folder of
hand-made reading orders (`psyattrs.align.gold`), every user sentence the readers place elsewhere is
marked `x` with where they place it, and a summary line gives the share of agreed user lines placed
as the readers place them. Without `--doc` it lists the file's conversations (id, sentences, mean
confidence), one per line.

Exit codes: 0 written / shown; 1 no conversation could be aligned; 2 the input cannot be used.
"""

from __future__ import annotations

import argparse
import difflib
import math
from pathlib import Path

from psyattrs.cli._options import add_schema, add_tracking_uri
from psyattrs.data import load_corpus
from psyattrs.data.io import read_table, require_columns
from psyattrs.data.output import atomic_output
from psyattrs.data.table import final_column
from psyattrs.errors import InputFileError
from psyattrs.schema import load_schema


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
        "--model", "--label-model", dest="label_model", default=None, metavar="URI",
        help="score the lines with this trained psyattrs model instead of a classifier trained on the rounds' own "
        "readings (a registry alias models:/NAME@ALIAS, a run runs:/RUN_ID/model, or a model folder); the priors, "
        "turn structure and coherence are learnt as without it. For small files: a few conversations cannot teach "
        "the classifier",
    )
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="processes that align side by side (default: the CPUs, at most 8; the output is the same)")
    parser.add_argument("--max-lines", type=int, default=None, help="most lines one message may span (default 8)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the folds and solvers (default 0)")
    add_schema(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    add_tracking_uri(parser)
    parser.set_defaults(func=align_handler)

    show = subparsers.add_parser(
        "show-aligned",
        help="print one reconstructed conversation as a two-column dialogue",
        description="Prints one conversation of a `data align` output, persona left, user right.",
    )
    show.add_argument("path", help="the table `psyattrs data align` wrote")
    show.add_argument("--doc", default=None, metavar="DOC_ID",
                      help="the conversation to print (default: list the file's conversations)")
    show.add_argument("--width", type=int, default=None, help="line width (default: the terminal's, at least 80)")
    add_schema(show)
    show.add_argument("--gold", default=None, metavar="DIR",
                      help="a folder of hand-made reading orders (reader*/DOC_ID.json): mark where the reconstruction differs")
    show.set_defaults(func=show_handler)


def _writable(path: str, what: str) -> None:
    if not Path(path).resolve().parent.is_dir():
        raise InputFileError(path, f"cannot write the {what}: its folder does not exist")


def align_handler(args: argparse.Namespace) -> int:
    """Runs `data align`; returns the exit code."""
    import shutil
    import sys

    # lazy: psyattrs --help imports every cli module
    from psyattrs.align import AlignSettings, align_public, write_aligned, write_report
    from psyattrs.align.reconstruct import cached_alignment
    from psyattrs.align.summary import summarize_alignment
    from psyattrs.serving.predict import Predictor

    _writable(args.out, "output")
    if args.report:
        _writable(args.report, "report")
    if args.label_model is not None and args.model_kind is not None:
        raise ValueError("--model-kind names the classifier trained on the rounds' readings; with --model the given "
                         "model scores the lines instead: give one of the two")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    overrides = {
        k: v for k, v in (("iterations", args.iterations), ("model_kind", args.model_kind),
                          ("max_lines", args.max_lines), ("seed", args.seed)) if v is not None
    }
    corpus = load_corpus(args.path, format="public", schema=args.schema)
    if args.label_model is None:  # the cache `psyattrs train` on the same file uses
        import pandas as pd

        folder, result = cached_alignment(corpus, settings=AlignSettings(**overrides), progress=not args.quiet,
                                          workers=args.workers)
        if result is None:  # the entry matched its checksums; read it all before writing --out
            table = pd.read_csv(folder / "aligned.csv", usecols=["align_confidence"])
            report = pd.read_json(folder / "report.jsonl", lines=True, dtype={"doc_id": str})
            history = pd.read_csv(folder / "history.csv")
            with atomic_output(args.out) as tmp:  # complete or absent, as every output
                shutil.copyfile(folder / "aligned.csv", tmp)
            print(f"(from the alignment cache: {folder})")
        else:
            write_aligned(result, args.out)
            table, report, history = result.utterances, result.report, result.history
    else:
        label_model = Predictor(args.label_model, tracking_uri=args.tracking_uri)
        result = align_public(corpus, progress=not args.quiet, label_model=label_model, workers=args.workers,
                              **overrides)
        write_aligned(result, args.out)
        table, report, history = result.utterances, result.report, result.history
    summary = summarize_alignment(report, table["align_confidence"], history,
                                  self_trained=args.label_model is None)
    aligned = report[report["status"] == "aligned"]
    lines = summary.lines()
    print(lines[0])
    print(f"{len(table)} sentence row(s) written to {args.out}")
    if len(aligned):
        counted = int((aligned["mode"] == "pauses counted").sum())
        print(f"pause treatment: {counted} counted, {len(aligned) - counted} not counted; merged lines: "
              f"{int(aligned['merged_lines'].sum())}")
    for line in lines[1:]:
        if not line.startswith("warning: "):
            print(line)
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
    for warning in summary.warnings:  # last, where a reader sees them: the output is written, but say what it rests on
        print(f"psyattrs: warning: {warning}", file=sys.stderr)
    return 0 if len(aligned) else 1


def show_handler(args: argparse.Namespace) -> int:
    """Runs `data show-aligned`; returns the exit code."""
    schema = load_schema(args.schema)
    heads = [final_column(h) for h in schema.head_names]
    table = read_table(args.path, str_columns=("doc_id", "text", "person_type"))
    require_columns(table.columns, ["doc_id", "person_type", "text", "align_confidence", *heads], args.path,
                    "a `psyattrs data align` output")
    docs = table["doc_id"].astype(str)
    if args.doc is None:
        print(_conversation_list(table, docs, args.path))
        return 0
    rows = table[docs == args.doc]
    if rows.empty:
        ids = list(dict.fromkeys(docs))
        close = difflib.get_close_matches(args.doc, ids, n=3, cutoff=0.5)
        shown = ", ".join(ids[:SHOWN_IDS]) + (", ..." if len(ids) > SHOWN_IDS else "")
        hint = f"; did you mean {close}?" if close else f"; it has {len(ids)} conversation(s): {shown}"
        raise ValueError(f"no conversation {args.doc!r} in {args.path}{hint} (leave out --doc to list them all)")
    width = args.width or max(80, _terminal_width())
    if width < 60:
        raise ValueError(f"--width must be at least 60, got {width}")
    # lazy: psyattrs --help imports every cli module
    from psyattrs.align.show import format_dialogue, gold_marks

    marks, summary = None, None
    if args.gold is not None:
        marks, summary = gold_marks(rows, args.gold, args.doc)
    print(format_dialogue(rows, schema, width, marks))
    if summary:
        print(summary)
    return 0


SHOWN_IDS = 5
"""How many conversation ids an unknown `--doc` error shows."""


def _conversation_list(table, docs, path: str) -> str:
    """One line per conversation of an aligned table, in file order: id, sentences, mean confidence."""
    import pandas as pd

    confidence = pd.to_numeric(table["align_confidence"], errors="coerce")
    grouped = confidence.groupby(docs, sort=False).agg(["size", "mean"])
    width = max(len("conversation"), *(len(d) for d in grouped.index)) if len(grouped) else len("conversation")
    lines = [f"{path}: {len(grouped)} conversation(s); show one with --doc DOC_ID",
             f"{'conversation'.ljust(width)}  sentences  mean confidence"]
    for doc, (size, mean) in grouped.iterrows():
        lines.append(f"{doc.ljust(width)}  {int(size):9d}  {mean:15.3f}")
    return "\n".join(lines)


def _terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((120, 40)).columns


