// Jobs: a page of jobs, newest first, filtered by queue, state and kind, with
// keyset paging (the API's next_after cursor). Filters and the cursor live in
// the hash (#/jobs?queue=…&state=…&kind=…&after=…) so Back and reload work.

import { query } from './api.js';
import { h, setText, setData, reconcile, badge, setBadge, fmtAgo, fmtTime, preview, jobHref } from './dom.js';
import { STATES } from './overview.js';

const PAGE = 50;

export function mountJobs(ctx) {
  const { api, root, route } = ctx;
  const f = {
    queue: route.params.get('queue') || '',
    state: route.params.get('state') || '',
    kind: route.params.get('kind') || '',
    after: route.params.get('after') || '',
  };
  if (f.after && !/^[0-9]{1,18}$/.test(f.after)) f.after = '';
  if (f.state && !STATES.includes(f.state)) f.state = '';

  const queueIn = h('input', { name: 'queue', testid: 'filter-queue', list: 'queue-names', placeholder: 'any queue', autocomplete: 'off', spellcheck: 'false' });
  queueIn.value = f.queue;
  const queueList = h('datalist', { id: 'queue-names' });
  const stateIn = h('select', { name: 'state', testid: 'filter-state' },
    h('option', { value: '', text: 'any state' }),
    STATES.map((s) => h('option', { value: s, text: s })));
  stateIn.value = f.state;
  const kindIn = h('input', { name: 'kind', testid: 'filter-kind', placeholder: 'any kind', autocomplete: 'off', spellcheck: 'false' });
  kindIn.value = f.kind;

  const form = h('form', { class: 'filters', testid: 'jobs-filters' },
    h('label', {}, 'Queue ', queueIn), queueList,
    h('label', {}, 'State ', stateIn),
    h('label', {}, 'Kind ', kindIn),
    h('button', { type: 'submit', testid: 'filter-apply', text: 'Apply' }),
    h('a', { href: '#/jobs', class: 'quiet', testid: 'filter-reset', text: 'Reset' }));
  const apply = (after) => {
    const q = new URLSearchParams();
    if (queueIn.value.trim()) q.set('queue', queueIn.value.trim());
    if (stateIn.value) q.set('state', stateIn.value);
    if (kindIn.value.trim()) q.set('kind', kindIn.value.trim());
    if (after) q.set('after', after);
    const s = q.toString();
    ctx.navigate(s ? `#/jobs?${s}` : '#/jobs');
  };
  form.addEventListener('submit', (ev) => { ev.preventDefault(); apply(''); });
  stateIn.addEventListener('change', () => apply(''));

  const tbody = h('tbody', { testid: 'jobs-body' });
  const empty = h('p', { class: 'empty', testid: 'jobs-empty', hidden: true, text: 'No jobs match.' });
  const newest = h('button', { type: 'button', class: 'small', testid: 'page-newest', text: '« Newest' });
  const older = h('button', { type: 'button', class: 'small', testid: 'page-older', text: 'Older »' });
  const pageInfo = h('span', { class: 'page-info', testid: 'page-info' });
  let nextAfter = null;
  newest.addEventListener('click', () => apply(''));
  older.addEventListener('click', () => { if (nextAfter !== null) apply(String(nextAfter)); });
  newest.disabled = !f.after;
  older.disabled = true;

  root.append(
    h('h1', { text: 'Jobs' }),
    form,
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'jobs-table' },
        h('thead', {}, h('tr', {},
          ['ID', 'State', 'Queue', 'Kind', 'Attempt', 'Prio', 'Args', 'Created', 'Run at / finished'].map((t) => h('th', { text: t })))),
        tbody)),
    empty,
    h('div', { class: 'pager' }, newest, pageInfo, older),
  );

  function createRow() {
    const link = h('a', { testid: 'job-link' });
    const tr = h('tr', { testid: 'job-row' },
      h('td', { class: 'num' }, link),
      h('td', {}, badge('', 'job-state')),
      h('td', { testid: 'job-queue' }),
      h('td', { testid: 'job-kind' }),
      h('td', { class: 'num', testid: 'job-attempt' }),
      h('td', { class: 'num', testid: 'job-priority' }),
      h('td', { class: 'args', testid: 'job-args-preview' }),
      h('td', { testid: 'job-created' }),
      h('td', { testid: 'job-when' }));
    tr.addEventListener('click', (ev) => {
      if (ev.target.closest('a') || window.getSelection().toString()) return;
      ctx.navigate(link.getAttribute('href'));
    });
    return tr;
  }

  function updateRow(tr, j) {
    setData(tr, 'jobId', j.id);
    setData(tr, 'state', j.state);
    const link = tr.querySelector('[data-testid="job-link"]');
    const href = jobHref(j.id);
    if (link.getAttribute('href') !== href) link.setAttribute('href', href);
    setText(link, j.id);
    setBadge(tr.querySelector('[data-testid="job-state"]'), j.state);
    setText(tr.querySelector('[data-testid="job-queue"]'), j.queue);
    setText(tr.querySelector('[data-testid="job-kind"]'), j.kind);
    setText(tr.querySelector('[data-testid="job-attempt"]'), `${j.attempt}/${j.max_attempts}`);
    setText(tr.querySelector('[data-testid="job-priority"]'), j.priority);
    setText(tr.querySelector('[data-testid="job-args-preview"]'), preview(j.args));
    const created = tr.querySelector('[data-testid="job-created"]');
    setText(created, fmtAgo(j.created_at));
    created.title = fmtTime(j.created_at);
    const when = tr.querySelector('[data-testid="job-when"]');
    const final = j.finished_at && ['completed', 'cancelled', 'discarded'].includes(j.state);
    const at = final ? j.finished_at : j.run_at;
    setText(when, at ? `${final ? 'finished' : 'run'} ${fmtAgo(at)}` : '');
    when.title = fmtTime(at);
  }

  let queuesLoaded = false;

  return {
    async refresh() {
      const res = await api.get(`/jobs${query({ queue: f.queue, state: f.state, kind: f.kind, after: f.after, order: 'desc', limit: PAGE })}`);
      if (!ctx.alive()) return;
      const jobs = Array.isArray(res.jobs) ? res.jobs : [];
      reconcile(tbody, jobs, (j) => j.id, createRow, updateRow);
      empty.hidden = jobs.length > 0;
      nextAfter = Number.isSafeInteger(res.next_after) ? res.next_after : null;
      older.disabled = nextAfter === null;
      const filters = [f.queue && `queue ${f.queue}`, f.state && `state ${f.state}`, f.kind && `kind ${f.kind}`].filter(Boolean);
      setText(pageInfo, `${jobs.length} job${jobs.length === 1 ? '' : 's'}, newest first` +
        (f.after ? `, ids below ${f.after}` : '') + (filters.length ? ` · ${filters.join(', ')}` : ''));
      if (!queuesLoaded) {
        queuesLoaded = true;
        api.get('/queues').then((r) => {
          const names = (Array.isArray(r.queues) ? r.queues : []).map((q) => String(q.queue));
          queueList.replaceChildren(...names.map((n) => h('option', { value: n })));
        }).catch(() => {});
      }
    },
  };
}
