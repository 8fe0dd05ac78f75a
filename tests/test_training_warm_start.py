"""The generic warm-start key (``warm_start.*`` of every train CLI) and the rollout keys of
:class:`training.Config` (``compaction_period``, advantage options), on the toy parity env and the
tiny random model (seconds)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import anyio
import chz
import pytest
import torch

import training
from training._cli import run_cli
from training.testing import SCRIPTED_REPLY, ToyConfig


def _toy(tmp_path: Path, *args: str) -> ToyConfig:
    return training.parse_config(ToyConfig, [f"log_path={tmp_path}", "progress=false", *args])


def test_warm_start_keys_parse_and_bad_ones_are_one_line_errors() -> None:
    config = training.parse_config(ToyConfig, ["warm_start.episodes=8", "warm_start.steps=3"])
    assert config.warm_start == training.WarmStartConfig(episodes=8, steps=3)
    assert training.parse_config(ToyConfig, []).warm_start.episodes == 0  # off by default
    for bad in ("warm_start.episodez=1", "warm_start.steps=0", "warm_start.learning_rate=-1"):
        with pytest.raises(training.ConfigError) as info:
            training.parse_config(ToyConfig, [bad])
        assert "\n" not in str(info.value)
    config = training.parse_config(
        ToyConfig, ["compaction_period=3", "advantage_normalize_std=true", "advantage_discount=0.9"]
    )
    assert (config.compaction_period, config.advantage_normalize_std, config.advantage_discount) == (
        3,
        True,
        0.9,
    )
    for bad in ("compaction_period=-1", "advantage_discount=1.5"):
        with pytest.raises(training.ConfigError):
            training.parse_config(ToyConfig, [bad])


def test_warm_start_key_plays_scripted_episodes_then_rl_and_reports_each_stage(tmp_path: Path) -> None:
    config = _toy(
        tmp_path,
        "warm_start.episodes=6",
        "warm_start.steps=5",
        "warm_start.batch_size=4",
        "warm_start.learning_rate=1e-2",
        "max_steps=1",
        "eval_every=1",
    )
    summary = training.train(config)
    warm = json.loads((tmp_path / "warm_start.json").read_text())
    assert summary.warm_start == warm
    assert warm["warm_start/episodes"] == 6 and warm["warm_start/datums"] == 6  # one sequence each
    assert warm["warm_start/scripted_reward"] == config.turns  # the scripted player wins every turn
    assert warm["warm_start/trained_tokens"] == 6 * config.turns * len(SCRIPTED_REPLY)
    assert warm["warm_start/loss_last"] < warm["warm_start/loss_first"]
    # held-out before any training (step 0), after the warm start (step 0) and after RL (step 1),
    # each logged like the others and reported
    rows = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert [(r["step"], r["stage"]) for r in rows] == [(0, "untrained"), (0, "warm_start"), (1, "rl")]
    assert summary.untrained_eval == rows[0] and summary.warm_start_eval == rows[1]
    assert summary.final_eval == rows[2]
    assert (tmp_path / "transcripts" / "eval_step0000_untrained.html").is_file()
    text = summary.describe()
    assert "warm start: 6 scripted episodes, 5 steps" in text
    assert "held-out before any training: win_rate=" in text
    assert "held-out after the warm start: win_rate=" in text and "held-out after 1 RL steps" in text
    # resuming does not warm-start again, and still reports it
    again = training.train(_toy(tmp_path, "warm_start.episodes=6", "max_steps=2", "eval_every=1"))
    assert again.start_step == 1 and again.warm_start == warm
    assert json.loads((tmp_path / "warm_start.json").read_text()) == warm


def test_a_warm_start_draws_the_adapter_from_its_own_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # with a warm start, the weights RL starts from depend on warm_start.* only: runs with other
    # seeds differ in RL alone (one supervised checkpoint, several RL seeds)
    from backend import LocalServiceClient

    seeds: list[int | None] = []
    original = LocalServiceClient.create_lora_training_client_async

    async def recording(self, base_model, rank=32, seed=None, **kwargs):  # type: ignore[no-untyped-def]
        seeds.append(seed)
        return await original(self, base_model, rank=rank, seed=seed, **kwargs)

    monkeypatch.setattr(LocalServiceClient, "create_lora_training_client_async", recording)
    for run_seed, extra in (
        (3, ["warm_start.episodes=2", "warm_start.steps=1", "warm_start.seed=11"]),
        (4, []),
    ):
        config = _toy(tmp_path / str(run_seed), f"seed={run_seed}", "max_steps=1", "eval_every=0", *extra)
        assert config.adapter_seed() == (11 if extra else run_seed)
        training.train(config)
    assert seeds == [11, 4]


class _RecordingClient:
    """A training client that records the datums of each ``forward_backward`` call."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    class _Done:
        def __init__(self, value: object) -> None:
            self.value = value

        async def result_async(self) -> object:
            return self.value

    async def forward_backward_async(self, batch, loss_fn):  # type: ignore[no-untyped-def]
        assert loss_fn == "cross_entropy"
        self.batches.append([d.model_input.to_ints()[0] for d in batch])
        return self._Done(SimpleNamespace(metrics={"loss:sum": 1.0}))

    async def optim_step_async(self, adam):  # type: ignore[no-untyped-def]
        return self._Done(None)


def test_warm_start_batches_count_episodes_with_all_their_sequences() -> None:
    # an episode a renderer splits into 3 sequences trains whole in one step, as a 1-sequence one
    episodes = [
        [training.sft_datum([tag, 5, 6], [0, 1, 1]) for _ in range(n)] for tag, n in ((1, 3), (2, 1), (3, 2))
    ]
    hook = training.supervised_warm_start(episodes, steps=4, batch_size=1, learning_rate=1e-3, seed=3)
    client = _RecordingClient()
    out = anyio.run(hook, client, ToyConfig())
    assert out["warm_start/steps"] == 4 and len(client.batches) == 4
    sizes = {1: 3, 2: 1, 3: 2}
    assert all(len(set(b)) == 1 and len(b) == sizes[b[0]] for b in client.batches)  # whole episodes
    assert sorted(b[0] for b in client.batches[:3]) == [1, 2, 3]  # every episode once per pass
    # plain datums are items of their own, as before
    client = _RecordingClient()
    anyio.run(
        training.supervised_warm_start(
            [d for e in episodes for d in e], steps=2, batch_size=4, learning_rate=1e-3
        ),
        client,
        ToyConfig(),
    )
    assert [len(b) for b in client.batches] == [4, 4]


@chz.chz
class NoScriptsConfig(ToyConfig):
    """The toy loop over a builder that cannot script episodes."""

    def dataset_builder(self):  # type: ignore[override]
        inner = super().dataset_builder()

        class Plain:  # only __call__: no scripted_episodes
            async def __call__(self):
                return await inner()

        return Plain()


def test_a_warm_start_the_builder_cannot_script_is_refused_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = run_cli(NoScriptsConfig, [f"log_path={tmp_path}", "warm_start.episodes=4", "progress=false"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert "cannot script episodes" in err and "\n" not in err
    assert not (tmp_path / "config.json").exists() and not (tmp_path / "train.log").exists()


@chz.chz
class SyncScriptsConfig(ToyConfig):
    """The toy loop over a builder whose ``scripted_episodes`` is a plain (not async) method."""

    def dataset_builder(self):  # type: ignore[override]
        inner = super().dataset_builder()

        class Sync:
            async def __call__(self):
                return await inner()

            def scripted_episodes(self, n: int, seed: int) -> list[object]:
                return []

        return Sync()


@chz.chz
class BadArgsScriptsConfig(ToyConfig):
    """The toy loop over a builder whose ``scripted_episodes`` takes no ``(n, seed)``."""

    def dataset_builder(self):  # type: ignore[override]
        inner = super().dataset_builder()

        class NoArgs:
            async def __call__(self):
                return await inner()

            async def scripted_episodes(self) -> list[object]:
                return []

        return NoArgs()


@pytest.mark.parametrize(
    ("config_cls", "message"),
    [(SyncScriptsConfig, "it is not async"), (BadArgsScriptsConfig, "must take (n, seed)")],
)
def test_a_scripted_episodes_off_the_protocol_is_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config_cls: type[ToyConfig], message: str
) -> None:
    run = tmp_path / "run"
    rc = run_cli(config_cls, [f"log_path={run}", "warm_start.episodes=4", "progress=false"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "scripted_episodes" in err and "\n" not in err
    assert not run.exists()  # no config.json, no train.log: refused before anything was written


def test_what_scripted_episodes_returns_is_checked_with_one_line() -> None:
    from training._warm_start import check_episodes

    class Builder:
        pass

    for returned, expected in (
        (None, "must return a list of 2"),
        ([1, 2, 3], "got 3 items"),
        ([("env", "policy"), ("env", "policy")], "item 0 must be an (env, policy) pair"),
    ):
        with pytest.raises(
            training.ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")
        ) as info:
            check_episodes(Builder(), returned, 2)
        assert "\n" not in str(info.value)


def test_compaction_for_envs_that_cannot_compact_is_refused_before_sampling(tmp_path: Path) -> None:
    # the parity env builds its own token observations: it has no set_compaction_period
    with pytest.raises(training.ConfigError, match="compaction_period=2 but ParityEnv cannot compact"):
        training.train(_toy(tmp_path, "compaction_period=2", "max_steps=1", "eval_every=0"))
    assert not (tmp_path / "metrics.jsonl").exists()


def test_advantage_keys_reach_datum_assembly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import training._loop as loop

    seen = []
    real = loop.to_datums

    def spy(groups, advantages=None):  # type: ignore[no-untyped-def]
        seen.append(advantages)
        return real(groups, advantages)

    monkeypatch.setattr(loop, "to_datums", spy)
    training.train(
        _toy(
            tmp_path, "advantage_normalize_std=true", "advantage_discount=0.5", "max_steps=2", "eval_every=0"
        )
    )
    assert seen and all(a.normalize_std and a.discount == 0.5 for a in seen)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    # the local sampler's prefill counters are logged per step
    assert all(r["sampler/prefill_tokens"] > 0 and "sampler/reused_tokens" in r for r in rows)


def test_warm_start_loss_comes_from_the_returned_logprobs_without_a_loss_metric() -> None:
    """A Tinker-API server that returns per-token logprobs but no ``loss:sum`` metric (SkyRL tx):
    the warm start's loss is the weighted mean NLL of the logprobs, not 0.0."""
    import tinker

    from training._warm_start import _mean_nll

    datum = tinker.Datum(
        model_input=tinker.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={
            "target_tokens": tinker.TensorData.from_torch(torch.tensor([2, 3, 4])),
            "weights": tinker.TensorData.from_torch(torch.tensor([0.0, 1.0, 1.0])),
        },
    )
    logprobs = tinker.TensorData.from_torch(torch.tensor([-9.0, -1.0, -3.0]))
    fb = tinker.ForwardBackwardOutput(
        loss_fn_output_type="cross_entropy", loss_fn_outputs=[{"logprobs": logprobs}], metrics={}
    )
    assert _mean_nll([datum], fb) == 2.0  # (1 + 3) / 2: the unweighted first token is left out
    without = tinker.ForwardBackwardOutput(
        loss_fn_output_type="cross_entropy", loss_fn_outputs=[], metrics={"loss:sum": 5.0}
    )
    assert _mean_nll([datum], without) == 2.5  # the metric, per weighted token
