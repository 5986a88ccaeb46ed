// Overlay the compared runs' training curves: one chart per metric, one line per run, a legend that
// names each run (and shows its value under the cursor).
(function () {
  const data = JSON.parse(document.getElementById("compare-curves").textContent);
  const charts = new window.MetricCharts(document.getElementById("compare-plots"), {
    empty: "No train.csv rows for these runs.",
  });
  charts.setSeries(data.map((run) => ({ label: run.title ? `${run.run_id} · ${run.title}` : run.run_id, rows: run.rows })));
})();
