// Overview: every queue's job counts by state (GET /queues), its paused
// state with pause/resume, and an estimate of completed jobs per minute
// computed here from successive polls.

import { ApiError, query, seg } from './api.js';
import { h, setText, setData, reconcile, fill, badge, setBadge, serverNow, fmtDuration } from './dom.js';

export const STATES = ['scheduled', 'available', 'running', 'retryable', 'completed', 'cancelled', 'discarded'];

// How many recently created completed jobs each poll reads for the estimate.
const RECENT_LIMIT = 200;
const WINDOW_MS = 60_000;

// samples of the completed counts by queue, kept across visits to this
// screen while the page is open: [{t, counts: Map(queue → completed)}].
const samples = [];

function countRate(queue, now) {
  const inWindow = samples.filter((s) => s.t >= now - WINDOW_MS && s.counts.has(queue));
  if (inWindow.length < 2) return null;
  const first = inWindow[0], last = inWindow[inWindow.length - 1];
  const secs = (last.t - first.t) / 1000;
  if (secs < 4) return null;
  const delta = last.counts.get(queue) - first.counts.get(queue);
  return Math.max(0, delta) * 60 / secs;
}

// recentCounts counts, per queue, the completed jobs in recent whose
// finished_at is within the last minute of the server's clock. truncated is
// true when the page of recent jobs was full and its oldest entry still
// finished within the minute (so more may exist).
function recentCounts(recent) {
  const since = serverNow() - WINDOW_MS;
  const byQueue = new Map();
  let oldestInWindow = true;
  for (const j of recent) {
    const f = Date.parse(j.finished_at || '');
    if (Number.isNaN(f) || f < since) { oldestInWindow = false; continue; }
    byQueue.set(j.queue, (byQueue.get(j.queue) || 0) + 1);
  }
  return { byQueue, truncated: recent.length >= RECENT_LIMIT && oldestInWindow };
}

export function mountOverview(ctx) {
  const { api, root } = ctx;
  const msg = h('p', { class: 'action-msg', testid: 'action-result', hidden: true });
  const err = h('p', { class: 'action-err', testid: 'action-error', hidden: true });
  const tbody = h('tbody', { testid: 'queues-body' });
  const totals = h('tr', { class: 'totals', testid: 'queues-total' });
  const empty = h('p', { class: 'empty', testid: 'queues-empty', hidden: true, text: 'No queues yet: submit a job or start a worker.' });
  const windowNote = h('span', { testid: 'throughput-window' });
  root.append(
    h('h1', { text: 'Queues' }),
    msg, err,
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'queues-table' },
        h('thead', {}, h('tr', {},
          h('th', { text: 'Queue' }), h('th', { text: 'Status' }),
          STATES.map((s) => h('th', { class: 'num', text: s })),
          h('th', { class: 'num', text: 'total' }),
          h('th', { class: 'num', text: 'completed/min*', title: 'An estimate made by this page; see the note below.' }),
          h('th', { text: '' }))),
        tbody,
        h('tfoot', {}, totals))),
    empty,
    h('p', { class: 'note', testid: 'throughput-note' },
      '* completed/min is an estimate made by this page, not a server metric: the larger of ',
      `(a) the completed jobs whose finished_at falls in the last 60 s among the ${RECENT_LIMIT} most recently created completed jobs, and `,
      '(b) the growth of each queue\'s completed count between this page\'s polls over up to the last 60 s, scaled to a minute. ',
      'Jobs deleted at completion (completed retention 0) or pruned meanwhile are not seen, so it can under-count; ',
      '"≥" marks a count cut off by the page size. For exact rates use the Prometheus metrics. ',
      windowNote),
  );

  function notify(text, isError) {
    setText(isError ? err : msg, text);
    (isError ? err : msg).hidden = false;
    (isError ? msg : err).hidden = true;
  }

  async function togglePause(q) {
    const pausing = !q.paused;
    if (pausing) {
      const ok = await ctx.confirm(`Pause queue ${q.queue}?`,
        `No node will claim jobs of "${q.queue}" until it is resumed. Running jobs finish normally.`, 'Pause');
      if (!ok) return;
    }
    try {
      const res = await api.post(`/queues/${seg(q.queue)}/${pausing ? 'pause' : 'resume'}`);
      const name = res && res.queue && res.queue.queue ? res.queue.queue : q.queue;
      notify(`Queue ${name} ${pausing ? 'paused' : 'resumed'}.`, false);
    } catch (e) {
      notify(`Could not ${pausing ? 'pause' : 'resume'} queue ${q.queue}: ${e.message}`, true);
    }
    ctx.refresh();
  }

  function createRow(q) {
    const cells = {};
    const pauseBtn = h('button', { type: 'button', class: 'small', testid: 'queue-pause-toggle' });
    pauseBtn.addEventListener('click', () => togglePause(pauseBtn._queue));
    const tr = h('tr', { testid: 'queue-row', data: { queue: q.queue } },
      h('td', {}, h('a', { testid: 'queue-name', href: `#/jobs?queue=${encodeURIComponent(q.queue)}` })),
      h('td', {}, badge('', 'queue-paused')),
      STATES.map((s) => (cells[s] = h('td', { class: 'num' },
        h('a', { testid: `count-${s}`, href: `#/jobs?${new URLSearchParams({ queue: q.queue, state: s })}` })))),
      h('td', { class: 'num', testid: 'count-total' }),
      h('td', { class: 'num', testid: 'queue-throughput' }),
      h('td', {}, pauseBtn));
    tr._cells = cells;
    tr._pause = pauseBtn;
    return tr;
  }

  function updateRow(tr, q) {
    tr._pause._queue = q;
    setText(tr.querySelector('[data-testid="queue-name"]'), q.queue);
    setBadge(tr.querySelector('[data-testid="queue-paused"]'), q.paused ? 'paused' : 'active');
    setData(tr, 'paused', q.paused);
    let total = 0;
    for (const s of STATES) {
      const n = Number(q.counts[s] || 0);
      total += n;
      setText(tr._cells[s].firstChild, n);
    }
    setText(tr.querySelector('[data-testid="count-total"]'), total);
    setText(tr.querySelector('[data-testid="queue-throughput"]'), q._rate);
    setText(tr._pause, q.paused ? 'Resume' : 'Pause');
  }

  function fmtRate(rate, truncated) {
    if (rate === null) return '…';
    const r = rate >= 10 ? Math.round(rate) : Math.round(rate * 10) / 10;
    return `${truncated ? '≥ ' : ''}${r}`;
  }

  return {
    async refresh() {
      const [qres, recent] = await Promise.all([
        api.get('/queues'),
        api.get(`/jobs${query({ state: 'completed', order: 'desc', limit: RECENT_LIMIT })}`)
          .then((r) => (Array.isArray(r.jobs) ? r.jobs : []))
          .catch((e) => { if (e instanceof ApiError && e.status === 401) throw e; return null; }),
      ]);
      if (!ctx.alive()) return;
      const queues = (Array.isArray(qres.queues) ? qres.queues : [])
        .map((q) => ({ queue: String(q.queue), paused: Boolean(q.paused), counts: q.counts && typeof q.counts === 'object' ? q.counts : {} }))
        .sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
      const now = Date.now();
      samples.push({ t: now, counts: new Map(queues.map((q) => [q.queue, Number(q.counts.completed || 0)])) });
      while (samples.length && samples[0].t < now - 2 * WINDOW_MS) samples.shift();
      const rc = recent ? recentCounts(recent) : { byQueue: new Map(), truncated: false };
      const totalCounts = {};
      let totalRate = 0, anyRate = false;
      for (const q of queues) {
        const a = recent ? (rc.byQueue.get(q.queue) || 0) : null;
        const b = countRate(q.queue, now);
        const rate = a === null && b === null ? null : Math.max(a || 0, b || 0);
        q._rate = fmtRate(rate, rc.truncated && a !== null && a >= (b || 0) && a > 0);
        if (rate !== null) { totalRate += rate; anyRate = true; }
        for (const s of STATES) totalCounts[s] = (totalCounts[s] || 0) + Number(q.counts[s] || 0);
      }
      reconcile(tbody, queues, (q) => q.queue, createRow, updateRow);
      empty.hidden = queues.length > 0;
      const total = STATES.reduce((n, s) => n + totalCounts[s], 0);
      fill(totals,
        h('th', { text: 'all queues' }), h('td'),
        STATES.map((s) => h('td', { class: 'num', text: totalCounts[s] || 0 })),
        h('td', { class: 'num', text: queues.length ? total : 0 }),
        h('td', { class: 'num', testid: 'throughput-total', text: fmtRate(anyRate ? totalRate : null, rc.truncated) }),
        h('td'));
      const watched = samples.length > 1 ? (now - samples[0].t) / 1000 : 0;
      setText(windowNote, watched >= 60 ? '' : `(This page has watched the counts for ${fmtDuration(watched)}.)`);
    },
  };
}
