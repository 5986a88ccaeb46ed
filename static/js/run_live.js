// The live run page: state badge, timeline, log tail, heartbeat and training curves over Channels.
(function () {
  const root = document.getElementById("run-live");
  if (!root) return;
  const runId = root.dataset.runId;
  const badge = document.getElementById("run-state");
  const health = document.getElementById("run-health");
  const timeline = document.getElementById("timeline");
  const logTail = document.getElementById("log-tail");
  const curves = document.getElementById("curves");
  const heartbeat = document.getElementById("heartbeat");
  const MAX_LOG_LINES = 500;
  // Health and heartbeat describe a live run; a closed one shows neither ("ok since …" would mislead).
  const LIVE = new Set(["preflight", "smoke", "launching", "running", "exited"]);
  const seen = new Set();
  let rows = [];

  function setState(state, label) {
    if (!state) return;
    badge.className = "state state-" + state;
    badge.textContent = label || state;
  }

  function setHealth(value, since) {
    health.className = "health health-" + (value || "none");
    health.textContent = value ? value + (since ? " since " + new Date(since).toLocaleTimeString() : "") : "";
  }

  function addEvent(event) {
    if (seen.has(event.id)) return;
    seen.add(event.id);
    const item = document.createElement("li");
    const when = document.createElement("span");
    when.className = "muted small";
    when.textContent = new Date(event.at).toLocaleTimeString() + " ";
    const tag = document.createElement("span");
    tag.className = "tag";
    tag.textContent = event.kind;
    item.append(when, tag, " " + event.message);
    timeline.append(item);
  }

  function appendLog(lines) {
    const kept = (logTail.textContent ? logTail.textContent.split("\n") : []).concat(lines);
    logTail.textContent = kept.slice(-MAX_LOG_LINES).join("\n");
    logTail.scrollTop = logTail.scrollHeight;
  }

  function drawCurves() {
    if (!rows.length) return;
    const metrics = Object.keys(rows[0]).filter((k) => k !== "epoch" && k !== "seconds");
    curves.replaceChildren(...metrics.map((name) => chart(name)));
  }

  function chart(name) {
    const NS = "http://www.w3.org/2000/svg";
    const width = 260, height = 140, pad = 28;
    const points = rows.filter((r) => Number.isFinite(r[name])).map((r, i) => [r.epoch ?? i + 1, r[name]]);
    const figure = document.createElement("figure");
    figure.className = "curve";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("data-metric", name);
    if (points.length) {
      const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
      const [x0, x1] = [Math.min(...xs), Math.max(...xs) || 1];
      const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
      const sx = (x) => pad + ((x - x0) / (x1 - x0 || 1)) * (width - pad - 6);
      const sy = (y) => height - pad + 6 - ((y - y0) / (y1 - y0 || 1)) * (height - pad - 6);
      const line = document.createElementNS(NS, "polyline");
      line.setAttribute("points", points.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" "));
      line.setAttribute("class", "curve-line");
      const axis = document.createElementNS(NS, "path");
      axis.setAttribute("d", `M${pad},6 V${height - pad + 6} H${width - 6}`);
      axis.setAttribute("class", "curve-axis");
      svg.append(axis, line, label(NS, 2, 14, y1.toPrecision(3)), label(NS, 2, height - pad + 6, y0.toPrecision(3)),
        label(NS, width - 40, height - 6, "epoch " + x1));
    }
    const caption = document.createElement("figcaption");
    caption.textContent = name + (points.length ? " = " + points[points.length - 1][1].toPrecision(4) : "");
    figure.append(svg, caption);
    return figure;
  }

  function label(NS, x, y, text) {
    const node = document.createElementNS(NS, "text");
    node.setAttribute("x", x);
    node.setAttribute("y", y);
    node.setAttribute("class", "curve-label");
    node.textContent = text;
    return node;
  }

  async function reload() {
    const response = await fetch(root.dataset.liveUrl, { credentials: "same-origin" });
    const data = await response.json();
    setState(data.state, data.state_label);
    setHealth(LIVE.has(data.state) ? data.health : "", data.health_since);
    if (!LIVE.has(data.state)) heartbeat.textContent = "";
    timeline.replaceChildren();
    seen.clear();
    data.events.forEach(addEvent);
    rows = data.curve;
    drawCurves();
    logTail.textContent = data.log_tail;
    for (const [name, value] of Object.entries(data.fields)) {
      document.querySelectorAll(`[data-field="${name}"]`).forEach((node) => (node.textContent = value));
    }
  }

  function formatBytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return n.toFixed(i ? 1 : 0) + " " + units[i];
  }

  function showCustodyProgress(message) {
    const box = document.getElementById("custody-progress");
    if (!box || String(message.record) !== box.dataset.record) return;
    box.hidden = false;
    const bar = document.getElementById("custody-bar");
    bar.max = Math.max(message.total_bytes, 1);
    bar.value = message.bytes_done;
    const eta = message.eta ? ` · ETA ${Math.ceil(message.eta)} s` : "";
    document.getElementById("custody-progress-text").textContent =
      `${formatBytes(message.bytes_done)} of ${formatBytes(message.total_bytes)} · ` +
      `${message.files_done}/${message.file_count} files · ${formatBytes(message.rate)}/s${eta}`;
  }

  let pending = null;
  function reloadSoon() {
    // Several events arrive together at a transition: one re-read of the DB (and of the page's
    // state-driven parts: buttons, failure, preflight/smoke, custody) covers them all.
    clearTimeout(pending);
    pending = setTimeout(() => {
      reload();
      window.swapLiveFragments();
    }, 300);
  }

  window.liveSocket(`/ws/runs/${runId}/`, {
    onOpen: reload,
    onMessage(message) {
      if (message.type === "event") {
        addEvent(message);
        setState(message.state, message.state_label);
        if (message.kind !== "alert") reloadSoon();
      } else if (message.type === "log") {
        appendLog(message.lines);
      } else if (message.type === "curve") {
        rows = rows.concat(message.rows);
        drawCurves();
      } else if (message.type === "custody") {
        showCustodyProgress(message);
      } else if (message.type === "status") {
        const live = LIVE.has(message.state);
        setHealth(live ? message.health : "");
        heartbeat.textContent = live && message.heartbeat_age != null ? `heartbeat ${Math.round(message.heartbeat_age)} s ago` : "";
      }
    },
  });
})();
