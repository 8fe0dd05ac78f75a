"""Prompt distillation (the tinker docs' recipe) offline: ``python -m envs.distill`` (see :mod:`envs.distill.pipeline`)."""
