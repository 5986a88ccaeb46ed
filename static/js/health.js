// Refreshes the dashboard's health panel from /health.json without reloading the page.
(function () {
  const panel = document.getElementById("health");
  if (!panel) return;
  const stamp = document.getElementById("health-updated");

  function render(checks) {
    for (const check of checks) {
      const row = panel.querySelector(`li[data-check="${CSS.escape(check.name)}"]`);
      if (!row) continue;
      // "starting": the stack's own worker and beat have not had time to measure yet (not a missing worker).
      row.className = check.starting ? "starting" : check.ok ? "ok" : "down";
      row.querySelector(".status").textContent = check.starting ? "STARTING" : check.ok ? "OK" : "DOWN";
      row.querySelector(".detail").textContent = check.detail;
    }
    stamp.textContent = "Last checked " + window.localTime(new Date().toISOString(), "time") + ".";
  }

  async function refresh() {
    try {
      const response = await fetch(panel.dataset.url, { credentials: "same-origin" });
      const body = await response.json();
      render(body.checks);
    } catch (error) {
      stamp.textContent = "The dashboard itself could not be reached: " + error.message;
    }
  }

  setInterval(refresh, 15000);
})();
