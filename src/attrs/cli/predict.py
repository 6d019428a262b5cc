"""`psyattrs predict --model URI (--text T ... | --input PATH) [--out PATH]`: predicted attributes.

`--text` sentences are independent (each its own conversation) unless `--dialogue` makes them one
conversation in the order given. `--input` reads a corpus file (PersonalDialog JSON lines, an
utterance table in CSV or Parquet, or a `.txt` file with one independent sentence per line); the
records its reader sets aside are counted and listed on standard error. For corpora too large
for memory use `psyattrs annotate`.

Without `--out`, prints each sentence with every head's class name and probability; `--json`
prints one JSON object per sentence instead. `--out` writes the full prediction table (every
class probability and the disagreement) as `.parquet`, `.csv` or `.jsonl` (one dict per sentence).

`--format lewidi` reads a LeWiDi harmonised JSON file and writes the predictions the way the task
collects them (`psyattrs.serving.lewidi_output`): one JSON object, item id -> `hard_label` and
`soft_label` per class, to `--out X.json` or, without `--out`, to standard output.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from psyattrs.cli._options import add_input_format, add_tracking_uri
from psyattrs.data import load_corpus
from psyattrs.data.io import check_file, iter_text_lines
from psyattrs.data.output import atomic_output
from psyattrs.errors import InputFileError
from psyattrs.features.tokenizers import prefetch_korean

OUT_SUFFIXES = (".parquet", ".csv", ".jsonl")
SHOWN_PROBLEMS = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `predict` command."""
    parser = subparsers.add_parser(
        "predict",
        help="predict the attributes of sentences, dialogues or a corpus file",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("--model", required=True, metavar="URI",
                        help="models:/NAME@ALIAS, runs:/RUN_ID/model, or a model folder")
    parser.add_argument("--text", action="append", default=[], metavar="SENTENCE",
                        help="a sentence to predict; repeatable")
    parser.add_argument("--dialogue", action="store_true", help="the --text sentences are one conversation, in order")
    parser.add_argument("--input", type=Path, default=None, metavar="PATH",
                        help="corpus file: PersonalDialog JSON lines, CSV/Parquet utterance table, or .txt")
    add_input_format(parser, note=" (for --input); lewidi also writes the LeWiDi layout")
    parser.add_argument("--out", type=Path, default=None, metavar="PATH", help="write predictions (.parquet, .csv, .jsonl)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per sentence")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler, quick_exit=True)  # psyattrs.cli.console: no teardown


def _read_input(path: Path, fmt: str | None, predictor) -> tuple[object, list]:
    """(inputs for the predictor, records set aside) from a file."""
    if path.suffix.lower() == ".txt" and fmt is None:
        check_file(path)
        sentences = [line for _, line in iter_text_lines(path) if line.strip()]
        if not sentences:
            raise InputFileError(path, "holds no sentence (only blank lines)")
        return sentences, []
    corpus = load_corpus(path, format=fmt, schema=predictor.schema, check_labels=False)  # labels are not used
    if corpus.format == "public":
        raise InputFileError(path, "is an OPELA public-release file (per-speaker texts whose interleaving is unknown); "
                                   "predict an utterance table instead")
    return corpus.utterances, corpus.problems


def _print_readable(frame, schema) -> None:
    for values in frame.to_dict("records"):
        who = f" [{values['speaker']}]" if values["speaker"] else ""
        print(f"{values['sent_id']}{who}  {values['text']}")
        if values["is_pause"]:
            print("      (pause: context only)")
            continue
        parts = []
        for head in schema:
            k = values[head.name]
            parts.append(f"{head.name}: {values[f'{head.name}_name']} ({values[f'{head.name}_proba_{k}']:.2f})")
        print("      " + "  ".join(parts))


def _write(frame, path: Path, predictor) -> None:
    # lazy: psyattrs --help imports every cli module
    from psyattrs.serving.predict import frame_to_dicts

    suffix = path.suffix.lower()
    if suffix not in OUT_SUFFIXES:
        raise ValueError(f"--out {path}: the file name must end in one of {list(OUT_SUFFIXES)}")
    if not path.resolve().parent.is_dir():
        raise InputFileError(path, "cannot write the predictions: its folder does not exist")
    with atomic_output(path) as tmp:  # complete or absent
        if suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        elif suffix == ".csv":
            frame.to_csv(tmp, index=False, encoding="utf-8")
        else:
            with tmp.open("w", encoding="utf-8") as fh:
                for item in frame_to_dicts(frame, predictor.schema):
                    fh.write(json.dumps(item, ensure_ascii=False) + "\n")


def handler(args: argparse.Namespace) -> int:
    # lazy: psyattrs --help imports every cli module
    from psyattrs.serving.predict import Predictor, frame_to_dicts

    if bool(args.text) == (args.input is not None):
        raise ValueError("give sentences with --text or a file with --input (one of them)")
    if args.dialogue and not args.text:
        raise ValueError("--dialogue applies to --text sentences")
    lewidi = args.format == "lewidi"
    if lewidi and args.input is None:
        raise ValueError("--format lewidi reads a LeWiDi file: give it with --input")
    if lewidi and args.out is not None and args.out.suffix.lower() != ".json":
        raise ValueError(f"--out {args.out}: LeWiDi predictions are one JSON object; the file name must end in .json")
    if not lewidi and args.out is not None and args.out.suffix.lower() not in OUT_SUFFIXES:
        raise ValueError(f"--out {args.out}: the file name must end in one of {list(OUT_SUFFIXES)} "
                         "(or .json with --format lewidi)")
    if args.text:  # the Korean analyser loads in a second process while this one loads MLflow and the model
        prefetch_korean(args.text)
    predictor = Predictor(args.model, tracking_uri=args.tracking_uri)
    problems: list = []
    if args.text:
        inputs = [{"text": t} for t in args.text] if args.dialogue else list(args.text)
    else:
        inputs, problems = _read_input(args.input, args.format, predictor)
    frame = predictor.predict(inputs)
    if problems:
        print(f"{len(problems)} record(s) of {args.input} set aside, not predicted:", file=sys.stderr)
        for p in problems[:SHOWN_PROBLEMS]:
            where = f"row {p.row}" if p.row is not None else p.doc_id
            print(f"  {where} ({p.field}): {p.reason}", file=sys.stderr)
        if len(problems) > SHOWN_PROBLEMS:
            print(f"  ... and {len(problems) - SHOWN_PROBLEMS} more (psyattrs data validate --report lists all)",
                  file=sys.stderr)
    if lewidi:
        # lazy: psyattrs --help imports every cli module
        from psyattrs.serving.lewidi_output import lewidi_predictions, write_lewidi_predictions

        if args.out is not None:
            n = write_lewidi_predictions(frame, predictor.schema, args.out)
            print(f"{n} item(s) predicted with {predictor.source} -> {args.out}")
        else:
            print(json.dumps(lewidi_predictions(frame, predictor.schema), ensure_ascii=False, indent=1))
    elif args.out is not None:
        _write(frame, args.out, predictor)
        print(f"{len(frame)} sentence(s) predicted with {predictor.source} -> {args.out}")
    elif args.json:
        for item in frame_to_dicts(frame, predictor.schema):
            print(json.dumps(item, ensure_ascii=False))
    else:
        print(f"model {predictor.source}")
        _print_readable(frame, predictor.schema)
    return 0
