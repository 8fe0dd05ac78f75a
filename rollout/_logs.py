"""Trajectory logs: one JSONL record per trajectory, and an HTML transcript of a few groups.

Records are built from the engine's outcomes; text is decoded with the tokenizer you pass
(token ids are written instead when it is None). Each turn shows only what the observation
*added* since the previous observation + action (the whole observation when it did not extend
it, flagged ``"rerendered": true``, and ``"compacted": true`` when that was a periodic
compaction: earlier thinking stripped), then the sampled action.
"""

from __future__ import annotations

import html
import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tinker_cookbook.rl.types import Trajectory
from tinker_cookbook.tokenizer_utils import Tokenizer

from rollout._compaction import METRIC_COMPACTION
from rollout._extension import flat_tokens
from rollout._results import BatchResult, GroupOutcome


def _decode(tokens: Sequence[Any], tokenizer: Tokenizer | None) -> str:
    ints = [t for t in tokens if isinstance(t, int)]
    images = len(tokens) - len(ints)
    text = str(tokenizer.decode(ints)) if tokenizer is not None else " ".join(map(str, ints))
    return text + (f" [+{images} non-text chunk(s)]" if images else "")


def decoded_turns(traj: Trajectory, tokenizer: Tokenizer | None) -> list[dict[str, Any]]:
    """Per transition: added observation text, action text, reward, metrics, logs, and whether
    the observation was re-rendered (``rerendered``) by a compaction (``compacted``)."""
    out: list[dict[str, Any]] = []
    prev: list[Any] = []
    compacted = False  # the previous transition's next observation was a compaction
    for tr in traj.transitions:
        ob = flat_tokens(tr.ob)
        n = len(prev)
        extends = n > 0 and len(ob) >= n and ob[:n] == prev
        added = ob[n:] if extends else ob
        out.append(
            {
                "observation": _decode(added, tokenizer),
                "rerendered": bool(n) and not extends,
                "compacted": compacted and bool(n) and not extends,
                "action": _decode(tr.ac.tokens, tokenizer),
                "action_tokens": len(tr.ac.tokens),
                "stop": tr.ac.stop_reason,
                "reward": tr.reward,
                "metrics": dict(tr.metrics),
                "logs": dict(tr.logs),
            }
        )
        prev = [*ob, *tr.ac.tokens]
        compacted = bool(tr.metrics.get(METRIC_COMPACTION))
    return out


def trajectory_records(
    outcomes: Iterable[GroupOutcome], tokenizer: Tokenizer | None = None, *, step: int | None = None
) -> list[dict[str, Any]]:
    """JSON-ready records: one per trajectory of kept groups, one per failed group."""
    records: list[dict[str, Any]] = []
    for o in outcomes:
        base = {"step": step, "group": o.index, "tags": list(o.tags)}
        errors = [{"type": e.error_type, "message": e.error_message} for e in o.errors]
        if o.group is None:
            failure = (
                {"type": o.failure.error_type, "message": o.failure.error_message} if o.failure else None
            )
            records.append(
                {**base, "failed": True, "failure": failure, "errors": errors, "requested": o.requested}
            )
            continue
        totals = o.group.get_total_rewards()
        for i, traj in enumerate(o.group.trajectories_G):
            records.append(
                {
                    **base,
                    "failed": False,
                    "traj": i,
                    "reward_total": totals[i],
                    "final_reward": o.group.final_rewards_G[i],
                    "step_rewards": [tr.reward for tr in traj.transitions],
                    "stop_reason": traj.stop_reason,
                    "metrics": dict(o.group.metrics_G[i]),
                    "breaks": [str(b) for b in o.stats[i].breaks] if i < len(o.stats) else [],
                    "turns": decoded_turns(traj, tokenizer),
                    "group_errors": errors,
                }
            )
    return records


def _outcomes(result: BatchResult | Iterable[GroupOutcome]) -> list[GroupOutcome]:
    return list(result.outcomes) if isinstance(result, BatchResult) else list(result)


def write_jsonl(
    result: BatchResult | Iterable[GroupOutcome],
    path: str | Path,
    tokenizer: Tokenizer | None = None,
    *,
    step: int | None = None,
) -> int:
    """Append the records of :func:`trajectory_records` to ``path``; return how many."""
    records = trajectory_records(_outcomes(result), tokenizer, step=step)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
    return len(records)


_CSS = """body{font-family:sans-serif;margin:1em}pre{white-space:pre-wrap;margin:0}
table{border-collapse:collapse;margin-bottom:1.5em;width:100%}td,th{border:1px solid #ccc;padding:4px;vertical-align:top}
.ob{background:#f4f4f4}.ac{background:#e8f4ff}.brk{color:#b00}"""


def render_html(
    result: BatchResult | Iterable[GroupOutcome],
    tokenizer: Tokenizer | None = None,
    *,
    n_groups: int = 2,
    seed: int = 0,
    title: str = "Rollout transcripts",
) -> str:
    """An HTML page with the transcripts of ``n_groups`` kept groups sampled with ``seed``.

    Every piece of model or env text is HTML-escaped.
    """
    kept = [o for o in _outcomes(result) if o.group is not None]
    chosen = sorted(random.Random(seed).sample(kept, min(n_groups, len(kept))), key=lambda o: o.index)
    esc = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"]
    parts.append(f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>")
    for o in chosen:
        assert o.group is not None
        parts.append(f"<h2>Group {o.index} {esc(' '.join(o.tags))}</h2>")
        totals = o.group.get_total_rewards()
        for i, traj in enumerate(o.group.trajectories_G):
            parts.append(
                f"<h3>Trajectory {i}: reward {totals[i]:.3f}, stop {esc(str(traj.stop_reason))}</h3><table>"
                "<tr><th>#</th><th>observation (added)</th><th>action</th><th>reward</th></tr>"
            )
            for t, turn in enumerate(decoded_turns(traj, tokenizer)):
                brk = turn["logs"].get("ext_break")
                note = f"<div class='brk'><pre>{esc(str(brk))}</pre></div>" if brk else ""
                rer = (
                    " <b>(compacted: earlier thinking stripped)</b>"
                    if turn["compacted"]
                    else " <b>(re-rendered)</b>"
                    if turn["rerendered"]
                    else ""
                )
                parts.append(
                    f"<tr><td>{t}</td><td class='ob'>{rer}<pre>{esc(turn['observation'])}</pre></td>"
                    f"<td class='ac'><pre>{esc(turn['action'])}</pre>{note}</td><td>{turn['reward']:.3f}</td></tr>"
                )
            parts.append("</table>")
        if o.errors:
            items = "".join(f"<li>{esc(e.error_type)}: {esc(e.error_message)}</li>" for e in o.errors)
            parts.append(f"<p>Errors:</p><ul>{items}</ul>")
    parts.append("</body></html>")
    return "".join(parts)


def write_html(
    result: BatchResult | Iterable[GroupOutcome],
    path: str | Path,
    tokenizer: Tokenizer | None = None,
    *,
    n_groups: int = 2,
    seed: int = 0,
) -> Path:
    """Write :func:`render_html` to ``path``; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(result, tokenizer, n_groups=n_groups, seed=seed), encoding="utf-8")
    return path
