"""``python -m envs.list``: the envs installed here, one line each (id, package, description).

The ids are TurnGym's own and those any installed package declares in the ``turngym.envs``
entry-point group (see :mod:`envs.gym._registry`); each works in ``python -m envs.check``,
``python -m envs.eval``, ``python -m envs.play`` and ``gymnasium.make``. ``--json`` prints one
JSON object per line instead. Describing an id that has no description imports its source module.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the installed env ids; returns the exit status."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m envs.list", description="The envs installed here, one line each.")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    from envs.gym._registry import describe, installed_entries

    entries = installed_entries()
    width = max((len(e.id) for e in entries), default=0)
    for entry in entries:
        about = describe(entry)
        if args.json:
            print(json.dumps({"id": entry.id, "package": entry.package, "source": entry.source, "description": about}))
        else:
            print(f"{entry.id:<{width}}  [{entry.package}]  {about}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
