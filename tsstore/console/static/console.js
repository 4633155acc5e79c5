// tsstore console: the page's views over the console's JSON answers. Written for tsstore;
// the only library is plotly.js, served from the plotly package the console depends on.
"use strict";

const state = {
  collection: null,
  cursor: null,      // the next page's cursor of the query shown
  shown: 0,          // rows shown by the pages so far
  ask: null,         // the id of the query running (to cancel it)
  bars: null,        // the last bars drawn, as the server sent them
  declared: {},      // each series as the catalog declares it, by collection
  facts: {},         // each series' facts as last read, by collection
  live: null,        // the EventSource of the live view
  liveSeen: [],      // every tick id the live view has shown, in the order they entered
  liveUpdate: {},    // the number of the update each of them entered with (from 0)
  liveArrivals: {},  // when each of them first reached the page (ms since the epoch)
  liveDelays: [],    // each update's delay from the chunks' snapshot to the page, in ms
};
window.tsstoreConsole = state;

const $ = (id) => document.getElementById(id);
// No mode bar: its styles would be inline ones, which the page's policy refuses (drag zooms,
// a double click zooms out).
const PLOT_CONFIG = {displayModeBar: false, responsive: true};

async function call(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  };
  const response = await fetch(path, options);
  const answer = await response.json();
  if (!response.ok) {
    throw new Error(answer.error || `${response.status} ${response.statusText}`);
  }
  return answer;
}

function show(view) {
  for (const section of document.querySelectorAll(".view")) {
    section.hidden = section.id !== `view-${view}`;
  }
  for (const button of document.querySelectorAll("nav button")) {
    button.classList.toggle("active", button.dataset.view === view);
  }
  if (view === "layout" && !$("y-census").textContent) {
    loadLayout().catch(() => {});
  }
}

function text(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function fillTable(table, columns, rows, {entered} = {}) {
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const column of columns) {
    const th = document.createElement("th");
    th.textContent = column;
    head.appendChild(th);
  }
  table.createTBody();
  appendRows(table, columns, rows, entered);
}

function appendRows(table, columns, rows, entered) {
  const body = table.tBodies[0] || table.createTBody();
  for (const [k, row] of rows.entries()) {
    const tr = body.insertRow();
    if (entered && entered.has(row.__id)) tr.classList.add("entered");
    for (const value of (row.__cells || row)) {
      const td = tr.insertCell();
      td.textContent = text(value);
      if (typeof value === "number") td.className = "num";
    }
    tr.dataset.row = String(k);
  }
}

// ---------------------------------------------------------------- series

async function loadCatalog() {
  const answer = await call("api/catalog");
  $("where").textContent = `${answer.where} · ${answer.declaration}`;
  const select = $("collection");
  select.replaceChildren();
  const list = $("series-list");
  list.replaceChildren();
  for (const series of answer.series) {
    state.declared[series.collection] = series;
    select.add(new Option(series.collection, series.collection));
    const card = document.createElement("div");
    card.className = "series-card";
    card.dataset.collection = series.collection;
    card.innerHTML = "<h3></h3><dl></dl>";
    card.querySelector("h3").textContent = series.collection;
    const facts = [
      ["ticks", "counting…"],
      ["newest tick", "reading…"],
      ["shapes", series.shapes.join(", ")],
      ["active shards", `${series.shards.length} (${series.shards.slice(0, 8).join(", ")}${series.shards.length > 8 ? ", …" : ""})`],
      ["retired shards", series.retired.length ? series.retired.join(", ") : "none"],
      ["write ceiling", `${series.write_rate.toLocaleString("en")} writes/s`],
      ["roll-ups", series.rollups.length ? series.rollups.map((r) => `${r.name} (${r.interval} bars in ${r.collection})`).join("; ") : "none declared"],
      ["cold tier", series.cold ? `${series.cold} (reading…)` : "none declared"],
    ];
    const dl = card.querySelector("dl");
    for (const [name, value] of facts) {
      const dt = document.createElement("dt");
      dt.textContent = name;
      const dd = document.createElement("dd");
      dd.textContent = value;
      dd.className = `fact-${name.replace(/\W+/g, "-")}`;
      dl.append(dt, dd);
    }
    list.appendChild(card);
  }
  state.collection = select.value;
  chartDefaults();
  $("y-rate").value = answer.series.length ? Math.round(answer.series[0].write_rate / 1.25) : "";
}

async function loadSeries(fresh) {
  const answer = await call(fresh ? "api/series?fresh=1" : "api/series");
  $("series-as-of").textContent = answer.series.length ? `as of ${answer.series[0].as_of}` : "";
  for (const series of answer.series) {
    state.facts[series.collection] = series;
    const card = document.querySelector(`.series-card[data-collection="${CSS.escape(series.collection)}"]`);
    const fact = (name, value) => { card.querySelector(`.fact-${name}`).textContent = value; };
    fact("ticks", series.count.toLocaleString("en"));
    fact("newest-tick", series.newest ? `${series.newest.timestamp} (${series.newest.id})` : "none");
    if (series.rollups.length) {
      fact("roll-ups", series.rollups.map((r) => {
        const span = series.covers[r.name];
        // a first run without since holds its bars whole from Firestore's earliest time (year 1)
        const from = span && span[0].startsWith("0001-01-01") ? "the first tick" : span && span[0];
        return `${r.name} (${r.interval} bars in ${r.collection}; ${span ? `whole from ${from} to ${span[1]}` : "not run yet"})`;
      }).join("; "));
    }
  }
  chartDefaults();
  document.body.dataset.counted = "true";
}

// Each series' cold tier as its manifest and marks say now: where the sealed history ends,
// what is sealed, and the partitions late ticks changed since (read from Firestore until the
// next seal).
async function loadTiers() {
  const answer = await call("api/tiers");
  for (const tiers of answer.tiers) {
    const cold = tiers.cold;
    const card = document.querySelector(`.series-card[data-collection="${CSS.escape(tiers.collection)}"]`);
    if (!cold || !card) continue;
    const marked = cold.marked.length ? cold.marked.join(", ") : "none";
    card.querySelector(".fact-cold-tier").textContent = cold.through === null
      ? `nothing sealed yet in ${cold.path}`
      : `sealed through ${cold.through} in ${cold.path}: ${cold.partitions.toLocaleString("en")} partition(s), `
        + `${cold.rows.toLocaleString("en")} ticks, ${cold.size.toLocaleString("en")} bytes; marked: ${marked}`;
  }
  document.body.dataset.tiers = "true";
}

// The chart form's price, by and where of the series shown, where they are empty and not typed
// in: its first roll-up's (or first measure and key fields), and the series of its newest tick.
function chartDefaults() {
  const declared = state.declared[state.collection], facts = state.facts[state.collection];
  const fill = (id, value) => { if (!$(id).value && !$(id).dataset.typed && value) $(id).value = value; };
  if (declared) {
    fill("c-price", declared.chart.price);
    fill("c-by", declared.chart.by);
  }
  if (facts) fill("c-where", facts.chart_where);
}

// ---------------------------------------------------------------- query

function values(prefix, names) {
  const got = {collection: state.collection};
  for (const name of names) got[name] = $(`${prefix}-${name}`).value;
  return got;
}

function queryForm() {
  const form = values("q", ["where", "start", "end", "direction", "limit", "columns"]);
  return {...form, limit: Number(form.limit)};
}

async function explain() {
  $("q-error").textContent = "";
  try {
    const answer = await call("api/explain", queryForm());
    $("q-explain-out").textContent = answer.text;
    $("q-python").textContent = answer.python;
    $("q-command").textContent = answer.command;
  } catch (error) {
    $("q-error").textContent = error.message;
  }
}

async function runQuery(next) {
  $("q-error").textContent = "";
  if (!next) {
    state.cursor = null;
    state.shown = 0;
    await explain();
    if ($("q-error").textContent) return;
  }
  state.ask = crypto.randomUUID ? crypto.randomUUID() : String(Math.random());
  $("q-cancel").hidden = false;
  $("q-run").disabled = true;
  try {
    const answer = await call("api/query", {...queryForm(), cursor: next ? state.cursor : null, ask: state.ask});
    if (answer.cancelled) {
      $("q-stats").textContent = "cancelled: nothing more is shown";
      return;
    }
    const rows = answer.rows;
    if (next) {
      appendRows($("q-grid"), answer.columns, rows);
    } else {
      fillTable($("q-grid"), answer.columns, rows);
    }
    state.shown += rows.length;
    state.cursor = answer.cursor;
    $("q-next").hidden = !answer.cursor;
    $("q-shown").textContent = `${state.shown} rows shown${answer.cursor ? "; more follow" : "; that is all"}`;
    $("q-stats").textContent = `this page: ${answer.stats.text}; ${answer.stats.price.text}`;
    $("q-python").textContent = answer.python;
    $("q-command").textContent = answer.command;
  } catch (error) {
    $("q-error").textContent = error.message;
  } finally {
    state.ask = null;
    $("q-cancel").hidden = true;
    $("q-run").disabled = false;
  }
}

async function cancelQuery() {
  if (state.ask) await call("api/cancel", {ask: state.ask});
}

// ---------------------------------------------------------------- chart

function chartForm() {
  return values("c", ["interval", "by", "price", "where", "start", "end", "tz", "origin", "fill"]);
}

async function drawBars() {
  $("c-error").textContent = "";
  try {
    const answer = await call("api/bars", chartForm());
    state.bars = answer;
    $("c-source").textContent = `${answer.bars.rows.length} bars from ${answer.source}`;
    const columns = answer.bars.columns;
    const at = (name) => columns.indexOf(name);
    const groups = new Map();
    for (const row of answer.bars.rows) {
      const key = answer.by.map((b) => row[at(b)]).join(" ") || "bars";
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(row);
    }
    const traces = [...groups].map(([name, rows]) => ({
      type: "candlestick", name,
      x: rows.map((r) => r[at("timestamp")]),
      open: rows.map((r) => r[at("open")]), high: rows.map((r) => r[at("high")]),
      low: rows.map((r) => r[at("low")]), close: rows.map((r) => r[at("close")]),
    }));
    const layout = {margin: {t: 20, r: 20, b: 40, l: 70}, xaxis: {rangeslider: {visible: false}}, uirevision: "bars"};
    await Plotly.react("c-chart", traces, layout, PLOT_CONFIG);
  } catch (error) {
    $("c-error").textContent = error.message;
  }
}

function onZoom(event) {
  const from = event["xaxis.range[0]"], to = event["xaxis.range[1]"];
  if (from && to) {  // reload the range zoomed into, as times with an offset
    const iso = (t) => new Date(t.replace(" ", "T") + (/[zZ+]/.test(t.slice(10)) ? "" : "Z")).toISOString();
    $("c-start").value = iso(from);
    $("c-end").value = iso(to);
    drawBars();
  }
}

// ---------------------------------------------------------------- live

function startLive() {
  stopLive();
  $("l-error").textContent = "";
  state.liveSeen = [];
  state.liveArrivals = {};
  state.liveDelays = [];
  state.liveUpdate = {};
  let updates = 0;
  const params = new URLSearchParams({collection: state.collection, where: $("l-where").value, limit: $("l-limit").value});
  const source = new EventSource(`api/live?${params}`);
  state.live = source;
  $("l-start").disabled = true;
  $("l-stop").hidden = false;
  const seen = new Set();
  source.onmessage = (message) => {
    const update = JSON.parse(message.data);
    const arrived = Date.now() / 1000;
    const times = update.read_times.filter((t) => t !== null);
    const delay = times.length ? Math.max(0, (arrived - Math.max(...times)) * 1000) : null;
    if (delay !== null) state.liveDelays.push(delay);
    for (const id of update.entered) {
      if (!seen.has(id)) {
        seen.add(id);
        state.liveSeen.push(id);
        state.liveArrivals[id] = arrived * 1000;
        state.liveUpdate[id] = updates;
      }
    }
    updates += 1;
    const entered = new Set(update.entered);
    const rows = update.window.map((t) => ({__id: t.id, __cells: [t.timestamp, t.id, ...Object.values(t.data).map(text)]}));
    const columns = ["timestamp", "id", ...(update.window.length ? Object.keys(update.window[0].data) : [])];
    fillTable($("l-grid"), columns, rows, {entered});
    $("l-delay").textContent = delay === null ? "" : `delivery delay ${delay.toFixed(0)} ms (snapshot to page); ${state.liveSeen.length} ticks seen`;
  };
  source.addEventListener("failed", (event) => {
    $("l-error").textContent = JSON.parse(event.data).error;
    stopLive();
  });
  source.onerror = async () => {
    if (state.live !== source) return;
    // An EventSource hides the answer's body: ask again plainly to show why it failed.
    const response = await fetch(`api/live?${params}`);
    if (!response.ok) {
      $("l-error").textContent = (await response.json()).error;
      stopLive();
    }
  };
}

function stopLive() {
  if (state.live) state.live.close();
  state.live = null;
  $("l-start").disabled = false;
  $("l-stop").hidden = true;
}

// ---------------------------------------------------------------- layout

async function loadLayout() {
  $("y-error").textContent = "";
  try {
    const params = new URLSearchParams({collection: state.collection, writes_per_second: $("y-rate").value});
    const answer = await call(`api/layout?${params}`);
    $("y-census").textContent = answer.census + (answer.problems.length ? "\n\n" + answer.problems.join("\n") : "");
    $("y-capacity").textContent = answer.capacity;
    const files = $("y-files");
    files.replaceChildren();
    for (const [name, file] of Object.entries(answer.files)) {
      const p = document.createElement("p");
      p.innerHTML = "<span></span> <code></code>: <strong></strong>";
      p.children[0].textContent = name;
      p.children[1].textContent = file.path;
      p.children[2].textContent = file.current ? "current" : "not current for the declaration";
      p.children[2].className = file.current ? "current" : "stale";
      files.appendChild(p);
      if (!file.current) {
        const pre = document.createElement("pre");
        pre.textContent = file.diff;
        files.appendChild(pre);
      }
    }
  } catch (error) {
    $("y-error").textContent = error.message;
  }
}

// ---------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", async () => {
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => show(button.dataset.view));
  }
  $("collection").addEventListener("change", (event) => {
    state.collection = event.target.value;
    $("y-census").textContent = "";
    for (const id of ["c-price", "c-by", "c-where"]) {
      $(id).value = "";
      delete $(id).dataset.typed;
    }
    chartDefaults();
  });
  $("query-form").addEventListener("submit", (event) => { event.preventDefault(); runQuery(false); });
  $("q-explain").addEventListener("click", explain);
  $("q-next").addEventListener("click", () => runQuery(true));
  $("q-cancel").addEventListener("click", cancelQuery);
  $("chart-form").addEventListener("submit", (event) => { event.preventDefault(); drawBars(); });
  for (const id of ["c-price", "c-by", "c-where"]) {
    $(id).addEventListener("input", () => { $(id).dataset.typed = "true"; });
  }
  $("live-form").addEventListener("submit", (event) => { event.preventDefault(); startLive(); });
  $("l-stop").addEventListener("click", stopLive);
  $("series-refresh").addEventListener("click", () => Promise.all([loadSeries(true), loadTiers()]).catch((error) => {
    $("series-error").textContent = error.message;
  }));
  $("layout-form").addEventListener("submit", (event) => { event.preventDefault(); loadLayout(); });
  try {
    await loadCatalog();
    document.body.dataset.ready = "true";
    await Promise.all([loadSeries(), loadTiers()]);
  } catch (error) {
    $("series-error").textContent = error.message;
  }
  const chart = $("c-chart");
  Plotly.newPlot(chart, [], {margin: {t: 20}}, PLOT_CONFIG).then(() => chart.on("plotly_relayout", onZoom));
});
