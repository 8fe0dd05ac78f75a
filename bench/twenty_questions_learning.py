"""Learning to ask: does RL teach SmolLM2-135M to ask useful questions in Twenty Questions?

Setting: 8 candidate words listed, 4 turns, the KB answerer. Enumerating candidates wins at most
half the games (4 guesses among 8), so a win rate above 0.5 needs questions that split the
candidates. Protocol (budget 45 minutes on 2 free cores, from the untrained model):

1. **before**: evaluate the untrained model on held-out games (16 held-out words x 4 games);
2. **SFT warm start** (``--sft-games``, ``--sft-steps``): ``cross_entropy`` through the run's own
   training client on token transcripts of a scripted player on *training* words, with
   candidate lists drawn from a different seed than the RL batches. ``--sft-player halving``
   (default): :class:`HalvingPlayer`, binary search with set questions ("Is it plum, plate,
   zebra or peach?"), whose moves only copy words from the prompt; ``kb-optimal``:
   :class:`KBOptimalPlayer`'s attribute questions (which a 135M model did not pick up: a
   previous run with it ended at 0.28);
3. **RL** with the shared loop (:mod:`training`) for ``max_steps`` (20) or until the time
   budget, at lr 1e-4; no shaping and no curriculum. Why the low rate: after the warm start
   most groups are all wins (constant, dropped), so a step often trains on one group, and Adam
   moves the weights by about the learning rate whatever the batch; at 5e-4 for 40 steps that
   random walk took the held-out win rate from 0.97 (after the warm start) to 0.72 (step 10)
   and 0.52 (step 20) to 0.33 (step 31): the policy began asking about all four words left
   instead of two.
   (Also tried: ``wrong_guess_reward=-0.1`` made the policy shy of guessing, 1.8 -> 0.8 guesses
   per game over 10 steps, win rate 0.06-0.2: asking is free, guessing is risky, so it learned
   to ask until the last turn.)
4. **after**: the same held-out games (same words, candidate lists and seeds) as in step 1.

Last line: ``win_rate_before=<a> win_rate_after=<b> question_turn_fraction_after=<q>`` where
``q`` is the fraction of the player's held-out turns that were questions. Goal: ``b >= 0.65``
and ``q > 0``.

Measured here (2026-12-02, idle 2 cores, defaults): ``win_rate_before=0.031
win_rate_after=0.953 question_turn_fraction_after=0.594`` in 29.4 minutes; after the warm start
alone (the loop's step-0 evaluation) the held-out win rate was already 0.969 with 2 questions
per game, and RL at 1e-4 kept it (0.984 at step 10, 0.953 at step 20): here the warm start
teaches the strategy and RL does not improve on it. Used: SFT warm start (192 halving games,
24 steps); no shaping, no curriculum.

``--quick`` runs the same pipeline in a few minutes (tiny SFT, one RL step, 8 eval games) to
prove it works end to end; it says nothing about learning. Any ``key=value`` argument is passed
to the training config (``learning_rate=5e-4``, ``group_size=16``, ``backend=tinker``...).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DEFAULTS = {
    "env.candidates": "8",
    "env.max_questions": "4",
    "env.wrong_guess_reward": "0.0",
    "env.question_reward": "0.0",  # asking is the point here (the easy default charges for it)
    "local_compute_dtype": "float32",  # as measured (the easy default uses bfloat16)
    "env.truncation_penalty": "0.0",  # as measured (the easy default charges 0.05)
    "lr_schedule": "constant",  # as measured (the easy default decays)
    "learning_rate": "1e-4",
    "batch_size": "4",
    "group_size": "8",
    "max_steps": "20",
    "eval_every": "10",
    "eval_words": "16",
    "eval_group_size": "4",
    "save_every": "5",
}
QUICK = {
    "batch_size": "2",
    "group_size": "4",
    "max_steps": "1",
    "eval_every": "0",
    "eval_words": "4",
    "eval_group_size": "2",
}
BUDGET_MINUTES = 45.0
FINAL_EVAL_RESERVE_MINUTES = 4.0


SFT_PLAYERS = ("halving", "kb-optimal")
"""Scripted players the warm start can imitate (``--sft-player``)."""


async def scripted_datums(
    config: Any, n_games: int, seed: int, player_name: str = "halving"
) -> tuple[list[Any], float]:
    """Token transcripts of a scripted player on training words (one datum per game, weight 1
    on the player's tokens) and the scripted win rate."""
    from envs.twenty_questions import (
        HalvingPlayer,
        KBAnswerer,
        KBOptimalPlayer,
        TwentyQuestionsDataset,
        TwentyQuestionsEnv,
        split_words,
        text_to_action,
    )
    from renderers_ext import load_renderer
    from training._warm_start import sft_datum

    builder = config.dataset_builder()
    renderer = load_renderer(config.renderer_name, config.model_name)
    pool = TwentyQuestionsDataset(
        split_words("train"),
        batch_size=1,
        group_size=1,
        answerer=KBAnswerer(),
        config=builder.env,
        seed=seed,
        model_name_for_tokenizer=config.model_name,
        renderer_name=config.renderer_name,
    )
    datums, wins = [], 0
    for i in range(n_games):
        word, candidates = pool.item(i)
        env = TwentyQuestionsEnv(renderer, word, KBAnswerer(), builder.env, candidates)
        player = (
            HalvingPlayer(tuple(candidates), max_questions=builder.env.max_questions)
            if player_name == "halving"
            else KBOptimalPlayer(tuple(candidates), max_questions=builder.env.max_questions)
        )
        start = await env.initial_observation()
        assert isinstance(start, tuple), "the prompt overflowed"
        tokens = start[0].to_ints()
        weights = [0.0] * len(tokens)
        while True:
            action = text_to_action(renderer, player.next_text(env.messages))
            result = await env.step(action, extra={"stop_reason": "stop"})
            tokens += action
            weights += [1.0] * len(action)
            if result.episode_done:
                break
            nxt = result.next_observation.to_ints()
            if nxt[: len(tokens)] != tokens:  # not an extension: start a new sequence
                datums.append(sft_datum(tokens, weights))
                tokens, weights = nxt, [0.0] * len(nxt)
            else:
                new = nxt[len(tokens) :]
                tokens += new
                weights += [0.0] * len(new)
        datums.append(sft_datum(tokens, weights))
        wins += int(env.stats.won)
    return datums, wins / max(n_games, 1)


def _eval_rows(log_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (log_path / "eval.jsonl").read_text().splitlines() if line.strip()]


def _eval_row(log_path: Path) -> dict[str, Any]:
    return _eval_rows(log_path)[-1]


def _question_fraction(row: dict[str, Any]) -> float:
    questions = row.get("eval/env/all/twenty_questions/questions", 0.0) or 0.0
    turns = row.get("eval/env/all/twenty_questions/turns", 0.0) or 0.0
    return questions / turns if turns else 0.0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints the result line last."""
    parser = argparse.ArgumentParser(
        prog="python bench/twenty_questions_learning.py", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few-minute end-to-end check (no learning claim)"
    )
    parser.add_argument(
        "--out", default=None, help="run folder (default runs/bench/twenty_questions_learning/<time>)"
    )
    parser.add_argument("--minutes", type=float, default=BUDGET_MINUTES, help="total time budget")
    parser.add_argument(
        "--sft-games", type=int, default=192, help="scripted games for the warm start (0: none)"
    )
    parser.add_argument(
        "--sft-player",
        choices=SFT_PLAYERS,
        default="halving",
        help="scripted player imitated by the warm start",
    )
    parser.add_argument("--sft-steps", type=int, default=24, help="cross_entropy steps of the warm start")
    parser.add_argument("--sft-batch", type=int, default=16, help="transcripts per warm-start step")
    parser.add_argument("--sft-lr", type=float, default=1e-3, help="warm-start learning rate")
    parser.add_argument("overrides", nargs="*", help="training config key=value overrides")
    args = parser.parse_args(argv)
    t0 = time.monotonic()

    import training
    from envs.twenty_questions.train import TwentyQuestionsTrainConfig

    out = Path(args.out or f"runs/bench/twenty_questions_learning/{time.strftime('%Y%m%d-%H%M%S')}")
    defaults = {**BENCH_DEFAULTS, **(QUICK if args.quick else {})}
    if args.quick:
        args.sft_games, args.sft_steps, args.sft_batch = min(args.sft_games, 8), min(args.sft_steps, 2), 4
    base = [f"{k}={v}" for k, v in defaults.items()] + list(args.overrides)
    try:
        config = training.parse_config(TwentyQuestionsTrainConfig, [*base, f"log_path={out / 'rl'}"])
        before_config = training.parse_config(
            TwentyQuestionsTrainConfig, [*base, f"log_path={out / 'before'}", "max_steps=0", "eval_every=1"]
        )
    except training.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"[bench] artifacts in {out}", flush=True)

    # 1. before: the untrained model on the held-out games
    training.train(before_config)
    before = _eval_row(out / "before")
    print(
        f"[bench] before: win_rate={before['eval/win_rate']:.3f} ({(time.monotonic() - t0) / 60:.1f} min)",
        flush=True,
    )

    # 2. SFT warm start on scripted games (training words, other candidate seeds)
    warm_start = None
    if args.sft_games > 0 and args.sft_steps > 0:
        datums, scripted_win = asyncio.run(
            scripted_datums(config, args.sft_games, seed=config.seed + 1000, player_name=args.sft_player)
        )
        print(
            f"[bench] warm start: {len(datums)} scripted transcripts (scripted win rate {scripted_win:.2f})",
            flush=True,
        )
        from training._warm_start import supervised_warm_start

        warm_start = supervised_warm_start(
            datums,
            steps=args.sft_steps,
            batch_size=args.sft_batch,
            learning_rate=args.sft_lr,
            seed=config.seed,
        )

    # 3. RL within what is left of the budget, 4. final held-out evaluation (by the loop)
    left = args.minutes - (time.monotonic() - t0) / 60 - FINAL_EVAL_RESERVE_MINUTES
    if not args.quick:
        config = training.parse_config(
            TwentyQuestionsTrainConfig,
            [*base, f"log_path={out / 'rl'}", f"time_budget_minutes={max(left, 1.0):.2f}"],
        )
    if config.eval_every == 0:  # the loop evaluates at the end only when eval_every > 0
        config = training.parse_config(
            TwentyQuestionsTrainConfig,
            [*base, f"log_path={out / 'rl'}", f"eval_every={max(config.max_steps, 1)}"],
        )
    summary = training.train(config, warm_start=warm_start)
    rl_rows = _eval_rows(out / "rl")
    after, after_sft = rl_rows[-1], rl_rows[0]  # the loop evaluates at step 0, after the warm start
    q = _question_fraction(after)
    minutes = (time.monotonic() - t0) / 60
    result = {
        "win_rate_before": before["eval/win_rate"],
        "win_rate_after": after["eval/win_rate"],
        "win_rate_after_sft": after_sft["eval/win_rate"] if after_sft["step"] == 0 else None,
        "question_turn_fraction_after_sft": _question_fraction(after_sft) if after_sft["step"] == 0 else None,
        "question_turn_fraction_before": _question_fraction(before),
        "question_turn_fraction_after": q,
        "rl_steps": summary.end_step,
        "minutes": minutes,
        "quick": args.quick,
        "sft_games": args.sft_games,
        "sft_steps": args.sft_steps,
        "sft_player": args.sft_player,
        "overrides": base,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    if after_sft["step"] == 0:
        print(
            f"[bench] after the warm start (step 0): win_rate={after_sft['eval/win_rate']:.3f} "
            f"question_turn_fraction={_question_fraction(after_sft):.3f}"
        )
    print(f"[bench] {summary.end_step} RL steps, {minutes:.1f} min; details in {out / 'result.json'}")
    print(
        f"win_rate_before={before['eval/win_rate']:.3f} win_rate_after={after['eval/win_rate']:.3f} "
        f"question_turn_fraction_after={q:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
