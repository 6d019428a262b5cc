"""Annotating corpora of any size: chunks in constant memory, resumable, every item accounted for.

    psyattrs annotate dialogues.jsonl --model models:/psyattrs-demo@champion --out dialogues.parquet

reads the input in chunks of whole conversations (`psyattrs.serving.sources`: PersonalDialog JSON
lines, or an utterance table in CSV or Parquet), predicts each chunk with `Predictor.predict_table`
(the same code as `psyattrs.predict`), and writes it. Memory holds one chunk at a time (the
tokenisation cache of `psyattrs.features.text` is emptied after each chunk, since no conversation
spans two chunks), so it does not grow with the input: ~1 GB for 50,000-utterance chunks with the
demo LightGBM model, for 100k and for 1M utterances alike (benchmarks/annotate_benchmark.py).

The output `OUT.parquet` is a Parquet dataset folder, read whole with `pd.read_parquet(OUT)`,
`read_annotations(OUT)` or `spark.read.parquet(OUT)`:

- `part-000000.parquet`, `part-000001.parquet`, ...: one file per chunk, in input order. Columns:
  those of `Predictor.output_columns` (`doc_id`, `sent_id`, `position`, `speaker`, `is_pause`,
  `text`, then per head the class, its name, the class probabilities and the disagreement), plus
  `is_golden` for PersonalDialog (the record's golden response).
- `_rejects.jsonl` (or `rejects=`): one JSON line per rejected item: `reason`, `field`, `line`
  (PersonalDialog) or `row` (table, 1-based data row), `doc_id`, `sent_id` (null when unknown).
- `_manifest.json`: the input's fingerprint, the model (an alias pinned to its version), the
  chunk size, the chunks finished, where the next chunk starts, the counts, and the size of the
  rejects file after the last finished chunk.

Resuming: after each chunk, its part file is moved into place, the rejects are flushed, and then
the manifest is replaced atomically. A run that stops anywhere (Ctrl-C, a crash, `max_chunks`)
leaves a manifest naming only complete chunks; running the same command again removes whatever
the unfinished chunk left (a part file past the manifest, reject lines past its recorded size)
and continues from the recorded position, so the output equals that of an uninterrupted run. The
input (size, modification time, first MiB) and the chunk size must be unchanged, and the model is
the one pinned at the start; `restart=True` starts over.

Reconciliation: items read = utterances written + items rejected, where an item is an utterance
or an unreadable PersonalDialog line (see `psyattrs.serving.sources`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from psyattrs._runtime import on_terminal, progress_bar
from psyattrs.data.output import atomic_output, describe_os_error, is_temp_name
from psyattrs.errors import InputFileError, OutputFileError

MANIFEST = "_manifest.json"
REJECTS = "_rejects.jsonl"
PART_PATTERN = "part-{:06d}.parquet"
DEFAULT_CHUNK_SIZE = 50_000
MANIFEST_VERSION = 1
_FINGERPRINT_BYTES = 1 << 20


@dataclass
class AnnotateResult:
    """What `annotate` did (over the whole run, resumed parts included).

    Attributes:
        out: the output folder.
        rejects: the rejects file.
        model: the model used (an alias pinned to its version).
        n_read: items read (utterances, plus unreadable PersonalDialog lines).
        n_written: utterances written.
        n_rejected: items rejected.
        n_chunks: chunks finished.
        n_chunks_resumed: chunks that an earlier, interrupted run had finished.
        finished: the whole input is annotated (False after `max_chunks`).
        n_records, n_records_rejected: PersonalDialog records (non-blank lines) read and rejected.
        source: `personaldialog` or `table`.
    """

    out: Path
    rejects: Path
    model: str
    n_read: int = 0
    n_written: int = 0
    n_rejected: int = 0
    n_chunks: int = 0
    n_chunks_resumed: int = 0
    finished: bool = False
    n_records: int = 0
    n_records_rejected: int = 0
    source: str = ""
    seconds: float = field(default=0.0, compare=False)

    @property
    def balanced(self) -> bool:
        """Whether read = written + rejected."""
        return self.n_read == self.n_written + self.n_rejected

    def reconciliation(self) -> str:
        """The closing lines: read = written + rejected, and where the rejects are."""
        what = "utterances" if self.source == "table" else "utterances and unreadable lines"
        sign, flag = ("=", "") if self.balanced else ("!=", "  MISMATCH")
        lines = [f"read {self.n_read:,} {sign} written {self.n_written:,} + rejected {self.n_rejected:,} ({what}){flag}"]
        if self.source == "personaldialog":
            lines.append(f"records read {self.n_records:,} = annotated {self.n_records - self.n_records_rejected:,}"
                         f" + rejected {self.n_records_rejected:,}")
        if self.n_rejected:
            lines.append(f"rejected items and their reasons: {self.rejects}")
        state = "complete" if self.finished else "stopped early: run the same command again to continue"
        lines.append(f"{self.n_chunks} chunk(s) in {self.out} ({self.n_chunks_resumed} from an earlier run), {state}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ the folder


def _fingerprint(path: Path) -> dict[str, Any]:
    stat = path.stat()
    with path.open("rb") as fh:
        head = hashlib.sha256(fh.read(_FINGERPRINT_BYTES)).hexdigest()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head_sha256": head}


def _write_atomic(path: Path, text: str) -> None:
    with atomic_output(path) as tmp:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(text)


def _is_temp(name: str) -> bool:
    """A temporary file of an unfinished write (`psyattrs.data.output`, or the older `NAME.tmp`)."""
    return is_temp_name(name) or name.endswith(".tmp")


def _ours(name: str) -> bool:
    if _is_temp(name):
        base = name[1:].rsplit(".", 2)[0] if is_temp_name(name) else name[: -len(".tmp")]
        return _ours(base)
    return name in (MANIFEST, REJECTS) or (name.startswith("part-") and ".parquet" in name)


def read_manifest(out: "str | Path") -> dict[str, Any] | None:
    """The manifest of an annotate output folder, or None when there is none.

    Raises:
        InputFileError: a manifest that is not readable JSON of this version.
    """
    path = Path(out) / MANIFEST
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(path, f"damaged annotate manifest ({exc}); rerun with --restart") from None
    if not isinstance(doc, dict) or doc.get("format_version") != MANIFEST_VERSION:
        raise InputFileError(path, f"not an annotate manifest of version {MANIFEST_VERSION}; rerun with --restart")
    return doc


def _inspect_folder(out: Path, restart: bool) -> dict[str, Any] | None:
    """Checks the output folder without touching it; returns the manifest of a run to resume."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; annotate writes a Parquet dataset folder (name it e.g. out.parquet)")
    if not out.exists():
        return None
    foreign = sorted(p.name for p in out.iterdir() if not _ours(p.name))
    if foreign:
        raise ValueError(
            f"--out {out} holds files that annotate did not write ({foreign[:5]}); choose a new or empty folder"
        )
    if restart:
        return None
    manifest = read_manifest(out)
    if manifest is None and any(out.iterdir()):
        raise ValueError(f"--out {out} holds annotate files but no manifest; rerun with --restart to start over")
    return manifest


def _reset_folder(out: Path) -> None:
    """Creates the output folder, or empties it of an earlier run's files (`_inspect_folder` has
    checked that it holds no others)."""
    out.mkdir(parents=True, exist_ok=True)
    for p in out.iterdir():
        if _ours(p.name) or _is_temp(p.name):
            p.unlink()


def _check_resume(manifest: dict[str, Any], fingerprint: dict[str, Any], chunk_size: int, model: str, out: Path) -> None:
    saved = manifest["input"]
    changed = [k for k in ("path", "size", "mtime_ns", "head_sha256") if saved.get(k) != fingerprint[k]]
    if changed:
        raise ValueError(
            f"{out} holds an annotation of {saved.get('path')} as it was ({', '.join(changed)} differ now); "
            "rerun with --restart to annotate the current input"
        )
    if manifest["chunk_size"] != chunk_size:
        raise ValueError(
            f"{out} was written with chunk size {manifest['chunk_size']}, not {chunk_size}: resume with "
            f"--chunk-size {manifest['chunk_size']} or rerun with --restart"
        )
    if manifest["model_given"] != model and manifest["model"] != model:
        raise ValueError(
            f"{out} was written with model {manifest['model_given']} ({manifest['model']}), not {model}: "
            "resume with that model or rerun with --restart"
        )
    for i in range(manifest["chunks"]):
        if not (out / PART_PATTERN.format(i)).is_file():
            raise ValueError(f"{out} lacks {PART_PATTERN.format(i)} that its manifest counts; rerun with --restart")


def _clean_unfinished(out: Path, chunks: int, rejects: Path, rejects_bytes: int) -> None:
    """Removes what an interrupted chunk left: parts past the manifest, temporary files, and
    reject lines past the recorded size."""
    for p in out.iterdir():
        if _is_temp(p.name):
            p.unlink()
        elif p.name.startswith("part-") and p.name.endswith(".parquet"):
            try:
                index = int(p.name[5:-8])
            except ValueError:
                continue
            if index >= chunks:
                p.unlink()
    if rejects.exists() and rejects.stat().st_size > rejects_bytes:
        with rejects.open("r+b") as fh:
            fh.truncate(rejects_bytes)


# ------------------------------------------------------------------------------------- writing


def arrow_schema(columns: list[str], schema: Any, *, golden: bool):
    """The pyarrow schema of every part file (fixed, so that all parts agree)."""
    import pyarrow as pa

    head_names = set(schema.head_names)
    fields = []
    for name in columns:
        if name in ("position",) or name in head_names:
            fields.append(pa.field(name, pa.int64()))
        elif name == "is_pause":
            fields.append(pa.field(name, pa.bool_()))
        elif name in ("doc_id", "sent_id", "speaker", "text") or name.endswith("_name"):
            fields.append(pa.field(name, pa.string()))
        else:
            fields.append(pa.field(name, pa.float64()))
    if golden:
        fields.append(pa.field("is_golden", pa.bool_()))
    return pa.schema(fields)


def _write_part(frame: pd.DataFrame, path: Path, arrow) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, schema=arrow, preserve_index=False)
    with atomic_output(path) as tmp:
        pq.write_table(table, tmp)


def _append_rejects(path: Path, rejects: list[dict[str, Any]]) -> int:
    """Appends reject lines; the manifest records the size after them only once they are on disk,
    so lines of a failed append are cut off on resume."""
    try:
        with path.open("ab") as fh:
            if rejects:
                fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rejects).encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
            return fh.tell()
    except OSError as exc:
        raise OutputFileError(path, describe_os_error(exc)) from None


def read_annotations(out: "str | Path") -> pd.DataFrame:
    """Every part of an annotate output folder, concatenated in input order.

    Raises:
        InputFileError: not an annotate output folder.
    """
    folder = Path(out)
    manifest = read_manifest(folder)
    if manifest is None:
        raise InputFileError(folder, "not an annotate output folder (no _manifest.json)")
    parts = [pd.read_parquet(folder / PART_PATTERN.format(i)) for i in range(manifest["chunks"])]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------ annotate


def annotate(
    path: "str | Path",
    model: Any,
    out: "str | Path",
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    format: str | None = None,
    rejects: "str | Path | None" = None,
    restart: bool = False,
    max_chunks: int | None = None,
    tracking_uri: str | None = None,
    progress: bool = True,
) -> AnnotateResult:
    """Annotates a corpus file into a Parquet dataset folder (see the module docstring).

    Args:
        path: the input: PersonalDialog JSON lines, or an utterance table (CSV or Parquet).
        model: a model URI (`models:/NAME@ALIAS` is pinned to its current version), a model folder,
            or a loaded model (a resumed run cannot check that an in-memory model is the same).
        out: the output folder (created; resumed when it holds an unfinished run).
        chunk_size: utterances per chunk (whole conversations; memory scales with it).
        format: `personaldialog`, `table`, or None to detect.
        rejects: the rejects file; None = `OUT/_rejects.jsonl`.
        restart: discard an earlier run in `out` and start over.
        max_chunks: stop after this many new chunks (the run can be resumed); None = to the end.
        tracking_uri: the MLflow store for model URIs.
        progress: show a progress bar (rate and time left) on standard error.

    Returns:
        The `AnnotateResult` (its `reconciliation()` is what the command prints).

    Raises:
        InputFileError: an unreadable input.
        ValueError: a bad argument, an `out` that is a file or holds other files, or a resume
            whose input, chunk size or model differ from the interrupted run's.
    """
    import time

    # lazy: psyattrs --help imports this module (cli/annotate)
    from psyattrs.serving.predict import Predictor
    from psyattrs.serving.registry import pinned_uri
    from psyattrs.serving.sources import open_source

    start_time = time.perf_counter()
    if max_chunks is not None and (isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1):
        raise ValueError(f"max_chunks must be None or an integer >= 1, got {max_chunks!r}")
    source = open_source(path, chunk_size, format=format)
    out = Path(out)
    manifest = _inspect_folder(out, restart)
    fingerprint = _fingerprint(source.path)
    given = model if isinstance(model, str) else str(model) if isinstance(model, Path) else None
    if manifest is not None:
        _check_resume(manifest, fingerprint, source.chunk_size, given or manifest["model_given"], out)
        pinned = manifest["model"] if given is not None else None
        rejects_path = Path(manifest["rejects_file"])
        if rejects is not None and Path(rejects).resolve() != rejects_path:
            raise ValueError(f"{out} was written with the rejects file {rejects_path}, not {rejects}: resume without "
                             "--rejects (or with that file), or rerun with --restart")
    else:
        pinned = pinned_uri(given, tracking_uri=tracking_uri) if given is not None else None
        rejects_path = Path(rejects) if rejects is not None else out / REJECTS
    predictor = Predictor(pinned if pinned is not None else model, tracking_uri=tracking_uri)
    model_name = pinned or predictor.source
    golden = source.kind == "personaldialog"
    columns = predictor.output_columns
    arrow = arrow_schema(columns, predictor.schema, golden=golden)
    result = AnnotateResult(out, rejects_path, model_name, source=source.kind)

    if manifest is None:
        if rejects_path.parent != out and rejects_path.exists() and rejects_path.stat().st_size and not restart:
            raise ValueError(f"the rejects file {rejects_path} exists and is not empty; choose another or pass --restart")
        try:
            _reset_folder(out)  # only now: a model that fails to load leaves an earlier run untouched
            rejects_path.parent.mkdir(parents=True, exist_ok=True)
            rejects_path.write_bytes(b"")
        except OSError as exc:
            raise OutputFileError(exc.filename or out, describe_os_error(exc)) from None
        manifest = {
            "format_version": MANIFEST_VERSION, "input": fingerprint, "source": source.kind,
            "model": model_name, "model_given": given or predictor.source, "chunk_size": source.chunk_size,
            "chunks": 0, "position": None, "progress": 0, "finished": False, "rejects_file": str(rejects_path.resolve()),
            "rejects_bytes": 0, "columns": [f.name for f in arrow],
            "counts": {"read": 0, "written": 0, "rejected": 0, "records": 0, "records_rejected": 0},
            "started": _now(), "updated": _now(),
        }  # fmt: skip
        _write_atomic(out / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1))
    else:
        try:
            _clean_unfinished(out, manifest["chunks"], rejects_path, manifest["rejects_bytes"])
        except OSError as exc:
            raise OutputFileError(exc.filename or out, describe_os_error(exc)) from None
        if source.kind == "table":
            _remember_finished(source, out, manifest["chunks"], rejects_path)
    result.n_chunks_resumed = manifest["chunks"]
    if not manifest["finished"]:
        _run_chunks(source, predictor, manifest, out, rejects_path, arrow, max_chunks, progress)
    counts = manifest["counts"]
    result.n_read, result.n_written, result.n_rejected = counts["read"], counts["written"], counts["rejected"]
    result.n_records, result.n_records_rejected = counts["records"], counts["records_rejected"]
    result.n_chunks, result.finished = manifest["chunks"], manifest["finished"]
    result.seconds = time.perf_counter() - start_time
    return result


def _remember_finished(source: Any, out: Path, chunks: int, rejects_path: Path) -> None:
    """A resumed table source learns the conversations already finished (contiguity check)."""
    import pyarrow.parquet as pq

    for i in range(chunks):
        source.remember(pq.read_table(out / PART_PATTERN.format(i), columns=["doc_id"]).column(0).to_pylist())
    if rejects_path.exists():
        with rejects_path.open(encoding="utf-8") as fh:
            source.remember([json.loads(line).get("doc_id") or "" for line in fh if line.strip()])


def _run_chunks(source, predictor, manifest: dict[str, Any], out: Path, rejects_path: Path, arrow,
                max_chunks: int | None, progress: bool) -> None:
    import time

    # lazy: psyattrs --help imports this module (cli/annotate)
    from psyattrs.features.tokenizers import clear_tokenizer_cache

    counts = manifest["counts"]
    started, written_now = time.perf_counter(), 0
    bar = progress_bar(total=source.total, initial=manifest["progress"], unit=source.unit, unit_scale=True,
                       desc="annotate", enabled=progress, file=sys.stderr, dynamic_ncols=True)
    lines = progress and not on_terminal(sys.stderr)  # logs and CI: one line per chunk instead of a bar
    new = 0
    chunks = iter(source.chunks(manifest["position"]))
    try:
        for chunk in chunks:
            frame = predictor.predict_table(chunk.table)
            clear_tokenizer_cache()  # no conversation spans two chunks: cached tokens are never reused
            if "is_golden" in arrow.names:
                frame["is_golden"] = chunk.table["is_golden"].to_numpy(dtype=bool)
            index = manifest["chunks"]
            _write_part(frame, out / PART_PATTERN.format(index), arrow)
            size = _append_rejects(rejects_path, chunk.rejects)
            counts["read"] += chunk.n_read
            counts["written"] += len(frame)
            counts["rejected"] += len(chunk.rejects)
            counts["records"] += chunk.n_records
            counts["records_rejected"] += chunk.n_records_rejected
            manifest.update(chunks=index + 1, position=chunk.position, progress=chunk.progress,
                            rejects_bytes=size, updated=_now())
            _write_atomic(out / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1))
            written_now += len(frame)
            rate = written_now / max(time.perf_counter() - started, 1e-9)
            bar.set_postfix_str(f"{counts['written']:,} written, {counts['rejected']:,} rejected, {rate:,.0f} utt/s",
                                refresh=False)
            bar.update(chunk.progress - bar.n)
            if lines:
                share = f" ({chunk.progress / source.total:.0%} of the input)" if source.total else ""
                print(f"annotate: chunk {index + 1} done{share}, {counts['written']:,} written, "
                      f"{counts['rejected']:,} rejected, {rate:,.0f} utt/s", file=sys.stderr, flush=True)
            new += 1
            if max_chunks is not None and new >= max_chunks and next(chunks, None) is not None:
                return  # stopped early; when that chunk was the last one, the run is complete
        manifest.update(finished=True, progress=source.total, updated=_now())
        _write_atomic(out / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1))
        bar.update(source.total - bar.n)
    finally:
        bar.close()
