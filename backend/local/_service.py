"""Local service, training and sampling clients with the surface of tinker 0.38's clients."""

from __future__ import annotations

import copy
import hashlib
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tinker
import torch
from tinker import types

from backend.model import KNOWN_MODELS, load_tokenizer, register_tokenizers
from backend.seeding import mix_seed

from . import _checkpoint as ckpt
from ._dtype import resolve_compute_dtype
from ._errors import UnknownModelError, UnsupportedCallError
from ._futures import ClientFuture, LocalFuture, submit, submit_client, then
from ._rest import LocalRestClient
from ._sampler import SamplerEngine, SamplerStats
from ._surface import TinkerSurface
from ._trainer import CustomLossFn, TrainerCore, custom_loss_view
from ._weights import merged_model, pristine_base


def adapter_digest(adapter: Mapping[str, torch.Tensor], scaling: float) -> str:
    """A hex digest of LoRA weights (names, values, scaling): the identity of a sampler's weights."""
    h = hashlib.blake2b(repr(scaling).encode(), digest_size=16)
    for name in sorted(adapter):
        h.update(name.encode())
        h.update(adapter[name].detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()


def _check_model(name: str) -> None:
    if name not in KNOWN_MODELS:
        raise UnknownModelError(
            f"unknown local base model {name!r}; the local backend serves: {', '.join(KNOWN_MODELS)}"
        )


class LocalSamplingClient(TinkerSurface):
    """Tinker-compatible sampling client over an in-process :class:`SamplerEngine`.

    Use like ``tinker.SamplingClient``: ``sample(...)`` / ``compute_logprobs(...)`` return futures
    usable as ``.result()``, ``await fut`` or ``await fut.result_async()``. A method of
    ``tinker.SamplingClient`` with no local counterpart raises
    :class:`~backend.UnsupportedCallError` naming it.
    """

    _tinker_class = "SamplingClient"

    def __init__(self, engine: SamplerEngine, model_path: str | None = None) -> None:
        self._engine = engine
        self.model_path = model_path

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        prompt_logprobs_last_n: int | None = None,
    ) -> LocalFuture[types.SampleResponse]:
        """Sample ``num_samples`` completions of ``prompt``.

        Honours ``max_tokens``, ``stop`` (strings or token ids; the stop token is included in the
        returned tokens), ``temperature`` (0 = greedy), ``top_p``, ``top_k`` and ``seed``. Each
        sequence has per-token logprobs (untempered model distribution) and ``stop_reason``
        ``"stop"`` or ``"length"``. Top-k logprobs, target prompt logprobs and prompt alternatives
        are not supported locally (a non-default value raises ``NotImplementedError``).
        """
        if (
            topk_prompt_logprobs
            or topk_sample_logprobs
            or target_prompt_logprobs is not None
            or prompt_alt_tokens_k
        ):
            raise NotImplementedError(
                "top-k / target / alternative prompt logprobs are not supported locally"
            )
        fut = self._engine.submit_sample(
            prompt.to_ints(), num_samples, sampling_params, include_prompt_logprobs
        )
        return LocalFuture(fut)

    async def sample_async(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        prompt_logprobs_last_n: int | None = None,
    ) -> types.SampleResponse:
        """``await self.sample(...)`` (tinker's deprecated async spelling, kept for the cookbook)."""
        return await self.sample(
            prompt,
            num_samples,
            sampling_params,
            include_prompt_logprobs,
            topk_prompt_logprobs,
            topk_sample_logprobs,
            target_prompt_logprobs,
            prompt_alt_tokens_k,
            prompt_logprobs_last_n,
        )

    def compute_logprobs(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> LocalFuture[list[float | None]]:
        """Logprob of every prompt token given the ones before it (``None`` for the first)."""
        tokens = prompt.to_ints()
        n = prompt_logprobs_last_n
        if n is not None and not 1 <= n <= len(tokens) - 1:
            raise ValueError(f"prompt_logprobs_last_n must be between 1 and {len(tokens) - 1}, got {n}")
        fut = self._engine.submit_logprobs(tokens)
        if n is None:
            return LocalFuture(fut)
        return LocalFuture(then(fut, lambda lps: [None] * (len(tokens) - n) + lps[-n:]))

    async def compute_logprobs_async(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> list[float | None]:
        """``await self.compute_logprobs(...)``."""
        return await self.compute_logprobs(prompt, prompt_logprobs_last_n)

    def get_tokenizer(self) -> Any:
        """The model's tokenizer (SmolLM2's, ChatML)."""
        return load_tokenizer(self._engine.base_model)

    def get_base_model(self) -> str:
        """Name of the base model."""
        return self._engine.base_model

    async def get_base_model_async(self) -> str:
        """Name of the base model."""
        return self._engine.base_model

    @property
    def stats(self) -> SamplerStats:
        """Engine counters: prefilled vs reused prompt tokens, decode steps, mean batch size."""
        return self._engine.stats

    @property
    def engine(self) -> SamplerEngine:
        """The engine serving this client (shared by clients of the same weights)."""
        return self._engine


class LocalTrainingClient(TinkerSurface):
    """Tinker-compatible LoRA training client running in-process.

    Calls are queued on the backend's compute thread and run in order; each returns a future usable as
    ``.result()``, ``await fut`` or ``await fut.result_async()``. A method of
    ``tinker.TrainingClient`` with no local counterpart raises
    :class:`~backend.UnsupportedCallError` naming it.
    """

    _tinker_class = "TrainingClient"

    def __init__(
        self, service: LocalServiceClient, core: TrainerCore, *, user_metadata: dict[str, str] | None = None
    ):
        self._service = service
        self._core = core
        self.model_id = f"local-{uuid.uuid4().hex[:12]}"
        self.user_metadata = dict(user_metadata or {})
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- training
    def forward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """Loss and per-token target logprobs of ``data`` without gradients."""
        self._core.prepare(data, loss_fn)  # validate eagerly: errors surface at the call
        return submit(lambda: self._core.forward_backward(data, loss_fn, loss_fn_config, backward=False))

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """Loss of ``data`` and its gradient (accumulated until :meth:`optim_step`)."""
        self._core.prepare(data, loss_fn)
        return submit(lambda: self._core.forward_backward(data, loss_fn, loss_fn_config, backward=True))

    async def forward_async(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """Deprecated tinker spelling: returns the future of :meth:`forward`."""
        return self.forward(data, loss_fn, loss_fn_config)

    async def forward_backward_async(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """Deprecated tinker spelling: returns the future of :meth:`forward_backward`."""
        return self.forward_backward(data, loss_fn, loss_fn_config)

    def forward_backward_custom(
        self,
        data: list[types.Datum],
        loss_fn: CustomLossFn,
        *,
        loss_type_input: str | None = None,
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """Forward/backward with a loss computed by ``loss_fn(data, logprobs_list)``.

        As in tinker: ``loss_fn`` receives every datum (all its ``loss_fn_inputs``) and one
        torch tensor of target-token logprobs per datum (shaped like ``target_tokens``), and
        returns ``(loss, metrics)``; the loss's gradient flows to the LoRA weights and
        accumulates until :meth:`optim_step`. The result's metrics are the loss function's plus
        ``loss:sum`` (the custom loss) and ``surrogate_loss:sum``. ``loss_fn`` runs on the
        training worker, in submission order. Server-side ``LossHandle`` s are not supported.
        """
        if isinstance(loss_fn, tinker.LossHandle):
            raise UnsupportedCallError(
                "TrainingClient.forward_backward_custom with a LossHandle (ServiceClient.create_custom_loss) "
                "is not supported by the local backend; pass a Python loss function"
            )
        if loss_type_input not in (None, "logprobs"):
            raise ValueError(f"loss_type_input must be 'logprobs' or None, got {loss_type_input!r}")
        view = custom_loss_view(data)
        self._core.prepare(view, "cross_entropy")  # validate eagerly: errors surface at the call
        return submit(lambda: self._core.forward_backward_custom(data, loss_fn))

    async def forward_backward_custom_async(
        self,
        data: list[types.Datum],
        loss_fn: CustomLossFn,
        *,
        loss_type_input: str | None = None,
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """Deprecated tinker spelling: returns the future of :meth:`forward_backward_custom`."""
        return self.forward_backward_custom(data, loss_fn, loss_type_input=loss_type_input)

    def optim_step(
        self, optim_params: types.AdamParams | None = None, *, adam_params: types.AdamParams | None = None
    ) -> LocalFuture[types.OptimStepResponse]:
        """AdamW update with the accumulated gradients (lr, betas, eps, weight decay, grad clip)."""
        if optim_params is not None and adam_params is not None:
            raise ValueError("Specify optim_params or legacy adam_params, not both")
        params = optim_params if optim_params is not None else adam_params
        if not isinstance(params, types.AdamParams):
            raise TypeError("Expected AdamParams")
        return submit(lambda: self._core.optim_step(params))

    async def optim_step_async(
        self, optim_params: types.AdamParams | None = None, *, adam_params: types.AdamParams | None = None
    ) -> LocalFuture[types.OptimStepResponse]:
        """Deprecated tinker spelling: returns the future of :meth:`optim_step`."""
        return self.optim_step(optim_params, adam_params=adam_params)

    # ---------------------------------------------------------------- checkpoints
    def _save(self, kind: str, name: str, overwrite: bool, user_metadata: dict[str, str] | None) -> str:
        path = ckpt.make_path(self.model_id, kind, name)
        folder = self._service.root / self.model_id / kind / name
        meta = self._core.meta(kind, self.model_id, name, {**self.user_metadata, **(user_metadata or {})})
        self._core.save(folder, meta, with_optimizer=(kind == "weights"), overwrite=overwrite)
        return path

    def save_state(
        self,
        name: str,
        ttl_seconds: int | None = None,
        overwrite: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> LocalFuture[types.SaveWeightsResponse]:
        """Save adapter + optimizer state as ``local://<model_id>/weights/<name>``."""
        return submit(
            lambda: types.SaveWeightsResponse(path=self._save("weights", name, overwrite, user_metadata)),
        )

    async def save_state_async(
        self,
        name: str,
        ttl_seconds: int | None = None,
        overwrite: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> LocalFuture[types.SaveWeightsResponse]:
        """Deprecated tinker spelling: returns the future of :meth:`save_state`."""
        return self.save_state(name, ttl_seconds, overwrite, user_metadata)

    def save_weights_for_sampler(
        self, name: str, ttl_seconds: int | None = None, user_metadata: dict[str, str] | None = None
    ) -> LocalFuture[types.SaveWeightsForSamplerResponse]:
        """Save the adapter as ``local://<model_id>/sampler_weights/<name>`` for ``create_sampling_client``."""
        return submit(
            lambda: types.SaveWeightsForSamplerResponse(
                path=self._save("sampler_weights", name, True, user_metadata)
            ),
        )

    async def save_weights_for_sampler_async(
        self, name: str, ttl_seconds: int | None = None, user_metadata: dict[str, str] | None = None
    ) -> LocalFuture[types.SaveWeightsForSamplerResponse]:
        """Deprecated tinker spelling: returns the future of :meth:`save_weights_for_sampler`."""
        return self.save_weights_for_sampler(name, ttl_seconds, user_metadata)

    def _load(self, path: str, with_optimizer: bool) -> types.LoadWeightsResponse:
        folder = ckpt.resolve(path, self._service.root)
        self._core.load(folder, with_optimizer=with_optimizer)
        return types.LoadWeightsResponse(path=path, model_id=self.model_id)

    def load_state(
        self, path: str, weights_access_token: str | None = None
    ) -> LocalFuture[types.LoadWeightsResponse]:
        """Load adapter weights from ``path`` (optimizer state is reset, as in Tinker)."""
        ckpt.resolve(path, self._service.root)  # fail at the call on a missing checkpoint
        return submit(lambda: self._load(path, False))

    def load_state_with_optimizer(
        self, path: str, weights_access_token: str | None = None
    ) -> LocalFuture[types.LoadWeightsResponse]:
        """Load adapter weights and AdamW moments from ``path``."""
        ckpt.resolve(path, self._service.root)
        return submit(lambda: self._load(path, True))

    async def load_state_async(
        self, path: str, weights_access_token: str | None = None
    ) -> LocalFuture[types.LoadWeightsResponse]:
        """Deprecated tinker spelling: returns the future of :meth:`load_state`."""
        return self.load_state(path)

    async def load_state_with_optimizer_async(
        self, path: str, weights_access_token: str | None = None
    ) -> LocalFuture[types.LoadWeightsResponse]:
        """Deprecated tinker spelling: returns the future of :meth:`load_state_with_optimizer`."""
        return self.load_state_with_optimizer(path)

    # ---------------------------------------------------------------- sampling
    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
        kind: types.SamplingClientKind = "snapshot",
    ) -> ClientFuture[LocalSamplingClient]:
        """A sampling client on a snapshot of the current weights (LoRA merged into a copy)."""
        core = self._core

        def make() -> LocalSamplingClient:
            meta = core.meta("sampler_weights", self.model_id, "", None)
            adapter = core.adapter_state()
            return self._service._sampler_for_adapter(meta, adapter, None)

        fut = submit(make)
        return ClientFuture(fut.future())

    async def save_weights_and_get_sampling_client_async(
        self,
        name: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
        kind: types.SamplingClientKind = "snapshot",
    ) -> LocalSamplingClient:
        """``await self.save_weights_and_get_sampling_client()``."""
        return await self.save_weights_and_get_sampling_client(
            name, retry_config, record_stability_info, kind
        )

    def create_sampling_client(
        self, model_path: str, retry_config: Any = None, record_stability_info: bool = False
    ) -> ClientFuture[LocalSamplingClient]:
        """A sampling client on the weights saved at ``model_path``."""
        return self._service.create_sampling_client(model_path=model_path)

    async def create_sampling_client_async(
        self, model_path: str, retry_config: Any = None, record_stability_info: bool = False
    ) -> LocalSamplingClient:
        """``await self.create_sampling_client(model_path)``."""
        return await self.create_sampling_client(model_path)

    # ---------------------------------------------------------------- info
    def get_tokenizer(self) -> Any:
        """The model's tokenizer."""
        return load_tokenizer(self._core.base_model)

    def get_info(self) -> types.GetInfoResponse:
        """Base model, LoRA rank and model id, as tinker's ``GetInfoResponse``."""
        return types.GetInfoResponse(
            model_data={
                "arch": "llama",
                "model_name": self._core.base_model,
                "tokenizer_id": self._core.base_model,
            },  # type: ignore[arg-type]
            model_id=self.model_id,
            is_lora=True,
            lora_rank=self._core.rank,
            model_name=self._core.base_model,
        )

    async def get_info_async(self) -> types.GetInfoResponse:
        """Same as :meth:`get_info`."""
        return self.get_info()

    def get_base_model(self) -> str:
        """Name of the base model."""
        return self._core.base_model

    @property
    def core(self) -> TrainerCore:
        """The underlying peft model / optimizer state (for tests and benchmarks)."""
        return self._core


class LocalServiceClient(TinkerSurface):
    """In-process replacement for ``tinker.ServiceClient`` serving the embedded models.

    A method of ``tinker.ServiceClient`` with no local counterpart raises
    :class:`~backend.UnsupportedCallError` naming it.

    Args:
        root: folder for ``local://`` checkpoints (default ``$TURNGYM_CHECKPOINTS`` or
            ``<turngym cache>/checkpoints``).
        max_batch_size: most rows one sampling engine decodes together.
        prefix_cache_tokens: KV tokens kept for prefix reuse per sampling engine (0 disables).
        max_tokens_per_pass: padded-token budget of one training forward/backward pass (1024 peaks
            at ~1.5 GB for SmolLM2; bigger passes were slower on a 2-core CPU, not faster).
        lora_alpha: LoRA alpha of new training clients (default ``2 * rank``).
        compute_dtype: ``"float32"`` (default: sampler and trainer logprobs agree to ~1e-5),
            ``"bfloat16"``: samplers hold bfloat16 weights and training passes run under bfloat16
            autocast (LoRA weights, gradients and AdamW stay float32): 1.6-2.3x faster on CPUs
            with AMX, slower on others; sampler and trainer logprobs then differ by ~1e-2 per
            token, which the KL metrics report; or ``"auto"``: whichever a quick probe of this
            machine finds faster (cached per machine, logged; see ``backend.local._dtype``).
            :attr:`compute_dtype` holds the concrete choice.
        seed: seed of sampling requests that carry no ``SamplingParams.seed``: each sampling
            engine derives its own from it and from the weights it serves, so a run with the same
            seed samples the same tokens (``None``: random, as on Tinker).
    """

    _tinker_class = "ServiceClient"

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        max_batch_size: int = 64,
        prefix_cache_tokens: int = 32768,
        max_tokens_per_pass: int = 1024,
        lora_alpha: int | None = None,
        compute_dtype: str = "float32",
        seed: int | None = None,
    ) -> None:
        self.compute_dtype = resolve_compute_dtype(compute_dtype)
        self.seed = seed
        self.root = Path(root).expanduser() if root is not None else ckpt.default_root()
        self.max_batch_size = max_batch_size
        self.prefix_cache_tokens = prefix_cache_tokens
        self.max_tokens_per_pass = max_tokens_per_pass
        self.lora_alpha = lora_alpha
        self._engines: dict[str, SamplerEngine] = {}
        self._lock = threading.Lock()
        register_tokenizers()  # renderers of the models served here resolve offline in this process

    def __enter__(self) -> LocalServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> LocalFuture[None]:
        """Forget the shared base-model sampling engines (their KV caches are released when idle)."""
        with self._lock:
            self._engines.clear()
        return LocalFuture.completed(None)

    # ---------------------------------------------------------------- training clients
    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: dict[str, str] | None = None,
        optimizer: Any = None,
    ) -> ClientFuture[LocalTrainingClient]:
        """A LoRA training client on ``base_model`` (``train_unembed`` is ignored: the unembedding stays frozen)."""
        _check_model(base_model)
        return submit_client(
            lambda: self._new_trainer(base_model, rank, seed, train_mlp, train_attn, user_metadata),
        )

    async def create_lora_training_client_async(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: dict[str, str] | None = None,
        optimizer: Any = None,
    ) -> LocalTrainingClient:
        """``await self.create_lora_training_client(...)``."""
        return await self.create_lora_training_client(
            base_model, rank, seed, train_mlp, train_attn, train_unembed, user_metadata, optimizer
        )

    def _new_trainer(
        self,
        base_model: str,
        rank: int,
        seed: int | None,
        train_mlp: bool,
        train_attn: bool,
        user_metadata: dict[str, str] | None,
    ) -> LocalTrainingClient:
        core = TrainerCore(
            base_model,
            rank,
            seed,
            train_mlp=train_mlp,
            train_attn=train_attn,
            lora_alpha=self.lora_alpha,
            max_tokens_per_pass=self.max_tokens_per_pass,
            compute_dtype=self.compute_dtype,
        )
        return LocalTrainingClient(self, core, user_metadata=user_metadata)

    def _from_state(
        self, path: str, base_model: str | None, with_optimizer: bool, user_metadata: dict[str, str] | None
    ) -> LocalTrainingClient:
        folder = ckpt.resolve(path, self.root)
        meta = ckpt.load_meta(folder)
        if base_model is not None and base_model != meta.base_model:
            raise UnknownModelError(f"checkpoint {path!r} is for {meta.base_model!r}, not {base_model!r}")
        core = TrainerCore(
            meta.base_model,
            meta.rank,
            0,
            train_mlp=any(m in meta.target_modules for m in ("gate_proj", "up_proj", "down_proj")),
            train_attn=any(m in meta.target_modules for m in ("q_proj", "k_proj", "v_proj", "o_proj")),
            lora_alpha=meta.lora_alpha,
            max_tokens_per_pass=self.max_tokens_per_pass,
            compute_dtype=self.compute_dtype,
        )
        core.load(folder, with_optimizer=with_optimizer)
        return LocalTrainingClient(self, core, user_metadata=user_metadata)

    def create_training_client_from_state(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: dict[str, str] | None = None,
        weights_access_token: str | None = None,
        optimizer: Any = None,
    ) -> ClientFuture[LocalTrainingClient]:
        """A training client initialised from the adapter saved at ``path`` (fresh optimizer)."""
        ckpt.resolve(path, self.root)
        return submit_client(lambda: self._from_state(path, base_model, False, user_metadata))

    async def create_training_client_from_state_async(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: dict[str, str] | None = None,
        weights_access_token: str | None = None,
        optimizer: Any = None,
    ) -> LocalTrainingClient:
        """``await self.create_training_client_from_state(...)``."""
        return await self.create_training_client_from_state(path, base_model, user_metadata)

    def create_training_client_from_state_with_optimizer(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: dict[str, str] | None = None,
        weights_access_token: str | None = None,
    ) -> ClientFuture[LocalTrainingClient]:
        """A training client with the adapter and AdamW state saved at ``path``."""
        ckpt.resolve(path, self.root)
        return submit_client(lambda: self._from_state(path, base_model, True, user_metadata))

    async def create_training_client_from_state_with_optimizer_async(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: dict[str, str] | None = None,
        weights_access_token: str | None = None,
    ) -> LocalTrainingClient:
        """``await self.create_training_client_from_state_with_optimizer(...)``."""
        return await self.create_training_client_from_state_with_optimizer(path, base_model, user_metadata)

    # ---------------------------------------------------------------- sampling clients
    def create_sampling_client(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
    ) -> ClientFuture[LocalSamplingClient]:
        """A sampling client on saved weights (``model_path``) or on a base model (``base_model``).

        Clients of the same base model share one engine (and its batch and prefix cache).
        """
        if model_path is None and base_model is None:
            raise ValueError("Either model_path or base_model must be provided")
        if model_path is not None:
            folder = ckpt.resolve(model_path, self.root)
            return submit_client(lambda: self._sampler_from_folder(folder, model_path))
        assert base_model is not None
        _check_model(base_model)
        return submit_client(lambda: LocalSamplingClient(self._base_engine(base_model)))

    async def create_sampling_client_async(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
    ) -> LocalSamplingClient:
        """``await self.create_sampling_client(...)``."""
        return await self.create_sampling_client(model_path, base_model)

    def _new_engine(self, model: Any, base_model: str, weights_id: str) -> SamplerEngine:
        if self.compute_dtype == "bfloat16":
            model = model.to(torch.bfloat16)
        return SamplerEngine(
            model,
            load_tokenizer(base_model),
            base_model,
            max_batch_size=self.max_batch_size,
            prefix_cache_tokens=self.prefix_cache_tokens,
            seed=None if self.seed is None else mix_seed(self.seed, base_model, weights_id),
        )

    def _base_engine(self, base_model: str) -> SamplerEngine:
        with self._lock:
            engine = self._engines.get(base_model)
        if engine is None:
            base = pristine_base(base_model)
            # The pristine copy is shared: convert a private copy, never it.
            engine = self._new_engine(
                copy.deepcopy(base) if self.compute_dtype != "float32" else base, base_model, "base"
            )
            with self._lock:
                engine = self._engines.setdefault(base_model, engine)
        return engine

    def _sampler_from_folder(self, folder: Path, model_path: str) -> LocalSamplingClient:
        meta = ckpt.load_meta(folder)
        return self._sampler_for_adapter(meta, ckpt.load_adapter(folder), model_path)

    def _sampler_for_adapter(
        self, meta: ckpt.CheckpointMeta, adapter: dict[str, Any], model_path: str | None
    ) -> LocalSamplingClient:
        _check_model(meta.base_model)
        model = merged_model(meta.base_model, adapter, meta.scaling)
        engine = self._new_engine(model, meta.base_model, adapter_digest(adapter, meta.scaling))
        return LocalSamplingClient(engine, model_path)

    def get_server_capabilities(self) -> Any:
        """Supported base models, as tinker's ``GetServerCapabilitiesResponse``."""
        return types.GetServerCapabilitiesResponse(
            supported_models=[{"model_name": m} for m in KNOWN_MODELS]  # type: ignore[list-item]
        )

    async def get_server_capabilities_async(self) -> Any:
        """Same as :meth:`get_server_capabilities`."""
        return self.get_server_capabilities()

    def create_rest_client(self) -> LocalRestClient:
        """A ``tinker.RestClient`` stand-in over this service's checkpoints (runs, checkpoints, deletion)."""
        return LocalRestClient(self.root)
