"""Judge-based environments: a rubric LLM judge and pairwise preference, with a judge that cannot stall training.

- The judge wrapper (usable on its own): :class:`JudgeConfig` (picklable; ``config.py``),
  :class:`Judge` (concurrency cap, deadline, retries with backoff, fallback, cache; ``judge.py``),
  :func:`get_judge` (one live judge per config), :class:`JudgeCache` (memory + SQLite;
  ``cache.py``), :func:`register_completer` / :func:`make_completer` (specs ``local:``,
  ``tinker:``, ``openai:`` and your own; ``registry.py``).
- Rubrics and tasks as data: :class:`Rubric`, :class:`Criterion`, :class:`GradingMode`,
  :func:`parse_score`, :func:`load_rubrics` (``rubric.py``); :class:`JudgeTask`, :func:`load_tasks`
  (``tasks.py``, whose ``check_files`` the train command runs first); grading a transcript:
  :func:`grade`, :class:`RubricGrade`.
- Pairwise preference: :class:`PairingScheme`, :func:`tournament_pairs`, :func:`run_tournament`,
  :func:`win_rates`, :func:`parse_preference`.
- Envs: :class:`RubricEnv`, :class:`PairwiseEnv` (``ChatEnv`` s, single- or multi-turn with a
  a simulated user), their picklable group builders and :class:`JudgeDatasetBuilder`.
- Scripted judges for tests (test doubles, not a production kind): :mod:`envs.judge.testing`;
  importing it registers the ``scripted:`` specs.

Modules, each importing only those listed before it: ``config``, ``cache``, ``registry``,
``judge``, ``text``, ``rubric``, ``tasks``, ``pairwise``, ``env``, ``builders`` (``testing`` and ``train`` on
top); no cycles (checked by the import-linter contracts in ``pyproject.toml``). ``config``,
``text``, ``rubric`` and ``tasks`` import no tinker at module level, so the train command checks
its files before anything heavy loads.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
