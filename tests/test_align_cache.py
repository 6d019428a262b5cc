"""The alignment cache (issue 26, item 1): every entry carries a manifest of sizes, line counts and
checksums checked on every read; a damaged entry is discarded with one warning and made again;
temporary files of killed writers are removed; `data align` never leaves an empty `--out`."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from psyattrs.align import AlignSettings, aligned_corpus, cache_folder
from psyattrs.align.cache import MANIFEST, STALE_TEMP_SECONDS
from psyattrs.cli import main
from psyattrs.data.opela import read_public
from psyattrs.errors import PsyattrsWarning
from test_align import _public

SETTINGS = AlignSettings(model_kind="majority", iterations=1)
CONVS = [
    dict(doc_id="donut_u11_2_5", persona="안녕~\n\n다시 왔어", user="반가워요\n어서 와요", pauses=1,
         labels=["s", "s", "sig", "s", "s"]),
    dict(doc_id="donut_u14_2_4", persona="오늘 뭐 했어?\n\n산책 다녀왔어", user="그냥 쉬었어\n좋다", pauses=1,
         labels=["q", "s", "s", "s"]),
]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PSYATTRS_CACHE", str(tmp_path / "cache"))


def _entry() -> Path:
    (entry,) = [p for p in cache_folder().iterdir() if p.is_dir()]
    return entry


def _cut_bytes(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 1])  # inside a row (and, here, inside a Hangul character)


def _cut_lines(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:3]), encoding="utf-8")


def _empty(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [_cut_bytes, _cut_lines, _empty])
def test_a_damaged_entry_is_discarded_with_one_warning_and_the_alignment_redone(damage, tmp_path):
    path = _public(tmp_path, CONVS)
    first = aligned_corpus(read_public(path), settings=SETTINGS, progress=False)
    entry = _entry()
    assert (entry / MANIFEST).is_file()
    damage(entry / "aligned.csv")
    with pytest.warns(PsyattrsWarning, match=r"alignment cache entry .* is damaged .*aligned\.csv.*redone") as caught:
        again = aligned_corpus(read_public(path), settings=SETTINGS, progress=False)
    assert len([w for w in caught if issubclass(w.category, PsyattrsWarning)]) == 1
    assert len(again.utterances) == len(first.utterances) == 10
    assert again.utterances["text"].tolist() == first.utterances["text"].tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PsyattrsWarning)  # re-cached whole: the next read is silent
        third = aligned_corpus(read_public(path), settings=SETTINGS, progress=False)
    assert third.utterances["text"].tolist() == first.utterances["text"].tolist()


def test_data_align_on_a_damaged_entry_writes_the_whole_table_and_never_an_empty_out(tmp_path, capsys):
    path = _public(tmp_path, CONVS)
    out = tmp_path / "aligned.csv"
    args = ["data", "align", str(path), "--out", str(out), "--iterations", "1", "--model-kind", "majority", "--quiet"]
    assert main(args) == 0
    whole = out.read_bytes()
    for damage in (_cut_bytes, _empty):
        out.unlink()
        damage(_entry() / "aligned.csv")
        assert main(args) == 0
        assert out.read_bytes() == whole
        captured = capsys.readouterr()
        assert "from the alignment cache" not in captured.out
        warned = [line for line in captured.err.splitlines() if "damaged" in line]
        assert len(warned) == 1 and warned[0].startswith("psyattrs: warning: alignment cache entry")
    out.unlink()
    assert main(args) == 0 and out.read_bytes() == whole
    assert "from the alignment cache" in capsys.readouterr().out


def test_an_entry_from_before_manifests_or_with_a_broken_manifest_is_redone(tmp_path):
    path = _public(tmp_path, CONVS)
    first = aligned_corpus(read_public(path), settings=SETTINGS, progress=False)
    manifest = _entry() / MANIFEST
    manifest.write_text("{not json", encoding="utf-8")
    with pytest.warns(PsyattrsWarning, match="manifest is unreadable"):
        aligned_corpus(read_public(path), settings=SETTINGS, progress=False)
    assert manifest.is_file()
    manifest.unlink()  # an entry that never got its manifest: a writer that died, or one still writing
    old = time.time() - STALE_TEMP_SECONDS - 60
    for p in _entry().iterdir():
        os.utime(p, (old, old))
    os.utime(_entry(), (old, old))
    again = aligned_corpus(read_public(path), settings=SETTINGS, progress=False)
    assert len(again.utterances) == len(first.utterances) and (_entry() / MANIFEST).is_file()


def test_temporary_files_of_killed_writers_are_removed(tmp_path):
    path = _public(tmp_path, CONVS)
    aligned_corpus(read_public(path), settings=SETTINGS, progress=False)
    entry = _entry()
    stale = entry / ".aligned.csv.0123abcd.tmp"
    fresh = entry / ".history.csv.89abcdef.tmp"
    stale.write_text("doc_id,text\nx,half a ro", encoding="utf-8")
    fresh.write_text("iteration", encoding="utf-8")
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    aligned_corpus(read_public(path), settings=SETTINGS, progress=False)
    assert not stale.exists()
    assert fresh.exists()  # young: its writer may be alive
