// Charts of each queue's last hour, drawn as plain SVG from the store's
// queue history (GET /v1/queues/{name}/history): jobs completed and
// attempts failed per minute, the due jobs waiting, and how long the
// oldest of them had been due. Every number comes from the server — the
// counts every node wrote to the database and the gauges any node sampled
// — never from an estimate made by this page, so every open dashboard,
// whichever server it talks to, shows the same history.

import { ApiError, seg } from './api.js';
import { h, setText, setData, reconcile, fmtDuration } from './dom.js';

// HISTORY_MINUTES is the window the charts show, the current minute
// included.
export const HISTORY_MINUTES = 60;

// A queue's history is read again at most this often: the nodes write it
// once per maintenance round (5 s by default).
const REFETCH_MS = 5000;

const MINUTE = 60_000;
const SVG_NS = 'http://www.w3.org/2000/svg';
const WIDTH = 240, HEIGHT = 48, PAD = 2;

// The four charts of a queue: the series they draw, how, and how their
// latest value reads.
const CHARTS = [
  { key: 'completed', title: 'completed/min', kind: 'bars', fmt: (v) => String(v) },
  { key: 'failed', title: 'failed/min', kind: 'bars', fmt: (v) => String(v) },
  { key: 'depth', title: 'due jobs', kind: 'line', fmt: (v) => String(v) },
  { key: 'age', title: 'oldest due', kind: 'line', fmt: (v) => fmtDuration(Math.round(v)) },
];

function svg(tag, attrs) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

// series turns an answer of the history endpoint into one value per
// minute over the HISTORY_MINUTES minutes that end with the server's
// current one, oldest first: counts are 0 in minutes without a bucket,
// gauges null in minutes nobody sampled.
export function series(res) {
  const now = Date.parse(res.now);
  const last = Math.floor(now / MINUTE) * MINUTE;
  const first = last - (HISTORY_MINUTES - 1) * MINUTE;
  const byMinute = new Map();
  for (const b of Array.isArray(res.buckets) ? res.buckets : []) byMinute.set(Date.parse(b.minute), b);
  const out = { minutes: [], completed: [], failed: [], depth: [], age: [] };
  for (let t = first; t <= last; t += MINUTE) {
    const b = byMinute.get(t);
    out.minutes.push(t);
    out.completed.push(b ? Number(b.completed) || 0 : 0);
    out.failed.push(b ? Number(b.failed) || 0 : 0);
    out.depth.push(b && b.depth !== null && b.depth !== undefined ? Number(b.depth) : null);
    out.age.push(b && b.oldest_age_seconds !== null && b.oldest_age_seconds !== undefined ? Number(b.oldest_age_seconds) : null);
  }
  return out;
}

// draw renders values (one per minute, null = no sample) into the svg
// element as bars or as a line broken where samples are missing, scaled
// to the largest value.
function draw(el, values, minutes, kind, fmt) {
  const top = Math.max(0, ...values.filter((v) => v !== null));
  const n = values.length;
  const step = (WIDTH - 2 * PAD) / n;
  const y = (v) => HEIGHT - PAD - (top > 0 ? (v / top) * (HEIGHT - 2 * PAD) : 0);
  const parts = [svg('line', { x1: PAD, y1: HEIGHT - PAD, x2: WIDTH - PAD, y2: HEIGHT - PAD, stroke: 'currentColor', 'stroke-opacity': 0.3 })];
  if (kind === 'bars') {
    values.forEach((v, i) => {
      if (!v) return;
      const yy = y(v);
      const bar = svg('rect', {
        x: (PAD + i * step + 0.5).toFixed(1), y: yy.toFixed(1),
        width: Math.max(1, step - 1).toFixed(1), height: Math.max(1, HEIGHT - PAD - yy).toFixed(1),
        fill: 'currentColor',
      });
      const tip = svg('title');
      tip.textContent = `${fmtMinute(minutes[i])}: ${fmt(v)}`;
      bar.append(tip);
      parts.push(bar);
    });
  } else {
    let run = [];
    const flush = () => {
      if (run.length === 1) {
        parts.push(svg('circle', { cx: run[0][0].toFixed(1), cy: run[0][1].toFixed(1), r: 1.5, fill: 'currentColor' }));
      } else if (run.length > 1) {
        parts.push(svg('polyline', {
          points: run.map(([x, yy]) => `${x.toFixed(1)},${yy.toFixed(1)}`).join(' '),
          fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5, 'stroke-linejoin': 'round',
        }));
      }
      run = [];
    };
    values.forEach((v, i) => {
      if (v === null) { flush(); return; }
      run.push([PAD + (i + 0.5) * step, y(v)]);
    });
    flush();
  }
  el.replaceChildren(...parts);
}

// fmtMinute renders a minute's start as local hours and minutes.
function fmtMinute(t) {
  return new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

// latest is the newest value of values that is not null, or null.
function latest(values) {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
  return null;
}

// mountCharts builds the charts section. refresh(queues) reads the
// history of each named queue (at most once per REFETCH_MS) and redraws;
// lastMinute(queue) is the queue's completed count of the last whole
// minute, or null before its history was read (or without one).
export function mountCharts(api) {
  const list = h('div', { class: 'charts', testid: 'charts' });
  const note = h('p', { class: 'note', testid: 'charts-note' },
    `Each queue's last ${HISTORY_MINUTES} minutes, per minute, from the store's queue history: `,
    'jobs completed and attempts failed on every node, and the due jobs waiting and the oldest one\'s age as the latest sample of each minute. ',
    'Each chart spans the hour up to now, the current minute at the right (hover a bar for its minute); a line breaks where no node sampled. ',
    'Counts arrive at each node\'s next maintenance round (5 s by default).');
  const unsupported = h('p', { class: 'empty', testid: 'charts-unsupported', hidden: true,
    text: 'This server\'s store keeps no queue history, so there are no charts.' });
  const failure = h('p', { class: 'action-err', testid: 'charts-error', hidden: true });
  const root = h('section', { testid: 'charts-section' }, h('h2', { text: 'Last hour' }), note, unsupported, failure, list);
  const state = new Map(); // queue → {fetched, series}

  function createBlock(queue) {
    const charts = {};
    const block = h('div', { class: 'chart-queue', testid: 'chart-queue', data: { queue } },
      h('h3', { testid: 'chart-queue-name', text: queue }),
      h('div', { class: 'chart-grid' }, CHARTS.map((c) => {
        const value = h('span', { class: 'chart-value', testid: 'chart-value' });
        const area = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, height: HEIGHT, role: 'img', 'aria-label': `${c.title} of queue ${queue}, last hour` });
        area.dataset.testid = 'chart-svg';
        const fig = h('figure', { class: `chart chart-${c.key}`, testid: `chart-${c.key}` },
          h('figcaption', {}, `${c.title} `, value), area);
        charts[c.key] = { fig, value, area };
        return fig;
      })));
    block._charts = charts;
    return block;
  }

  function updateBlock(block, queue) {
    const st = state.get(queue);
    if (!st || !st.series) return;
    for (const c of CHARTS) {
      const { fig, value, area } = block._charts[c.key];
      const values = st.series[c.key];
      const key = values.join(',');
      if (area._key !== key) {
        draw(area, values, st.series.minutes, c.kind, c.fmt);
        area._key = key;
      }
      // For counts the current minute (still filling) and the last whole
      // one; for gauges the latest sample.
      if (c.kind === 'bars') {
        setText(value, `${c.fmt(values[values.length - 1])} now · ${c.fmt(values[values.length - 2])} the minute before`);
      } else {
        const v = latest(values);
        setText(value, v === null ? '—' : c.fmt(v));
      }
      setData(fig, 'points', values.filter((x) => x !== null && x > 0).length);
      setData(fig, 'max', Math.max(0, ...values.filter((x) => x !== null)));
      if (c.kind === 'bars') setData(fig, 'total', values.reduce((a, x) => a + x, 0));
    }
  }

  return {
    root,
    async refresh(queues) {
      const now = Date.now();
      for (const q of [...state.keys()]) if (!queues.includes(q)) state.delete(q);
      await Promise.all(queues.map(async (q) => {
        const st = state.get(q) || { fetched: 0, series: null };
        state.set(q, st);
        if (now - st.fetched < REFETCH_MS) return;
        try {
          const res = await api.get(`/queues/${seg(q)}/history?minutes=${HISTORY_MINUTES}`);
          st.series = series(res);
          st.fetched = now;
          unsupported.hidden = true;
        } catch (e) {
          if (e instanceof ApiError && e.status === 401) throw e;
          if (e instanceof ApiError && e.status === 501) {
            unsupported.hidden = false;
            st.fetched = now;
            return;
          }
          // Keep what was drawn; the table above still refreshes.
          setText(failure, `Could not read the history of queue ${q}: ${e.message}`);
          failure.hidden = false;
          return;
        }
        failure.hidden = true;
      }));
      reconcile(list, queues.filter((q) => state.get(q).series), (q) => q, createBlock, updateBlock);
    },
    lastMinute(queue) {
      const st = state.get(queue);
      if (!st || !st.series) return null;
      const c = st.series.completed;
      return c[c.length - 2];
    },
  };
}
