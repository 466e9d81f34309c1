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
    // Days the chart spans (its x values skip the empty stretches: pages/shared.ts daysOf).
    const span = xs.length ? (xs[xs.length - 1] - xs[0]) / 86400 + 1 : 0;
    const opts = {
      width: Math.max(280, box.clientWidth),
      height: 220,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      scales: { x: { time: true } },
      // Daily data: ticks on whole days (1, 2, 7, 14 days, ~a month, ~a year, up to ~10,000 years
      // apart: a range may span the whole calendar, its empty ends drawn as one flat stretch).
      axes: [
        {
          incrs: [1, 2, 7, 14, 30, 91, 365, 730, 1826, 3652, 7305, 18262, 36525, 182625, 365250, 1826250].map(
            (d) => d * 86400,
          ),
          // Month-day on the axis, the month once ticks are a month apart, the year once a year
          // apart (the legend shows the full date of the day under the cursor).
          values: (_u, ticks, _axis, _space, incr) =>
            ticks.map((t) => {
              const iso = new Date(t * 1000).toISOString();
              return incr >= 365 * 86400
                ? iso.slice(0, 4)
                : incr >= 30 * 86400
                  ? iso.slice(0, 7)
                  : iso.slice(5, 10);
            }),
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
          points: { show: span <= 62 },
          spanGaps: false,
        })),
      ],
    };
    // A partial day (the open day so far, pages/shared.ts partialDays): hatched and labelled, so that its
    // lower figures are not read as a day that fell.
    const partial = (spec.partial || []).map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
    if (partial.length) {
      opts.hooks = {
        draw: [
          (u) => {
            const ctx = u.ctx;
            const { top, height, left, width } = u.bbox;
            ctx.save();
            ctx.beginPath();
            ctx.rect(left, top, width, height);
            ctx.clip();
            for (const t of partial) {
              const x0 = u.valToPos(t - 43200, 'x', true);
              const x1 = u.valToPos(t + 43200, 'x', true);
              ctx.save();
              ctx.beginPath();
              ctx.rect(x0, top, x1 - x0, height);
              ctx.clip();
              ctx.fillStyle = 'rgba(100, 116, 139, 0.12)';
              ctx.fillRect(x0, top, x1 - x0, height);
              ctx.strokeStyle = 'rgba(100, 116, 139, 0.5)';
              ctx.lineWidth = 1;
              for (let x = x0 - height; x < x1; x += 8) {
                ctx.beginPath();
                ctx.moveTo(x, top + height);
                ctx.lineTo(x + height, top);
                ctx.stroke();
              }
              ctx.restore();
              ctx.fillStyle = '#475569';
              ctx.font = `${12 * devicePixelRatio}px sans-serif`;
              ctx.textAlign = 'right';
              ctx.fillText('today so far', Math.min(x1, left + width) - 4, top + 14 * devicePixelRatio);
            }
            ctx.restore();
          },
        ],
      };
      box.dataset.partial = spec.partial.join(' ');
    }
    const plot = new uPlot(opts, [xs, ...spec.series.map((s) => s.values)], box);
    box.dataset.drawn = 'true';
    new ResizeObserver(() => plot.setSize({ width: Math.max(280, box.clientWidth), height: 220 })).observe(
      box,
    );
  }
  document.body.dataset.chartsDrawn = String(document.querySelectorAll('.chart[data-drawn]').length);
})();
