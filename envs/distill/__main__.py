"""``python -m envs.distill``: :func:`envs.distill.pipeline.main`."""

from envs.distill.pipeline import main

raise SystemExit(main())
