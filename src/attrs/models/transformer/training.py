"""The training loop: AdamW, warmup and linear decay, clipping, accumulation, early stopping,
a checkpoint each epoch and resuming from it, deterministic seeding, data parallelism.

- Optimiser: AdamW (no weight decay on biases and LayerNorm weights), linear warmup over
  `warmup_ratio` of the optimiser steps then linear decay to 0
  (`transformers.get_linear_schedule_with_warmup`), gradient norm clipped at `max_grad_norm`,
  gradients accumulated over `grad_accumulation` batches.
- Early stopping on the validation loss (the same masked loss as training, on the validation
  split): training stops after `patience` epochs without improvement and the best epoch's weights
  are kept. Without a validation split every epoch runs and the last weights are kept.
- Determinism: the batches of epoch e come from a generator seeded with (seed, e); dropout uses
  torch's generator, seeded once and saved in each checkpoint, so a resumed run ends with the same
  weights as an uninterrupted one.
- Checkpoints (`checkpoint_dir`): `last.pt` after every epoch (network, optimiser, schedule, RNG,
  early-stopping state), written atomically; `resume` continues after its epoch.
- Progress: a tqdm bar with the loss and the time left on a terminal, one line per epoch
  otherwise; `callback(metrics, step)` receives per-step (`train_loss`, `learning_rate`, every
  `log_every` optimiser steps) and per-epoch (`epoch_train_loss`, `valid_loss`, `epoch`) metrics,
  so the experiments layer can log them without models/ importing MLflow.
- Data parallelism: when `torch.distributed` is initialised (torchrun), the network is wrapped in
  `DistributedDataParallel` and rank r takes every world_size-th batch of the same seeded batch
  list; only rank 0 writes checkpoints and calls the callback.
- On CUDA, forward passes run under bfloat16 autocast (mixed precision).
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from psyattrs.errors import InputFileError
from psyattrs.models.base import damaged_file
from psyattrs.models.transformer.inputs import EncodedRows, collate, length_sorted_batches, shuffled_batches
from psyattrs.models.transformer.loss import total_loss

CHECKPOINT_FILE = "last.pt"
MetricsCallback = Callable[[dict[str, float], int], None]


@dataclass
class TrainSettings:
    """Optimisation settings (see the module docstring)."""

    epochs: int = 3
    batch_size: int = 16
    learning_rate: float = 5e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    grad_accumulation: int = 1
    patience: int = 2
    seed: int = 0
    checkpoint_dir: str | None = None
    resume: bool = False
    log_every: int = 10
    fingerprint: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainData:
    """Encoded rows and their targets: head -> (n, K) float (NaN rows = no target) and, for
    labeler heads, head -> (n, L) float labeler labels (NaN = none); for annotator embeddings,
    `labelers` holds the vote slots' labels and `annotators` head -> (n, S) int64 the slots'
    annotator indices (-1 = empty), passed to the network as its `annotators` input."""

    encoded: EncodedRows
    targets: dict[str, np.ndarray]
    labelers: dict[str, np.ndarray] = field(default_factory=dict)
    annotators: dict[str, np.ndarray] = field(default_factory=dict)

    def batch(self, rows: np.ndarray, device: torch.device) -> tuple[dict[str, torch.Tensor], dict, dict]:
        inputs: dict = {k: torch.from_numpy(v).to(device) for k, v in collate(self.encoded, rows).items()}
        if self.annotators:
            inputs["annotators"] = {h: torch.from_numpy(a[rows]).to(device) for h, a in self.annotators.items()}
        targets = {h: torch.from_numpy(t[rows]).float().to(device) for h, t in self.targets.items()}
        labelers = {h: torch.from_numpy(t[rows]).float().to(device) for h, t in self.labelers.items()}
        return inputs, targets, labelers


def distributed() -> tuple[int, int]:
    """(rank, world size) of an initialised torch.distributed group, else (0, 1)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return torch.autocast(device_type="cpu", enabled=False)


def _optimizer(network: torch.nn.Module, settings: TrainSettings) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, param in network.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(param)
    groups = [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # the fused kernel: one pass over all parameters instead of a loop per tensor (on this CPU, 2.6
    # instead of 9.8 ms a step for the tiny encoder), where torch has it for the parameters' device
    params = decay + no_decay
    fused = bool(params) and all(p.dtype in (torch.float32, torch.float16, torch.bfloat16) and p.device.type in ("cpu", "cuda")
                                 for p in params)
    return torch.optim.AdamW(groups, lr=settings.learning_rate, fused=fused or None)


def evaluate_loss(network, data: TrainData, device: torch.device, *, head_weights, class_weights, batch_size: int) -> float:
    """The mean training loss over the batches of `data` (eval mode, no gradient)."""
    inner = getattr(network, "module", network)
    was_training = inner.training
    inner.eval()
    losses, sizes = [], []
    with torch.inference_mode():
        for rows in length_sorted_batches(data.encoded.lengths, batch_size):
            inputs, targets, labelers = data.batch(rows, device)
            with _autocast(device):
                out = inner(**inputs)
            loss, _ = total_loss(out, targets, inner.head_specs, head_weights=head_weights,
                                 class_weights=class_weights, labeler_labels=labelers)
            losses.append(float(loss))
            sizes.append(len(rows))
    inner.train(was_training)
    return float(np.average(losses, weights=sizes)) if losses else float("nan")


def _save_checkpoint(folder: Path, state: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (CHECKPOINT_FILE + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, folder / CHECKPOINT_FILE)


CHECKPOINT_KEYS = ("fingerprint", "network", "optimizer", "scheduler", "torch_rng", "best_loss", "best_state",
                   "bad_epochs", "step", "epoch", "history")


def load_checkpoint(folder: "str | Path") -> dict[str, Any] | None:
    """The last checkpoint in `folder`, or None when there is none.

    Raises:
        InputFileError: a checkpoint file that is empty, truncated, not a checkpoint or one that
            lacks a part (names the file and what is wrong).
    """
    file = Path(folder) / CHECKPOINT_FILE
    if not file.is_file():
        return None
    try:
        state = torch.load(file, map_location="cpu", weights_only=False)
    except Exception as exc:  # pickle, zip, EOF, ...: torch.load fails its own way on each kind of damage
        raise damaged_file(file, exc) from None
    if not isinstance(state, dict):
        raise InputFileError(file, f"not a psyattrs checkpoint (it holds a {type(state).__name__}); delete it to "
                                   "train from the start")
    missing = [key for key in CHECKPOINT_KEYS if key not in state]
    if missing:
        raise InputFileError(file, f"not a complete psyattrs checkpoint (no {', '.join(missing)}); delete it to "
                                   "train from the start")
    return state


class _Progress:
    def __init__(self, enabled: bool, total_steps: int, epochs: int):
        self.enabled = enabled
        self.bar = None
        self.epochs = epochs
        if enabled and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total_steps, desc="train", unit="batch", file=sys.stderr, leave=False)

    def step(self, loss: float, epoch: int) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(epoch=f"{epoch + 1}/{self.epochs}", loss=f"{loss:.4f}")

    def epoch(self, epoch: int, train_loss: float, valid_loss: float, seconds: float) -> None:
        if self.enabled and self.bar is None:
            valid = "" if math.isnan(valid_loss) else f", valid loss {valid_loss:.4f}"
            print(f"epoch {epoch + 1}/{self.epochs}: train loss {train_loss:.4f}{valid}, {seconds:.1f}s",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def train_network(
    network: torch.nn.Module,
    train: TrainData,
    valid: TrainData | None,
    settings: TrainSettings,
    device: torch.device,
    *,
    head_weights: dict[str, float],
    class_weights: dict[str, torch.Tensor | None],
    progress: bool = False,
    callback: MetricsCallback | None = None,
) -> dict[str, Any]:
    """Trains `network` in place (see the module docstring).

    Returns:
        history: `train_loss` and `valid_loss` per epoch, `best_epoch` (1-based), `epochs_run`,
        `stopped_early`, `resumed_from` (epoch, 0 when not resumed), `seconds_per_epoch` (the
        whole epoch, validation and checkpoint included) and `train_seconds_per_epoch` (its
        training steps only).

    Raises:
        ValueError: `resume` with a checkpoint written for other data or settings.
    """
    rank, world = distributed()
    torch.manual_seed(settings.seed)
    network.to(device)
    model = network
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(network, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = _optimizer(network, settings)
    params = [p for p in network.parameters() if p.requires_grad]
    foreach = all(p.device.type in ("cpu", "cuda") for p in params) or None
    n_batches = math.ceil(len(train.encoded) / settings.batch_size)
    per_rank = max(n_batches // world, 1)
    steps_per_epoch = math.ceil(per_rank / settings.grad_accumulation)
    total_steps = steps_per_epoch * settings.epochs
    from transformers import get_linear_schedule_with_warmup

    scheduler = get_linear_schedule_with_warmup(optimizer, int(settings.warmup_ratio * total_steps), total_steps)
    history: dict[str, Any] = {"train_loss": [], "valid_loss": [], "best_epoch": 0, "epochs_run": 0,
                               "stopped_early": False, "resumed_from": 0, "seconds_per_epoch": [], "train_seconds_per_epoch": []}
    best_loss, best_state, bad_epochs, step, start_epoch = math.inf, None, 0, 0, 0
    folder = Path(settings.checkpoint_dir) if settings.checkpoint_dir else None
    if folder is not None and settings.resume:
        ckpt = load_checkpoint(folder)
        if ckpt is not None:
            if ckpt["fingerprint"] != settings.fingerprint:
                raise ValueError(
                    f"cannot resume from {folder / CHECKPOINT_FILE}: it was written for other data or settings "
                    "(delete it, or train with the same config and data)"
                )
            network.load_state_dict(ckpt["network"])
            optimizer.load_state_dict(ckpt["optimizer"])
            scheduler.load_state_dict(ckpt["scheduler"])
            torch.set_rng_state(ckpt["torch_rng"])
            best_loss, best_state, bad_epochs = ckpt["best_loss"], ckpt["best_state"], ckpt["bad_epochs"]
            step, start_epoch, history = ckpt["step"], ckpt["epoch"], ckpt["history"]
            history["resumed_from"] = start_epoch
            if ckpt.get("stopped"):
                start_epoch = settings.epochs
    bar = _Progress(progress and rank == 0, steps_per_epoch * max(settings.epochs - start_epoch, 0) * settings.grad_accumulation,
                    settings.epochs)
    lengths = train.encoded.lengths
    stopped = False
    try:
        for epoch in range(start_epoch, settings.epochs):
            started = time.perf_counter()
            model.train()
            rng = np.random.default_rng([settings.seed, epoch])
            batches = shuffled_batches(lengths, settings.batch_size, rng)
            batches = batches[: per_rank * world][rank::world]
            epoch_losses = []
            optimizer.zero_grad(set_to_none=True)
            for i, rows in enumerate(batches):
                inputs, targets, labelers = train.batch(rows, device)
                with _autocast(device):
                    out = model(**inputs)
                loss, _ = total_loss(out, targets, network.head_specs, head_weights=head_weights,
                                     class_weights=class_weights, labeler_labels=labelers)
                (loss / settings.grad_accumulation).backward()
                epoch_losses.append(float(loss.detach()))
                if (i + 1) % settings.grad_accumulation == 0 or i + 1 == len(batches):
                    torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm, foreach=foreach)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                    step += 1
                    if callback is not None and rank == 0 and step % settings.log_every == 0:
                        callback({"train_loss": float(np.mean(epoch_losses[-settings.grad_accumulation:])),
                                  "learning_rate": float(scheduler.get_last_lr()[0])}, step)
                bar.step(epoch_losses[-1], epoch)
            history.setdefault("train_seconds_per_epoch", []).append(time.perf_counter() - started)
            train_loss = float(np.mean(epoch_losses)) if epoch_losses else float("nan")
            valid_loss = float("nan")
            if valid is not None and len(valid.encoded):
                valid_loss = evaluate_loss(network, valid, device, head_weights=head_weights,
                                           class_weights=class_weights, batch_size=settings.batch_size * 2)
                if valid_loss < best_loss - 1e-6:
                    best_loss, bad_epochs = valid_loss, 0
                    best_state = {k: v.detach().clone().cpu() for k, v in network.state_dict().items()}
                else:
                    bad_epochs += 1
                stopped = bad_epochs >= settings.patience
            history["train_loss"].append(train_loss)
            history["valid_loss"].append(valid_loss)
            history["epochs_run"] = epoch + 1
            seconds = time.perf_counter() - started
            history["seconds_per_epoch"].append(seconds)
            if folder is not None and rank == 0:
                _save_checkpoint(folder, {
                    "network": network.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
                    "best_loss": best_loss, "best_state": best_state, "bad_epochs": bad_epochs,
                    "step": step, "epoch": epoch + 1, "history": history, "stopped": stopped,
                    "fingerprint": settings.fingerprint,
                })
            bar.epoch(epoch, train_loss, valid_loss, seconds)
            if callback is not None and rank == 0:
                callback({"epoch_train_loss": train_loss, "valid_loss": valid_loss, "epoch": float(epoch + 1)}, step)
            if stopped:
                history["stopped_early"] = True
                break
    finally:
        bar.close()
    if best_state is not None:
        network.load_state_dict(best_state)
        history["best_epoch"] = int(np.nanargmin(history["valid_loss"])) + 1
    else:
        history["best_epoch"] = history["epochs_run"]
    return history
