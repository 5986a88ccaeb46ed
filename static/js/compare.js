// Overlay each metric's training curve for the compared runs (one SVG per metric, one line per run).
(function () {
  const data = JSON.parse(document.getElementById("compare-curves").textContent);
  const target = document.getElementById("compare-plots");
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];
  const metrics = new Set();
  data.forEach((run) => run.rows.forEach((row) => Object.keys(row).forEach((k) => metrics.add(k))));
  ["epoch", "seconds"].forEach((k) => metrics.delete(k));
  if (!metrics.size) { target.textContent = "No train.csv rows for these runs."; return; }
  for (const name of metrics) {
    const series = data.map((run) => run.rows.filter((r) => Number.isFinite(r[name])).map((r, i) => [r.epoch ?? i + 1, r[name]]));
    const all = series.flat();
    if (!all.length) continue;
    const width = 320, height = 170, pad = 30;
    const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const sx = (x) => pad + ((x - x0) / (x1 - x0 || 1)) * (width - pad - 6);
    const sy = (y) => height - pad + 6 - ((y - y0) / (y1 - y0 || 1)) * (height - pad - 6);
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("data-metric", name);
    series.forEach((points, i) => {
      if (!points.length) return;
      const line = document.createElementNS(NS, "polyline");
      line.setAttribute("points", points.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" "));
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", COLORS[i % COLORS.length]);
      line.setAttribute("stroke-width", "1.5");
      line.setAttribute("data-run", data[i].run_id);
      svg.append(line);
    });
    const figure = document.createElement("figure");
    figure.className = "curve";
    const caption = document.createElement("figcaption");
    caption.textContent = name + " — " + data.map((run, i) => `${run.run_id} (${COLORS[i % COLORS.length]})`).join(", ");
    figure.append(svg, caption);
    target.append(figure);
  }
})();
