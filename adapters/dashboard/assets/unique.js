// Unique keys: the holds on unique keys held now (GET /unique, admin), by
// scoped key, with the holding job (or "gone" when its row was deleted or
// pruned), its window and when the hold ends, and a Release button for a
// hold whose job has finished or is gone (DELETE /unique/{key}).

import { ApiError, query, seg } from './api.js';
import { h, setText, setData, reconcile, fill, badge, setBadge, fmtAgo, fmtTime, fmtDuration, jobHref } from './dom.js';

// PAGE is how many holds the screen lists; older ones are reached with
// "Next page".
const PAGE = 200;

export function mountUnique(ctx) {
  const { api, root } = ctx;
  const msg = h('p', { class: 'action-msg', testid: 'action-result', hidden: true });
  const err = h('p', { class: 'action-err', testid: 'action-error', hidden: true });
  const forbidden = h('p', { class: 'action-err', testid: 'unique-forbidden', hidden: true });
  const tbody = h('tbody', { testid: 'unique-body' });
  const empty = h('p', { class: 'empty', testid: 'unique-empty', hidden: true, text: 'No unique key is held.' });
  const info = h('p', { class: 'page-info', testid: 'unique-info' });
  const next = h('button', { type: 'button', class: 'small', testid: 'unique-next', text: 'Next page', hidden: true });
  const first = h('button', { type: 'button', class: 'small quiet', testid: 'unique-first', text: 'First page', hidden: true });
  const table = h('div', { class: 'table-wrap' },
    h('table', { testid: 'unique-table' },
      h('thead', {}, h('tr', {},
        ['Key', 'Scope', 'Queue', 'Kind', 'Job', 'State', 'Window', 'Held until', ''].map((t) => h('th', { text: t })))),
      tbody));
  root.append(
    h('h1', { text: 'Unique keys' }),
    msg, err, forbidden, info, table, empty, h('p', {}, first, ' ', next),
    h('p', { class: 'note', testid: 'unique-note' },
      'A job with a unique key holds it while it lives and for its window after it finishes, also once its row is ',
      'deleted or pruned (gone): meanwhile a submission of the key returns that job instead of a new one. ',
      'Release ends the hold, so the next submission makes a new job; a job that has not finished keeps its key ',
      '(cancel it first). Listing and releasing need the admin token.'),
  );

  let after = '';
  let nextAfter = '';
  next.addEventListener('click', () => { after = nextAfter; ctx.refresh(); });
  first.addEventListener('click', () => { after = ''; ctx.refresh(); });

  function notify(isError, ...parts) {
    fill(isError ? err : msg, ...parts);
    (isError ? err : msg).hidden = false;
    (isError ? msg : err).hidden = true;
  }

  async function release(u) {
    const scope = u.scope === 'global' ? 'global' : `${u.scope} ${u.scope === 'queue' ? u.queue : u.kind}`;
    const ok = await ctx.confirm(`Release unique key ${u.key}?`,
      `The hold of job ${u.job_id} on "${u.key}" (${scope}) ends: the next submission of the key makes a new job. ` +
      'The job itself is left as it is; retrying it afterwards is refused.', 'Release');
    if (!ok) return;
    const q = { scope: u.scope === 'global' ? '' : u.scope };
    if (u.scope === 'queue') q.queue = u.queue;
    if (u.scope === 'kind') q.kind = u.kind;
    try {
      await api.del(`/unique/${seg(u.key)}${query(q)}`);
      notify(false, `Unique key ${u.key} released from job ${u.job_id}.`);
    } catch (e) {
      notify(true, `Could not release unique key ${u.key}: ${e.message}`);
    }
    ctx.refresh();
  }

  function createRow() {
    const btn = h('button', { type: 'button', class: 'small', testid: 'unique-release', text: 'Release' });
    btn.addEventListener('click', () => release(btn._item));
    const tr = h('tr', { testid: 'unique-row' },
      h('td', { class: 'mono', testid: 'unique-key' }),
      h('td', { testid: 'unique-scope' }),
      h('td', { testid: 'unique-queue' }),
      h('td', { testid: 'unique-kind' }),
      h('td', { testid: 'unique-job' }),
      h('td', {}, badge('', 'unique-state')),
      h('td', { testid: 'unique-window' }),
      h('td', { testid: 'unique-until' }),
      h('td', {}, btn));
    tr._btn = btn;
    return tr;
  }

  function updateRow(tr, u) {
    tr._btn._item = u;
    setData(tr, 'scopedKey', u.scoped_key);
    setData(tr, 'state', u.state);
    setText(tr.querySelector('[data-testid="unique-key"]'), u.key);
    setText(tr.querySelector('[data-testid="unique-scope"]'), u.scope);
    setText(tr.querySelector('[data-testid="unique-queue"]'), u.queue);
    setText(tr.querySelector('[data-testid="unique-kind"]'), u.kind);
    const job = tr.querySelector('[data-testid="unique-job"]');
    if (job.dataset.key !== `${u.job_id}|${u.state}`) {
      job.dataset.key = `${u.job_id}|${u.state}`;
      if (u.state === 'gone') fill(job, h('span', { class: 'muted', text: `job ${u.job_id}` }));
      else fill(job, h('a', { href: jobHref(u.job_id), testid: 'unique-job-link', text: `job ${u.job_id}` }));
    }
    setBadge(tr.querySelector('[data-testid="unique-state"]'), u.state);
    setText(tr.querySelector('[data-testid="unique-window"]'), fmtDuration(u.unique_for_seconds));
    const until = tr.querySelector('[data-testid="unique-until"]');
    setText(until, u.until ? fmtTime(u.until) : 'while the job lives');
    until.title = u.until ? fmtAgo(u.until) : '';
    tr._btn.disabled = !u.finished;
    tr._btn.title = u.finished ? '' : 'The job has not finished: cancel it first.';
  }

  return {
    async refresh() {
      let res;
      try {
        res = await api.get(`/unique${query({ after, limit: PAGE })}`);
      } catch (e) {
        if (e instanceof ApiError && e.status === 403 && ctx.alive()) {
          setText(forbidden, `Listing unique keys needs the admin token. ${e.message}`);
          forbidden.hidden = false;
          table.hidden = true;
          return;
        }
        throw e;
      }
      if (!ctx.alive()) return;
      forbidden.hidden = true;
      table.hidden = false;
      const final = new Set(['completed', 'cancelled', 'discarded']);
      const list = (res && Array.isArray(res.holds) ? res.holds : [])
        .filter((u) => u && typeof u.scoped_key === 'string' && Number.isSafeInteger(u.job_id))
        .map((u) => {
          const state = u.job_gone ? 'gone' : String(u.state ?? '');
          return {
            key: String(u.key ?? ''),
            scope: String(u.scope ?? 'global'),
            scoped_key: u.scoped_key,
            queue: String(u.queue ?? ''),
            kind: String(u.kind ?? ''),
            job_id: u.job_id,
            state,
            finished: state === 'gone' || final.has(state),
            unique_for_seconds: Number(u.unique_for_seconds || 0),
            until: typeof u.until === 'string' ? u.until : '',
          };
        });
      reconcile(tbody, list, (u) => u.scoped_key, createRow, updateRow);
      nextAfter = res && typeof res.next_after === 'string' ? res.next_after : '';
      next.hidden = !nextAfter;
      first.hidden = !after;
      empty.hidden = list.length > 0 || Boolean(nextAfter);
      setText(info, `${list.length} held key${list.length === 1 ? '' : 's'}${after || nextAfter ? ' on this page' : ''}`);
    },
  };
}
