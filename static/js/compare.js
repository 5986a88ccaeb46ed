// Overlay the compared runs' training curves: one chart per metric, one line per run; a legend that
// names each run (and shows its value under the cursor), or past two runs one key line per group.
(function () {
  const data = JSON.parse(document.getElementById("compare-curves").textContent);
  const charts = new window.MetricCharts(document.getElementById("compare-plots"), {
    empty: "No train.csv rows for these runs.",
  });
  // One colour per group of replicates (runs that differ only in their seed), named once on its key line.
  const grouped = new Set(data.map((run) => run.group)).size < data.length;
  charts.setSeries(
    data.map((run) => ({
      label: run.title ? `${run.run_id} · ${run.title}` : run.run_id,
      rows: run.rows,
      color: run.index,
      group: grouped ? run.group : null,
    })),
  );
})();
