"""HTML transcripts of a few episodes: what the model saw (new tokens only) and what it said.

One self-contained HTML file per evaluation, ``transcripts/eval_step<NNNN>.html``: for each
episode its total reward, whether it won, and per turn the newly observed text (grey), the
sampled action (blue), the step reward and the env's metrics and logs. An observation that does
not extend the previous observation + action (an extension break) is shown in full and flagged;
a periodic compaction (the engine's ``rollout/compaction`` metric on the turn before: earlier
thinking stripped from the history) is flagged as such.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tinker_cookbook.rl.types import TrajectoryGroup

from rollout import METRIC_COMPACTION
from training._metrics import trajectory_won

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:1rem auto;padding:0 1rem}
.ep{border:1px solid #ccc;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
.ep h3{margin:.2rem 0}.win{color:#087f23}.loss{color:#b00020}
pre{white-space:pre-wrap;word-break:break-word;margin:.2rem 0;padding:.3rem;border-radius:4px}
.ob{background:#f3f3f3;color:#444}.ac{background:#e8f0fe;color:#0b3d91}
.meta{font-size:.8rem;color:#666}.break{color:#b00020;font-weight:bold}.compact{color:#8a5a00;font-weight:bold}
"""


def _decode(tokenizer: Any, tokens: Sequence[int]) -> str:
    try:
        return tokenizer.decode(list(tokens))
    except Exception:  # never let a display problem stop training
        return f"<{len(tokens)} tokens>"


def episode_html(tokenizer: Any, group: TrajectoryGroup, index: int, *, win_metric: str = "win") -> str:
    """One episode of ``group`` as an HTML fragment."""
    traj = group.trajectories_G[index]
    total = group.get_total_rewards()[index]
    won = trajectory_won(traj, group.metrics_G[index], total, win_metric)
    parts = [
        f'<div class="ep"><h3 class="{"win" if won else "loss"}">'
        f"{'won' if won else 'lost'} · total reward {total:.3g} · {len(traj.transitions)} turns"
        f"{' · stop: ' + html.escape(str(traj.stop_reason)) if traj.stop_reason else ''}</h3>"
    ]
    seen: list[int] = []
    compacted = False
    for turn, t in enumerate(traj.transitions):
        ob = t.ob.to_ints()
        if ob[: len(seen)] == seen:
            new, flag = ob[len(seen) :], ""
        elif compacted:
            new, flag = ob, ' <span class="compact">[compacted: earlier thinking stripped]</span>'
        else:
            new, flag = ob, ' <span class="break">[re-rendered: not an extension]</span>'
        compacted = bool(t.metrics.get(METRIC_COMPACTION))
        parts.append(f'<div class="meta">turn {turn + 1}{flag}</div>')
        parts.append(f'<pre class="ob">{html.escape(_decode(tokenizer, new))}</pre>')
        parts.append(f'<pre class="ac">{html.escape(_decode(tokenizer, t.ac.tokens))}</pre>')
        extras = {k: v for k, v in t.metrics.items() if not k.startswith("stop/")}
        meta = f"reward {t.reward:.3g}"
        if extras:
            meta += " · " + ", ".join(f"{k}={v:.3g}" for k, v in extras.items())
        if t.logs:
            meta += " · " + ", ".join(f"{k}={v}" for k, v in t.logs.items())
        parts.append(f'<div class="meta">{html.escape(meta)}</div>')
        seen = ob + list(t.ac.tokens)
    if group.final_rewards_G[index]:
        parts.append(f'<div class="meta">group reward {group.final_rewards_G[index]:.3g}</div>')
    parts.append("</div>")
    return "\n".join(parts)


def pick_episodes(groups: Sequence[TrajectoryGroup], n: int) -> list[tuple[int, int]]:
    """``n`` (group, trajectory) indices spread over the groups: the first episode of each
    group first, then the second of each, and so on."""
    picks: list[tuple[int, int]] = []
    depth = 0
    while len(picks) < n and any(depth < len(g.trajectories_G) for g in groups):
        for gi, g in enumerate(groups):
            if depth < len(g.trajectories_G) and len(picks) < n:
                picks.append((gi, depth))
        depth += 1
    return picks


def write_transcripts(
    path: Path,
    tokenizer: Any,
    groups: Sequence[TrajectoryGroup],
    n: int,
    *,
    title: str,
    win_metric: str = "win",
) -> Path | None:
    """Write ``n`` episodes of ``groups`` to ``path`` as HTML (nothing when ``n`` is 0)."""
    picks = pick_episodes(groups, n)
    if not picks:
        return None
    body = "\n".join(episode_html(tokenizer, groups[g], i, win_metric=win_metric) for g, i in picks)
    doc = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(doc, encoding="utf-8")
    os.replace(tmp, path)
    return path
