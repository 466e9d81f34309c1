// Draws the page's charts with uPlot (served from node_modules by the dashboard server). The
// figures and tables are rendered by the server; this script only turns the page's chart data
// (the JSON in #chart-data: days and series per chart) into canvases. Without it the page still
// shows every number.
(() => {
  const COLORS = ['#2563eb', '#dc2626', '#059669', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d'];
  const data = JSON.parse(document.getElementById('chart-data')?.textContent || '{}');
  const boxes = document.querySelectorAll('.chart[data-chart]');
  for (const box of boxes) {
    const spec = data[box.dataset.chart];
    if (!spec || typeof uPlot === 'undefined') continue;
    const xs = spec.days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
    const opts = {
      width: Math.max(280, box.clientWidth),
      height: 220,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      scales: { x: { time: true } },
      // Daily data: ticks on whole days (1, 2, 7, 14 days, ~a month, ~a year apart), shown as dates.
      axes: [
        {
          incrs: [1, 2, 7, 14, 30, 91, 365].map((d) => d * 86400),
          // Month-day on the axis (the legend shows the full date of the day under the cursor).
          values: (_u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)),
          space: 50,
        },
        { size: 60 },
      ],
      legend: { live: true },
      series: [
        {
          label: 'day (UTC)',
          value: (_u, v) => (v == null ? '–' : new Date(v * 1000).toISOString().slice(0, 10)),
        },
        ...spec.series.map((s, i) => ({
          label: s.label,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          points: { show: xs.length <= 62 },
          spanGaps: false,
        })),
      ],
    };
    const plot = new uPlot(opts, [xs, ...spec.series.map((s) => s.values)], box);
    box.dataset.drawn = 'true';
    new ResizeObserver(() => plot.setSize({ width: Math.max(280, box.clientWidth), height: 220 })).observe(
      box,
    );
  }
  document.body.dataset.chartsDrawn = String(document.querySelectorAll('.chart[data-drawn]').length);
})();
