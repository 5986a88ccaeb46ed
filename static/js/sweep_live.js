// The sweep grid follows its cells' states without a page reload (a light poll of the grid's JSON).
(function () {
  const grid = document.getElementById("sweep-grid");
  if (!grid) return;
  async function refresh() {
    try {
      const response = await fetch(grid.dataset.url, { credentials: "same-origin" });
      const data = await response.json();
      for (const cell of data.cells) {
        const badge = grid.querySelector(`tr[data-run="${cell.run_id}"] [data-cell-state]`);
        if (badge) { badge.className = "state state-" + cell.state; badge.textContent = cell.label; }
      }
    } catch (error) { /* the next poll tries again */ }
  }
  setInterval(refresh, 5000);
})();
