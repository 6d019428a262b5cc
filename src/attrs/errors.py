"""The project's exceptions."""

from __future__ import annotations

from pathlib import Path


class InputFileError(Exception):
    """A file that cannot be used at all: names the file and, where known, the row and the column.

    Rows are 1-based data rows as a spreadsheet user counts them after the header
    (for CSV, line numbers of the physical file can differ when a cell spans lines);
    for JSON lines, the line number.
    """

    def __init__(self, path: "str | Path", message: str, *, row: int | None = None, column: str | None = None):
        self.path = Path(path)
        self.message = message
        self.row = row
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [str(self.path)]
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        return f"{', '.join(where)}: {self.message}"


class PsyattrsWarning(UserWarning):
    """A warning the user can act on (the CLI prints it as one line, `psyattrs: warning: ...`)."""

class OutputFileError(Exception):
    """An output that could not be written (disk full, read-only folder, ...): names the file and
    the cause. Nothing is left at the final path by the writer that raised it (see
    `psyattrs.data.output`)."""

    def __init__(self, path: "str | Path", cause: str):
        self.path = Path(path)
        self.cause = cause
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.path}: cannot write: {self.cause}"


class Interrupted(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGHUP, ...) received while a run was active: ends it KILLED.

    A KeyboardInterrupt, so whatever already handles Ctrl-C (closing runs, annotate's resumable
    stop) handles these signals alike.
    """

    def __init__(self, signum: int):
        import signal

        self.signum = signum
        try:
            self.signal_name = signal.Signals(signum).name
        except ValueError:
            self.signal_name = f"signal {signum}"
        super().__init__(self.signal_name)
