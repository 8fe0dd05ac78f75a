"""Judge-based environments: a rubric LLM judge and pairwise preference, with a judge that cannot stall training.

- The judge wrapper (usable on its own): :class:`JudgeConfig` (picklable), :class:`Judge` (concurrency
  cap, deadline, retries with backoff, fallback, cache), :func:`get_judge` (one live judge per config),
  :class:`JudgeCache` (memory + SQLite), :func:`register_completer` / :func:`make_completer` (specs
  ``local:``, ``tinker:``, ``openai:``, ``scripted:`` and your own).
- Rubrics as data: :class:`Rubric`, :class:`Criterion`, :class:`GradingMode`, :func:`grade`,
  :func:`parse_score`, :func:`load_rubrics`.
- Pairwise preference: :class:`TournamentPattern`, :func:`tournament_pairs`, :func:`run_tournament`,
  :func:`win_rates`, :func:`parse_preference`.
- Envs: :class:`RubricEnv`, :class:`PairwiseEnv` (``ChatEnv`` s, single- or multi-turn with a
  :class:`SimulatedUser`), their picklable group builders and :class:`JudgeDatasetBuilder`.
- Scripted judges for tests: :mod:`envs.judge.scripted`.
"""

from typing import TYPE_CHECKING

from envs._lazy import attach

if TYPE_CHECKING:  # the public names; imported lazily at run time (envs._lazy)
    from envs.judge.env import (
        DATA_DIR,
        DEFAULT_FAULTS,
        JudgeDataset,
        JudgeDatasetBuilder,
        JudgedChatEnv,
        JudgeEnvKind,
        JudgeTask,
        OnTruncation,
        PairwiseEnv,
        PairwiseGroupBuilder,
        RubricEnv,
        RubricGroupBuilder,
        SimulatedUser,
        UserConfig,
        load_tasks,
        rubric_criteria_text,
    )
    from envs.judge.judge import (
        METRIC_PREFIX,
        Judge,
        JudgeCache,
        JudgeConfig,
        JudgeResult,
        JudgeStats,
        JudgeStatus,
        PrefilledSamplingCompleter,
        cache_key,
        clear_judges,
        get_judge,
        make_completer,
        register_completer,
        sum_metrics,
    )
    from envs.judge.pairwise import (
        Comparison,
        TournamentPattern,
        TournamentResult,
        comparison_prompt,
        parse_preference,
        run_tournament,
        tournament_pairs,
        win_rates,
    )
    from envs.judge.rubric import (
        Criterion,
        GradingMode,
        Rubric,
        RubricGrade,
        format_transcript,
        grade,
        load_rubrics,
        parse_score,
    )

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "DATA_DIR",
    "DEFAULT_FAULTS",
    "METRIC_PREFIX",
    "Comparison",
    "Criterion",
    "GradingMode",
    "Judge",
    "JudgeCache",
    "JudgeConfig",
    "JudgeDataset",
    "JudgeDatasetBuilder",
    "JudgeEnvKind",
    "JudgeResult",
    "JudgeStats",
    "JudgeStatus",
    "JudgeTask",
    "JudgedChatEnv",
    "OnTruncation",
    "PairwiseEnv",
    "PairwiseGroupBuilder",
    "PrefilledSamplingCompleter",
    "Rubric",
    "RubricEnv",
    "RubricGrade",
    "RubricGroupBuilder",
    "SimulatedUser",
    "TournamentPattern",
    "TournamentResult",
    "UserConfig",
    "cache_key",
    "clear_judges",
    "comparison_prompt",
    "format_transcript",
    "get_judge",
    "grade",
    "load_rubrics",
    "load_tasks",
    "make_completer",
    "parse_preference",
    "parse_score",
    "register_completer",
    "rubric_criteria_text",
    "run_tournament",
    "sum_metrics",
    "tournament_pairs",
    "win_rates",
]
