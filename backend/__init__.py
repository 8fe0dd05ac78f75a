"""TurnGym backends: the embedded local backend with tinker-compatible clients, and a factory.

Quick start::

    from backend import make_service_client, SMOLLM2

    service = make_service_client()  # local unless TINKER_API_KEY is set
    trainer = service.create_lora_training_client(SMOLLM2, rank=8).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()

The local clients mirror ``tinker.ServiceClient`` / ``TrainingClient`` / ``SamplingClient``
(tinker 0.38): same method names and arguments, same ``tinker.types`` results, and futures that
work as ``.result()``, ``await fut`` and ``await fut.result_async()``.
"""

from backend.factory import BackendName, make_service_client, resolve_backend
from backend.local._checkpoint import SCHEME as CHECKPOINT_SCHEME
from backend.local._errors import (
    CheckpointExistsError,
    CheckpointNotFoundError,
    InvalidDatumError,
    LocalBackendError,
    PromptTooLongError,
    UnknownLossError,
)
from backend.local._futures import ClientFuture, LocalFuture
from backend.local._sampler import SamplerStats
from backend.local._service import LocalSamplingClient, LocalServiceClient, LocalTrainingClient
from backend.model import SMOLLM2, TINY, UnknownModelError, load_model, load_tokenizer

__all__ = [
    "CHECKPOINT_SCHEME",
    "SMOLLM2",
    "TINY",
    "BackendName",
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "ClientFuture",
    "InvalidDatumError",
    "LocalBackendError",
    "LocalFuture",
    "LocalSamplingClient",
    "LocalServiceClient",
    "LocalTrainingClient",
    "PromptTooLongError",
    "SamplerStats",
    "UnknownLossError",
    "UnknownModelError",
    "load_model",
    "load_tokenizer",
    "make_service_client",
    "resolve_backend",
]
