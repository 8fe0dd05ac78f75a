"""Shipped judge-env data: ``prompts.jsonl`` (tasks) and ``rubrics.json`` (a package so the files ship in wheels)."""
