// Workers: every registered worker (engine nodes and remote workers of the
// job server) with its liveness as the server judges it, its queues and
// tags, and the age of its last heartbeat. Listing workers needs the admin
// token.

import { ApiError } from './api.js';
import { h, setText, setData, reconcile, badge, setBadge, fmtAgo, fmtTime } from './dom.js';

export function mountWorkers(ctx) {
  const { api, root } = ctx;
  const tbody = h('tbody', { testid: 'workers-body' });
  const empty = h('p', { class: 'empty', testid: 'workers-empty', hidden: true, text: 'No workers are registered.' });
  const forbidden = h('p', { class: 'action-err', testid: 'workers-forbidden', hidden: true });
  const counts = h('p', { class: 'page-info', testid: 'workers-counts' });
  const table = h('div', { class: 'table-wrap' },
    h('table', { testid: 'workers-table' },
      h('thead', {}, h('tr', {},
        ['Worker', 'Name', 'Liveness', 'Queues', 'Tags', 'Last heartbeat', 'Started'].map((t) => h('th', { text: t })))),
      tbody));
  root.append(h('h1', { text: 'Workers' }), forbidden, counts, table, empty,
    h('p', { class: 'note' },
      'Liveness is judged by the server from the last heartbeat: active, stale (missed heartbeats; its jobs are left alone) ',
      'or dead (its running jobs are handed back and its record removed at the next maintenance round).'));

  function createRow() {
    return h('tr', { testid: 'worker-row' },
      h('td', { class: 'mono', testid: 'worker-id' }),
      h('td', { testid: 'worker-name' }),
      h('td', {}, badge('', 'worker-liveness')),
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
      if (!ctx.alive()) return;
      forbidden.hidden = true;
      table.hidden = false;
      const ws = (Array.isArray(res.workers) ? res.workers : []).filter((w) => w && typeof w.id === 'string');
      reconcile(tbody, ws, (w) => w.id, createRow, updateRow);
      empty.hidden = ws.length > 0;
      const by = { active: 0, stale: 0, dead: 0 };
      for (const w of ws) if (w.liveness in by) by[w.liveness]++;
      setText(counts, `${ws.length} worker${ws.length === 1 ? '' : 's'}: ${by.active} active, ${by.stale} stale, ${by.dead} dead`);
    },
  };
}
