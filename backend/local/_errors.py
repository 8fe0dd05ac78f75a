"""Exception types of the local backend. Every message is one line saying what is wrong."""

from __future__ import annotations

from backend.model import UnknownModelError


class LocalBackendError(RuntimeError):
    """Base class of the errors raised by the embedded local backend."""


class UnknownLossError(LocalBackendError, ValueError):
    """``loss_fn`` names a loss the local backend does not implement."""


class InvalidDatumError(LocalBackendError, ValueError):
    """A :class:`tinker.types.Datum` is empty, lacks a required input, or has inputs of the wrong length."""


class PromptTooLongError(LocalBackendError, ValueError):
    """The prompt (plus ``max_tokens``) does not fit in the model's context window."""


class CustomLossError(LocalBackendError, ValueError):
    """A ``forward_backward_custom`` loss function returned something unusable (not a
    ``(tensor, metrics)`` pair, or a loss with no gradient to some datum's logprobs)."""


class UnsupportedCallError(LocalBackendError, NotImplementedError):
    """A tinker client method (or argument) the local backend does not implement; the message
    names the call."""


class CheckpointNotFoundError(LocalBackendError, FileNotFoundError):
    """A ``local://`` checkpoint path does not resolve to a saved checkpoint."""


class CheckpointExistsError(LocalBackendError, FileExistsError):
    """A checkpoint of that name exists already and ``overwrite`` was not set."""


__all__ = [
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "CustomLossError",
    "InvalidDatumError",
    "LocalBackendError",
    "PromptTooLongError",
    "UnknownLossError",
    "UnknownModelError",
    "UnsupportedCallError",
]
