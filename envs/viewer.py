"""The results viewer: one self-contained HTML page per run folder (``python -m envs.viewer <folder>``).

Works on evaluation folders (``python -m envs.eval``: ``summary.json``, ``episodes.jsonl``) and on
training run folders (``metrics.jsonl``, ``eval.jsonl``, ``transcripts/``). The page, written to
``<folder>/index.html``, needs nothing but a browser (no network, no server):

- the curves (training: reward and win rate per step, held-out ones per evaluation; evaluation:
  the running mean reward over episodes and the reward histogram), as inline SVG;
- the summary table (``summary.json``, or a training run's last metrics and evaluation rows);
- the episodes, filterable by reward range, stop reason, fault and extension break; a click
  expands an episode's transcript: each turn's new observation and action with every token
  boundary marked, the turn's reward, metrics and logs, and for a break the decoded diff at the
  divergence (context, the tokens expected, the tokens observed);
- for a training run, its held-out episodes (``eval_episodes.jsonl``, written by the training loop
  at each evaluation; filterable by evaluation step too) and links to its per-step HTML transcripts.

The transcripts travel gzip-compressed (base64) inside the page and are inflated by the browser's
``DecompressionStream`` on the first expansion, so a page stays small (a 1,000-episode evaluation
fits in well under 2 MB) and opens fast: the episode list is built from a compact index.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["PAGE_FILE", "build_page", "main", "write_page"]

PAGE_FILE = "index.html"
"""The page's name inside its run folder."""

_CURVE_KEYS = ("reward/mean", "win_rate", "eval/reward/mean", "eval/win_rate")


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            break  # a torn last line
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


# --------------------------------------------------------------------------- SVG curves
def _svg_lines(title: str, series: dict[str, list[tuple[float, float]]], xlabel: str) -> str:
    """A small line chart (one polyline per series)."""
    points = [p for s in series.values() for p in s]
    if not points:
        return ""
    w, h, pad = 420, 200, 36
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y0, y1 = min(p[1] for p in points), max(p[1] for p in points)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5

    def sx(x: float) -> float:
        return pad + (x - x0) / (x1 - x0) * (w - 2 * pad)

    def sy(y: float) -> float:
        return h - pad + (y0 - y) / (y1 - y0) * (h - 2 * pad) + 0

    colours = ("#1a73e8", "#d93025", "#188038", "#e37400", "#9334e6", "#007b83")
    parts = [
        f'<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">',
        f'<text x="{w / 2}" y="14" text-anchor="middle" class="ct">{html.escape(title)}</text>',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" class="ax"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" class="ax"/>',
        f'<text x="{pad - 4}" y="{pad + 4}" text-anchor="end" class="tk">{y1:.3g}</text>',
        f'<text x="{pad - 4}" y="{h - pad}" text-anchor="end" class="tk">{y0:.3g}</text>',
        f'<text x="{pad}" y="{h - pad + 14}" class="tk">{x0:.4g}</text>',
        f'<text x="{w - pad}" y="{h - pad + 14}" text-anchor="end" class="tk">{x1:.4g}</text>',
        f'<text x="{w / 2}" y="{h - 6}" text-anchor="middle" class="tk">{html.escape(xlabel)}</text>',
    ]
    for i, (name, pts) in enumerate(series.items()):
        c = colours[i % len(colours)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="1.6"/>')
        if len(pts) == 1:
            parts.append(f'<circle cx="{sx(pts[0][0]):.1f}" cy="{sy(pts[0][1]):.1f}" r="3" fill="{c}"/>')
        parts.append(f'<text x="{w - pad}" y="{pad + 12 * i}" text-anchor="end" fill="{c}" class="tk">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_histogram(title: str, values: Sequence[float], bins: int = 20) -> str:
    if not values:
        return ""
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins if hi > lo else 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width)) if hi > lo else 0] += 1
    w, h, pad = 420, 200, 36
    top = max(counts)
    bw = (w - 2 * pad) / bins
    parts = [
        f'<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">',
        f'<text x="{w / 2}" y="14" text-anchor="middle" class="ct">{html.escape(title)}</text>',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" class="ax"/>',
        f'<text x="{pad - 4}" y="{pad + 4}" text-anchor="end" class="tk">{top}</text>',
        f'<text x="{pad}" y="{h - pad + 14}" class="tk">{lo:.3g}</text>',
        f'<text x="{w - pad}" y="{h - pad + 14}" text-anchor="end" class="tk">{(hi if hi > lo else lo + 1):.3g}</text>',
        f'<text x="{w / 2}" y="{h - 6}" text-anchor="middle" class="tk">total reward</text>',
    ]
    for i, c in enumerate(counts):
        bh = c / top * (h - 2 * pad) if top else 0
        parts.append(
            f'<rect x="{pad + i * bw + 1:.1f}" y="{h - pad - bh:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" fill="#1a73e8"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- the run's data
def _dedup(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last row of each episode key (a resumed training run re-evaluates a step), sorted."""
    last: dict[tuple[int, ...], dict[str, Any]] = {}
    for r in rows:
        last[(r.get("step", 0), r.get("task", 0), r.get("repeat", 0), r.get("slot", 0))] = r
    return [last[k] for k in sorted(last)]


def _fault(row: dict[str, Any]) -> str:
    """The episode's fault: the row's own, else the last ``turngym/fault/*`` metric it summed."""
    if "fault" in row:
        return str(row["fault"])
    from envs.core import METRIC_FAULT_PREFIX

    names = [k[len(METRIC_FAULT_PREFIX) :] for k, v in row.get("metrics", {}).items() if k.startswith(METRIC_FAULT_PREFIX) and v]
    return names[-1] if names else ""


def _episodes(rows: list[dict[str, Any]], *, by_step: bool) -> tuple[list[list[Any]], list[Any]]:
    """The page's compact episode index and the transcripts, in the same order."""
    index = [
        [
            (f"step {e.get('step', 0)} · " if by_step else "")
            + f"{e.get('task', 0)}.{e.get('repeat', 0)}.{e.get('slot', 0)}",
            _num(e.get("reward")),
            str(e.get("stop", "")),
            _fault(e),
            int(e.get("breaks", 0)),
            int(e.get("turns", 0)),
            str(e.get("error", ""))[:200],
            f"after step {e.get('step', 0)}" if by_step else "",
        ]
        for e in rows
    ]
    return index, [e.get("transcript", []) for e in rows]


def _eval_data(folder: Path) -> dict[str, Any]:
    episodes = _dedup(_rows(folder / "episodes.jsonl"))
    config = _json(folder / "config.json")
    summary = _json(folder / "summary.json")
    rewards = [r for r in (_num(e.get("reward")) for e in episodes) if r is not None]
    running, total = [], 0.0
    for i, r in enumerate(rewards):
        total += r
        running.append((float(i + 1), total / (i + 1)))
    charts = [
        _svg_lines("running mean reward", {"reward": running}, "episodes"),
        _svg_histogram("reward histogram", rewards),
    ]
    index, transcripts = _episodes(episodes, by_step=False)
    title = f"eval · {config.get('config', {}).get('env', folder.name)}"
    notes = []
    if config.get("extension_check", "").startswith("not applicable"):
        notes.append(
            "Message-level endpoint: the tokens shown are our renderer's rendering of the server's text; "
            "the extension check does not apply."
        )
    return {
        "title": title,
        "summary": summary,
        "config": config.get("config", {}),
        "charts": [c for c in charts if c],
        "index": index,
        "transcripts": transcripts,
        "notes": notes,
        "links": [],
    }


def _training_data(folder: Path) -> dict[str, Any]:
    metrics = _rows(folder / "metrics.jsonl")
    evals = _rows(folder / "eval.jsonl")
    config = _json(folder / "config.json")
    charts = []
    for rows, keys, label in ((metrics, _CURVE_KEYS[:2], "training"), (evals, _CURVE_KEYS[2:], "held-out")):
        series: dict[str, list[tuple[float, float]]] = {}
        for key in keys:
            pts = [(float(r["step"]), v) for r in rows if (v := _num(r.get(key))) is not None and "step" in r]
            if pts:
                series[key] = pts
        charts.append(_svg_lines(f"{label} per step", series, "step"))
    summary: dict[str, Any] = {}
    if metrics:
        summary.update({k: v for k, v in metrics[-1].items() if _num(v) is not None})
    if evals:
        summary.update({k: v for k, v in evals[-1].items() if k != "step" and _num(v) is not None})
    links = sorted(p.relative_to(folder).as_posix() for p in (folder / "transcripts").glob("*.html"))
    index, transcripts = _episodes(_dedup(_rows(folder / "eval_episodes.jsonl")), by_step=True)
    return {
        "title": f"training · {folder.name}",
        "summary": summary,
        "config": config,
        "charts": [c for c in charts if c],
        "index": index,
        "transcripts": transcripts,
        "notes": ["Episodes: the held-out evaluations (eval_episodes.jsonl), filterable by step."] if index else [],
        "links": links,
    }


def build_page(folder: str | Path) -> str:
    """The viewer page of the run folder ``folder`` (an evaluation or a training run)."""
    folder = Path(folder)
    if (folder / "episodes.jsonl").is_file() or (folder / "summary.json").is_file():
        data = _eval_data(folder)
    elif (folder / "metrics.jsonl").is_file():
        data = _training_data(folder)
    else:
        raise FileNotFoundError(f"{folder}: not a run folder (no episodes.jsonl, summary.json or metrics.jsonl)")
    packed = base64.b64encode(
        gzip.compress(json.dumps(data.pop("transcripts"), separators=(",", ":")).encode(), 6, mtime=0)
    ).decode()
    charts = "".join(data.pop("charts"))
    payload = json.dumps({**data, "tx": packed}, separators=(",", ":"), default=str).replace("</", "<\\/")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(data['title'])}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(data['title'])}</h1><div id='notes'></div>"
        f"<div id='charts'>{charts}</div><div id='summary'></div><div id='links'></div>"
        f"<div id='episodes'></div>"
        f"<script id='data' type='application/json'>{payload}</script><script>{_SCRIPT}</script></body></html>\n"
    )


def write_page(folder: str | Path, out: str | Path | None = None) -> Path:
    """Write the viewer page of ``folder`` (default ``<folder>/index.html``); return its path."""
    folder = Path(folder)
    path = Path(out) if out else folder / PAGE_FILE
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(build_page(folder), encoding="utf-8")
    tmp.replace(path)
    return path


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1rem 2rem;color:#202124}
h1{font-size:1.3rem}.chart{margin:0 1rem 1rem 0;border:1px solid #ddd;border-radius:6px}
.ct{font-size:12px;font-weight:600}.tk{font-size:10px;fill:#555}.ax{stroke:#999}
#charts{display:flex;flex-wrap:wrap}table{border-collapse:collapse;font-size:.85rem}
td,th{border-bottom:1px solid #eee;padding:.15rem .6rem;text-align:left}
#summary table td:nth-child(2){font-family:monospace}
.filters{margin:1rem 0;display:flex;gap:1rem;flex-wrap:wrap;align-items:center;font-size:.9rem}
.filters input{width:5rem}#eplist tr.ep{cursor:pointer}#eplist tr.ep:hover{background:#f1f3f4}
.bad{color:#b00020}.note{background:#fff4e5;padding:.4rem .8rem;border-radius:4px;margin:.3rem 0}
.tx{background:#fafafa;padding:.4rem .8rem}.turn{margin:.4rem 0;border-left:3px solid #dadce0;padding-left:.6rem}
.th{font-size:.8rem;color:#555}pre{white-space:pre-wrap;word-break:break-word;margin:.2rem 0;padding:.3rem;border-radius:4px}
pre.ob{background:#f1f3f4;color:#3c4043}pre.ac{background:#e8f0fe;color:#0b3d91}
pre span{border-right:1px solid rgba(0,0,0,.18)}
.brk{border:1px solid #d93025;border-radius:4px;padding:.3rem;margin:.3rem 0;font-size:.85rem}
.brk del{background:#fce8e6;color:#a50e0e}.brk ins{background:#e6f4ea;color:#0d652d;text-decoration:none}
.brk code{white-space:pre-wrap}
"""

_SCRIPT = r"""
const D=JSON.parse(document.getElementById('data').textContent);
const esc=s=>String(s).replace(/[&<>"']/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const fmt=v=>typeof v==='number'?(Number.isInteger(v)?String(v):v.toPrecision(4)):(v===null?'–':String(v));
document.getElementById('notes').innerHTML=D.notes.map(n=>`<div class="note">${esc(n)}</div>`).join('');
const S=Object.entries(D.summary);
if(S.length)document.getElementById('summary').innerHTML='<h2>Summary</h2><table>'+S.map(([k,v])=>`<tr><td>${esc(k)}</td><td>${esc(fmt(v))}</td></tr>`).join('')+'</table>';
if(D.links.length)document.getElementById('links').innerHTML='<h2>Transcripts</h2>'+D.links.map(l=>`<a href="${esc(l)}">${esc(l)}</a>`).join(' · ');
let TX=null;
async function transcripts(){
  if(TX)return TX;
  const bin=Uint8Array.from(atob(D.tx),c=>c.charCodeAt(0));
  const s=new Blob([bin]).stream().pipeThrough(new DecompressionStream('gzip'));
  TX=JSON.parse(await new Response(s).text());return TX;
}
const I=D.index; // [id, reward, stop, fault, breaks, turns, error, group]
if(I.length){
  const opts=(k)=>[...new Set(I.map(r=>r[k]))].sort();
  const sel=(id,label,vals)=>`<label>${label} <select id="${id}"><option value="*">all</option>${vals.map(v=>`<option value="${esc(v)}">${esc(v===''?'(none)':v)}</option>`).join('')}</select></label>`;
  document.getElementById('episodes').innerHTML=`<h2>Episodes</h2><div class="filters">
    <label>reward ≥ <input id="rmin" type="number" step="any"></label><label>≤ <input id="rmax" type="number" step="any"></label>
    ${opts(7).length>1?sel('fgroup','evaluation',opts(7)):'<input id="fgroup" type="hidden" value="*">'}${sel('fstop','stop',opts(2))}${sel('ffault','fault',opts(3))}
    <label>extension break <select id="fbreak"><option value="*">all</option><option value="yes">with</option><option value="no">without</option></select></label>
    <span id="count"></span></div>
    <table id="eplist"><thead><tr><th>episode</th><th>reward</th><th>stop</th><th>fault</th><th>breaks</th><th>turns</th></tr></thead><tbody></tbody></table>`;
  const body=document.querySelector('#eplist tbody');
  const val=id=>document.getElementById(id).value;
  function render(){
    const t0=performance.now();
    const lo=parseFloat(val('rmin')),hi=parseFloat(val('rmax')),st=val('fstop'),fa=val('ffault'),br=val('fbreak'),gr=val('fgroup');
    const out=[];let n=0;
    for(let i=0;i<I.length;i++){const r=I[i];
      if(!isNaN(lo)&&!(r[1]!==null&&r[1]>=lo))continue;
      if(!isNaN(hi)&&!(r[1]!==null&&r[1]<=hi))continue;
      if(gr!=='*'&&r[7]!==gr)continue;if(st!=='*'&&r[2]!==st)continue;if(fa!=='*'&&r[3]!==fa)continue;
      if(br==='yes'&&!r[4])continue;if(br==='no'&&r[4])continue;
      n++;out.push(`<tr class="ep" data-i="${i}"><td>${esc(r[0])}</td><td>${esc(fmt(r[1]))}</td><td>${esc(r[2])}</td><td class="${r[3]?'bad':''}">${esc(r[3])}</td><td class="${r[4]?'bad':''}">${r[4]}</td><td>${r[5]}</td></tr>`);
    }
    body.innerHTML=out.join('');
    document.getElementById('count').textContent=`${n} of ${I.length} episodes`;
    document.body.dataset.renderMs=String(Math.round(performance.now()-t0));
  }
  for(const id of ['rmin','rmax','fstop','ffault','fbreak','fgroup'])document.getElementById(id).addEventListener('input',render);
  const toks=(ps,cls)=>`<pre class="${cls}">${ps.map(p=>`<span>${esc(p)}</span>`).join('')}</pre>`;
  body.addEventListener('click',async ev=>{
    const tr=ev.target.closest('tr.ep');if(!tr)return;
    const next=tr.nextElementSibling;
    if(next&&next.classList.contains('txrow')){next.remove();return;}
    const i=+tr.dataset.i,row=I[i],t=(await transcripts())[i];
    let h=row[6]?`<div class="brk">error: ${esc(row[6])}</div>`:'';
    t.forEach((u,k)=>{
      h+=`<div class="turn"><div class="th">turn ${k+1} · reward ${esc(fmt(u.reward))} · ${u.ob.length} observed + ${u.ac.length} sampled tokens`+
        (u.metrics?' · '+esc(Object.entries(u.metrics).map(([a,b])=>a+'='+fmt(b)).join(', ')):'')+
        (u.logs?' · '+esc(Object.entries(u.logs).map(([a,b])=>a+'='+b).join(', ')):'')+'</div>';
      if(u.break){const b=u.break;h+=`<div class="brk"><b>${b.expected?'expected re-render':'extension break'}</b> at token ${b.at}: <code>…${esc(b.before)}</code><del>${esc(b.was)}</del><ins>${esc(b.now)}</ins></div>`;}
      h+=toks(u.ob,'ob')+toks(u.ac,'ac')+'</div>';
    });
    const x=document.createElement('tr');x.className='txrow';x.innerHTML=`<td colspan="6"><div class="tx">${h||'(no turns)'}</div></td>`;
    tr.after(x);
  });
  render();
}
document.body.dataset.readyMs=String(Math.round(performance.now()));document.body.dataset.ready='1';
"""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m envs.viewer <run folder> [--out FILE]``; returns the exit status."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m envs.viewer", description="Write a run folder's results page.")
    parser.add_argument("folder", help="an evaluation folder (python -m envs.eval) or a training run folder")
    parser.add_argument("--out", help=f"page path (default <folder>/{PAGE_FILE})")
    args = parser.parse_args(argv)
    try:
        path = write_page(args.folder, args.out)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
