// netperfd run page: live intervals over server-sent events (charts: charts.js).
// No framework, no external code.
(function () {
  "use strict";
  var box = document.getElementById("run");
  if (!box) { return; }
  var runId = box.getAttribute("data-run");
  var live = box.getAttribute("data-live") === "true";
  // A failed or monitor-only run has no Intervals table: nothing to fill then.
  var tbody = document.getElementById("intervals");
  if (!tbody) { return; }
  var legs = Array.prototype.map.call(document.querySelectorAll("tr[data-leg]"), function (tr) {
    return { id: tr.getAttribute("data-leg"), n: tr.getAttribute("data-n"), row: tr, now: 0 };
  });
  var legId = {};
  legs.forEach(function (l) { legId[l.n] = l.id; });
  // Rows already on the page: "seq", or "leg id:seq" for a leg's ("leg 2 · 5").
  var seen = {};
  Array.prototype.forEach.call(tbody.querySelectorAll("tr[data-seq]"), function (tr) {
    var m = /^leg (\d+) · /.exec(tr.children[0] ? tr.children[0].textContent : "");
    var seq = tr.getAttribute("data-seq");
    seen[m && legId[m[1]] ? legId[m[1]] + ":" + seq : seq] = true;
  });

  var size = window.netperfdUnits.size, rate = window.netperfdUnits.rate;
  function pct(l, t) { return t > 0 ? (100 * Math.min(l, t) / t).toFixed(2) : "0.00"; }

  // The two protocol columns: TCP Retr / Cwnd; UDP jitter / lost-total (receiver) or datagrams.
  function cols(s) {
    if (s.udp) {
      if (s.sender) { return ["", s.udp.packets + " datagrams"]; }
      return [s.udp.jitter_ms.toFixed(3) + " ms", s.udp.lost + "/" + s.udp.packets + " (" + pct(s.udp.lost, s.udp.packets) + " %)"];
    }
    return [s.tcp ? String(s.tcp.retransmits) : "", s.tcp ? size(s.tcp.snd_cwnd) : ""];
  }

  function cell(tr, text) { var td = document.createElement("td"); td.textContent = text; tr.appendChild(td); }

  function addRow(seq, id, role, s, e, bytes, bps, c1, c2, sum, omitted) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-seq", seq);
    if (prefix) { id = prefix + id; }
    tr.setAttribute("data-bps", sum ? bps : 0);
    if (sum) { tr.className = "sum"; }
    cell(tr, id); cell(tr, role);
    cell(tr, s.toFixed(2) + "-" + e.toFixed(2) + " s" + (omitted ? " (omitted)" : ""));
    cell(tr, size(bytes)); cell(tr, rate(bps));
    cell(tr, c1); cell(tr, c2);
    tbody.appendChild(tr);
  }

  // A multi-port run's rows name their leg ("leg 2 · 5"), as the page renders them.
  var prefix = "";
  function addInterval(seq, rec, leg) {
    var key = leg ? leg.id + ":" + seq : seq;
    if (seen[key]) { return; }
    seen[key] = true;
    prefix = leg ? "leg " + leg.n + " · " : "";
    [true, false].forEach(function (sender) {
      var g = rec.streams.filter(function (s) { return s.sender === sender; });
      g.forEach(function (s) {
        var c = cols(s);
        addRow(seq, String(s.id), sender ? "sender" : "receiver", s.start, s.end, s.bytes, s.bits_per_second,
          c[0], c[1], g.length === 1, s.omitted);
      });
      if (g.length > 1) {
        var bytes = 0, bps = 0, retr = 0, pk = 0, lost = 0, udp = false;
        g.forEach(function (s) {
          bytes += s.bytes; bps += s.bits_per_second; retr += s.tcp ? s.tcp.retransmits : 0;
          if (s.udp) { udp = true; pk += s.udp.packets; lost += s.udp.lost; }
        });
        var c1 = udp ? "" : (sender ? String(retr) : ""), c2 = "";
        if (udp) { c2 = sender ? pk + " datagrams" : lost + "/" + pk + " (" + pct(lost, pk) + " %)"; }
        addRow(seq, "SUM", sender ? "sender" : "receiver", g[0].start, g[0].end, bytes, bps, c1, c2, true, g[0].omitted);
      }
    });
    prefix = "";
    if (leg) { legInterval(leg, rec); return; }
    var now = document.getElementById("now-rate");
    var sums = tbody.querySelectorAll("tr.sum");
    if (now && sums.length) { now.textContent = sums[sums.length - 1].children[4].textContent; }
  }

  // Multi-port: each leg's row in the Legs table shows its latest interval (sender and
  // receiver sums, retransmits or loss) while the run is live; "Now" is the legs' total.
  function legInterval(leg, rec) {
    var snd = 0, rcv = 0, retr = 0, pk = 0, lost = 0, hasS = false, hasR = false, udp = false;
    rec.streams.forEach(function (s) {
      if (s.sender) { snd += s.bits_per_second; hasS = true; retr += s.tcp ? s.tcp.retransmits : 0; }
      else { rcv += s.bits_per_second; hasR = true; }
      if (s.udp && !s.sender) { udp = true; pk += s.udp.packets; lost += s.udp.lost; }
    });
    var cell = function (c, t) { var td = leg.row.querySelector(c); if (td) { td.textContent = t; } };
    if (hasS) { cell(".leg-sender", rate(snd)); leg.now = snd; }
    if (hasR) { cell(".leg-receiver", rate(rcv)); if (!hasS) { leg.now = rcv; } }
    cell(".leg-loss", udp ? pct(lost, pk) + " % loss" : String(retr));
    var now = document.getElementById("now-rate");
    if (now) {
      var total = 0;
      legs.forEach(function (l) { total += l.now || 0; });
      now.textContent = rate(total);
    }
  }

  if (!live || !window.EventSource) { return; }
  legs.forEach(function (leg) {
    var les = new EventSource("/api/runs/" + leg.id + "/events");
    les.onmessage = function (m) {
      var ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev.type === "interval") { addInterval(ev.seq, ev.record, leg); }
      if (ev.type === "done") { les.close(); }
    };
  });
  var es = new EventSource("/api/runs/" + runId + "/events");
  es.onmessage = function (m) {
    var ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    if (ev.type === "interval") { addInterval(ev.seq, ev.record); }
    if (ev.type === "done") {
      es.close();
      var st = document.getElementById("status");
      if (st) { st.textContent = "finished"; }
      window.setTimeout(function () { window.location.reload(); }, 300);
    }
  };
}());
