// The project page: each live run's state and health update without a reload.
(function () {
  const root = document.getElementById("project-live");
  if (!root) return;
  const body = document.querySelector("#live-runs tbody");

  function rowFor(runId) {
    let row = body.querySelector(`tr[data-run-id="${CSS.escape(runId)}"]`);
    if (row) return row;
    body.querySelector("tr.empty")?.remove();
    row = document.createElement("tr");
    row.dataset.runId = runId;
    const link = document.createElement("a");
    link.href = `/runs/${encodeURIComponent(runId)}/`;
    link.textContent = runId;
    const first = document.createElement("td");
    first.append(link);
    row.append(first, document.createElement("td"));
    for (const name of ["run-state", "run-health", "run-last"]) {
      const cell = document.createElement("td");
      cell.className = name;
      row.append(cell);
    }
    body.append(row);
    return row;
  }

  window.liveSocket(`/ws/projects/${root.dataset.slug}/`, {
    onMessage(message) {
      const row = rowFor(message.run_id);
      if (message.state_label) row.querySelector(".run-state").textContent = message.state_label;
      if (message.health !== undefined) row.querySelector(".run-health").textContent = message.health || "—";
      if (message.message) row.querySelector(".run-last").textContent = message.message;
    },
  });
})();
