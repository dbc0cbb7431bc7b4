// netperfd run charts: throughput per stream/leg, CPU per core and port rates on one time
// axis (seconds since the run started), drawn with uPlot (static/vendor, MIT). Data from
// GET /api/runs/{id}/chart; refreshed every 2 s while the run is live. The board's drops per
// second, the slowest core's clock and the hottest zone's temperature are added below them
// once the run has ended, when the board recorded something to show.
(function () {
  "use strict";
  var box = document.getElementById("charts");
  if (!box || !window.uPlot) { return; }
  var runId = box.getAttribute("data-run");
  var live = box.getAttribute("data-live") === "true";
  var plots = {};
  var sync = window.uPlot.sync("run-" + runId);
  var colors = ["#0b63c5", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#1098ad", "#c2255c", "#5c940d",
    "#364fc7", "#a61e4d"];

  // Rates as every page writes them (units.js: one scale, Mbit/s); the axis carries the unit
  // once and its ticks the numbers.
  function mbit(v) {
    return v === null || v === undefined || !isFinite(v) ? "—" : window.netperfdUnits.rate(v);
  }
  // Ticks of one axis share their decimals (those the tick step needs), so an axis reads
  // 0 / 5000 / 10000, not 0.000 / 5000.0 / 10000.0.
  function mbitTicks(ticks) {
    var step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) / 1e6 : 1;
    var d = step >= 1 || step <= 0 ? 0 : Math.min(3, Math.ceil(-Math.log10(step) - 1e-9));
    return ticks.map(function (v) { return (v / 1e6).toFixed(d); });
  }
  var kinds = {
    throughput: { title: "Throughput", fmt: mbit, ticks: mbitTicks, axis: "Mbit/s" },
    cpu: { title: "CPU per core", fmt: function (v) { return v === null || v === undefined ? "—" : v.toFixed(0) + " %"; }, max: 100 },
    ports: { title: "Port rates", fmt: mbit, ticks: mbitTicks, axis: "Mbit/s" },
    rtt: { title: "Round-trip time", fmt: function (v) { return v === null || v === undefined ? "—" : (v < 10 ? v.toFixed(2) : v.toFixed(0)) + " ms"; } },
    drops: { title: "Drops on the board", fmt: function (v) { return v === null || v === undefined ? "—" : v.toFixed(0); }, axis: "drops/s as counted (a qdisc: skbs)", extra: true },
    clock: { title: "CPU clock (slowest core)", fmt: function (v) { return v === null || v === undefined ? "—" : v.toFixed(0) + " MHz"; }, axis: "MHz", extra: true },
    temperature: { title: "Temperature (hottest zone)", fmt: function (v) { return v === null || v === undefined ? "—" : v.toFixed(1) + " °C"; }, axis: "°C", extra: true }
  };

  // One time axis: every chart spans 0 … the latest sample of any chart.
  var tMax = 1;
  function xRange() { return [0, tMax]; }

  function options(kind, ch, width) {
    var k = kinds[kind];
    var series = [{ label: "t (s)", value: function (u, v) { return v === null ? "—" : v.toFixed(1) + " s"; } }];
    ch.series.forEach(function (s, i) {
      series.push({
        label: s.label,
        stroke: colors[i % colors.length],
        width: s.label.indexOf("sum") >= 0 || s.label.indexOf("softirq") >= 0 ? 2 : 1.5,
        dash: s.label.indexOf("softirq") >= 0 ? [5, 4] : undefined,
        // Throughput lines bridge the time points of other lines (streams and legs end their
        // intervals a few ms apart); a lost ICMP probe stays a gap.
        spanGaps: kind === "throughput" || s.label.indexOf("TCP RTT") === 0,
        value: function (u, v) { return k.fmt(v); }
      });
    });
    return {
      title: k.title,
      width: width,
      height: 190,
      cursor: { sync: { key: sync.key } },
      scales: { x: { time: false, range: xRange }, y: k.max ? { range: [0, k.max] } : { range: function (u, min, max) { return [0, Math.max(max, 1) * 1.08]; } } },
      axes: [
        { label: "seconds since start" },
        { size: 80, label: k.axis, values: function (u, ticks) { return k.ticks ? k.ticks(ticks) : ticks.map(k.fmt); } }
      ],
      series: series
    };
  }

  // A chart is as wide as its box (at least 200 px); the box follows the window.
  function width(el) { return Math.max(el.clientWidth, 200); }

  // Charts follow the window: a resize or a phone's rotation redraws them at the new width
  // (once the size has settled, 150 ms), so they never make the page scroll sideways.
  var lastWidth = box.clientWidth, pending = null;
  function fit() {
    pending = null;
    if (box.clientWidth === lastWidth) { return; }
    lastWidth = box.clientWidth;
    Object.keys(plots).forEach(function (kind) {
      var el = document.getElementById("chart-" + kind);
      if (el && plots[kind]) { plots[kind].setSize({ width: width(el), height: 190 }); }
    });
  }
  function later() { if (pending === null) { pending = window.setTimeout(fit, 150); } }
  if (window.ResizeObserver) { new window.ResizeObserver(later).observe(box); }
  window.addEventListener("resize", later);
  window.addEventListener("orientationchange", later);

  function render(data) {
    // Latency runs: the RTT chart goes first, on the same time axis (only when the run has one).
    if (data.rtt && !document.getElementById("chart-rtt")) {
      var r = document.createElement("div");
      r.id = "chart-rtt";
      r.className = "chart";
      box.insertBefore(r, box.firstChild);
    }
    // Board charts: only those the run has, after the others.
    Object.keys(kinds).forEach(function (kind) {
      if (kinds[kind].extra && data[kind] && data[kind].t.length && !document.getElementById("chart-" + kind)) {
        var b = document.createElement("div");
        b.id = "chart-" + kind;
        b.className = "chart";
        box.appendChild(b);
      }
    });
    Object.keys(kinds).forEach(function (kind) {
      var t = data[kind] && data[kind].t;
      if (t && t.length) { tMax = Math.max(tMax, t[t.length - 1]); }
    });
    Object.keys(kinds).forEach(function (kind) {
      var el = document.getElementById("chart-" + kind);
      if (!el) { return; }
      var ch = data[kind];
      if (!ch || !ch.t.length) {
        if (!plots[kind]) { el.textContent = kinds[kind].title + (live ? ": no samples yet" : ": none recorded"); }
        return;
      }
      var d = [ch.t].concat(ch.series.map(function (s) { return s.values; }));
      var p = plots[kind];
      if (p && p.series.length === d.length) { p.setData(d); p.setScale("x", { min: 0, max: tMax }); return; }
      if (p) { p.destroy(); }
      el.textContent = "";
      plots[kind] = new window.uPlot(options(kind, ch, width(el)), d, el);
      el.setAttribute("data-series", String(ch.series.length));
    });
  }

  function load() {
    var x = new XMLHttpRequest();
    x.open("GET", "/api/runs/" + runId + "/chart");
    x.onload = function () {
      if (x.status !== 200) { return; }
      try { render(JSON.parse(x.responseText)); } catch (e) { /* keep the last chart */ }
    };
    x.send();
  }

  load();
  if (live) { window.setInterval(load, 2000); }
}());
