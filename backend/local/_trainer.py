"""LoRA training state: peft model, padded forward/backward passes, AdamW, checkpoints.

Everything here runs on the backend's compute thread (:mod:`._device`), so calls are processed in
submission order, like Tinker's sequenced requests. Gradients accumulate across
``forward_backward`` calls until ``optim_step`` applies and clears them.

LoRA: rank ``rank``, ``lora_alpha = 2 * rank`` unless given (scale 2), no dropout, on every linear
layer of the transformer blocks (attention q/k/v/o when ``train_attn``, MLP gate/up/down when
``train_mlp``); the base weights, embeddings and the (tied) unembedding stay frozen. ``B`` starts
at zero, so a fresh adapter reproduces the base model exactly.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tinker import types

from . import _checkpoint as ckpt
from ._dtype import check_compute_dtype
from ._errors import CustomLossError, InvalidDatumError, LocalBackendError
from ._losses import get_loss
from ._prefix import Plan, TreeLayout, plan, tree_attention_on
from ._weights import fresh_base

ATTN_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")


CustomLossFn = Callable[[list[types.Datum], list[torch.Tensor]], tuple[torch.Tensor, dict[str, float]]]
"""tinker's ``CustomLossFnV1``: ``(data, per-datum target logprobs) -> (loss, metrics)``."""


def custom_loss_view(data: Sequence[types.Datum]) -> list[types.Datum]:
    """What a custom loss's forward pass sees of ``data``: ``target_tokens`` and ``weights``
    (zeros when absent), as tinker sends them. Raises :class:`InvalidDatumError` on a datum
    without ``target_tokens``."""
    out = []
    for i, datum in enumerate(data):
        targets = datum.loss_fn_inputs.get("target_tokens")
        if targets is None:
            raise InvalidDatumError(
                f"datum {i}: forward_backward_custom needs loss_fn_inputs['target_tokens']"
            )
        weights = datum.loss_fn_inputs.get("weights")
        if weights is None:
            weights = types.TensorData(data=[0.0] * len(targets.data), dtype="float32", shape=targets.shape)
        out.append(
            types.Datum(
                model_input=datum.model_input, loss_fn_inputs={"target_tokens": targets, "weights": weights}
            )
        )
    return out


@dataclass
class _Prepared:
    index: int
    tokens: list[int]
    inputs: dict[str, torch.Tensor]


def weighted_positions(inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Positions whose per-token loss can have a gradient, as a bool tensor.

    Every built-in loss multiplies its per-token term by ``advantages`` (RL losses), ``weights``
    (cross-entropy) and ``mask`` when present, so a position where one of those is zero
    contributes nothing to the gradient.
    """
    need = torch.ones_like(inputs["target_tokens"], dtype=torch.bool)
    for key in ("advantages", "weights", "mask"):
        if key in inputs:
            need &= inputs[key] != 0
    return need


def _logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return -torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")


class TrainerCore:
    """The trainable LoRA model behind a local training client.

    Args:
        base_model: name understood by :func:`backend.model.load_model`.
        rank: LoRA rank.
        seed: seed of the LoRA initialisation (random when None).
        train_mlp / train_attn: which linear layers get adapters.
        lora_alpha: LoRA alpha (default ``2 * rank``).
        max_tokens_per_pass: padded-token budget of one forward/backward pass; a batch is sorted
            by length and cut into as few passes as fit this budget.
        compute_dtype: ``"float32"`` or ``"bfloat16"`` (passes run under CPU bfloat16 autocast;
            parameters, gradients and optimizer state stay float32).
    """

    def __init__(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        *,
        train_mlp: bool = True,
        train_attn: bool = True,
        lora_alpha: int | None = None,
        max_tokens_per_pass: int = 1024,
        compute_dtype: str = "float32",
    ) -> None:
        from peft import LoraConfig, get_peft_model

        self.compute_dtype = check_compute_dtype(compute_dtype)

        if rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {rank}")
        targets = [*(ATTN_MODULES if train_attn else ()), *(MLP_MODULES if train_mlp else ())]
        if not targets:
            raise ValueError("at least one of train_mlp or train_attn must be True")
        self.base_model = base_model
        self.rank = rank
        self.lora_alpha = int(lora_alpha if lora_alpha is not None else 2 * rank)
        self.target_modules = targets
        self.max_tokens_per_pass = max_tokens_per_pass
        model = fresh_base(base_model)
        config = LoraConfig(
            r=rank, lora_alpha=self.lora_alpha, target_modules=targets, lora_dropout=0.0, bias="none"
        )
        with torch.random.fork_rng():
            torch.manual_seed(seed if seed is not None else random.getrandbits(62))
            self.model = get_peft_model(model, config)
        self.model.train()
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer: torch.optim.AdamW | None = None
        self.step = 0
        self.vocab_size = int(self.model.config.vocab_size)
        self.context_length = int(getattr(self.model.config, "max_position_embeddings", 2048))
        self.pad_id = int(getattr(self.model.config, "pad_token_id", None) or 0)
        # Unembed zero-weight positions (observations, in RL) without autograd; see target_logprobs.
        self.selective_unembedding = True
        # Compute a prefix shared by several datums of a batch once (see ._prefix).
        self.share_prefixes = True

    # ----------------------------------------------------------------- data
    def prepare(self, data: Sequence[types.Datum], loss_fn: str) -> list[_Prepared]:
        """Validate ``data`` for ``loss_fn`` and convert the inputs to tensors."""
        _, required, optional = get_loss(loss_fn)
        if len(data) == 0:
            raise InvalidDatumError("forward_backward got an empty list of data")
        out = []
        for i, datum in enumerate(data):
            tokens = datum.model_input.to_ints()
            n = len(tokens)
            if n == 0:
                raise InvalidDatumError(f"datum {i} has an empty model_input")
            if n > self.context_length:
                raise InvalidDatumError(
                    f"datum {i} has {n} tokens, more than the context window ({self.context_length})"
                )
            missing = [k for k in required if k not in datum.loss_fn_inputs]
            if missing:
                raise InvalidDatumError(f"datum {i}: loss {loss_fn!r} needs loss_fn_inputs {missing}")
            inputs: dict[str, torch.Tensor] = {}
            for key, td in datum.loss_fn_inputs.items():
                if key not in required and key not in optional:
                    continue
                tensor = td.to_torch().reshape(-1)
                if tensor.numel() != n:
                    raise InvalidDatumError(
                        f"datum {i}: loss_fn_inputs[{key!r}] has {tensor.numel()} entries but "
                        f"model_input has {n} tokens"
                    )
                inputs[key] = tensor.long() if key == "target_tokens" else tensor.float()
            targets = inputs["target_tokens"]
            if int(targets.min()) < 0 or int(targets.max()) >= self.vocab_size:
                raise InvalidDatumError(
                    f"datum {i}: target_tokens outside the vocabulary (size {self.vocab_size})"
                )
            if min(tokens) < 0 or max(tokens) >= self.vocab_size:
                raise InvalidDatumError(f"datum {i}: model_input has ids outside the vocabulary")
            out.append(_Prepared(i, tokens, inputs))
        return out

    def plan(self, items: Sequence[_Prepared]) -> Plan:
        """How :meth:`forward_backward` splits ``items``: shared-prefix chunks and plain datums
        (all plain when :attr:`share_prefixes` is off)."""
        if not self.share_prefixes:
            return Plan(
                chunks=(), plain=tuple(range(len(items))), plain_tokens=sum(len(p.tokens) for p in items)
            )
        return plan([p.tokens for p in items], self.max_tokens_per_pass)

    def _passes(self, items: list[_Prepared]) -> list[list[_Prepared]]:
        items = sorted(items, key=lambda p: len(p.tokens), reverse=True)
        passes: list[list[_Prepared]] = []
        for item in items:
            # Sorted longest first: the first item of a pass sets its padded length.
            if passes and len(passes[-1][0].tokens) * (len(passes[-1]) + 1) <= self.max_tokens_per_pass:
                passes[-1].append(item)
            else:
                passes.append([item])
        return passes

    def target_logprobs(
        self, chunk: list[_Prepared], *, grad_only_where_weighted: bool = False
    ) -> torch.Tensor:
        """Logprobs ``[B, T]`` of each datum's target tokens (right-padded, padding = 0).

        With ``grad_only_where_weighted`` the unembedding and softmax run with autograd only at
        positions whose loss is weighted (:func:`weighted_positions`); the others are computed
        without a graph. Same values, but the backward pass skips the ``[positions, vocab]``
        work of every observation token, which is most of an RL datum.
        """
        length = len(chunk[0].tokens)
        ids = torch.full((len(chunk), length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), length), dtype=torch.long)
        targets = torch.zeros((len(chunk), length), dtype=torch.long)
        for row, item in enumerate(chunk):
            n = len(item.tokens)
            ids[row, :n] = torch.tensor(item.tokens)
            mask[row, :n] = 1
            targets[row, :n] = item.inputs["target_tokens"]
        # Positions with a graph: every real one, or with grad_only_where_weighted only the
        # weighted ones (under no_grad nothing gets a graph either way).
        graph = mask.bool()
        if grad_only_where_weighted:
            for row, item in enumerate(chunk):
                graph[row, : len(item.tokens)] &= weighted_positions(item.inputs)
        rest = mask.bool() & ~graph
        causal_lm: Any = self.model.get_base_model()
        hidden = causal_lm.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        unembed = causal_lm.get_output_embeddings()
        lp = torch.zeros((len(chunk), length))
        if bool(graph.any()):
            rows = hidden.flatten(0, 1).index_select(0, graph.flatten().nonzero()[:, 0])  # see _gather_rows
            lp = lp.index_put(graph.nonzero(as_tuple=True), _logprobs(unembed(rows), targets[graph]))
        if bool(rest.any()):
            with torch.no_grad():
                values = _logprobs(unembed(hidden[rest]), targets[rest])
            # Outside no_grad: an index_put made under no_grad would drop the graph built above.
            lp = lp.index_put(rest.nonzero(as_tuple=True), values)
        return lp

    def shared_logprobs(
        self, chunk: Sequence[_Prepared], shared: Sequence[int], *, grad_only_where_weighted: bool = False
    ) -> list[torch.Tensor]:
        """Logprobs ``[n]`` of each datum's target tokens, from one pass over the chunk's prefix
        trie (``chunk`` sorted by tokens, ``shared[k]`` tokens in common with datum ``k - 1``).

        Each distinct (trie node, target token) is unembedded once; with
        ``grad_only_where_weighted`` only those weighted in some datum get a graph (as in
        :meth:`target_logprobs`).
        """
        layout = TreeLayout.build([p.tokens for p in chunk], shared)
        causal_lm: Any = self.model.get_base_model()
        decoder = causal_lm.get_decoder()
        with tree_attention_on(decoder.config):
            hidden = decoder(
                input_ids=layout.ids[None], position_ids=layout.positions[None], prefix_tree=layout
            ).last_hidden_state[0]
        node = torch.cat(layout.paths)
        targets = torch.cat([p.inputs["target_tokens"] for p in chunk])
        pairs, inverse = torch.unique(node * self.vocab_size + targets, return_inverse=True)
        if grad_only_where_weighted:
            weighted = torch.cat([weighted_positions(p.inputs) for p in chunk])
            graph = torch.zeros(len(pairs), dtype=torch.long).index_add_(0, inverse, weighted.long()) > 0
        else:
            graph = torch.ones(len(pairs), dtype=torch.bool)
        if not torch.is_grad_enabled():
            graph[:] = False
        pair_node = pairs // self.vocab_size
        pair_target = pairs % self.vocab_size
        unembed = causal_lm.get_output_embeddings()
        lp = torch.zeros(len(pairs))
        if bool(graph.any()):
            idx = graph.nonzero(as_tuple=True)
            rows = hidden.index_select(0, pair_node[idx])  # not hidden[...]: see _prefix._gather_rows
            lp = lp.index_put(idx, _logprobs(unembed(rows), pair_target[idx]))
        rest = ~graph
        if bool(rest.any()):
            idx = rest.nonzero(as_tuple=True)
            with torch.no_grad():
                values = _logprobs(unembed(hidden[pair_node[idx]]), pair_target[idx])
            lp = lp.index_put(idx, values)
        return list(lp.index_select(0, inverse).split([len(p.tokens) for p in chunk]))

    def _autocast(self) -> contextlib.AbstractContextManager[object]:
        if self.compute_dtype == "bfloat16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    # ----------------------------------------------------------------- passes
    def forward_backward(
        self,
        data: Sequence[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, float | str] | None,
        *,
        backward: bool,
    ) -> types.ForwardBackwardOutput:
        """Run ``loss_fn`` over ``data``; with ``backward`` accumulate its gradient."""
        fn, _, _ = get_loss(loss_fn)
        config = dict(loss_fn_config or {})
        items = self.prepare(data, loss_fn)
        outputs: list[dict[str, types.TensorData] | None] = [None] * len(items)
        total = 0.0
        self.model.train(backward)
        planned = self.plan(items)
        passes: list[tuple[list[_Prepared], tuple[int, ...] | None]] = [
            ([items[i] for i in c.order], c.shared) for c in planned.chunks
        ]
        passes += [(chunk, None) for chunk in self._passes([items[i] for i in planned.plain])]
        for chunk, shared in passes:
            with torch.set_grad_enabled(backward), self._autocast():
                if shared is None:
                    lp = self.target_logprobs(chunk, grad_only_where_weighted=self.selective_unembedding)
                    lps = [lp[row, : len(item.tokens)] for row, item in enumerate(chunk)]
                else:
                    lps = self.shared_logprobs(
                        chunk, shared, grad_only_where_weighted=self.selective_unembedding
                    )
                losses = []
                for item, item_lp in zip(chunk, lps, strict=True):
                    per_token = fn(item_lp, item.inputs, config)
                    if "mask" in item.inputs:
                        per_token = per_token * item.inputs["mask"]
                    losses.append(per_token)
                    outputs[item.index] = {
                        "logprobs": types.TensorData.from_torch(item_lp.detach().float().clone()),
                        "elementwise_loss": types.TensorData.from_torch(per_token.detach().float().clone()),
                    }
                chunk_loss = torch.stack([x.sum() for x in losses]).sum()
                if backward and chunk_loss.requires_grad:  # False when no position is weighted
                    chunk_loss.backward()
            total += float(chunk_loss.detach())
        return types.ForwardBackwardOutput(
            loss_fn_output_type="TorchLossReturn",
            loss_fn_outputs=[o for o in outputs if o is not None],
            metrics={"loss:sum": total},
        )

    def forward_backward_custom(
        self, data: Sequence[types.Datum], loss_fn: CustomLossFn
    ) -> types.ForwardBackwardOutput:
        """tinker's ``forward_backward_custom``: a forward pass gives each datum's target
        logprobs; ``loss_fn(data, logprobs)`` runs on them as leaf tensors; its gradient ``g``
        with respect to them is sent back through the model as ``cross_entropy`` with weights
        ``-g`` (the gradient of ``sum(-weights * logprobs)`` is then exactly the loss's), and
        accumulated until :meth:`optim_step`.

        Metrics: the loss function's own, ``loss:sum`` (the custom loss) and
        ``surrogate_loss:sum`` (the linearised cross-entropy), as in tinker.
        """
        view = custom_loss_view(data)
        forward = self.forward_backward(view, "cross_entropy", None, backward=False)
        logprobs = []
        for out, datum in zip(forward.loss_fn_outputs, view, strict=True):
            shape = datum.loss_fn_inputs["target_tokens"].shape
            lp = out["logprobs"].to_torch().float()
            logprobs.append((lp.reshape(shape) if shape else lp).clone().detach().requires_grad_(True))
        result = loss_fn(list(data), logprobs)
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.Tensor)):
            raise CustomLossError(
                f"the custom loss function must return (loss tensor, metrics dict), got {type(result).__name__}"
            )
        loss, metrics = result
        if not loss.requires_grad:
            raise CustomLossError(
                "the custom loss does not depend on the logprobs it was given (no gradient)"
            )
        loss_sum = float(loss.detach().sum())
        loss.sum().backward()
        backward_data = []
        for i, (datum, lp) in enumerate(zip(view, logprobs, strict=True)):
            if lp.grad is None:
                raise CustomLossError(f"no gradient reached the logprobs of datum {i} (the loss ignores it)")
            backward_data.append(
                types.Datum(
                    model_input=datum.model_input,
                    loss_fn_inputs={
                        "target_tokens": datum.loss_fn_inputs["target_tokens"],
                        "weights": types.TensorData.from_torch(-lp.grad.detach().reshape(-1).float()),
                    },
                )
            )
        backward = self.forward_backward(backward_data, "cross_entropy", None, backward=True)
        out_metrics = dict(backward.metrics)
        surrogate = out_metrics.pop("loss:sum")
        out_metrics.update({k: float(v) for k, v in dict(metrics or {}).items()})
        out_metrics["loss:sum"] = loss_sum
        out_metrics["surrogate_loss:sum"] = surrogate
        return types.ForwardBackwardOutput(
            loss_fn_output_type=backward.loss_fn_output_type,
            loss_fn_outputs=backward.loss_fn_outputs,
            metrics=out_metrics,
        )

    def optim_step(self, params: types.AdamParams) -> types.OptimStepResponse:
        """AdamW step with ``params`` (lr, betas, eps, weight decay, grad-norm clipping), then zero grads."""
        if not isinstance(params, types.AdamParams):
            raise LocalBackendError(
                f"the local backend supports AdamParams only, got {type(params).__name__}"
            )
        opt = self._ensure_optimizer(params)
        for group in opt.param_groups:
            group["lr"] = params.learning_rate
            group["betas"] = (params.beta1, params.beta2)
            group["eps"] = params.eps
            group["weight_decay"] = params.weight_decay
        max_norm = params.grad_clip_norm if params.grad_clip_norm > 0 else float("inf")
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, max_norm))
        opt.step()
        opt.zero_grad(set_to_none=True)
        self.step += 1
        return types.OptimStepResponse(
            metrics={
                "optim/grad_norm": norm,
                "optim/lr": params.learning_rate,
                "optim/step": float(self.step),
            }
        )

    def _ensure_optimizer(self, params: types.AdamParams | None = None) -> torch.optim.AdamW:
        if self.optimizer is None:
            p = params or types.AdamParams()
            self.optimizer = torch.optim.AdamW(
                self.params,
                lr=p.learning_rate,
                betas=(p.beta1, p.beta2),
                eps=p.eps,
                weight_decay=p.weight_decay,
            )
        return self.optimizer

    # ----------------------------------------------------------------- weights
    def adapter_state(self) -> dict[str, torch.Tensor]:
        """A detached copy of the LoRA weights (peft state-dict names)."""
        from peft import get_peft_model_state_dict

        return {k: v.detach().clone() for k, v in get_peft_model_state_dict(self.model).items()}

    def meta(
        self, kind: str, run_id: str, name: str, user_metadata: dict[str, str] | None
    ) -> ckpt.CheckpointMeta:
        """Metadata describing the current adapter."""
        return ckpt.CheckpointMeta(
            base_model=self.base_model,
            rank=self.rank,
            lora_alpha=self.lora_alpha,
            target_modules=list(self.target_modules),
            kind=kind,
            step=self.step,
            run_id=run_id,
            name=name,
            user_metadata=dict(user_metadata or {}),
        )

    def save(self, folder: Path, meta: ckpt.CheckpointMeta, *, with_optimizer: bool, overwrite: bool) -> None:
        """Write the adapter (and optimizer state) to ``folder``."""
        opt_state = self.optimizer.state_dict() if (with_optimizer and self.optimizer is not None) else None
        ckpt.save(folder, meta, self.adapter_state(), opt_state, overwrite)

    def load(self, folder: Path, *, with_optimizer: bool) -> ckpt.CheckpointMeta:
        """Load the adapter (and, if asked, the optimizer state) saved in ``folder``."""
        from peft import set_peft_model_state_dict

        meta = ckpt.load_meta(folder)
        if meta.base_model != self.base_model:
            raise LocalBackendError(
                f"checkpoint is for {meta.base_model!r}, this client trains {self.base_model!r}"
            )
        if meta.rank != self.rank or sorted(meta.target_modules) != sorted(self.target_modules):
            raise LocalBackendError(
                f"checkpoint LoRA (rank {meta.rank}, {meta.target_modules}) does not match this client "
                f"(rank {self.rank}, {self.target_modules})"
            )
        result = set_peft_model_state_dict(self.model, ckpt.load_adapter(folder))
        unexpected = getattr(result, "unexpected_keys", None)
        if unexpected:
            raise LocalBackendError(f"checkpoint has unexpected adapter keys, e.g. {unexpected[0]!r}")
        self.step = meta.step
        self.optimizer = None
        if with_optimizer:
            state = ckpt.load_optimizer(folder)
            if state is not None:
                self._ensure_optimizer().load_state_dict(state)
        return meta
