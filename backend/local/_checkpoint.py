"""Checkpoints of LoRA adapters in a local folder, addressed as ``local://<run>/<kind>/<name>``.

Layout of one checkpoint folder (``<root>/<run>/<kind>/<name>/``):

- ``adapter_model.safetensors``: the LoRA weights (peft state-dict names);
- ``optimizer.pt``: AdamW state (only for ``kind == "weights"``, i.e. ``save_state``, once the
  optimizer has stepped);
- ``metadata.json``: base model, LoRA rank / alpha / target modules, step, kind, user metadata.

``kind`` is ``weights`` (``save_state``) or ``sampler_weights`` (``save_weights_for_sampler``),
like Tinker's ``tinker://<run>/<kind>/<name>`` paths. The root is ``$TURNGYM_CHECKPOINTS`` or
``<turngym cache>/checkpoints`` unless given to the service client. A plain folder path (absolute,
or ``local:///abs/path``) that holds a checkpoint is accepted too.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from backend.model import cache_dir

from ._errors import CheckpointExistsError, CheckpointNotFoundError

CHECKPOINT_SCHEME = "local://"
ADAPTER_FILE = "adapter_model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
METADATA_FILE = "metadata.json"
FORMAT_VERSION = 1


@dataclass
class CheckpointMeta:
    """Contents of ``metadata.json``."""

    base_model: str
    rank: int
    lora_alpha: int
    target_modules: list[str]
    kind: str
    step: int = 0
    run_id: str = ""
    name: str = ""
    user_metadata: dict[str, str] = field(default_factory=dict)
    format: int = FORMAT_VERSION

    @property
    def scaling(self) -> float:
        """LoRA scale ``alpha / rank`` applied to ``B @ A``."""
        return self.lora_alpha / self.rank


def default_root() -> Path:
    """``$TURNGYM_CHECKPOINTS`` or ``<turngym cache>/checkpoints``."""
    env = os.environ.get("TURNGYM_CHECKPOINTS")
    return Path(env).expanduser() if env else cache_dir() / "checkpoints"


def make_path(run_id: str, kind: str, name: str) -> str:
    """The ``local://`` address of a checkpoint."""
    return f"{CHECKPOINT_SCHEME}{run_id}/{kind}/{name}"


def resolve(path: str, root: Path) -> Path:
    """Folder of the checkpoint at ``path``; :class:`CheckpointNotFoundError` when there is none."""
    if path.startswith(CHECKPOINT_SCHEME):
        rest = path[len(CHECKPOINT_SCHEME) :]
        folder = Path(rest) if rest.startswith("/") else root / rest
    elif path.startswith("tinker://"):
        raise CheckpointNotFoundError(
            f"{path!r} is a Tinker cloud path; the local backend reads local:// paths"
        )
    else:
        folder = Path(path).expanduser()
    if ".." in Path(path[len(CHECKPOINT_SCHEME) :] if path.startswith(CHECKPOINT_SCHEME) else path).parts:
        raise CheckpointNotFoundError(f"checkpoint path {path!r} may not contain '..'")
    if not (folder / METADATA_FILE).is_file() or not (folder / ADAPTER_FILE).is_file():
        raise CheckpointNotFoundError(f"no checkpoint at {path!r} (looked in {folder})")
    return folder


def save(
    folder: Path,
    meta: CheckpointMeta,
    adapter: dict[str, torch.Tensor],
    optimizer_state: dict[str, Any] | None,
    overwrite: bool,
) -> None:
    """Write a checkpoint folder atomically (temporary sibling, then rename)."""
    if folder.exists() and not overwrite:
        raise CheckpointExistsError(
            f"checkpoint {meta.name!r} exists already at {folder}; pass overwrite=True"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".save-", dir=folder.parent))
    try:
        save_file({k: v.detach().contiguous().cpu() for k, v in adapter.items()}, str(tmp / ADAPTER_FILE))
        if optimizer_state is not None:
            torch.save(optimizer_state, tmp / OPTIMIZER_FILE)
        (tmp / METADATA_FILE).write_text(json.dumps(asdict(meta), indent=2))
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_meta(folder: Path) -> CheckpointMeta:
    """Read ``metadata.json`` of a checkpoint folder."""
    data = json.loads((folder / METADATA_FILE).read_text())
    return CheckpointMeta(**data)


def load_adapter(folder: Path) -> dict[str, torch.Tensor]:
    """The LoRA state dict of a checkpoint folder."""
    return load_file(str(folder / ADAPTER_FILE))


def load_optimizer(folder: Path) -> dict[str, Any] | None:
    """The optimizer state of a checkpoint folder, or None when it has none."""
    file = folder / OPTIMIZER_FILE
    return torch.load(file, weights_only=True) if file.is_file() else None
