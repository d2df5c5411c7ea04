// Jobs: a page of jobs, newest first, filtered by queue, states (several at
// once), kind and args (JSON containment), with keyset paging (the API's
// next_after cursor). Filters and the cursor live in the hash
// (#/jobs?queue=…&state=discarded,retryable&kind=…&args=…&after=…) so Back
// and reload work.
//
// Triage: the last error of each job, how long running jobs have run, and
// bulk actions (retry, cancel, delete, run now) on the selected jobs or on
// every job matching the filter. The server applies them
// (POST /v1/jobs/bulk); each is confirmed with the count of a dry run first.
//
// Archived: the archive of finished jobs (serve --archive) instead of the
// jobs, with the same filters and paging (#/jobs?archived=true, the API's
// archived=true); archived jobs take no bulk actions.
//
// Workflow: the jobs of one workflow or batch (#/jobs?workflow_id=N, the
// API's workflow_id), with the other filters; bulk actions then apply to
// the jobs selected on the page only (the bulk filter has no workflow; a
// whole workflow or batch is cancelled from its page).

import { query } from './api.js';
import { h, setText, setData, reconcile, badge, setBadge, fmtAgo, fmtDuration, serverNow, preview, jobHref, fmtZoned, timeTitle, zoneName } from './dom.js';
import { progressBar, setProgress } from './progress.js';
import { STATES } from './overview.js';

const PAGE = 50;
const FINAL = ['completed', 'cancelled', 'discarded'];
const RUN_NOW = ['scheduled', 'retryable']; // the states run_now applies to

// lastError is the first line of a job's newest error entry, and its whole
// text.
function lastError(j) {
  const es = Array.isArray(j.errors) ? j.errors : [];
  if (!es.length) return ['', ''];
  const e = es[es.length - 1];
  const text = typeof e.error === 'string' ? e.error : JSON.stringify(e.error);
  return [text.split('\n', 1)[0], text.length > 2000 ? text.slice(0, 1999) + '…' : text];
}

// setCut shows text in cell's ellipsis span (.cut), with title (text
// when omitted) as the whole value on hover.
function setCut(cell, text, title) {
  const span = cell.firstElementChild;
  setText(span, text);
  const t = title === undefined ? String(text ?? '') : title;
  if (span.title !== t) span.title = t;
}

// parseArgs checks an args search pattern as the API will: a JSON object.
// It returns [pattern, error message].
function parseArgs(s) {
  if (!s.trim()) return ['', ''];
  let v;
  try { v = JSON.parse(s); } catch (e) { return ['', `Args search is not JSON: ${e.message}`]; }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return ['', 'Args search must be a JSON object, such as {"customer": 42}.'];
  return [JSON.stringify(v), ''];
}

export function mountJobs(ctx) {
  const { api, root, route } = ctx;
  const f = {
    queue: route.params.get('queue') || '',
    states: (route.params.get('state') || '').split(',').map((s) => s.trim()).filter((s) => STATES.includes(s)),
    kind: route.params.get('kind') || '',
    args: route.params.get('args') || '',
    after: route.params.get('after') || '',
    afterRunAt: route.params.get('after_run_at') || '',
    archived: route.params.get('archived') === 'true',
    workflowId: route.params.get('workflow_id') || '',
  };
  if (!/^[0-9]{1,18}$/.test(f.workflowId)) f.workflowId = '';
  if (f.after && !/^[0-9]{1,18}$/.test(f.after)) f.after = '';
  if (!f.after || Number.isNaN(Date.parse(f.afterRunAt))) f.afterRunAt = '';
  // Scheduled jobs are looked at by when they run: soonest first, the
  // server sorting by (run_at, id) and paging with both as the cursor.
  const byRunAt = f.states.length === 1 && f.states[0] === 'scheduled';
  const [argsPattern, argsProblem] = parseArgs(f.args);

  // ---- filters ------------------------------------------------------------

  const queueIn = h('input', { name: 'queue', testid: 'filter-queue', list: 'queue-names', placeholder: 'any queue', autocomplete: 'off', spellcheck: 'false' });
  queueIn.value = f.queue;
  const queueList = h('datalist', { id: 'queue-names' });
  const kindIn = h('input', { name: 'kind', testid: 'filter-kind', list: 'kind-names', placeholder: 'any kind', autocomplete: 'off', spellcheck: 'false' });
  kindIn.value = f.kind;
  const kindList = h('datalist', { id: 'kind-names' });
  const argsIn = h('input', { name: 'args', testid: 'filter-args', class: 'args-search', placeholder: 'args contain {"customer": 42}', autocomplete: 'off', spellcheck: 'false' });
  argsIn.value = f.args;
  const stateBoxes = STATES.map((s) => {
    const box = h('input', { type: 'checkbox', value: s, testid: `filter-state-${s}` });
    box.checked = f.states.includes(s);
    return box;
  });
  const failedBtn = h('button', { type: 'button', class: 'small quiet', testid: 'filter-failed', text: 'failed', title: 'discarded and retryable jobs' });
  const archivedBox = h('input', { type: 'checkbox', testid: 'filter-archived' });
  archivedBox.checked = f.archived;

  const form = h('form', { class: 'filters', testid: 'jobs-filters' },
    h('label', {}, 'Queue ', queueIn), queueList,
    h('fieldset', { class: 'states', testid: 'filter-state' },
      h('legend', { text: 'States' }),
      stateBoxes.map((b) => h('label', { class: 'state-choice' }, b, b.value)),
      failedBtn),
    h('label', {}, 'Kind ', kindIn), kindList,
    h('label', {}, 'Args ', argsIn),
    h('label', { title: 'finished jobs moved to the archive past their retention (serve --archive)' }, archivedBox, ' Archived'),
    h('button', { type: 'submit', testid: 'filter-apply', text: 'Apply' }),
    h('a', { href: '#/jobs', class: 'quiet', testid: 'filter-reset', text: 'Reset' }));
  const workflowNote = f.workflowId
    ? h('p', { class: 'note workflow-filter', testid: 'filter-workflow' },
      'Jobs of workflow or batch ',
      h('a', { href: `#/workflows/${f.workflowId}`, testid: 'filter-workflow-link', text: f.workflowId }),
      ' only · ',
      h('a', { href: '#/jobs', testid: 'filter-workflow-clear', text: 'all jobs' }))
    : null;
  const apply = (after, afterRunAt) => {
    const q = new URLSearchParams();
    if (queueIn.value.trim()) q.set('queue', queueIn.value.trim());
    const states = stateBoxes.filter((b) => b.checked).map((b) => b.value);
    if (states.length) q.set('state', states.join(','));
    if (kindIn.value.trim()) q.set('kind', kindIn.value.trim());
    if (argsIn.value.trim()) q.set('args', argsIn.value.trim());
    if (after) q.set('after', after);
    if (after && afterRunAt) q.set('after_run_at', afterRunAt);
    if (archivedBox.checked) q.set('archived', 'true');
    if (f.workflowId) q.set('workflow_id', f.workflowId);
    const s = q.toString();
    ctx.navigate(s ? `#/jobs?${s}` : '#/jobs');
  };
  form.addEventListener('submit', (ev) => { ev.preventDefault(); apply(''); });
  for (const b of stateBoxes) b.addEventListener('change', () => apply(''));
  archivedBox.addEventListener('change', () => apply(''));
  failedBtn.addEventListener('click', () => {
    for (const b of stateBoxes) b.checked = b.value === 'discarded' || b.value === 'retryable';
    apply('');
  });

  const argsNote = h('p', { class: 'note', testid: 'args-note', hidden: !f.args });
  setText(argsNote, argsProblem || 'Args search finds jobs whose args contain this JSON object (no arrays). Sealed (encrypted) args cannot be searched: such jobs never match.');
  argsNote.classList.toggle('action-err', Boolean(argsProblem));
  const zoneNote = h('p', { class: 'note', testid: 'time-zone', text: `Times are shown in ${zoneName()}; hover one for UTC.` });

  // ---- bulk actions ---------------------------------------------------------

  const selected = new Set(); // job ids checked on this page
  let allMatching = false; // the action goes to every job matching the filter
  let pageIDs = [];

  const bulkCount = h('span', { class: 'bulk-count', testid: 'bulk-count' });
  const selectAll = h('button', { type: 'button', class: 'small quiet', testid: 'bulk-select-all' });
  const bulkBtn = (action, label, cls) => h('button', { type: 'button', class: `small ${cls}`, testid: `bulk-${action.replace('_', '-')}`, text: label, data: { action } });
  const bulkButtons = [bulkBtn('retry', 'Retry', ''), bulkBtn('run_now', 'Run now', ''), bulkBtn('cancel', 'Cancel', 'warn'), bulkBtn('delete', 'Delete', 'danger')];
  const bulkMsg = h('p', { class: 'action-msg', testid: 'bulk-result', hidden: true });
  const bulkErr = h('p', { class: 'action-err', testid: 'bulk-error', hidden: true });
  const bulkBar = h('div', { class: 'bulk-bar', testid: 'bulk-bar' }, bulkCount, selectAll, ...bulkButtons);

  const LABELS = {
    retry: ['Retry', 'retried', 'Each becomes available to run now (a job whose attempts are used up gets one more). Running jobs are skipped.'],
    run_now: ['Run now', 'made available now', 'Scheduled and retryable jobs become available now instead of at their run time; jobs in other states are not touched.'],
    cancel: ['Cancel', 'cancelled', 'Cancelled jobs are never retried unless retried by hand. Jobs already finished are skipped.'],
    delete: ['Delete', 'deleted', 'Their history is lost for good. Running jobs are skipped (cancel them first).'],
  };

  function describeFilter() {
    const parts = [f.queue && `queue ${f.queue}`, f.states.length && `state ${f.states.join(' or ')}`,
      f.kind && `kind ${f.kind}`, argsPattern && `args containing ${argsPattern}`,
      f.workflowId && `workflow ${f.workflowId}`].filter(Boolean);
    return parts.length ? parts.join(', ') : 'no filter: every job';
  }

  // bulkFilter is the API filter of action for the current selection, or
  // a string saying why there is none.
  function bulkFilter(action) {
    if (!allMatching) {
      if (!selected.size) return 'Select jobs first, or every job matching the filter.';
      return { ids: Array.from(selected).sort((a, b) => a - b) };
    }
    if (argsProblem) return argsProblem;
    const filter = {};
    if (f.queue) filter.queue = f.queue;
    if (f.kind) filter.kind = f.kind;
    if (argsPattern) filter.args = JSON.parse(argsPattern);
    let states = f.states.slice();
    if (action === 'run_now') {
      states = states.length ? states.filter((s) => RUN_NOW.includes(s)) : RUN_NOW.slice();
      if (!states.length) return 'Run now applies to scheduled and retryable jobs; the filter names neither.';
    }
    // An empty filter means every job: the API wants that said explicitly.
    if (!states.length && !Object.keys(filter).length) states = STATES.slice();
    if (states.length) filter.states = states;
    return filter;
  }

  function bulkNotify(text, isError) {
    setText(isError ? bulkErr : bulkMsg, text);
    (isError ? bulkErr : bulkMsg).hidden = false;
    (isError ? bulkMsg : bulkErr).hidden = true;
  }

  async function bulk(action) {
    const [label, done, explain] = LABELS[action];
    const filter = bulkFilter(action);
    if (typeof filter === 'string') { bulkNotify(filter, true); return; }
    let dry;
    try {
      dry = await api.post('/jobs/bulk', { action, filter, dry_run: true });
    } catch (e) {
      if (ctx.alive()) bulkNotify(`${label} failed: ${e.message}`, true);
      return;
    }
    if (!ctx.alive()) return;
    const n = Number(dry.matched) || 0;
    if (!n) {
      bulkNotify(`No job to ${label.toLowerCase()}: nothing matches.`, false);
      return;
    }
    const what = allMatching ? `matching ${describeFilter()}` : 'selected';
    const ok = await ctx.confirm(`${label} ${n} job${n === 1 ? '' : 's'}?`,
      `${label} ${n} job${n === 1 ? '' : 's'} ${what}? ${explain}`, label);
    if (!ok || !ctx.alive()) return;
    try {
      const res = await api.post('/jobs/bulk', { action, filter });
      if (!ctx.alive()) return;
      bulkNotify(`${res.applied} of ${res.matched} job${res.matched === 1 ? '' : 's'} ${done}` +
        (res.skipped ? `; ${res.skipped} skipped (changed meanwhile, or in a state ${label.toLowerCase()} does not apply to)` : '') + '.', false);
      selected.clear();
      allMatching = false;
    } catch (e) {
      if (ctx.alive()) bulkNotify(`${label} failed: ${e.message}`, true);
    }
    ctx.refresh();
  }
  for (const b of bulkButtons) b.addEventListener('click', () => bulk(b.dataset.action));
  selectAll.addEventListener('click', () => {
    allMatching = !allMatching;
    selected.clear();
    renderSelection();
  });

  const headBox = h('input', { type: 'checkbox', testid: 'select-page', title: 'select the jobs of this page' });
  headBox.addEventListener('change', () => {
    allMatching = false;
    if (headBox.checked) for (const id of pageIDs) selected.add(id);
    else selected.clear();
    renderSelection();
  });

  function renderSelection() {
    for (const box of tbody.querySelectorAll('[data-testid="job-select"]')) {
      const id = Number(box.closest('tr').dataset.jobId);
      box.checked = allMatching || selected.has(id);
      box.disabled = allMatching;
    }
    headBox.checked = allMatching || (pageIDs.length > 0 && pageIDs.every((id) => selected.has(id)));
    headBox.disabled = allMatching;
    setData(bulkBar, 'mode', allMatching ? 'all' : 'ids');
    setText(bulkCount, allMatching ? `All jobs matching this filter (${describeFilter()})`
      : selected.size ? `${selected.size} selected` : 'Select jobs to act on them');
    setText(selectAll, allMatching ? 'Clear selection' : 'Select all matching this filter');
    for (const b of bulkButtons) b.disabled = !allMatching && !selected.size;
    // The bulk filter has no workflow: only the selected jobs of one.
    selectAll.hidden = Boolean(f.workflowId);
  }

  // ---- table -----------------------------------------------------------------

  const tbody = h('tbody', { testid: 'jobs-body' });
  const empty = h('p', { class: 'empty', testid: 'jobs-empty', hidden: true, text: f.archived ? 'No archived jobs match.' : 'No jobs match.' });
  const newest = h('button', { type: 'button', class: 'small', testid: 'page-newest', text: '« Newest' });
  const older = h('button', { type: 'button', class: 'small', testid: 'page-older', text: 'Older »' });
  const pageInfo = h('span', { class: 'page-info', testid: 'page-info' });
  let nextAfter = null;
  let nextAfterRunAt = '';
  if (byRunAt) {
    newest.textContent = '« Soonest';
    older.textContent = 'Later »';
  }
  newest.addEventListener('click', () => apply(''));
  older.addEventListener('click', () => { if (nextAfter !== null) apply(String(nextAfter), nextAfterRunAt); });
  newest.disabled = !f.after;
  older.disabled = true;

  root.append(
    h('h1', { text: 'Jobs' }),
    form,
    workflowNote,
    argsNote,
    ...(f.archived ? [] : [bulkBar, bulkMsg, bulkErr]), // archived jobs take no actions
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'jobs-table' },
        h('thead', {}, h('tr', {}, h('th', { class: 'select' }, headBox),
          ['ID', 'State', 'Queue', 'Kind', 'Attempt', 'Prio', 'Args', 'Last error', 'Created', 'Run at / running / finished'].map((t) => h('th', { text: t })))),
        tbody)),
    empty,
    h('div', { class: 'pager' }, newest, pageInfo, older),
    zoneNote,
  );

  function createRow() {
    const link = h('a', { testid: 'job-link' });
    const box = h('input', { type: 'checkbox', testid: 'job-select' });
    box.addEventListener('change', () => {
      const id = Number(box.closest('tr').dataset.jobId);
      if (box.checked) selected.add(id);
      else selected.delete(id);
      renderSelection();
    });
    const tr = h('tr', { testid: 'job-row' },
      h('td', { class: 'select' }, box),
      h('td', { class: 'num' }, link),
      h('td', {}, badge('', 'job-state'), progressBar('job-progress')),
      h('td', { class: 'queue', testid: 'job-queue' }, h('span', { class: 'cut' })),
      h('td', { class: 'kind', testid: 'job-kind' }, h('span', { class: 'cut' })),
      h('td', { class: 'num', testid: 'job-attempt' }),
      h('td', { class: 'num', testid: 'job-priority' }),
      h('td', { class: 'args', testid: 'job-args-preview' }, h('span', { class: 'cut' })),
      h('td', { class: 'last-error', testid: 'job-error-last' }, h('span', { class: 'cut' })),
      h('td', { testid: 'job-created' }),
      h('td', { testid: 'job-when' }));
    tr.addEventListener('click', (ev) => {
      if (ev.target.closest('a, input, label, button') || window.getSelection().toString()) return;
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
    setProgress(tr.querySelector('[data-testid="job-progress"]'), j);
    setCut(tr.querySelector('[data-testid="job-queue"]'), j.queue);
    setCut(tr.querySelector('[data-testid="job-kind"]'), j.kind);
    setText(tr.querySelector('[data-testid="job-attempt"]'), `${j.attempt}/${j.max_attempts}`);
    setText(tr.querySelector('[data-testid="job-priority"]'), j.priority);
    setCut(tr.querySelector('[data-testid="job-args-preview"]'), preview(j.args), preview(j.args, 2000));
    const [first, full] = lastError(j);
    setCut(tr.querySelector('[data-testid="job-error-last"]'), first, full);
    const created = tr.querySelector('[data-testid="job-created"]');
    setText(created, fmtAgo(j.created_at));
    created.title = timeTitle(j.created_at);
    const when = tr.querySelector('[data-testid="job-when"]');
    const final = j.finished_at && FINAL.includes(j.state);
    if (j.state === 'running' && j.attempted_at) {
      const t = Date.parse(j.attempted_at);
      setText(when, Number.isNaN(t) ? 'running' : `running for ${fmtDuration((serverNow() - t) / 1000)}`);
      setData(when, 'kind', 'running');
      when.title = `started ${timeTitle(j.attempted_at)}`;
    } else if (j.state === 'waiting') {
      const n = Number(j.waiting_for) || 0;
      setText(when, `waits for ${n} job${n === 1 ? '' : 's'}`);
      setData(when, 'kind', 'waiting');
      when.title = Array.isArray(j.depends_on) ? `depends on ${j.depends_on.join(', ')}` : '';
    } else {
      const at = final ? j.finished_at : j.run_at;
      setText(when, at ? `${final ? 'finished' : 'run'} ${fmtAgo(at)}` : '');
      setData(when, 'kind', final ? 'finished' : 'run-at');
      when.title = timeTitle(at);
    }
  }

  let queuesLoaded = false;
  const kindsSeen = new Set();
  let kindsShown = '';
  function noteKinds(kinds) {
    for (const k of kinds) if (typeof k === 'string' && k) kindsSeen.add(k);
    const list = Array.from(kindsSeen).sort();
    const key = list.join('\n');
    if (key === kindsShown) return;
    kindsShown = key;
    kindList.replaceChildren(...list.map((k) => h('option', { value: k })));
  }

  renderSelection();

  return {
    async refresh() {
      if (argsProblem) {
        reconcile(tbody, [], (j) => j.id, createRow, updateRow);
        empty.hidden = true;
        setText(pageInfo, '');
        return;
      }
      const order = byRunAt
        ? { sort: 'run_at', order: 'asc', after: f.afterRunAt ? f.after : '', after_run_at: f.afterRunAt }
        : { order: 'desc', after: f.after };
      const res = await api.get(`/jobs${query({
        queue: f.queue, state: f.states.join(','), kind: f.kind, args: argsPattern, ...order, limit: PAGE,
        archived: f.archived ? 'true' : '', workflow_id: f.workflowId,
      })}`);
      if (!ctx.alive()) return;
      const jobs = Array.isArray(res.jobs) ? res.jobs : [];
      reconcile(tbody, jobs, (j) => j.id, createRow, updateRow);
      pageIDs = jobs.map((j) => j.id);
      for (const id of Array.from(selected)) if (!pageIDs.includes(id)) selected.delete(id);
      renderSelection();
      empty.hidden = jobs.length > 0;
      nextAfter = Number.isSafeInteger(res.next_after) ? res.next_after : null;
      nextAfterRunAt = typeof res.next_after_run_at === 'string' ? res.next_after_run_at : '';
      if (byRunAt && !nextAfterRunAt) nextAfter = null;
      older.disabled = nextAfter === null;
      const filters = [f.queue && `queue ${f.queue}`, f.states.length && `state ${f.states.join(',')}`, f.kind && `kind ${f.kind}`, argsPattern && `args ${argsPattern}`, f.workflowId && `workflow ${f.workflowId}`].filter(Boolean);
      setText(pageInfo, `${jobs.length} ${f.archived ? 'archived ' : ''}job${jobs.length === 1 ? '' : 's'}, ` +
        (byRunAt ? 'by run time, soonest first' : 'newest first') +
        (f.after ? (byRunAt ? ', later pages' : `, ids below ${f.after}`) : '') + (filters.length ? ` · ${filters.join(', ')}` : ''));
      noteKinds(jobs.map((j) => j.kind));
      if (!queuesLoaded) {
        queuesLoaded = true;
        api.get('/queues?limit=1000').then((r) => {
          const names = (Array.isArray(r.queues) ? r.queues : []).map((q) => String(q.queue));
          queueList.replaceChildren(...names.map((n) => h('option', { value: n })));
        }).catch(() => {});
        // Kinds the workers announced (the list needs the admin role;
        // without it the picker offers the kinds seen on the pages).
        api.get('/workers').then((r) => {
          const ws = Array.isArray(r.workers) ? r.workers : [];
          noteKinds(ws.flatMap((w) => (Array.isArray(w.kinds) ? w.kinds : [])));
        }).catch(() => {});
      }
    },
  };
}
