/* ragmeter dashboard: filters and sorting of the sample list. Plain JavaScript, no library,
   no network. The page reads fine without it: this only adds the controls. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var list = document.getElementById("rows");
  if (!list) { return; }
  var rows = Array.prototype.slice.call(list.querySelectorAll("details.sample"));
  rows.forEach(function (el) { el._row = JSON.parse(el.getAttribute("data-row")); });
  var byId = function (id) { return document.getElementById(id); };
  var controls = ["f-metric", "f-label", "f-diagnosis", "f-tag", "f-search"].map(byId).filter(Boolean);
  var state = { key: "composite", dir: 1 };

  function visible(row, el, f) {
    if (f.diagnosis && row.diagnosis !== f.diagnosis) { return false; }
    if (f.tag && row.tags.indexOf(f.tag) < 0) { return false; }
    if (f.metric && !(f.metric in row.labels)) { return false; }
    if (f.label) {
      var names = f.metric ? [f.metric] : Object.keys(row.labels);
      if (!names.some(function (m) { return row.labels[m] === f.label; })) { return false; }
    }
    if (f.search) {
      var q = el.querySelector(".q");
      var text = (row.id + " " + (q ? q.textContent : "")).toLowerCase();
      if (text.indexOf(f.search) < 0) { return false; }
    }
    return true;
  }

  function apply() {
    var f = {
      metric: byId("f-metric") ? byId("f-metric").value : "",
      label: byId("f-label") ? byId("f-label").value : "",
      diagnosis: byId("f-diagnosis") ? byId("f-diagnosis").value : "",
      tag: byId("f-tag") ? byId("f-tag").value : "",
      search: byId("f-search") ? byId("f-search").value.trim().toLowerCase() : ""
    };
    var shown = 0;
    rows.forEach(function (el) {
      var ok = visible(el._row, el, f);
      el.hidden = !ok;
      if (ok) { shown += 1; }
    });
    byId("shown").textContent = String(shown);
  }

  function keyOf(row, key) {
    if (key === "id" || key === "diagnosis" || key === "composite") { return row[key]; }
    var m = key.slice(2);
    return m in row.values ? row.values[m] : null;
  }

  function compare(a, b) {
    var x = keyOf(a._row, state.key), y = keyOf(b._row, state.key);
    if (x === null || x === undefined) { return (y === null || y === undefined) ? a._row.i - b._row.i : 1; }
    if (y === null || y === undefined) { return -1; }
    if (x < y) { return -state.dir; }
    if (x > y) { return state.dir; }
    return a._row.i - b._row.i;
  }

  function sortBy(key, button) {
    state.dir = state.key === key ? -state.dir : 1;
    state.key = key;
    rows.sort(compare);
    rows.forEach(function (el) { list.appendChild(el); });
    document.querySelectorAll(".row.head button[data-sort]").forEach(function (b) {
      if (b === button) { b.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending"); }
      else { b.removeAttribute("aria-sort"); }
    });
  }

  controls.forEach(function (c) { c.addEventListener(c.tagName === "INPUT" ? "input" : "change", apply); });
  var form = byId("filters");
  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  form.addEventListener("reset", function () { setTimeout(apply, 0); });
  document.querySelectorAll(".row.head button[data-sort]").forEach(function (b) {
    b.addEventListener("click", function () { sortBy(b.getAttribute("data-sort"), b); });
  });
  byId("expand").addEventListener("click", function () { rows.forEach(function (el) { if (!el.hidden) { el.open = true; } }); });
  byId("collapse").addEventListener("click", function () { rows.forEach(function (el) { el.open = false; }); });

  function openHash() {
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    var sample = target && target.closest ? target.closest("details.sample") : null;
    if (sample) { sample.hidden = false; sample.open = true; target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openHash);
  openHash();
  apply();
}());
/* The "Runs" filters: dataset, kind and tag choose the rows of the runs table and the trend groups
   that hold a chosen run. */
(function () {
  "use strict";
  var form = document.getElementById("run-filters");
  if (!form) { return; }
  var rows = Array.prototype.slice.call(document.querySelectorAll("#runs-table tbody tr"));
  var groups = Array.prototype.slice.call(document.querySelectorAll("#trends .trend-group"));
  var pick = function (id) { var el = document.getElementById(id); return el ? el.value : ""; };

  function apply() {
    var f = { series: pick("r-dataset"), kind: pick("r-kind"), tag: pick("r-tag") };
    var chosen = {};
    var shown = 0;
    rows.forEach(function (tr) {
      var tags = JSON.parse(tr.getAttribute("data-tags") || "[]");
      var ok = (!f.series || tr.getAttribute("data-series") === f.series) &&
               (!f.kind || tr.getAttribute("data-kind") === f.kind) && (!f.tag || tags.indexOf(f.tag) >= 0);
      tr.hidden = !ok;
      if (ok) { shown += 1; chosen[tr.getAttribute("data-run")] = true; }
    });
    groups.forEach(function (g) {
      var ids = JSON.parse(g.getAttribute("data-runs") || "[]");
      g.hidden = !ids.some(function (id) { return chosen[id]; });
    });
    document.getElementById("runs-shown").textContent = String(shown);
  }

  Array.prototype.forEach.call(form.querySelectorAll("select"), function (s) { s.addEventListener("change", apply); });
  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  form.addEventListener("reset", function () { setTimeout(apply, 0); });
  apply();
}());
