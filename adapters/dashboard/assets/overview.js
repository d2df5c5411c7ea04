// Overview: the queues' job counts by state (GET /queues, a page of
// QUEUE_PAGE queues at a time, by name), each queue's paused
// state with pause/resume, its completed jobs of the last whole minute and
// charts of its last hour, both from the store's queue history (see
// charts.js).

import { seg } from './api.js';
import { h, setText, setData, reconcile, fill, badge, setBadge } from './dom.js';
import { mountCharts } from './charts.js';

// QUEUE_PAGE is how many queues one page of the overview shows (and one
// poll reads, with their charts): the server pages GET /queues, however
// many queues there are.
export const QUEUE_PAGE = 100;

// STATES are the job states in life-cycle order (core.AllStates): waiting
// (for the jobs it depends on, in a workflow or batch) first.
export const STATES = ['waiting', 'scheduled', 'available', 'running', 'retryable', 'completed', 'cancelled', 'discarded'];

export function mountOverview(ctx) {
  const { api, root } = ctx;
  const msg = h('p', { class: 'action-msg', testid: 'action-result', hidden: true });
  const err = h('p', { class: 'action-err', testid: 'action-error', hidden: true });
  const tbody = h('tbody', { testid: 'queues-body' });
  const totals = h('tr', { class: 'totals', testid: 'queues-total' });
  const empty = h('p', { class: 'empty', testid: 'queues-empty', hidden: true, text: 'No queues yet: submit a job or start a worker.' });
  const charts = mountCharts(api);
  // Paging: after is the cursor of the page shown ('' for the first),
  // nextAfter the server's next_after of it ('' on the last page).
  let after = '';
  let nextAfter = '';
  const first = h('button', { type: 'button', class: 'small', testid: 'queues-first', text: '« First queues' });
  const next = h('button', { type: 'button', class: 'small', testid: 'queues-next', text: 'More queues »' });
  const pageInfo = h('span', { class: 'page-info', testid: 'queues-page-info' });
  const pager = h('div', { class: 'pager', testid: 'queues-pager', hidden: true }, first, pageInfo, next);
  first.addEventListener('click', () => { after = ''; ctx.refresh(); });
  next.addEventListener('click', () => { if (nextAfter) { after = nextAfter; ctx.refresh(); } });
  root.append(
    h('h1', { text: 'Queues' }),
    msg, err,
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'queues-table' },
        h('thead', {}, h('tr', {},
          h('th', { text: 'Queue' }), h('th', { text: 'Status' }),
          STATES.map((s) => h('th', { class: 'num', text: s })),
          h('th', { class: 'num', text: 'total' }),
          h('th', { class: 'num', text: 'completed/min', title: 'Jobs completed in the last whole minute on every node, from the store\'s queue history.' }),
          h('th', { text: '' }))),
        tbody,
        h('tfoot', {}, totals))),
    pager,
    empty,
    charts.root,
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

  function fmtRate(rate) { return rate === null ? '…' : String(rate); }

  return {
    async refresh() {
      let qres = await api.get(`/queues?limit=${QUEUE_PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      if (!ctx.alive()) return;
      if (after && !(Array.isArray(qres.queues) && qres.queues.length)) {
        // The queues of this page are gone: back to the first.
        after = '';
        qres = await api.get(`/queues?limit=${QUEUE_PAGE}`);
        if (!ctx.alive()) return;
      }
      nextAfter = typeof qres.next_after === 'string' ? qres.next_after : '';
      const paged = Boolean(after || nextAfter);
      pager.hidden = !paged;
      first.disabled = !after;
      next.disabled = !nextAfter;
      const queues = (Array.isArray(qres.queues) ? qres.queues : [])
        .map((q) => ({ queue: String(q.queue), paused: Boolean(q.paused), counts: q.counts && typeof q.counts === 'object' ? q.counts : {} }))
        .sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
      await charts.refresh(queues.map((q) => q.queue));
      if (!ctx.alive()) return;
      const totalCounts = {};
      let totalRate = 0, anyRate = false;
      for (const q of queues) {
        const rate = charts.lastMinute(q.queue);
        q._rate = fmtRate(rate);
        if (rate !== null) { totalRate += rate; anyRate = true; }
        for (const s of STATES) totalCounts[s] = (totalCounts[s] || 0) + Number(q.counts[s] || 0);
      }
      reconcile(tbody, queues, (q) => q.queue, createRow, updateRow);
      empty.hidden = queues.length > 0;
      setText(pageInfo, paged && queues.length
        ? `queues ${queues[0].queue} to ${queues[queues.length - 1].queue}${nextAfter ? ', more follow' : ', the last'}`
        : '');
      const total = STATES.reduce((n, s) => n + totalCounts[s], 0);
      fill(totals,
        h('th', { text: paged ? 'these queues' : 'all queues' }), h('td'),
        STATES.map((s) => h('td', { class: 'num', text: totalCounts[s] || 0 })),
        h('td', { class: 'num', text: queues.length ? total : 0 }),
        h('td', { class: 'num', testid: 'throughput-total', text: fmtRate(anyRate ? totalRate : null) }),
        h('td'));
    },
  };
}
