// Workers: every registered worker (engine nodes and remote workers of the
// job server) with its liveness as the server judges it, its queues and
// tags, the age of its last heartbeat, and what it is running now (the
// running jobs, GET /v1/jobs?state=running, grouped by their worker_id).
// Listing workers needs the admin token.

import { ApiError } from './api.js';
import { h, setText, setData, fill, reconcile, badge, setBadge, fmtAgo, fmtTime, fmtDuration, serverNow, jobHref } from './dom.js';

// RUNNING_PAGE is how many running jobs one poll reads (newest first);
// SHOWN is how many a worker's row lists before "and n more".
const RUNNING_PAGE = 500;
const SHOWN = 5;

export function mountWorkers(ctx) {
  const { api, root } = ctx;
  const tbody = h('tbody', { testid: 'workers-body' });
  const empty = h('p', { class: 'empty', testid: 'workers-empty', hidden: true, text: 'No workers are registered.' });
  const forbidden = h('p', { class: 'action-err', testid: 'workers-forbidden', hidden: true });
  const counts = h('p', { class: 'page-info', testid: 'workers-counts' });
  const table = h('div', { class: 'table-wrap' },
    h('table', { testid: 'workers-table' },
      h('thead', {}, h('tr', {},
        ['Worker', 'Name', 'Liveness', 'Running now', 'Queues', 'Tags', 'Last heartbeat', 'Started'].map((t) => h('th', { text: t })))),
      tbody));
  const orphans = h('p', { class: 'note', testid: 'workers-running-elsewhere', hidden: true });
  root.append(h('h1', { text: 'Workers' }), forbidden, counts, table, empty, orphans,
    h('p', { class: 'note' },
      'Liveness is judged by the server from the last heartbeat: active, stale (missed heartbeats; its jobs are left alone) ',
      'or dead (its running jobs are handed back and its record removed at the next maintenance round).'));

  function createRow() {
    return h('tr', { testid: 'worker-row' },
      h('td', { class: 'mono', testid: 'worker-id' }),
      h('td', { testid: 'worker-name' }),
      h('td', {}, badge('', 'worker-liveness')),
      h('td', { class: 'running', testid: 'worker-running' }),
      h('td', { testid: 'worker-queues' }),
      h('td', { testid: 'worker-tags' }),
      h('td', { testid: 'worker-heartbeat' }),
      h('td', { testid: 'worker-started' }));
  }

  const list = (v) => (Array.isArray(v) ? v.map(String).join(', ') : '');

  function updateRow(tr, w) {
    setData(tr, 'workerId', w.id);
    setData(tr, 'liveness', w.liveness);
    setText(tr.querySelector('[data-testid="worker-id"]'), w.id);
    setText(tr.querySelector('[data-testid="worker-name"]'), w.name || '');
    setBadge(tr.querySelector('[data-testid="worker-liveness"]'), w.liveness || 'unknown');
    setText(tr.querySelector('[data-testid="worker-queues"]'), list(w.queues));
    setText(tr.querySelector('[data-testid="worker-tags"]'), list(w.tags));
    const hb = tr.querySelector('[data-testid="worker-heartbeat"]');
    setText(hb, fmtAgo(w.heartbeat_at));
    hb.title = fmtTime(w.heartbeat_at);
    const st = tr.querySelector('[data-testid="worker-started"]');
    setText(st, fmtAgo(w.started_at));
    st.title = fmtTime(w.started_at);
    renderRunning(tr.querySelector('[data-testid="worker-running"]'), running.get(w.id) || []);
  }

  // running maps a worker id to its running jobs, newest first, as the
  // last poll read them; truncated says the read did not reach them all.
  let running = new Map();
  let truncated = false;

  function renderRunning(cell, jobs) {
    setData(cell, 'count', jobs.length);
    const now = serverNow();
    fill(cell, jobs.length ? h('ul', {}, jobs.slice(0, SHOWN).map((j) => {
      const t = Date.parse(j.attempted_at);
      return h('li', { testid: 'worker-job', data: { jobId: j.id } },
        h('a', { href: jobHref(j.id), testid: 'worker-job-link', text: `#${j.id}` }),
        h('span', { class: 'cut mono', testid: 'worker-job-kind', text: j.kind, title: j.kind }),
        h('span', { class: 'muted', testid: 'worker-job-queue', text: j.queue }),
        h('span', { class: 'for', testid: 'worker-job-for', title: `attempt ${j.attempt} started ${fmtTime(j.attempted_at)}`,
          text: Number.isNaN(t) ? 'running' : `for ${fmtDuration((now - t) / 1000)}` }));
    }), jobs.length > SHOWN ? h('li', { class: 'muted', text: `and ${jobs.length - SHOWN} more` }) : null)
      : h('span', { class: 'muted', text: truncated ? '(none among the newest running jobs)' : 'idle' }));
  }

  // readRunning reads the running jobs and groups them by worker id.
  async function readRunning() {
    const res = await api.get(`/jobs?state=running&order=desc&limit=${RUNNING_PAGE}`);
    const jobs = (Array.isArray(res.jobs) ? res.jobs : []).filter((j) => j && Number.isSafeInteger(j.id));
    const by = new Map();
    for (const j of jobs) {
      const k = typeof j.worker_id === 'string' ? j.worker_id : '';
      if (!by.has(k)) by.set(k, []);
      by.get(k).push(j);
    }
    return { by, truncated: Number.isSafeInteger(res.next_after) && res.next_after > 0 };
  }

  return {
    async refresh() {
      let res;
      try {
        res = await api.get('/workers');
      } catch (e) {
        if (e instanceof ApiError && e.status === 403 && ctx.alive()) {
          setText(forbidden, `Listing workers needs the admin token. ${e.message}`);
          forbidden.hidden = false;
          table.hidden = true;
          return;
        }
        throw e;
      }
      const r = await readRunning();
      if (!ctx.alive()) return;
      running = r.by;
      truncated = r.truncated;
      forbidden.hidden = true;
      table.hidden = false;
      const ws = (Array.isArray(res.workers) ? res.workers : []).filter((w) => w && typeof w.id === 'string');
      reconcile(tbody, ws, (w) => w.id, createRow, updateRow);
      empty.hidden = ws.length > 0;
      // Running jobs whose worker is not listed (its record was removed,
      // or a claim's worker never registered).
      const listed = new Set(ws.map((w) => w.id));
      let elsewhere = 0;
      for (const [id, jobs] of running) if (!listed.has(id)) elsewhere += jobs.length;
      orphans.hidden = !elsewhere && !truncated;
      setText(orphans, [
        elsewhere ? `${elsewhere} running job${elsewhere === 1 ? '' : 's'} belong${elsewhere === 1 ? 's' : ''} to no listed worker.` : '',
        truncated ? `Only the newest ${RUNNING_PAGE} running jobs are shown; see the jobs page for all.` : '',
      ].filter(Boolean).join(' '));
      const by = { active: 0, stale: 0, dead: 0 };
      for (const w of ws) if (w.liveness in by) by[w.liveness]++;
      setText(counts, `${ws.length} worker${ws.length === 1 ? '' : 's'}: ${by.active} active, ${by.stale} stale, ${by.dead} dead`);
    },
  };
}
