// Training curves drawn with uPlot (vendored under static/vendor/uplot): one chart per logged metric,
// any metric chosen, values under the cursor in the legend, drag to zoom (double-click resets), log
// scale and smoothing. The run page draws one series and appends rows live; compare draws one per run.
window.MetricCharts = class MetricCharts {
  static COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d"];
  static AXES = new Set(["epoch", "seconds", "step", "minutes"]);
  static DEFAULT_SHOWN = 6;
  static KEYED_PAST = 2; // more series than this: one key line per group above the charts, no legend per chart
  static WHOLE = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];

  // x: the rows' key drawn across (epoch, falling back to step; the GPU chart's minutes).
  constructor(target, { empty = "No train.csv rows yet.", x = "epoch" } = {}) {
    this.target = target;
    this.empty = empty;
    this.x = x;
    this.series = [];
    this.charts = new Map();
    this.chosen = null; // the metrics a person picked; null = the first DEFAULT_SHOWN
    this.keyed = false;
    this.log = false;
    this.smoothing = 0;
    this.controls = this.makeControls();
    this.plots = document.createElement("div");
    this.plots.className = "curves";
    this.key = document.createElement("div");
    this.key.className = "chart-key";
    this.key.hidden = true;
    target.replaceChildren(this.controls, this.key, this.plots);
    new ResizeObserver(() => this.resize()).observe(this.plots);
  }

  makeControls() {
    const bar = document.createElement("div");
    bar.className = "toolbar chart-controls";
    bar.hidden = true;
    this.picker = document.createElement("span");
    this.picker.className = "metric-picker";
    const log = this.control("checkbox", "log", "log scale");
    log.input.addEventListener("change", () => { this.log = log.input.checked; this.redraw(); });
    const smooth = this.control("range", "smoothing", "smoothing");
    Object.assign(smooth.input, { min: 0, max: 0.95, step: 0.05, value: 0 });
    const shown = document.createElement("output");
    shown.textContent = "0";
    smooth.label.append(shown);
    smooth.input.addEventListener("input", () => {
      this.smoothing = Number(smooth.input.value);
      shown.textContent = this.smoothing.toFixed(2);
      this.redraw(true);
    });
    const hint = document.createElement("span");
    hint.className = "muted small";
    hint.textContent = "drag to zoom · double-click to reset";
    bar.append(this.picker, log.label, smooth.label, hint);
    return bar;
  }

  control(type, role, text) {
    const label = document.createElement("label");
    label.className = "inline";
    const input = document.createElement("input");
    input.type = type;
    input.dataset.role = role;
    label.append(input, " " + text + " ");
    return { label, input };
  }

  setSeries(series) {
    // color: an index into COLORS shared by the series of one group (the compare page's replicates);
    // group: that group's name, said once on its key line.
    this.series = series.map((one, i) => ({ ...one, rows: one.rows || [], color: one.color ?? i }));
    const keyed = this.series.length > MetricCharts.KEYED_PAST;
    if (keyed !== this.keyed) {
      // Charts made with the other kind of legend are made again.
      this.charts.forEach((chart) => { chart.plot.destroy(); chart.figure.remove(); });
      this.charts.clear();
    }
    this.keyed = keyed;
    this.drawKey();
    this.redraw(true);
  }

  // A sweep of many runs: each chart's own legend took a line or more per run under every chart. One
  // line per group instead (its colour, its name, its runs), cut with an ellipsis, the whole in a tooltip.
  drawKey() {
    this.key.hidden = !this.keyed;
    if (!this.keyed) return;
    const groups = new Map();
    for (const one of this.series) {
      if (!groups.has(one.color)) groups.set(one.color, { name: one.group, labels: [] });
      groups.get(one.color).labels.push(one.label);
    }
    this.key.replaceChildren(
      ...[...groups].map(([color, group]) => {
        const line = document.createElement("p");
        line.className = "key-line";
        line.dataset.group = group.name ?? "";
        const swatch = document.createElement("span");
        swatch.className = "swatch";
        swatch.style.background = MetricCharts.COLORS[color % MetricCharts.COLORS.length];
        const runs = group.labels.length > 1 ? `${group.labels.length} runs: ` : "";
        line.append(swatch, `${group.name ? group.name + " · " : ""}${runs}${group.labels.join(", ")}`);
        line.title = group.labels.join("\n");
        return line;
      }),
    );
  }

  append(index, rows) {
    if (!this.series[index] || !rows.length) return;
    this.series[index].rows = this.series[index].rows.concat(rows);
    this.redraw(true);
  }

  metrics() {
    const names = [];
    for (const one of this.series) {
      for (const row of one.rows) {
        for (const [key, value] of Object.entries(row)) {
          if (!MetricCharts.AXES.has(key) && Number.isFinite(value) && !names.includes(key)) names.push(key);
        }
      }
    }
    return names;
  }

  shown(metrics) {
    return metrics.filter((name, i) => (this.chosen ? this.chosen.has(name) : i < MetricCharts.DEFAULT_SHOWN));
  }

  updatePicker(metrics) {
    const have = [...this.picker.querySelectorAll("input")].map((input) => input.value);
    if (have.join("\n") === metrics.join("\n")) return;
    const shown = new Set(this.shown(metrics));
    this.picker.replaceChildren(document.createTextNode("Metrics: "));
    for (const name of metrics) {
      const { label, input } = this.control("checkbox", "metric", name);
      input.value = name;
      input.checked = shown.has(name);
      input.addEventListener("change", () => {
        this.chosen = new Set([...this.picker.querySelectorAll("input:checked")].map((box) => box.value));
        this.redraw();
      });
      this.picker.append(label);
    }
  }

  // One x array for every series (the union of their epochs) and one y array per series, smoothed.
  aligned(name) {
    const points = this.series.map((one) =>
      one.rows.filter((row) => Number.isFinite(row[name])).map((row, i) => [row[this.x] ?? row.epoch ?? row.step ?? i + 1, row[name]]),
    );
    const xs = [...new Set(points.flat().map((p) => p[0]))].sort((a, b) => a - b);
    const ys = points.map((series) => {
      const at = new Map(this.smooth(series.map((p) => p[1])).map((y, i) => [series[i][0], y]));
      return xs.map((x) => (at.has(x) ? at.get(x) : null));
    });
    return [xs, ...ys];
  }

  // Exponential moving average, debiased at the start (as TensorBoard draws it).
  smooth(values) {
    const w = this.smoothing;
    if (!w) return values;
    let last = 0;
    return values.map((v, i) => {
      last = last * w + (1 - w) * v;
      return last / (1 - w ** (i + 1));
    });
  }

  width() {
    const room = this.plots.clientWidth || this.target.clientWidth || 600;
    return room >= 760 ? Math.floor((room - 16) / 2) : Math.max(260, room);
  }

  redraw(keepZoom = false) {
    const metrics = this.metrics();
    this.controls.hidden = !metrics.length;
    if (!metrics.length) {
      this.plots.replaceChildren(Object.assign(document.createElement("p"), { className: "muted", textContent: this.empty }));
      this.charts.clear();
      return;
    }
    this.updatePicker(metrics);
    const shown = this.shown(metrics);
    for (const [name, chart] of this.charts) {
      if (!shown.includes(name)) {
        chart.plot.destroy();
        chart.figure.remove();
        this.charts.delete(name);
      }
    }
    this.plots.querySelector("p.muted")?.remove();
    for (const name of shown) {
      const data = this.aligned(name);
      const log = this.log && data.slice(1).flat().every((y) => y === null || y > 0);
      const chart = this.charts.get(name);
      if (chart && chart.log === log && keepZoom) {
        chart.plot.setData(data, !chart.zoomed);
      } else {
        if (chart) {
          chart.plot.destroy();
          chart.figure.remove();
        }
        this.charts.set(name, this.create(name, data, log));
      }
      this.caption(name, data);
      this.plots.append(this.charts.get(name).figure); // keeps the metrics' order
    }
  }

  create(name, data, log) {
    const latest = (u) => { if (u.data[0].length) u.setLegend({ idx: u.data[0].length - 1 }); };
    const figure = document.createElement("figure");
    figure.className = "curve";
    figure.dataset.metric = name;
    figure.dataset.scale = log ? "log" : "linear";
    const caption = document.createElement("figcaption");
    figure.append(caption);
    const chart = { figure, caption, log, zoomed: false };
    const options = {
      width: this.width(),
      height: 220,
      cursor: { drag: { x: true, y: false }, focus: { prox: 24 } },
      scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
      // Epochs are whole numbers: no tick at 2.5.
      axes: [{ label: this.x, size: 36, incrs: this.x === "epoch" ? MetricCharts.WHOLE : undefined }, { size: 56 }],
      legend: { show: !this.keyed, live: true },
      series: [
        { label: this.x },
        ...this.series.map((one, i) => ({
          label: one.label,
          stroke: MetricCharts.COLORS[one.color % MetricCharts.COLORS.length],
          width: 1.6,
          spanGaps: true,
          points: { size: 4 },
          value: (u, v) => (v == null ? "—" : Number(v).toPrecision(5)),
        })),
      ],
      hooks: {
        // Away from the cursor the legend shows the latest values, not dashes.
        ready: [latest],
        setData: [latest],
        setCursor: [(u) => { if (u.cursor.idx == null) latest(u); }],
        setSelect: [(u) => { if (u.select.width > 0) chart.zoomed = true; }],
        setScale: [(u, key) => {
          if (key === "x") figure.dataset.xRange = `${u.scales.x.min}..${u.scales.x.max}`;
        }],
      },
    };
    chart.plot = new uPlot(options, data, figure);
    chart.plot.over.addEventListener("dblclick", () => { chart.zoomed = false; });
    return chart;
  }

  caption(name, data) {
    const chart = this.charts.get(name);
    const last = this.series.length === 1 ? data[1].filter((y) => y !== null).at(-1) : undefined;
    chart.caption.textContent =
      name +
      (last !== undefined ? ` = ${Number(last).toPrecision(4)}` : "") +
      (this.smoothing ? ` (smoothed ${this.smoothing.toFixed(2)})` : "") +
      (this.log && !chart.log ? " (log scale needs positive values)" : "");
  }

  resize() {
    const width = this.width();
    for (const chart of this.charts.values()) {
      if (Math.abs(chart.plot.width - width) > 4) chart.plot.setSize({ width, height: 220 });
    }
  }
};
