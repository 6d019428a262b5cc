"""Writing output files so that they are complete or absent.

Every psyattrs writer (resolved labels, aligned tables, predictions, the synthetic corpus,
set-aside reports, annotate's parts and manifest) writes through `atomic_output`: the content
goes to a temporary file in the destination folder (`.NAME.XXXXXXXX.tmp`), is flushed to disk,
and only then renamed over the destination (`os.replace`, atomic on one file system). A write
that fails part-way (disk full, a read-only folder, an interrupted process) leaves the
destination as it was before (absent, or the previous complete version) and removes the
temporary file; the failure is an `OutputFileError` naming the destination and the cause.

Destinations that are not regular files (`/dev/stdout`, a named pipe) are written in place:
they cannot be renamed over.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Iterator

from psyattrs.errors import OutputFileError

TEMP_SUFFIX = ".tmp"


def temp_path_for(path: "str | Path") -> Path:
    """A fresh temporary name beside `path`: `.NAME.<8 hex>.tmp` (hidden, recognisable)."""
    p = Path(path)
    return p.with_name(f".{p.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def is_temp_name(name: str, of: str | None = None) -> bool:
    """Whether a file name is one of `temp_path_for`'s (of the destination name `of`, if given)."""
    if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
        return False
    stem = name[1 : -len(TEMP_SUFFIX)]
    base, dot, token = stem.rpartition(".")
    if not dot or len(token) != 8:
        return False
    return of is None or base == of


def describe_os_error(exc: OSError) -> str:
    """`No space left on device` (the OS's words), without the file name."""
    return exc.strerror or str(exc) or type(exc).__name__


@contextlib.contextmanager
def atomic_output(path: "str | Path", *, make_parents: bool = False) -> Iterator[Path]:
    """Yields a temporary path to write to; renames it to `path` when the block completes.

    Args:
        path: the destination.
        make_parents: create missing parent folders first.

    Yields:
        The path to write (a temporary file beside `path`, created empty with the permissions a
        new file would get; or `path` itself when it exists and is not a regular file).

    Raises:
        OutputFileError: any OSError while creating, writing (inside the block), flushing or
            renaming; the destination is untouched and the temporary file removed. Other
            exceptions from the block propagate unchanged after the same clean-up.
    """
    dest = Path(path)
    if dest.exists() and not dest.is_file() and not dest.is_dir():  # a device or a pipe
        try:
            yield dest
        except OSError as exc:
            raise OutputFileError(dest, describe_os_error(exc)) from None
        return
    if dest.is_dir():
        raise OutputFileError(dest, "is a folder")
    tmp = temp_path_for(dest)
    try:
        if make_parents:
            dest.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise OutputFileError(dest, describe_os_error(exc)) from None
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except OSError as exc:
        _remove(tmp)
        raise OutputFileError(dest, describe_os_error(exc)) from None
    except BaseException:
        _remove(tmp)
        raise


def write_text_atomic(path: "str | Path", text: str, *, make_parents: bool = False) -> None:
    """Writes `text` (UTF-8) to `path` through `atomic_output`."""
    with atomic_output(path, make_parents=make_parents) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)


def _remove(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        tmp.unlink()
