"""Internal: The offline HTML labeling page: one self-contained file (no network), one task at a time.

Keys: ``1``-``5`` rate the highlighted criterion and move to the next (after the last
criterion, to the next task); ``0`` leaves it blank on purpose (a missing label); ``←`` / ``→``
previous / next task; ``↑`` / ``↓`` previous / next criterion. Labels are kept in the browser's
local storage (per task set), the progress bar counts tasks with every criterion answered, and
"Download labels" saves ``{"ragmeter": "labels", "annotator": ..., "labels": [...]}``, the JSON
:func:`ragmeter.labels.import_labels` reads; each label carries the hash of the answer it was
given on (``answer_hash``).
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from typing import Any

__all__ = ["labeling_page"]

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #dde;padding:10px 20px;display:flex;gap:16px;align-items:center}
main{max-width:980px;margin:18px auto;padding:0 20px}
.bar{flex:1;height:8px;background:#e5e7ee;border-radius:4px;overflow:hidden}.bar i{display:block;height:100%;background:#2f7d4f}
section{background:#fff;border:1px solid #dde;border-radius:8px;padding:14px 18px;margin-bottom:14px}
h2{font-size:13px;text-transform:uppercase;color:#667;margin:0 0 6px}.reason{color:#8a5a00;font-size:13px}
ol.chunks li{margin-bottom:8px;white-space:pre-wrap}.answer{white-space:pre-wrap}
.crit{border:2px solid transparent;border-radius:6px;padding:8px 10px;margin:6px 0}.crit.active{border-color:#3266d6;background:#f3f6fe}
.crit button{width:34px;height:30px;margin-right:4px;border:1px solid #bbc;border-radius:4px;background:#fff;cursor:pointer}
.crit button.on{background:#3266d6;color:#fff;border-color:#3266d6}.crit .skip.on{background:#777;border-color:#777}
.anchors{font-size:13px;color:#556}kbd{border:1px solid #bbc;border-radius:3px;padding:0 4px;font-size:12px}
"""

_SCRIPT = r"""
(function(){
const tasks = JSON.parse(document.getElementById('tasks').textContent);
const KEY = document.body.dataset.storageKey;
const saved = JSON.parse(localStorage.getItem(KEY) || '{}');
const state = {labels: saved.labels || {}, annotator: saved.annotator || '', task: saved.task || 0, crit: 0};
const $ = id => document.getElementById(id);
const names = t => Object.keys(t.criteria);
const save = () => localStorage.setItem(KEY, JSON.stringify({labels: state.labels, annotator: state.annotator, task: state.task}));
const done = t => names(t).every(c => (t.sample_id + '\u0000' + c) in state.labels);
function text(el, s){ el.textContent = s == null ? '' : String(s); return el; }
function make(tag, cls, s){ const el = document.createElement(tag); if (cls) el.className = cls; return text(el, s); }
function render(){
  const t = tasks[state.task];
  const complete = tasks.filter(done).length;
  text($('progress'), complete + ' / ' + tasks.length + ' tasks labelled');
  $('bar').style.width = (100 * complete / Math.max(tasks.length, 1)) + '%';
  text($('position'), 'task ' + (state.task + 1) + ' of ' + tasks.length);
  if (!t) return;
  text($('reason'), '#' + t.queue_rank + ' · ' + t.reason + ' · ' + t.sample_id);
  text($('question'), t.question);
  const ol = $('chunks'); ol.replaceChildren(...t.chunks.map(c => make('li', '', c)));
  text($('answer'), t.answer);
  const box = $('criteria'); box.replaceChildren();
  names(t).forEach((c, i) => {
    const g = t.criteria[c], key = t.sample_id + '\u0000' + c, value = state.labels[key];
    const div = make('div', 'crit' + (i === state.crit ? ' active' : '')); div.dataset.criterion = c;
    div.append(make('strong', '', c.replace(/_/g, ' ') + ': '), make('span', '', g.question), document.createElement('br'));
    for (let v = 1; v <= 5; v++) {
      const b = make('button', value === v ? 'on' : '', v); b.onclick = () => { state.crit = i; rate(v); }; div.append(b);
    }
    const s = make('button', 'skip' + (value === null ? ' on' : ''), '–'); s.title = 'leave blank (0)';
    s.onclick = () => { state.crit = i; rate(null); }; div.append(s);
    div.append(make('div', 'anchors', Object.entries(g.anchors).map(([k, a]) => k + ' = ' + a).join(' · ')));
    box.append(div);
  });
  const active = box.querySelector('.crit.active'); if (active && active.scrollIntoView) active.scrollIntoView({block: 'nearest'});
}
function go(task){ state.task = Math.max(0, Math.min(tasks.length - 1, task)); state.crit = 0; save(); render(); }
function rate(v){
  const t = tasks[state.task]; if (!t) return;
  state.labels[t.sample_id + '\u0000' + names(t)[state.crit]] = v;
  if (state.crit < names(t).length - 1) { state.crit++; save(); render(); }
  else if (state.task < tasks.length - 1) go(state.task + 1);
  else { save(); render(); }
}
function download(){
  const hashes = Object.fromEntries(tasks.map(t => [t.sample_id, t.answer_hash]));
  const labels = Object.entries(state.labels).map(([k, v]) => {
    const [sample_id, criterion] = k.split('\u0000');
    return {sample_id, answer_hash: hashes[sample_id] || null, criterion, value: v};
  });
  const doc = {ragmeter: 'labels', annotator: state.annotator || 'annotator', labels};
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 1)], {type: 'application/json'}));
  a.download = 'labels-' + (state.annotator || 'annotator').replace(/[^\w.-]+/g, '_') + '.json';
  document.body.append(a); a.click(); a.remove();
}
document.addEventListener('keydown', e => {
  if (e.target.tagName === 'INPUT' || e.ctrlKey || e.metaKey || e.altKey) return;
  const t = tasks[state.task];
  if (e.key >= '1' && e.key <= '5') rate(Number(e.key));
  else if (e.key === '0') rate(null);
  else if (e.key === 'ArrowRight') go(state.task + 1);
  else if (e.key === 'ArrowLeft') go(state.task - 1);
  else if (e.key === 'ArrowDown' && t) { state.crit = Math.min(names(t).length - 1, state.crit + 1); render(); }
  else if (e.key === 'ArrowUp') { state.crit = Math.max(0, state.crit - 1); render(); }
  else return;
  e.preventDefault();
});
$('annotator').value = state.annotator;
$('annotator').oninput = e => { state.annotator = e.target.value.trim(); save(); };
$('download').onclick = download;
$('prev').onclick = () => go(state.task - 1);
$('next').onclick = () => go(state.task + 1);
render();
})();
"""


def labeling_page(tasks: Sequence[dict[str, Any]], title: str = "ragmeter labeling") -> str:
    """The labeling page for ``tasks`` (:func:`ragmeter.labels.tasks.task_records`) as one HTML
    document with its data, style and script inline."""
    data = json.dumps(list(tasks), ensure_ascii=False)  # key order kept: criteria in the order asked
    key = "ragmeter-labels-" + hashlib.sha256(data.encode()).hexdigest()[:16]
    safe = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<style>{_STYLE}</style></head>
<body data-storage-key="{key}">
<header><strong>{html.escape(title)}</strong><span id="position"></span><div class="bar"><i id="bar"></i></div>
<span id="progress"></span><label>annotator <input id="annotator" size="12"></label>
<button id="prev">←</button><button id="next">→</button><button id="download">Download labels</button></header>
<main>
<p class="reason" id="reason"></p>
<section><h2>Question</h2><div id="question"></div></section>
<section><h2>Chunks</h2><ol class="chunks" id="chunks"></ol></section>
<section><h2>Answer</h2><div class="answer" id="answer"></div></section>
<section><h2>Rate 1-5</h2><div id="criteria"></div>
<p class="anchors">Keys: <kbd>1</kbd>-<kbd>5</kbd> rate the highlighted criterion, <kbd>0</kbd> leave it blank,
<kbd>←</kbd> <kbd>→</kbd> previous / next task, <kbd>↑</kbd> <kbd>↓</kbd> criterion. Labels stay in this browser until you download them.</p></section>
</main>
<script type="application/json" id="tasks">{safe}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
