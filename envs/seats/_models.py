"""Model players of a seat by name: ``base`` (the base model) and ``checkpoint:<path>`` (frozen
sampler weights), each sampling from its own sampling client through the seat's renderer.

``<path>`` is a run folder (its last checkpoint with sampler weights, read from its
``checkpoints.jsonl``), a ``local://`` sampler path (resolved under the given checkpoint root;
``local:///abs/path`` or a checkpoint folder's own path anywhere), or a ``tinker://`` path on the
Tinker service. The same player plays against a person in ``python -m envs.play <game>`` and
holds a pinned seat of a two-seat game's training or held-out games (``train_opponents=base``).
Such a player is frozen: its seat is pinned, so it acts and is logged, never trains.
:func:`opponent_tag` is any opponent's name as a metric key part. Cheap to import.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # cheap to import: the train configs read opponent_tag while parsing
    from tinker_cookbook.completers import TokenCompleter

BASE = "base"
"""The base model as a player."""
CHECKPOINT = "checkpoint:"
"""Prefix of a frozen checkpoint as a player (``checkpoint:<run folder | sampler path>``)."""

_METADATA, _ADAPTER = "metadata.json", "adapter_model.safetensors"  # a local checkpoint folder's files


def backend_of(backend: str) -> Literal["local", "tinker"]:
    """The backend a model player runs on: ``local`` or ``tinker`` as named, anything else as
    ``auto`` resolves it (``backend.resolve_backend``; imported here, so this module stays cheap)."""
    from backend import resolve_backend

    return resolve_backend("tinker" if backend == "tinker" else "local" if backend == "local" else "auto")


def is_model(name: str) -> bool:
    """Whether ``name`` names a model player (``base`` or ``checkpoint:<path>``)."""
    return name == BASE or name.startswith(CHECKPOINT)


def opponent_tag(name: str) -> str:
    """An opponent's name as it appears in metric keys (``vs_<tag>``): ``random`` stays ``random``;
    a checkpoint's path becomes one key part (``checkpoint:runs/a`` -> ``checkpoint_runs_a``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")


def last_sampler_path(run: Path) -> str:
    """The sampler path of a run folder's last checkpoint with sampler weights (one-line
    ``ValueError`` when it has none)."""
    rows = [json.loads(x) for x in (run / "checkpoints.jsonl").read_text().splitlines() if x.strip()]
    path = next((r["sampler_path"] for r in reversed(rows) if r.get("sampler_path")), "")
    if not path:
        raise ValueError(f"{run} has no checkpoint with sampler weights")
    return path


def checkpoint_source(path: str, root: Path | None) -> tuple[str, Path | None]:
    """``(sampler path, checkpoint root)`` of a checkpoint player: a run folder is its last
    sampler path under its own ``checkpoints/`` root; any other path keeps ``root``."""
    folder = Path(path).expanduser()
    if "://" not in path and (folder / "checkpoints.jsonl").is_file():
        return last_sampler_path(folder), folder / "checkpoints"
    return path, root


def check_model(name: str, *, backend: str, root: Path | None) -> None:
    """Fail early, in one line (``ValueError``), on a model player that cannot load: an empty or
    unreadable checkpoint path, or a path of the other backend. Reads no weights."""
    if name == BASE:
        return
    if not name.startswith(CHECKPOINT):
        raise ValueError(f"{name!r} is not a model player: base or checkpoint:<path>")
    path = name[len(CHECKPOINT) :].strip()
    if not path:
        raise ValueError("checkpoint: needs a path (a run folder or a sampler path)")
    path, root = checkpoint_source(path, root)
    if path.startswith("tinker://"):
        if backend == "local":
            raise ValueError(f"{name!r}: a Tinker path needs backend=tinker")
        return
    if backend == "tinker":
        raise ValueError(f"{name!r}: the Tinker backend reads tinker:// paths only")
    rest = path.removeprefix("local://")
    if rest != path and not rest.startswith("/"):
        if root is None:  # the backend's default root: checked when the client is made
            return
        folder = root / rest
    else:
        folder = Path(rest).expanduser()
    if not (folder / _METADATA).is_file() or not (folder / _ADAPTER).is_file():
        raise ValueError(f"{name!r}: no checkpoint with sampler weights at {folder}")


async def model_player(
    name: str,
    *,
    model: str,
    backend: str = "local",
    root: Path | None = None,
    base_url: str | None = None,
    max_tokens: int,
    temperature: float,
) -> TokenCompleter:
    """The model player ``name`` (``base`` or ``checkpoint:<path>``): a token completer on its own
    sampling client (``model``'s base weights, or the checkpoint's), made from a service client of
    ``backend`` (``root``: where ``local://`` paths live)."""
    from tinker_cookbook.completers import TinkerTokenCompleter

    from backend import make_service_client
    from backend.model import register_tokenizers

    which = backend_of(backend)
    check_model(name, backend=which, root=root)
    register_tokenizers()
    if name == BASE:
        source = {"base_model": model}
    else:
        path, root = checkpoint_source(name[len(CHECKPOINT) :].strip(), root)
        source = {"model_path": path}
    kwargs: dict[str, Any] = (
        {"root": root} if which == "local" else ({"base_url": base_url} if base_url else {})
    )
    service: Any = make_service_client(which, **kwargs)
    client = await service.create_sampling_client_async(**source)
    return TinkerTokenCompleter(client, max_tokens=max_tokens, temperature=temperature)
