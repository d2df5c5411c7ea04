// Workflows and batches: the list of both, newest first, paged
// (#/workflows?type=workflow|batch&after=ID; GET /workflows and
// GET /batches merged by id), a workflow's page with its steps in
// dependency order (#/workflows/<id>, GET /workflows/{id}) and a batch's
// page with its progress and callbacks (#/batches/<id>,
// GET /batches/{id}), each with the cancel of every job not yet final
// (POST …/{id}/cancel, confirmed first). A batch's jobs are listed on the
// jobs screen (#/jobs?workflow_id=<id>).
//
// These reads are heavy: the server reads every job of each workflow it
// shows to count them (a batch may hold 100,000). The screens pace their
// polls by what the last read cost (see pacer) rather than reading at
// every poll.

import { ApiError } from './api.js';
import { h, setText, setData, fill, reconcile, badge, setBadge, fmtAgo, fmtZoned, timeTitle, jobHref, zoneName } from './dom.js';

const PAGE = 20;
const FINAL = ['completed', 'cancelled', 'discarded'];
// The order states are listed in (core.AllStates).
const ORDER = ['waiting', 'scheduled', 'available', 'running', 'retryable', 'completed', 'cancelled', 'discarded'];
const CALLBACKS = ['on_finish', 'on_success'];

// SLOW is how many times its own duration a screen waits after a read
// before the next; DONE_MS how long it waits while what it shows is done
// (only a cancel or a prune changes it then), in ms.
const SLOW = 5;
const DONE_MS = 30_000;

// pacer spaces a screen's reads: after a read that took t ms the next is
// due no sooner than SLOW × t later (or DONE_MS when settled), so that an
// open page costs the server at most about a sixth of its time however
// large the workflows; force makes the next poll read.
function pacer() {
  let next = 0;
  return {
    due: () => Date.now() >= next,
    start: () => performance.now(),
    took(t0, settled) { next = Date.now() + Math.max(SLOW * (performance.now() - t0), settled ? DONE_MS : 0); },
    force() { next = 0; },
  };
}

// flowHref is the page of workflow (or batch) id; ids are checked to be
// integers so nothing else can end up in an href.
export function flowHref(id, batch) {
  if (!Number.isSafeInteger(id)) return '#/workflows';
  return batch ? `#/batches/${id}` : `#/workflows/${id}`;
}

// batchJobsHref is the jobs screen filtered to the jobs of workflow id.
export function batchJobsHref(id) {
  return Number.isSafeInteger(id) ? `#/jobs?workflow_id=${id}` : '#/jobs';
}

// countsText is a status's counts by state in one line: "2 completed,
// 1 waiting".
function countsText(counts) {
  const c = counts && typeof counts === 'object' ? counts : {};
  const parts = ORDER.filter((s) => Number(c[s]) > 0).map((s) => `${Number(c[s])} ${s}`);
  return parts.length ? parts.join(', ') : 'no jobs';
}

// stackBar returns the element setStack fills: a bar of completed,
// discarded, cancelled and pending (every other state) parts of a total.
function stackBar(testid) {
  const part = (k) => h('span', { class: `stack-${k}`, testid: `${testid}-${k}` });
  return h('span', { class: 'stack', testid, attrs: { role: 'img' } },
    part('completed'), part('discarded'), part('cancelled'), part('pending'));
}

// setStack sizes bar's parts from counts (by state) against total; the
// widths are set through the CSSOM (the page's CSP allows no inline
// style attribute).
function setStack(bar, counts, total) {
  const c = counts && typeof counts === 'object' ? counts : {};
  const done = { completed: Number(c.completed) || 0, discarded: Number(c.discarded) || 0, cancelled: Number(c.cancelled) || 0 };
  const pending = Math.max(0, total - done.completed - done.discarded - done.cancelled);
  const n = { ...done, pending };
  for (const k of ['completed', 'discarded', 'cancelled', 'pending']) {
    const el = bar.querySelector(`.stack-${k}`);
    const w = total > 0 ? `${(100 * n[k]) / total}%` : '0%';
    if (el.style.width !== w) el.style.width = w;
    setData(el, 'count', n[k]);
  }
  const label = `${n.completed} completed, ${n.discarded} discarded, ${n.cancelled} cancelled, ${n.pending} pending of ${total}`;
  if (bar.title !== label) bar.title = label;
  bar.setAttribute('aria-label', label);
  return n;
}

// validStatus keeps the fields of a workflow status the page reads.
function validStatus(s) {
  return s && typeof s === 'object' && Number.isSafeInteger(s.id);
}

// ---- the list ---------------------------------------------------------------

export function mountWorkflows(ctx) {
  const { api, root, route } = ctx;
  let type = route.params.get('type') || '';
  if (type !== 'workflow' && type !== 'batch') type = '';
  let after = route.params.get('after') || '';
  if (!/^[0-9]{1,18}$/.test(after)) after = '';

  const go = (t, a) => {
    const q = new URLSearchParams();
    if (t) q.set('type', t);
    if (a) q.set('after', a);
    const s = q.toString();
    ctx.navigate(s ? `#/workflows?${s}` : '#/workflows');
  };
  const typeSel = h('select', { testid: 'workflows-type', name: 'type' },
    h('option', { value: '', text: 'workflows and batches' }),
    h('option', { value: 'workflow', text: 'workflows' }),
    h('option', { value: 'batch', text: 'batches' }));
  typeSel.value = type;
  typeSel.addEventListener('change', () => go(typeSel.value, ''));

  const tbody = h('tbody', { testid: 'workflows-body' });
  const empty = h('p', { class: 'empty', testid: 'workflows-empty', hidden: true, text: 'No workflows or batches.' });
  const unsupported = h('p', { class: 'empty', testid: 'workflows-unsupported', hidden: true });
  const newest = h('button', { type: 'button', class: 'small', testid: 'workflows-newest', text: '« Newest' });
  const older = h('button', { type: 'button', class: 'small', testid: 'workflows-older', text: 'Older »' });
  const pageInfo = h('span', { class: 'page-info', testid: 'workflows-page-info' });
  let nextAfter = '';
  newest.disabled = !after;
  older.disabled = true;
  newest.addEventListener('click', () => go(type, ''));
  older.addEventListener('click', () => { if (nextAfter) go(type, nextAfter); });

  root.append(
    h('h1', { text: 'Workflows and batches' }),
    h('form', { class: 'filters' }, h('label', {}, 'Show ', typeSel)),
    unsupported,
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'workflows-table' },
        h('thead', {}, h('tr', {},
          ['ID', 'Type', 'Jobs', 'Progress', 'Status', 'Created', 'Finished'].map((t) => h('th', { text: t })))),
        tbody)),
    empty,
    h('div', { class: 'pager' }, newest, pageInfo, older),
    h('p', { class: 'note', text: `A workflow's id is its first step's job id, a batch's its first job's. Jobs counts every job, a batch's callbacks included. Times are shown in ${zoneName()}; hover one for UTC.` }),
  );

  function createRow() {
    return h('tr', { testid: 'workflow-row' },
      h('td', { class: 'num' }, h('a', { testid: 'workflow-link' })),
      h('td', {}, badge('', 'workflow-type')),
      h('td', { class: 'num', testid: 'workflow-jobs' }),
      h('td', { testid: 'workflow-progress' }, stackBar('workflow-bar'), h('span', { class: 'counts', testid: 'workflow-counts' })),
      h('td', {}, badge('', 'workflow-done')),
      h('td', { testid: 'workflow-created' }),
      h('td', { testid: 'workflow-finished' }));
  }

  function updateRow(tr, s) {
    setData(tr, 'workflowId', s.id);
    setData(tr, 'batch', Boolean(s.batch));
    setData(tr, 'done', Boolean(s.done));
    const link = tr.querySelector('[data-testid="workflow-link"]');
    const href = flowHref(s.id, s.batch);
    if (link.getAttribute('href') !== href) link.setAttribute('href', href);
    setText(link, s.id);
    setBadge(tr.querySelector('[data-testid="workflow-type"]'), s.batch ? 'batch' : 'workflow');
    setText(tr.querySelector('[data-testid="workflow-jobs"]'), Number(s.jobs) || 0);
    const bar = tr.querySelector('[data-testid="workflow-bar"]');
    bar.hidden = !s.batch;
    if (s.batch) setStack(bar, s.counts, Number(s.jobs) || 0);
    setText(tr.querySelector('[data-testid="workflow-counts"]'), countsText(s.counts));
    setBadge(tr.querySelector('[data-testid="workflow-done"]'), s.done ? 'done' : 'open');
    const created = tr.querySelector('[data-testid="workflow-created"]');
    setText(created, fmtZoned(s.created_at));
    created.title = timeTitle(s.created_at);
    const finished = tr.querySelector('[data-testid="workflow-finished"]');
    setText(finished, s.finished_at ? fmtAgo(s.finished_at) : '');
    finished.title = s.finished_at ? timeTitle(s.finished_at) : '';
  }

  const pace = pacer();
  return {
    async refresh() {
      if (!pace.due()) return;
      const t0 = pace.start();
      const sorts = type ? [type] : ['workflow', 'batch'];
      let pages;
      try {
        pages = await Promise.all(sorts.map((t) => api.get(`/${t === 'batch' ? 'batches' : 'workflows'}?limit=${PAGE}${after ? `&after=${after}` : ''}`)));
      } catch (e) {
        if (e instanceof ApiError && e.status === 501 && ctx.alive()) {
          unsupported.hidden = false;
          setText(unsupported, `This server's store has no job dependencies: it runs no workflows or batches. ${e.message}`);
          return;
        }
        throw e;
      }
      if (!ctx.alive()) return;
      // Both lists are newest first by id, and their ids never meet: the
      // page is the newest PAGE of the two, the next starts below its
      // last id.
      let more = false;
      const all = [];
      for (const p of pages) {
        const ws = Array.isArray(p.workflows) ? p.workflows.filter(validStatus) : [];
        all.push(...ws);
        if (Number.isSafeInteger(p.next_after)) more = true;
      }
      all.sort((a, b) => b.id - a.id);
      if (all.length > PAGE) more = true;
      const shown = all.slice(0, PAGE);
      nextAfter = more && shown.length ? String(shown[shown.length - 1].id) : '';
      older.disabled = !nextAfter;
      reconcile(tbody, shown, (s) => s.id, createRow, updateRow);
      empty.hidden = shown.length > 0;
      const what = type === 'workflow' ? 'workflow' : type === 'batch' ? 'batch' : 'workflow or batch';
      const plural = shown.length === 1 ? what : (type === 'batch' ? 'batches' : type === 'workflow' ? 'workflows' : 'workflows and batches');
      setText(pageInfo, `${shown.length} ${plural}, newest first${after ? `, ids below ${after}` : ''}`);
      pace.took(t0, false);
    },
  };
}

// ---- one workflow or batch ------------------------------------------------

// mountFlow is the page of one workflow (batch false) or batch (true).
function mountFlow(ctx, batch) {
  const { api, root, route } = ctx;
  const id = route.id;
  const what = batch ? 'Batch' : 'Workflow';
  const path = `/${batch ? 'batches' : 'workflows'}/${id}`;

  const state = badge('', 'flow-done');
  const missing = h('p', { class: 'empty', testid: 'flow-missing', hidden: true });
  const msg = h('p', { class: 'action-msg', testid: 'action-result', hidden: true });
  const err = h('p', { class: 'action-err', testid: 'action-error', hidden: true });
  const cancelBtn = h('button', { type: 'button', class: 'warn', testid: 'flow-cancel', text: `Cancel ${what.toLowerCase()}`, disabled: true });
  const summary = h('dl', { class: 'summary', testid: 'flow-summary' });
  const body = h('div', { class: 'detail', testid: 'flow-detail', data: { workflowId: id, batch }, hidden: true },
    h('div', { class: 'actions' }, cancelBtn), msg, err,
    h('section', {}, h('h2', { text: 'Summary' }), summary));

  root.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/workflows', testid: 'back-to-workflows', text: '← Workflows and batches' })),
    h('div', { class: 'title' }, h('h1', { text: `${what} ${id}` }), state),
    missing, body);

  let status = null;
  const pace = pacer();

  function notify(text, isError) {
    setText(isError ? err : msg, text);
    (isError ? err : msg).hidden = false;
    (isError ? msg : err).hidden = true;
  }

  cancelBtn.addEventListener('click', async () => {
    if (!status) return;
    const open = Object.entries(status.counts || {}).filter(([s]) => !FINAL.includes(s)).reduce((n, [, v]) => n + (Number(v) || 0), 0);
    const ok = await ctx.confirm(`Cancel ${what.toLowerCase()} ${id}?`,
      `Cancel the ${open} job${open === 1 ? '' : 's'} of ${what.toLowerCase()} ${id} not yet final? ` +
      'Waiting jobs are cancelled first, then the others; a running job\'s handler sees the cancel. Cancelled jobs are never retried unless retried by hand.',
      `Cancel ${what.toLowerCase()}`);
    if (!ok || !ctx.alive()) return;
    try {
      const res = await api.post(`${path}/cancel`);
      if (!ctx.alive()) return;
      const n = Number(res && res.applied) || 0;
      notify(`${n} job${n === 1 ? '' : 's'} of ${what.toLowerCase()} ${id} cancelled` +
        (res && res.skipped ? `; ${res.skipped} skipped (final meanwhile)` : '') + '.', false);
    } catch (e) {
      if (ctx.alive()) notify(`Cancel failed: ${e.message}`, true);
    }
    pace.force();
    ctx.refresh();
  });

  function renderSummary(s, extra) {
    status = s;
    body.hidden = false;
    missing.hidden = true;
    setBadge(state, s.done ? 'done' : 'open');
    setData(body, 'done', Boolean(s.done));
    cancelBtn.disabled = Boolean(s.done);
    cancelBtn.title = s.done ? `Every job of this ${what.toLowerCase()} is final.` : '';
    const rows = [
      ['Jobs', `${Number(s.jobs) || 0}${batch ? ' (callbacks included)' : ''}`],
      ['By state', countsText(s.counts)],
      ['Status', s.done ? 'done: every job is final' : 'open: some jobs are not final'],
      ['Created', s.created_at ? `${fmtZoned(s.created_at)} (${fmtAgo(s.created_at)})` : ''],
      ['Finished', s.finished_at ? `${fmtZoned(s.finished_at)} (${fmtAgo(s.finished_at)})` : ''],
      ...extra,
    ].filter(([, v]) => v !== '');
    fill(summary, rows.map(([k, v]) => [h('dt', { text: k }),
      h('dd', { testid: `flow-summary-${k.toLowerCase().replace(/ /g, '-')}` }, v)]));
  }

  // read returns the workflow's or batch's detail, or null when this poll
  // reads nothing (paced, gone, or sent on to the other sort's page).
  async function read() {
    if (!pace.due()) return null;
    const t0 = pace.start();
    try {
      const res = await api.get(path);
      pace.took(t0, Boolean(res && res.done));
      return res;
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 404 || !ctx.alive()) throw e;
      // The id may be of the other sort (a step of a workflow named like
      // a batch's callback links here as a batch): open its own page.
      try {
        await api.get(`/${batch ? 'workflows' : 'batches'}/${id}`);
        if (ctx.alive()) ctx.navigate(flowHref(id, !batch));
        return null;
      } catch { /* neither: say so */ }
      if (!ctx.alive()) return null;
      status = null;
      body.hidden = true;
      missing.hidden = false;
      setBadge(state, 'gone');
      setText(missing, `${what} ${id} does not exist (no job has workflow id ${id}: it may have been deleted, pruned or archived). ${e.message}`);
      return null;
    }
  }

  return { read, renderSummary, body, id };
}

export function mountWorkflow(ctx) {
  const f = mountFlow(ctx, false);
  const steps = h('ol', { class: 'steps', testid: 'workflow-steps' });
  f.body.append(
    h('section', {}, h('h2', { text: 'Steps' }),
      h('p', { class: 'note', text: 'In insert order, which is a dependency order: every step comes after the steps it waits for.' }),
      steps));

  function createStep() {
    return h('li', { testid: 'workflow-step' },
      h('span', { class: 'step-name', testid: 'step-name' }), ' ',
      badge('', 'step-state'), ' ',
      h('a', { testid: 'step-job' }), ' ',
      h('span', { class: 'kind', testid: 'step-kind' }),
      h('div', { class: 'step-deps' },
        h('span', { testid: 'step-after' }),
        h('span', { class: 'step-waiting', testid: 'step-waiting' })));
  }

  let names = new Map(); // job id → step name
  function updateStep(li, s) {
    setData(li, 'step', s.name);
    setData(li, 'state', s.state);
    setData(li, 'jobId', s.id);
    setText(li.querySelector('[data-testid="step-name"]'), s.name);
    setBadge(li.querySelector('[data-testid="step-state"]'), s.state);
    const link = li.querySelector('[data-testid="step-job"]');
    const href = jobHref(s.id);
    if (link.getAttribute('href') !== href) link.setAttribute('href', href);
    setText(link, `job ${s.id}`);
    setText(li.querySelector('[data-testid="step-kind"]'), `${s.kind} · ${s.queue} · attempt ${s.attempt}/${s.max_attempts}`);
    const deps = Array.isArray(s.depends_on) ? s.depends_on.filter(Number.isSafeInteger) : [];
    const after = li.querySelector('[data-testid="step-after"]');
    const key = JSON.stringify([deps.map((d) => names.get(d) || ''), s.on_dependency_failure || '']);
    if (after.dataset.key !== key) {
      after.dataset.key = key;
      fill(after, deps.length
        ? ['after ', deps.map((d, i) => [i ? ', ' : '', h('a', { href: jobHref(d), class: 'step-dep', testid: 'step-dep', text: names.get(d) || `job ${d}` })]),
          s.on_dependency_failure === 'run' ? ' (runs even if one fails)' : '']
        : 'first: waits for nothing');
    }
    setText(li.querySelector('[data-testid="step-waiting"]'),
      s.state === 'waiting' && Number(s.waiting_for) > 0 ? ` · waiting for ${s.waiting_for} of ${deps.length}` : '');
  }

  return {
    async refresh() {
      const res = await f.read();
      if (!res || !ctx.alive()) return;
      const list = Array.isArray(res.steps) ? res.steps.filter((s) => s && Number.isSafeInteger(s.id)) : [];
      names = new Map(list.map((s) => [s.id, s.name]));
      f.renderSummary(res, [['Steps', String(list.length)]]);
      reconcile(steps, list, (s) => s.id, createStep, updateStep);
    },
  };
}

export function mountBatch(ctx) {
  const f = mountFlow(ctx, true);
  const id = f.id;
  const bar = stackBar('batch-bar');
  const legend = h('span', { class: 'counts', testid: 'batch-progress-text' });
  const callbacks = h('tbody', { testid: 'batch-callbacks' });
  const noCallbacks = h('p', { class: 'empty', testid: 'batch-no-callbacks', hidden: true, text: 'This batch has no callbacks.' });
  f.body.append(
    h('section', {}, h('h2', { text: 'Progress' }),
      h('div', { class: 'batch-progress', testid: 'batch-progress' }, bar, legend),
      h('p', {}, h('a', { href: batchJobsHref(id), testid: 'batch-jobs-link', text: 'The batch\'s jobs →' }))),
    h('section', {}, h('h2', { text: 'Callbacks' }),
      h('div', { class: 'table-wrap' }, h('table', { testid: 'batch-callbacks-table' },
        h('thead', {}, h('tr', {}, ['Callback', 'Job', 'State', 'Kind', 'Waiting for', 'Batch jobs ended'].map((t) => h('th', { text: t })))),
        callbacks)),
      noCallbacks));

  function createCallback() {
    return h('tr', { testid: 'batch-callback' },
      h('td', { class: 'mono', testid: 'callback-step' }),
      h('td', { class: 'num' }, h('a', { testid: 'callback-job' })),
      h('td', {}, badge('', 'callback-state')),
      h('td', { class: 'kind', testid: 'callback-kind' }),
      h('td', { class: 'num', testid: 'callback-waiting' }),
      h('td', { testid: 'callback-ends' }));
  }

  function updateCallback(tr, j) {
    setData(tr, 'step', j.step || '');
    setData(tr, 'state', j.state);
    setText(tr.querySelector('[data-testid="callback-step"]'), j.step || '');
    const link = tr.querySelector('[data-testid="callback-job"]');
    const href = jobHref(j.id);
    if (link.getAttribute('href') !== href) link.setAttribute('href', href);
    setText(link, j.id);
    setBadge(tr.querySelector('[data-testid="callback-state"]'), j.state);
    setText(tr.querySelector('[data-testid="callback-kind"]'), j.kind);
    const n = Number(j.waiting_for) || 0;
    setText(tr.querySelector('[data-testid="callback-waiting"]'), j.state === 'waiting' ? `${n} job${n === 1 ? '' : 's'}` : '—');
    const e = j.dependency_ends && typeof j.dependency_ends === 'object' ? j.dependency_ends : {};
    setText(tr.querySelector('[data-testid="callback-ends"]'),
      `${Number(e.completed) || 0} completed, ${Number(e.cancelled) || 0} cancelled, ${Number(e.discarded) || 0} discarded`);
  }

  return {
    async refresh() {
      const res = await f.read();
      if (!res || !ctx.alive()) return;
      const cbs = (Array.isArray(res.callbacks) ? res.callbacks : []).filter((j) => j && Number.isSafeInteger(j.id) && CALLBACKS.includes(j.step));
      // The batch's own jobs: the status's counts less its callbacks.
      const counts = { ...(res.counts && typeof res.counts === 'object' ? res.counts : {}) };
      for (const j of cbs) counts[j.state] = Math.max(0, (Number(counts[j.state]) || 0) - 1);
      const total = Math.max(0, (Number(res.jobs) || 0) - cbs.length);
      const n = setStack(bar, counts, total);
      setText(legend, `${n.completed} completed, ${n.discarded} discarded, ${n.cancelled} cancelled, ${n.pending} pending of ${total} job${total === 1 ? '' : 's'}`);
      setData(bar, 'total', total);
      f.renderSummary(res, [['Callbacks', cbs.length ? cbs.map((j) => j.step).join(', ') : 'none']]);
      reconcile(callbacks, cbs, (j) => j.id, createCallback, updateCallback);
      noCallbacks.hidden = cbs.length > 0;
    },
  };
}
