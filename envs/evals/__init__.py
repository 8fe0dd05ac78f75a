"""Offline evaluations in the tinker docs' formats: Inspect AI tasks on local files, graded by
rules or by a model the current tinker backend serves (see :mod:`envs.evals.inspect_tasks`)."""
