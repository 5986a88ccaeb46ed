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
  // Which states are live is the server's (runs.models.LIVE_STATES), handed to the page once.
  const LIVE = new Set(JSON.parse(document.getElementById("run-states").textContent).live);
  const seen = new Set();
  const charts = new window.MetricCharts(curves);
  // The run's GPU use (runs/gpu_use.py): one chart per GPU and quantity, over minutes.
  const gpuUse = document.getElementById("gpu-use");
  const gpuCharts = gpuUse ? new window.MetricCharts(gpuUse, { empty: gpuUse.dataset.empty, x: "minutes" }) : null;
  if (gpuCharts) gpuCharts.setSeries([{ label: runId, rows: JSON.parse(document.getElementById("gpu-use-rows").textContent) }]);

  function setState(state, label) {
    if (!state) return;
    badge.className = "state state-" + state;
    badge.textContent = label || state;
  }

  function setHealth(value, since) {
    health.className = "health health-" + (value || "none");
    health.textContent = value ? value + (since ? " since " + window.localTime(since, "time") : "") : "";
  }

  function addEvent(event) {
    if (seen.has(event.id)) return;
    seen.add(event.id);
    const item = document.createElement("li");
    const when = document.createElement("span");
    when.className = "muted small";
    when.textContent = window.localTime(event.at, "short") + " ";
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

  async function reload() {
    const response = await fetch(root.dataset.liveUrl, { credentials: "same-origin" });
    const data = await response.json();
    setState(data.state, data.state_label);
    setHealth(LIVE.has(data.state) ? data.health : "", data.health_since);
    if (!LIVE.has(data.state)) heartbeat.textContent = "";
    timeline.replaceChildren();
    seen.clear();
    data.events.forEach(addEvent);
    charts.setSeries([{ label: runId, rows: data.curve }]);
    if (gpuCharts) gpuCharts.setSeries([{ label: runId, rows: data.gpu_use || [] }]);
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

  function showStagingProgress(message) {
    const box = document.getElementById("staging-progress");
    if (!box) return;
    box.hidden = false;
    document.getElementById("staging-name").textContent = message.dataset;
    const bar = document.getElementById("staging-bar");
    bar.max = Math.max(message.total_bytes, 1);
    bar.value = message.bytes_done;
    document.getElementById("staging-text").textContent =
      `${formatBytes(message.bytes_done)} of ${formatBytes(message.total_bytes)} · ${message.files_done} files`;
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

  // The newest durable copy's age goes on counting between the watcher's news.
  setInterval(() => {
    const age = document.getElementById("durable-age");
    const at = age ? Number(age.dataset.at) : NaN;
    if (!Number.isNaN(at)) age.textContent = `${Math.max(0, Math.round(Date.now() / 1000 - at))} s old`;
  }, 1000);

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
        charts.append(0, message.rows);
      } else if (message.type === "custody") {
        showCustodyProgress(message);
      } else if (message.type === "checkpoint") {
        reloadSoon();
      } else if (message.type === "staging") {
        showStagingProgress(message);
      } else if (message.type === "status") {
        const live = LIVE.has(message.state);
        setHealth(live ? message.health : "");
        heartbeat.textContent = live && message.heartbeat_age != null ? `heartbeat ${Math.round(message.heartbeat_age)} s ago` : "";
      }
    },
  });
})();
