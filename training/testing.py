"""A toy token-level env for smoke-testing the loop in seconds (no renderer, any model).

Every episode starts from the same few prompt tokens; each of ``turns`` turns the policy samples
some tokens and earns reward 1 (metric ``win``) when the first sampled token is even, so even a
random model gets groups with mixed rewards. Observations extend previous observation + action,
so every trajectory is one datum. Its builder scripts warm-start episodes
(``training.SupportsScriptedEpisodes``: a player that always says :data:`SCRIPTED_REPLY`), so
``warm_start.episodes=8`` works on it too.

``python -m training.testing model_name=turngym/tiny-random-llama max_steps=2 log_path=/tmp/x``
runs the real loop on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import chz

from training._cli import run_cli
from training._config import Config

if TYPE_CHECKING:
    from tinker_cookbook.rl.types import EnvGroupBuilder, RLDatasetBuilder

TINY_MODEL = "turngym/tiny-random-llama"
_PROMPT = [1, 9690, 198]  # "<|im_start|>system\n"-like prefix; any ids work
_FOLLOW_UP = [2, 198, 1]
SCRIPTED_REPLY = [100, 102, 2]
"""What the scripted warm-start player says every turn (an even first token: a win)."""


def _make_builder(**kwargs: int) -> RLDatasetBuilder:
    import tinker
    from tinker_cookbook.completers import TokenCompleter
    from tinker_cookbook.rl.types import (
        Env,
        EnvGroupBuilder,
        RLDataset,
        RLDatasetBuilder,
        StepResult,
    )

    class ParityEnv(Env):
        """Reward 1 per turn whose first sampled token is even."""

        def __init__(self, turns: int, offset: int) -> None:
            self.turns = turns
            self.turn = 0
            self.tokens = [*_PROMPT, 100 + offset]

        async def initial_observation(self):  # type: ignore[override]
            return tinker.ModelInput.from_ints(self.tokens), [2]

        async def step(self, action, *, extra=None) -> StepResult:  # type: ignore[override]
            self.turn += 1
            win = bool(action) and action[0] % 2 == 0
            done = self.turn >= self.turns
            self.tokens = [*self.tokens, *action, *_FOLLOW_UP]
            return StepResult(
                reward=1.0 if win else 0.0,
                episode_done=done,
                next_observation=tinker.ModelInput.empty()
                if done
                else tinker.ModelInput.from_ints(self.tokens),
                next_stop_condition=[2],
                metrics={"win": 1.0 if win else 0.0},
            )

    class ParityGroup(EnvGroupBuilder):
        def __init__(self, group_size: int, turns: int, offset: int) -> None:
            self.group_size, self.turns, self.offset = group_size, turns, offset

        async def make_envs(self) -> Sequence[Env]:
            return [ParityEnv(self.turns, self.offset) for _ in range(self.group_size)]

        def logging_tags(self) -> list[str]:
            return ["parity"]

    class ParityDataset(RLDataset):
        def __init__(self, n_batches: int, batch_size: int, group_size: int, turns: int, base: int) -> None:
            self.n_batches, self.batch_size, self.group_size, self.turns, self.base = (
                n_batches,
                batch_size,
                group_size,
                turns,
                base,
            )

        def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
            return [
                ParityGroup(self.group_size, self.turns, self.base + index * self.batch_size + i)
                for i in range(self.batch_size)
            ]

        def __len__(self) -> int:
            return self.n_batches

    @chz.chz
    class ParityDatasetBuilder(RLDatasetBuilder):
        batch_size: int
        group_size: int
        turns: int
        n_batches: int
        eval_groups: int

        async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
            train = ParityDataset(self.n_batches, self.batch_size, self.group_size, self.turns, 0)
            test = ParityDataset(1, self.eval_groups, self.group_size, self.turns, 10_000)
            return train, test if self.eval_groups else None

        async def scripted_episodes(self, n: int, seed: int) -> list[tuple[Env, TokenCompleter]]:
            """Warm-start episodes (``training.SupportsScriptedEpisodes``): a player that
            always opens with an even token, i.e. always wins."""
            from completers import ScriptedTokenCompleter

            return [
                (
                    ParityEnv(self.turns, 20_000 + seed + i),
                    ScriptedTokenCompleter([SCRIPTED_REPLY], cycle=True),
                )
                for i in range(n)
            ]

    return ParityDatasetBuilder(**kwargs)


def parity_builders(n: int, *, group_size: int = 4, turns: int = 2, offset: int = 0) -> list[EnvGroupBuilder]:
    """``n`` groups of the parity env (the toy dataset's batch ``offset``, ``n`` groups wide)."""
    import anyio

    async def build() -> list[EnvGroupBuilder]:
        builder = _make_builder(
            batch_size=n, group_size=group_size, turns=turns, n_batches=offset + 1, eval_groups=0
        )
        train, _ = await builder()
        return list(train.get_batch(offset))

    return anyio.run(build)


def __getattr__(name: str) -> Any:
    """``KillWorkerOnce`` on first use: it subclasses the cookbook's ``EnvGroupBuilder``, and a
    config's CLI parsing imports this module without the cookbook (``test_cli_parsing_imports_nothing_heavy``)."""
    if name == "KillWorkerOnce":
        from training._kill_worker import KillWorkerOnce

        return KillWorkerOnce
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@chz.chz
class ToyConfig(Config):
    """:class:`training.Config` for the toy parity env (tiny model, short episodes)."""

    model_name: str = TINY_MODEL
    log_path: str = "runs/toy"
    lora_rank: int = 4
    max_tokens: int = 4
    max_steps: int = 2
    eval_every: int = 1
    batch_size: int = 2
    """Groups per training batch."""
    group_size: int = 4
    """Episodes per group."""
    turns: int = 2
    """Turns per episode."""
    eval_groups: int = 2
    """Held-out groups per evaluation (0: no held-out split)."""

    def dataset_builder(self) -> RLDatasetBuilder:
        """The parity dataset (1000 training batches)."""
        return _make_builder(
            batch_size=self.batch_size,
            group_size=self.group_size,
            turns=self.turns,
            n_batches=1000,
            eval_groups=self.eval_groups,
        )


if __name__ == "__main__":
    raise SystemExit(run_cli(ToyConfig, prog="training.testing"))
