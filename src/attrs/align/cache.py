"""The alignment cache's entries: written with a manifest, checked on every read.

An entry is one folder (`reconstruct.cache_entry`) holding the files of `CACHE_FILES` and, written
last, `manifest.json`: for each file its size in bytes, its number of lines and its SHA-256. A read
(`entry_is_sound`) checks every file against the manifest first. An entry that fails (a file cut
short, cut by lines, emptied, edited, missing; the manifest itself unreadable) is discarded with one
warning naming the entry and what was wrong, and the alignment is made again and re-cached: the
cache only ever saves time, it never decides what a run reads.

Each file is written through `atomic_output` (a temporary file renamed into place). A process
killed while writing leaves such a temporary file (`.NAME.XXXXXXXX.tmp`): every use of the cache
removes those older than `STALE_TEMP_SECONDS` (a live writer renames its file within seconds of
creating it) and entry folders that never received their manifest within that time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import warnings
from pathlib import Path

from psyattrs.data.output import is_temp_name, write_text_atomic
from psyattrs.errors import PsyattrsWarning

MANIFEST = "manifest.json"
STALE_TEMP_SECONDS = 15 * 60
"""Age after which a temporary file, or an entry folder without a manifest, belongs to a process
that died while writing (a live one finishes an entry within seconds of starting to write it)."""


def cache_folder() -> Path:
    """Where `aligned_corpus` caches alignments: `$PSYATTRS_CACHE/align`, else `~/.cache/psyattrs/align`."""
    root = os.environ.get("PSYATTRS_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "psyattrs") / "align"


def file_facts(path: Path) -> dict[str, int | str]:
    """{"bytes", "lines", "sha256"} of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    size = lines = 0
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
            lines += block.count(b"\n")
    return {"bytes": size, "lines": lines, "sha256": digest.hexdigest()}


def write_manifest(folder: Path, names: tuple[str, ...]) -> None:
    """Writes the entry's manifest (after its files: a manifest marks a complete entry)."""
    facts = {name: file_facts(folder / name) for name in names}
    write_text_atomic(folder / MANIFEST, json.dumps({"files": facts}, indent=1, sort_keys=True))


def _damage(folder: Path, names: tuple[str, ...]) -> str | None:
    """What is wrong with a complete entry, None when every file matches its manifest."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        expected = {name: manifest["files"][name] for name in names}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"its manifest is unreadable ({type(exc).__name__})"
    for name in names:
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        want = expected[name]
        size = path.stat().st_size
        if size != want.get("bytes"):
            return f"{name} has {size:,} bytes, the manifest says {want.get('bytes')}"
        got = file_facts(path)
        if got["sha256"] != want.get("sha256") or got["lines"] != want.get("lines"):
            return f"{name} does not match its checksum"
    return None


def entry_is_sound(folder: Path, names: tuple[str, ...]) -> bool:
    """Whether a cache entry can be read: complete and every file as its manifest says.

    A damaged entry is removed with one `PsyattrsWarning` naming it and the damage (the caller
    then makes the alignment again). An entry without a manifest is a miss: removed when it is
    older than `STALE_TEMP_SECONDS` (its writer died), left alone otherwise (another process may
    be writing it now).
    """
    if not folder.is_dir():
        return False
    if not (folder / MANIFEST).is_file():
        if _age(folder) > STALE_TEMP_SECONDS:
            shutil.rmtree(folder, ignore_errors=True)
        return False
    damage = _damage(folder, names)
    if damage is None:
        return True
    warnings.warn(f"alignment cache entry {folder} is damaged ({damage}): discarded, the alignment is redone",
                  PsyattrsWarning, stacklevel=3)
    shutil.rmtree(folder, ignore_errors=True)
    return False


def clean_stale(root: Path) -> int:
    """Removes the temporary files (`atomic_output`'s) older than `STALE_TEMP_SECONDS` in the cache
    entries under `root`; returns how many. Cheap: one listing of each entry folder."""
    removed = 0
    if not root.is_dir():
        return 0
    now = time.time()
    for entry in root.iterdir():
        if not entry.is_dir():
            continue
        try:
            names = list(entry.iterdir())
        except OSError:
            continue
        for path in names:
            try:
                if is_temp_name(path.name) and now - path.stat().st_mtime > STALE_TEMP_SECONDS:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
    return removed


def _age(folder: Path) -> float:
    """Seconds since anything in the folder last changed."""
    try:
        times = [folder.stat().st_mtime] + [p.stat().st_mtime for p in folder.iterdir()]
    except OSError:
        return 0.0
    return time.time() - max(times)
