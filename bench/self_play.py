"""Self-play on a small zero-sum game (``--game``: Nim by default, or tic-tac-toe): what the warm
start scores, what self-play RL adds, and whether the multi-seat loop ever deadlocks.

Three parts, each reported on its own:

1. **Train** (``python -m envs.<game>.train`` with the game's bench keys, :data:`DEFAULT` for Nim
   and :data:`TICTACTOE`, or ``key=value`` overrides on the command line): a warm start on scripted
   games of random legal moves (the move format, not the play), then RL by self-play mixed with a
   random opponent. The held-out
   evaluation right after the warm start (``eval.jsonl`` step 0) gives ``score_vs_random_warm``,
   the last one ``score_vs_random_after`` and ``illegal_move_rate`` (the share of the policy's
   held-out games that ended on its own illegal move); score = win 1, draw 0.5, loss 0. The
   held-out games sample the policy at the training temperature (see :data:`DEFAULT` for why).
2. **Head to head**: the trained policy against its warm start (both sampled at the training
   temperature, ``--h2h-games`` games, half with the trained policy in seat 0), through the same
   game loop; ``head_to_head_after_vs_warm`` is the trained policy's score.
3. **Deadlocks**: ``--chaos-games`` tic-tac-toe games whatever ``--game`` (no model) whose seats draw delays, faulty actions,
   crashes and hangs (cut by the call deadline) at any turn, in batches of which some are cancelled
   at a drawn moment; a game or batch still running past a generous bound counts as a deadlock.

The last line::

    score_vs_random_warm=<a> score_vs_random_after=<b> head_to_head_after_vs_warm=<c> illegal_move_rate=<d> deadlocks=<e>

``--quick`` runs the pipeline on the tiny random model in a couple of minutes (an end-to-end check,
no learning claim). The machine and its load are printed first, the wall and CPU time last: wall
times depend on the load. Measured figures are in ``envs/nim/NOTES.md`` (why Nim: the gain over a
random player that RL can show per game played) and ``envs/tictactoe/NOTES.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

import anyio

DEFAULT = (
    "warm_start.steps=4",
    "warm_start.episodes=64",
    "max_steps=6",
    "eval_every=6",
    "batch_size=2",
    "group_size=8",
    "learning_rate=1e-3",
    "train_opponents=self,random,random",
    "eval_opponents=random",
    "eval_games=64",
    "eval_temperature=1.0",
)
"""The bench's job on Nim (``key=value`` on the command line override these): a warm start on
scripted games of random legal moves (the move format, not the play), then 6 RL steps of 16
games at ``learning_rate=1e-3``, self-play mixed with a random opponent (the second seat drawn
per game from the policy itself, one time in three, and a random player); held out: 64 games against a random player, **sampled at
the training temperature** (the distribution RL trains; the greedy argmax of a near-uniform warm
start is one arbitrary fixed pattern whose score is a draw of luck). Why Nim: the gain over a
random player that RL can show per game played (``envs/nim/NOTES.md``)."""
TICTACTOE = (*(k for k in DEFAULT if not k.startswith("learning_rate=")), "learning_rate=7e-4")
"""The job of ``--game tictactoe``: Nim's keys at ``learning_rate=7e-4`` (``envs/tictactoe/NOTES.md``,
run C; the warm start's random legal moves are that game's ``scripted_noise=1.0`` default)."""
GAMES = {
    "nim": ("envs.nim.train", "NimTrainConfig", DEFAULT),
    "tictactoe": ("envs.tictactoe.train", "TicTacToeTrainConfig", TICTACTOE),
}
"""``--game`` choices: the train module, its config class, the bench's keys."""
QUICK = (
    "model_name=turngym/tiny-random-llama",
    "max_steps=2",
    "eval_every=2",
    "batch_size=2",
    "group_size=2",
    "eval_games=8",
    "warm_start.episodes=8",
    "warm_start.steps=2",
    "warm_start.batch_size=4",
)
"""Overrides of ``--quick`` (an end-to-end check, no learning claim)."""
WARM_NAME = "bench_warm_start"


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{cpu}, {os.cpu_count()} cores, load {load:.1f}"


def _peak_gib() -> float:
    """This process's peak resident memory so far (GiB; ``nan`` where the OS does not say)."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return float("nan")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _release() -> None:
    """Hand the last part's garbage back before the next one (the training run's models and
    sampler engines are unreachable once :func:`train` returns, but cycles keep them until a
    collection, and glibc keeps freed arenas unless asked)."""
    import contextlib
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _fmt(x: float) -> str:
    return f"{x:.3f}"


# --------------------------------------------------------------------------- part 1: train
def _config_class(game: str) -> Any:
    import importlib

    module, name, _keys = GAMES[game]
    return getattr(importlib.import_module(module), name)


def train(game: str, args: list[str], out: Path) -> tuple[Any, str, Any]:
    """Run the training job; return its summary, the warm start's sampler path and the config."""
    import training
    from training._rollouts import rollout_config
    from training._warm_start import scripted_warm_start

    config = training.parse_config(_config_class(game), [f"log_path={out / 'run'}", "progress=False", *args])
    if config.warm_start.episodes <= 0:
        raise SystemExit("error: the bench compares with the warm start: warm_start.episodes must be > 0")
    if not config.eval_every:
        raise SystemExit("error: the bench reads the held-out evaluations: eval_every must be > 0")
    builder = config.dataset_builder()
    scripted = scripted_warm_start(builder, config, rollout_config(config.max_tokens))
    saved: dict[str, str] = {}

    async def warm_start(training_client: Any, cfg: Any) -> dict[str, float]:
        metrics = await scripted(training_client, cfg)
        future = await training_client.save_weights_for_sampler_async(WARM_NAME)
        saved["path"] = (await future.result_async()).path
        return metrics

    summary = training.train(config, dataset_builder=builder, warm_start=warm_start)
    return summary, saved["path"], config


# --------------------------------------------------------------------------- part 2: head to head
async def head_to_head(run: Path, warm_path: str, games: int, train_config: Any) -> float:
    """The trained policy's score against the warm start (half the games in seat 0), both sampled
    at the training temperature."""
    from tinker_cookbook.completers import TinkerTokenCompleter

    from backend import make_service_client
    from envs.seats import Seat, SeatedGroupBuilder
    from renderers_ext import load_renderer

    temperature, max_tokens = float(train_config.temperature), int(train_config.max_tokens)
    win = str(train_config.win_metric)
    draw = win.rsplit("/", 1)[0] + "/draw"
    records = [
        json.loads(line) for line in (run / "checkpoints.jsonl").read_text().splitlines() if line.strip()
    ]
    final = next(r["sampler_path"] for r in reversed(records) if r.get("sampler_path"))
    service: Any = make_service_client("local", root=run / "checkpoints", seed=0)
    after = TinkerTokenCompleter(
        await service.create_sampling_client_async(final), max_tokens=max_tokens, temperature=temperature
    )
    warm = TinkerTokenCompleter(
        await service.create_sampling_client_async(warm_path), max_tokens=max_tokens, temperature=temperature
    )
    renderer = load_renderer(train_config.renderer_name, train_config.model_name)
    make_game = train_config.dataset_builder().make_game()  # the run's game under its rules
    score = 0.0
    n = 0
    for seat in (0, 1):
        pair = (
            (Seat.policy(), Seat.pinned("warm", warm))
            if seat == 0
            else (Seat.pinned("warm", warm), Seat.policy())
        )
        builder = SeatedGroupBuilder(
            make_game=make_game,
            renderer=renderer,
            seats=pair,
            games=games // 2,
            seed=seat,
        )
        for record in await builder.play(after):
            mine = record.seats[seat]
            if not record.ok:
                continue
            score += mine.metrics.get(win, 0.0) + 0.5 * mine.metrics.get(draw, 0.0)
            n += 1
    return score / n if n else float("nan")


# --------------------------------------------------------------------------- part 3: deadlocks
def _chaos_players(seed: int) -> Any:
    """A token-level random player that draws, per call, a delay, a faulty action, a crash or a hang."""
    from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs

    from envs.tictactoe.env import free_cells, parse_board

    class Chaos(TokenCompleter):
        def __init__(self, renderer: Any, rng: random.Random) -> None:
            self.renderer = renderer
            self.rng = rng

        async def __call__(self, model_input: Any, stop: Any, *, max_tokens: int | None = None) -> Any:
            r = self.rng.random()
            await anyio.sleep(self.rng.choice([0.0, 0.0, 0.0005, 0.002]))
            if r < 0.03:
                raise RuntimeError("chaos: crash")
            if r < 0.05:
                await anyio.sleep_forever()
            tok = self.renderer.tokenizer
            board = parse_board(str(tok.decode(model_input.to_ints())))
            assert board is not None
            text = "none" if r < 0.08 else str(self.rng.choice(free_cells(board)))
            tokens = list(tok.encode(text, add_special_tokens=False))
            if r < 0.10:
                return TokensWithLogprobs(
                    tokens=tokens, maybe_logprobs=[0.0] * len(tokens), stop_reason="length"
                )
            return TokensWithLogprobs(tokens=[*tokens, stop[0]], maybe_logprobs=[0.0] * (len(tokens) + 1))

    return Chaos


async def chaos(games: int, seed: int, model_name: str) -> tuple[int, int, int]:
    """(deadlocks, games finished, games cancelled) over ``games`` chaos games."""
    from envs.seats import LoopConfig, Seat, SeatedGroupBuilder
    from envs.tictactoe.env import TicTacToeGame
    from renderers_ext import load_renderer

    renderer = load_renderer(None, model_name)
    chaos_cls = _chaos_players(seed)
    rng = random.Random(seed)
    deadlocks = finished = cancelled = 0
    batch = 50
    bound = 30.0
    for b in range(0, games, batch):
        n = min(batch, games - b)
        o = Seat.pinned("chaos", lambda r: chaos_cls(renderer, random.Random(r.random())))
        builder = SeatedGroupBuilder(
            make_game=lambda r: TicTacToeGame(),
            renderer=renderer,
            seats=(Seat.policy(), o),
            games=n,
            seed=seed * 1_000_003 + b,
            loop=LoopConfig(call_timeout_s=0.05),
        )
        policy = chaos_cls(renderer, random.Random(rng.random()))
        cancel_at = rng.uniform(0.0, 0.05) if rng.random() < 0.2 else None
        records: list[Any] = []
        try:
            with anyio.fail_after(bound):
                if cancel_at is None:
                    records = await builder.play(policy)
                else:
                    with anyio.move_on_after(cancel_at):
                        records = await builder.play(policy)
        except TimeoutError:
            deadlocks += n
            continue
        if cancel_at is not None and not records:
            cancelled += n
            continue
        finished += len(records)
        deadlocks += n - len(records)
        for outcome in builder.groups(records):
            if outcome.requested != outcome.completed + outcome.failed:
                deadlocks += 1  # a game lost to the accounting counts as stuck
    return deadlocks, finished, cancelled


# --------------------------------------------------------------------------- main
def _eval_score(row: dict[str, Any], name: str) -> float:
    return float(row.get(f"eval/score_vs_{name}", float("nan")))


def main(argv: list[str] | None = None) -> int:
    """Run the three parts; print the summary line last."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = argparse.ArgumentParser(prog="bench/self_play.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="the tiny model, a few minutes (no learning claim)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="run folder (default: a fresh one under runs/bench)"
    )
    parser.add_argument("--h2h-games", type=int, default=32)
    parser.add_argument("--chaos-games", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--game", choices=sorted(GAMES), default="nim", help="the game trained (default nim)")
    parser.add_argument("keys", nargs="*", help="key=value overrides of envs.<game>.train")
    ns = parser.parse_args(argv)
    out = ns.out or Path("runs/bench") / f"self_play_{time.strftime('%Y%m%d_%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    keys = [*GAMES[ns.game][2], *(QUICK if ns.quick else ()), f"seed={ns.seed}", *ns.keys]
    h2h = 8 if ns.quick and ns.h2h_games == parser.get_default("h2h_games") else ns.h2h_games
    print(f"[bench] {_machine()}; {ns.game}; runs in {out}", flush=True)
    t0 = time.monotonic()
    cpu0 = time.process_time()
    summary, warm_path, config = train(ns.game, keys, out)
    rows = [
        json.loads(line) for line in (out / "run" / "eval.jsonl").read_text().splitlines() if line.strip()
    ]
    # step 0 has two rows: the untrained policy, then the warm start (``stage``)
    warm_row = next(r for r in rows if r.get("stage") == "warm_start")
    final_row = rows[-1]
    a, b = _eval_score(warm_row, "random"), _eval_score(final_row, "random")
    d = float(final_row.get("eval/illegal_rate", float("nan")))
    t1 = time.monotonic()
    print(
        f"[bench] train: {(t1 - t0) / 60:.1f} min; warm start vs random {_fmt(a)}, after RL {_fmt(b)}; "
        f"peak memory {_peak_gib():.1f} GiB",
        flush=True,
    )
    print(summary.describe(), flush=True)
    del summary
    _release()
    c = anyio.run(head_to_head, out / "run", warm_path, h2h, config)
    t2 = time.monotonic()
    print(
        f"[bench] head to head ({h2h} games): {_fmt(c)} in {(t2 - t1) / 60:.1f} min; "
        f"peak memory {_peak_gib():.1f} GiB",
        flush=True,
    )
    _release()
    e, finished, cancelled = anyio.run(chaos, ns.chaos_games, ns.seed, str(config.model_name))
    print(
        f"[bench] chaos: {ns.chaos_games} games ({finished} finished, {cancelled} cancelled with their batch), "
        f"{e} deadlocked, in {(time.monotonic() - t2):.0f} s; load now {_machine().rsplit('load ', 1)[1]}",
        flush=True,
    )
    print(
        f"[bench] total {(time.monotonic() - t0) / 60:.1f} min wall, "
        f"{(time.process_time() - cpu0) / 60:.1f} min CPU (all threads of this process)",
        flush=True,
    )
    result = {
        "score_vs_random_warm": a,
        "score_vs_random_after": b,
        "head_to_head_after_vs_warm": c,
        "illegal_move_rate": d,
        "deadlocks": e,
        "game": ns.game,
        "minutes": (time.monotonic() - t0) / 60,
        "cpu_minutes": (time.process_time() - cpu0) / 60,
        "peak_memory_gib": _peak_gib(),
        "machine": _machine(),
        "keys": keys,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"score_vs_random_warm={_fmt(a)} score_vs_random_after={_fmt(b)} head_to_head_after_vs_warm={_fmt(c)} "
        f"illegal_move_rate={_fmt(d)} deadlocks={e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
