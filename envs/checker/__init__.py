"""Env conformance checker: does a token-level env behave under everything a sampler can send?

``python -m envs.check module:Builder`` (or :func:`check_conformance` from Python) runs an env
source through the :class:`CheckName` checks and returns a :class:`ConformanceReport`. It never
passes vacuously: a check that cannot run (no tokenizer, no episode past its first turn) is
:attr:`Outcome.NOT_RUN` and fails the report unless ``allow_skip`` names it. Tool envs declare
their tools (``env.tools``) and the checker draws well-formed, wrong and malformed calls to them.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
