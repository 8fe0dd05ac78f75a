"""Pins the public API: each package's curated ``__all__`` (trio style).

A change here is an API change: update the snapshot on purpose, and say so in the changelog/commit.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

PUBLIC_API: dict[str, list[str]] = {
    "backend": [
        "BackendName",
        "CHECKPOINT_SCHEME",
        "CheckpointExistsError",
        "CheckpointNotFoundError",
        "ClientFuture",
        "CustomLossError",
        "InvalidDatumError",
        "LocalBackendError",
        "LocalFuture",
        "LocalSamplingClient",
        "LocalServiceClient",
        "LocalTrainingClient",
        "PromptTooLongError",
        "SMOLLM2",
        "SamplerStats",
        "TINY",
        "UnknownLossError",
        "UnknownModelError",
        "UnsupportedCallError",
        "load_model",
        "load_tokenizer",
        "make_service_client",
        "register_tokenizers",
        "resolve_backend",
        "use_local_backend",
    ],
    "completers": [
        "MessageCompleter",
        "ScriptExhaustedError",
        "ScriptedGroupCompleter",
        "ScriptedMessageCompleter",
        "ScriptedReply",
        "ScriptedTokenCompleter",
        "StopCondition",
        "TinkerMessageCompleter",
        "TinkerTokenCompleter",
        "TokenCompleter",
        "TokensWithLogprobs",
    ],
    "envs": [
        "ChatEnv",
        "EnvLimits",
        "Fault",
        "FaultPolicy",
        "GroupDataset",
        "METRIC_FAULT_PREFIX",
        "METRIC_RERENDER",
        "PlayerPolicy",
        "Reply",
        "SeededDataset",
        "decode_action",
    ],
    "envs.checker": [
        "ActionKind",
        "CLEAN_KINDS",
        "CheckConfig",
        "CheckName",
        "CheckResult",
        "ConformanceReport",
        "ConformanceRun",
        "DrawnAction",
        "FuzzStats",
        "Outcome",
        "WELL_FORMED_TEXTS",
        "check_conformance",
        "declared_budget",
        "describe_action",
        "drawn_actions",
        "env_actions",
        "env_limits",
        "example_json",
        "example_tool_call",
        "fault_policies",
        "fuzz_env",
        "invalid_utf8_fragments",
        "json_values",
        "make_renderer",
        "malformed_tool_call_action",
        "pickle_problem",
        "step_result_problem",
        "stop_tokens",
        "tool_call_messages",
        "tool_specs",
        "well_formed_action",
    ],
    "envs.gym": [
        "ENTRIES",
        "ENV_IDS",
        "EnvEntry",
        "EnvSource",
        "EpisodeEnd",
        "LazyDatasetFactory",
        "TRUNCATION_REASONS",
        "TextEnv",
        "TokenEnv",
        "TokenObs",
        "UnicodeText",
        "env_source",
        "is_truncation",
        "register_envs",
        "resolve_builder",
        "stop_reason_of",
    ],
    "envs.code": [
        "CodeDatasetBuilder",
        "CodeEnv",
        "CodeEnvConfig",
        "CodeGroupBuilder",
        "CodeRLDataset",
        "ESCAPE_ATTEMPTS",
        "EscapeAttempt",
        "EscapeOutcome",
        "Isolation",
        "METRIC_FAILED_CALLS",
        "METRIC_TOOL_CALLS",
        "PROGRAMS",
        "PYTHON_TOOL",
        "RunResult",
        "RunStatus",
        "Sandbox",
        "SandboxConfig",
        "SandboxLimits",
        "SandboxStats",
        "SandboxUnavailable",
        "ToolFormat",
        "code_action_messages",
        "format_run",
        "leftover_processes",
        "run_escape_attempts",
        "sandbox_for",
    ],
    "envs.judge": [
        "Criterion",
        "DATA_DIR",
        "DEFAULT_FAULTS",
        "GradingMode",
        "Judge",
        "JudgeCache",
        "JudgeConfig",
        "JudgeDataset",
        "JudgeDatasetBuilder",
        "JudgeEnvConfig",
        "JudgeEnvKind",
        "JudgeResult",
        "JudgeStats",
        "JudgeStatus",
        "JudgeTask",
        "JudgedChatEnv",
        "METRIC_PREFIX",
        "OnTruncation",
        "PairingScheme",
        "PairwiseEnv",
        "PairwiseGroupBuilder",
        "PrefilledSamplingCompleter",
        "Rubric",
        "RubricEnv",
        "RubricGrade",
        "RubricGroupBuilder",
        "SMALL_LOCAL_JUDGE",
        "SimulatedUser",
        "TournamentMatch",
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
    ],
    "envs.judge.testing": [
        "ConstantJudge",
        "FlakyJudge",
        "GarbageJudge",
        "HangingJudge",
        "LongerJudge",
        "PreferenceJudge",
        "RaisingJudge",
        "SCRIPTED_NAMES",
        "ScriptedJudge",
        "SleepingJudge",
        "make_scripted",
        "register_scripted_judges",
    ],
    "envs.math": [
        "CALCULATOR_TOOL",
        "CalculatorError",
        "CalculatorLimits",
        "CalculatorMode",
        "DatasetFormatError",
        "EnvPreset",
        "GradeResult",
        "GradeStatus",
        "Grader",
        "GraderConfig",
        "GraderStats",
        "METRIC_ATTEMPTS",
        "METRIC_CORRECT",
        "METRIC_FORMAT",
        "METRIC_THINKING",
        "MathDatasetBuilder",
        "MathEnv",
        "MathEnvConfig",
        "MathGroupBuilder",
        "MathProblem",
        "MathRLDataset",
        "ProblemsDatasetBuilder",
        "Split",
        "THINKING_INSTRUCTION",
        "THINKING_RENDERER",
        "ThinkingSolver",
        "check_source",
        "default_grader",
        "evaluate",
        "generate_problems",
        "gsm8k_reference_answer",
        "has_complete_thinking",
        "last_boxed",
        "load_gsm8k",
        "load_jsonl",
        "load_math",
        "load_split",
        "normalize_answer",
        "reasoning_for",
        "supports_tools",
    ],
    "envs.testing": [
        "ActionKind",
        "CheckName",
        "ConformanceReport",
        "Outcome",
        "ScriptedAnswerer",
        "WELL_FORMED_TEXTS",
        "assert_env_conforms",
        "assistant_messages",
        "conversations",
        "cookbook_twenty_questions",
        "env_actions",
        "env_limits",
        "fault_policies",
        "json_values",
        "messages",
        "render_action",
        "scripted_policy",
        "texts",
        "thinking_contents",
        "token_actions",
        "tool_call",
        "tool_call_conversations",
        "tool_call_messages",
        "tool_calls",
        "well_formed_action",
    ],
    "envs.twenty_questions": [
        "ALL_WORDS",
        "ANSWERER_PROMPT",
        "ANSWER_TEXT",
        "Answer",
        "AnswerResult",
        "Answerer",
        "AnswererKind",
        "Attribute",
        "CANDIDATES_SENTENCE",
        "EpisodeStats",
        "FORMAT_REMINDER",
        "FixedPlayer",
        "GameRecord",
        "GameStep",
        "HalvingPlayer",
        "KBAnswerer",
        "KBOptimalPlayer",
        "KnowledgeBase",
        "LLMAnswerer",
        "Metric",
        "PLAYER_PROMPT",
        "ParsedTurn",
        "QUESTIONS",
        "TEST_WORDS",
        "TRAIN_WORDS",
        "TurnKind",
        "TwentyQuestionsConfig",
        "TwentyQuestionsDataset",
        "TwentyQuestionsDatasetBuilder",
        "TwentyQuestionsEnv",
        "TwentyQuestionsGame",
        "TwentyQuestionsGroupBuilder",
        "Understanding",
        "WRONG_GUESS",
        "answerer_renderer_name",
        "classify_turn",
        "default_kb",
        "is_correct_guess",
        "parse_guess",
        "parse_yes_no",
        "pick_candidates",
        "play_game",
        "play_with_player",
        "player_prompt",
        "scripted_game",
        "set_question",
        "split_words",
        "text_to_action",
        "understand",
    ],
    "renderers_ext": [
        "CompactingRenderer",
        "ExtensionReport",
        "PROBE_RENDERERS",
        "QWEN3_PRESERVE_THINKING",
        "TokenizerNotFoundError",
        "UnknownRendererError",
        "check_extension",
        "extension_expected",
        "first_divergence",
        "is_valid_utf8",
        "load_renderer",
        "prompt_tokens",
        "recommended_renderer_name",
        "register_renderers",
        "render_action",
        "render_continuation",
        "stop_overlap",
        "stop_token_sequences",
        "strip_thinking",
        "token_bytes",
        "tool_call",
    ],
    "rollout": [
        "AdvantageConfig",
        "Assembled",
        "BatchAborted",
        "BatchResult",
        "CleanupTimeout",
        "CompactionUnsupported",
        "EngineConfig",
        "ExtensionBreak",
        "ExtensionCheck",
        "ExtensionTracker",
        "Gate",
        "GroupBelowFloor",
        "GroupOutcome",
        "InvalidCompletion",
        "InvalidGroup",
        "LOG_COMPACTION",
        "LOG_EXT_BREAK",
        "METRIC_COMPACTION",
        "METRIC_COMPACTION_UNSUPPORTED",
        "METRIC_EXT_BREAK",
        "RewardTimeout",
        "RolloutEngine",
        "RolloutFailure",
        "RolloutLimits",
        "SampleCall",
        "StepTimeout",
        "Strategy",
        "StrategyKind",
        "SupportsCompaction",
        "TrajectoryStats",
        "apply_compaction",
        "assemble",
        "current_sample_call",
        "decoded_turns",
        "effective_limits",
        "flat_tokens",
        "group_advantages",
        "informative_groups",
        "is_constant_group",
        "render_html",
        "rollout_batch",
        "run_episode",
        "run_group",
        "summarize",
        "trajectory_datums",
        "trajectory_records",
        "trajectory_returns",
        "write_html",
        "write_jsonl",
    ],
    "training": [
        "BackendName",
        "ComputeDtype",
        "Config",
        "ConfigError",
        "LRSchedule",
        "LossFnName",
        "METRIC_NO_DATUM",
        "RunFolderError",
        "ScriptedEpisode",
        "SupportsScriptedEpisodes",
        "TrainSummary",
        "WarmStart",
        "WarmStartConfig",
        "group_metrics",
        "parse_config",
        "plot_reward_curve",
        "run_cli",
        "scripted_datums",
        "sft_datum",
        "supervised_warm_start",
        "train",
        "train_async",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC_API))
def test_all_is_pinned(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == PUBLIC_API[package]


@pytest.mark.parametrize("package", sorted(PUBLIC_API))
def test_every_export_resolves_and_is_documented(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        obj = getattr(module, name)  # raises if an export is missing
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (obj.__doc__ or "").strip(), f"{package}.{name} has no docstring"


SAME_MEANING_AS_THE_COOKBOOK = {
    "training.Config": "a trainer's config, named like each cookbook trainer's (rl.train.Config, supervised.train.Config)",
}
"""Names we share with the cookbook on purpose, with the reason (each is checked to still clash)."""


def _cookbook_library_names() -> dict[str, list[str]]:
    """Top-level public classes and functions of the cookbook's library modules, by name.

    Read from the source (no imports: fast, and no optional dependency needed). Private modules,
    tests and ``recipes`` are left out: recipes are example programs (their ``MathEnv`` or
    ``TwentyQuestionsEnv`` is the same kind of thing as ours), not the library's namespace.
    """
    import tinker_cookbook

    root = Path(tinker_cookbook.__file__).parent
    names: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] == "recipes" or any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        if any(p.startswith("test") or p.endswith("_test") for p in parts):
            continue
        module = ".".join(("tinker_cookbook", *parts)).removesuffix(".__init__")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(
                node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            ) and not node.name.startswith("_"):
                names.setdefault(node.name, []).append(module)
    return names


def test_no_public_name_means_something_else_in_the_cookbook() -> None:
    """A name we export that a cookbook library module also defines is the cookbook's own object (a
    re-export), never a different thing under the same name (#17: e.g. the old
    ``rollout.RolloutConfig``, ``rollout.run_rollout(env, policy)``, ``envs.judge.Comparison``)."""
    theirs = _cookbook_library_names()
    clashes: dict[str, list[str]] = {}
    for package, names in PUBLIC_API.items():
        module = importlib.import_module(package)
        for name in names:
            obj = getattr(module, name)
            if name in theirs and not str(getattr(obj, "__module__", "")).startswith("tinker_cookbook"):
                clashes[f"{package}.{name}"] = theirs[name]
    unexplained = {k: v for k, v in clashes.items() if k not in SAME_MEANING_AS_THE_COOKBOOK}
    assert not unexplained, f"public names that mean something else in the cookbook: {unexplained}"
    stale = set(SAME_MEANING_AS_THE_COOKBOOK) - set(clashes)
    assert not stale, f"no longer shared with the cookbook, drop from the allow-list: {stale}"


def test_the_cookbook_scan_sees_its_library() -> None:
    """The scan above is not vacuous: it finds names we know the cookbook defines."""
    theirs = _cookbook_library_names()
    assert "tinker_cookbook.renderers" in theirs["get_renderer"]
    assert "tinker_cookbook.preference.types" in theirs["Comparison"]
    assert "TwentyQuestionsEnv" not in theirs  # recipes are left out on purpose
