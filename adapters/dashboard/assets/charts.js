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
// The drawing area: WIDTH × HEIGHT user units, the plot inside margins
// that hold the y axis' labels (left) and the x axis' (bottom).
const WIDTH = 300, HEIGHT = 110;
const LEFT = 46, RIGHT = 6, TOP = 6, BOTTOM = 16;

// The four charts of a queue: the series they draw, how, how their
// latest value reads, and how their y axis is scaled and labelled (with
// its unit).
const CHARTS = [
  { key: 'completed', title: 'completed/min', kind: 'bars', fmt: (v) => String(v), scale: countScale, tick: (v) => `${fmtCount(v)}/min` },
  { key: 'failed', title: 'failed/min', kind: 'bars', fmt: (v) => String(v), scale: countScale, tick: (v) => `${fmtCount(v)}/min` },
  { key: 'depth', title: 'due jobs', kind: 'line', fmt: (v) => String(v), scale: countScale, tick: (v) => (v === 1 ? '1 job' : `${fmtCount(v)} jobs`) },
  { key: 'age', title: 'oldest due', kind: 'line', fmt: (v) => fmtDuration(Math.round(v)), scale: durationScale, tick: fmtShortDuration },
];

// countScale is the y scale of counts up to max: ticks at a step of 1, 2
// or 5 × 10^n (whole numbers), from 0 to the first tick at or above max,
// at most 4 intervals. An empty chart gets 0 and 1.
export function countScale(max) {
  if (!(max > 0)) return [0, 1];
  let step = 1;
  for (let p = 1; ; p *= 10) {
    const s = [p, 2 * p, 5 * p].find((c) => max / c <= 4);
    if (s) { step = s; break; }
  }
  return ticksTo(max, step);
}

// durationScale is the y scale of ages in seconds up to max: ticks at a
// step people read as a duration (1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10,
// 15, 30 min, 1, 2, 3, 6, 12 h, 1 d …), at most 4 intervals.
export function durationScale(max) {
  if (!(max > 0)) return [0, 1];
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  let step = steps.find((c) => max / c <= 4);
  if (!step) step = 86400 * Math.ceil(max / 86400 / 4);
  return ticksTo(max, step);
}

function ticksTo(max, step) {
  const out = [];
  for (let v = 0; v < max + step; v += step) {
    out.push(v);
    if (v >= max) break;
  }
  return out;
}

// fmtCount renders a tick's count: 950, 1.5k, 12k, 3M.
function fmtCount(v) {
  if (v < 1000) return String(v);
  if (v < 1e6) return `${+(v / 1000).toFixed(v < 10000 ? 1 : 0)}k`;
  return `${+(v / 1e6).toFixed(v < 1e7 ? 1 : 0)}M`;
}

// fmtShortDuration renders a tick's seconds: 0, 30 s, 5 min, 2 h, 1 d.
function fmtShortDuration(v) {
  if (v === 0) return '0';
  if (v < 60) return `${v} s`;
  if (v < 3600) return `${+(v / 60).toFixed(1)} min`;
  if (v < 86400) return `${+(v / 3600).toFixed(1)} h`;
  return `${+(v / 86400).toFixed(1)} d`;
}

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
// element as bars or as a line broken where samples are missing, against
// a y axis of chart c's scale (ticks labelled with their unit, faint grid
// lines) and an x axis of local clock times every quarter hour.
function draw(el, values, minutes, c) {
  const ticks = c.scale(Math.max(0, ...values.filter((v) => v !== null)));
  const top = ticks[ticks.length - 1];
  const n = values.length;
  const plotW = WIDTH - LEFT - RIGHT, bottom = HEIGHT - BOTTOM;
  const step = plotW / n;
  const y = (v) => bottom - (v / top) * (bottom - TOP);
  const parts = [];
  for (const t of ticks) {
    const yy = y(t).toFixed(1);
    parts.push(svg('line', { class: t === 0 ? 'axis' : 'grid-line', x1: LEFT, y1: yy, x2: WIDTH - RIGHT, y2: yy }));
    const label = svg('text', { x: LEFT - 4, y: yy, 'text-anchor': 'end', 'dominant-baseline': 'middle', 'data-axis': 'y', 'data-value': t });
    label.textContent = c.tick(t);
    parts.push(label);
  }
  parts.push(svg('line', { class: 'axis', x1: LEFT, y1: TOP, x2: LEFT, y2: bottom }));
  minutes.forEach((t, i) => {
    if (new Date(t).getMinutes() % 15 !== 0) return;
    const x = (LEFT + (i + 0.5) * step).toFixed(1);
    parts.push(svg('line', { class: 'axis', x1: x, y1: bottom, x2: x, y2: bottom + 3 }));
    const label = svg('text', { x, y: HEIGHT - 2, 'text-anchor': 'middle', 'data-axis': 'x' });
    label.textContent = fmtMinute(t);
    parts.push(label);
  });
  if (c.kind === 'bars') {
    values.forEach((v, i) => {
      if (!v) return;
      const yy = y(v);
      const bar = svg('rect', {
        x: (LEFT + i * step + 0.5).toFixed(1), y: yy.toFixed(1),
        width: Math.max(1, step - 1).toFixed(1), height: Math.max(1, bottom - yy).toFixed(1),
        fill: 'currentColor',
      });
      const tip = svg('title');
      tip.textContent = `${fmtMinute(minutes[i])}: ${c.fmt(v)}`;
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
      run.push([LEFT + (i + 0.5) * step, y(v)]);
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
    'Each chart spans the hour up to now, the current minute at the right, with local clock times every quarter hour below and its scale at the left (hover a bar for its minute); a line breaks where no node sampled. ',
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
      const key = `${st.series.minutes[0]}|${values.join(',')}`;
      if (area._key !== key) {
        draw(area, values, st.series.minutes, c);
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
