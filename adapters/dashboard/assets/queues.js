// Queues: each queue's jobs, the nodes working it with how many of its
// jobs each runs at once (and their sum: the queue's concurrency across
// workers), its cluster-wide claim policy (GET /queues/{name}/limits) and
// the rate-limited groups waiting for their next start. A queue's page
// (#/queues/<name>) shows all of it and edits the policy
// (PUT /queues/{name}/limits, admin) and pauses or resumes the queue.
//
// The node counts come from the workers' registrations (GET /workers,
// admin): an engine node registers "backlog.workers.<queue>" = how many
// jobs of the queue it runs at once, as of its last heartbeat. Without the
// admin role the screens are read-only and say so.

import { ApiError, seg } from './api.js';
import { h, setText, setData, reconcile, fill, badge, setBadge, fmtAgo, fmtTime, fmtZoned, timeTitle, zoneName } from './dom.js';
import { STATES } from './overview.js';

// WORKERS_PREFIX is core.WorkersMetadataPrefix.
const WORKERS_PREFIX = 'backlog.workers.';

// queueHref is the dashboard link to a queue's page; queue names are
// letters, digits and _-.: only, and are encoded anyway.
export function queueHref(name) { return `#/queues/${encodeURIComponent(name)}`; }

function jobsHref(queue, state) {
  const q = new URLSearchParams({ queue });
  if (state) q.set('state', state);
  return `#/jobs?${q}`;
}

function plural(n, one, many) { return `${n} ${n === 1 ? one : (many || `${one}s`)}`; }

// secs renders a number of seconds compactly: "1 s", "0.5 s", "60 s".
function secs(s) {
  const n = Number(s) || 0;
  return `${Number.isInteger(n) ? n : Number(n.toFixed(3))} s`;
}

function rateText(r) { return `${r.starts}/${secs(r.per_seconds)}`; }

function hasRate(r) { return Boolean(r && Number(r.starts) > 0); }

function entries(m) {
  return m && typeof m === 'object' ? Object.entries(m).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)) : [];
}

// policySummary is the claim policy on one line.
export function policySummary(l) {
  l = l || {};
  const parts = [];
  if (l.max_running > 0) parts.push(`at most ${l.max_running} running`);
  for (const [k, n] of entries(l.max_running_per_kind)) if (n > 0) parts.push(`${k} ≤ ${n} running`);
  if (l.max_running_per_partition > 0) parts.push(`≤ ${l.max_running_per_partition} running per partition`);
  if (hasRate(l.rate)) parts.push(`rate ${rateText(l.rate)}`);
  for (const [k, r] of entries(l.rate_per_kind)) if (hasRate(r)) parts.push(`${k} rate ${rateText(r)}`);
  if (hasRate(l.rate_per_partition)) parts.push(`rate ${rateText(l.rate_per_partition)} per partition`);
  if (l.fair) parts.push('fair across partitions');
  if (l.aging && l.aging.every_seconds > 0) {
    parts.push(`aging 1 step per ${secs(l.aging.every_seconds)}${l.aging.max_steps > 0 ? ` (at most ${l.aging.max_steps})` : ''}`);
  }
  if (l.workers_per_node > 0) parts.push(`${plural(l.workers_per_node, 'worker')} per node`);
  return parts.length ? parts.join(' · ') : 'no limits';
}

// rateWaitText: "kind:sms waits until 12:00:05 CET (in 3 s)", with the
// date too when it is not today in the browser's zone.
function rateWaitText(w) {
  const ago = fmtAgo(w.next_start);
  let at = fmtZoned(w.next_start);
  const today = fmtTime(new Date().toISOString()).slice(0, 11);
  if (at.startsWith(today)) at = at.slice(today.length);
  return `${w.group} waits until ${at}${ago ? ` (${ago})` : ''}`;
}

function rateWaitList(waits) {
  if (!waits.length) return h('span', { class: 'muted', text: 'none' });
  return h('ul', { class: 'rate-waits' }, waits.map((w) =>
    h('li', { testid: 'rate-wait', data: { group: w.group }, title: timeTitle(w.next_start), text: rateWaitText(w) })));
}

// nodesOf returns the live workers whose queues include queue, each with
// the count it registered for the queue (null when it registers none, as
// remote workers), and their sum.
function nodesOf(workers, queue) {
  const nodes = [];
  let sum = 0, unknown = 0;
  for (const w of workers) {
    if (!w || w.liveness !== 'active' || !Array.isArray(w.queues) || !w.queues.includes(queue)) continue;
    const raw = w.metadata && typeof w.metadata === 'object' ? w.metadata[WORKERS_PREFIX + queue] : undefined;
    const n = raw !== undefined && /^[0-9]{1,9}$/.test(String(raw)) ? Number(raw) : null;
    if (n === null) unknown++;
    else sum += n;
    nodes.push({ id: String(w.id), name: String(w.name || w.id), workers: n, heartbeat_at: w.heartbeat_at });
  }
  nodes.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1));
  return { nodes, sum, unknown };
}

function concurrencyText(n) {
  if (!n.nodes.length) return '0';
  return n.unknown ? `${n.sum} + ${plural(n.unknown, 'node')} not reporting` : String(n.sum);
}

function nodesText(n) {
  if (!n.nodes.length) return 'no live node';
  return n.nodes.map((x) => `${x.name}: ${x.workers === null ? '?' : x.workers}`).join(', ');
}

// readLimits reads GET /queues/{name}/limits; a refusal other than 401
// (which asks for a token) comes back as {error: message}, so one queue's
// failure (a store without limits answers 501) leaves the rest of the page.
async function readLimits(api, queue) {
  try {
    return await api.get(`/queues/${seg(queue)}/limits`);
  } catch (e) {
    if (e instanceof ApiError && e.status !== 401 && e.status !== 0) return { error: e.message };
    throw e;
  }
}

// loadWorkers reads GET /workers; null when the token lacks the admin role.
async function loadWorkers(api) {
  try {
    const res = await api.get('/workers');
    return Array.isArray(res.workers) ? res.workers : [];
  } catch (e) {
    if (e instanceof ApiError && e.status === 403) return null;
    throw e;
  }
}

function readOnlyNote(testid) {
  return h('p', { class: 'note action-err', testid, hidden: true,
    text: 'This token lacks the admin role: the nodes working each queue are not listed, and the policy and pause cannot be changed here (the API answers 403). Use an admin token to edit.' });
}

// ---- the list -----------------------------------------------------------------

export function mountQueues(ctx) {
  const { api, root } = ctx;
  const tbody = h('tbody', { testid: 'queues-list-body' });
  const empty = h('p', { class: 'empty', testid: 'queues-list-empty', hidden: true, text: 'No queues yet: submit a job or start a worker.' });
  const note = readOnlyNote('queues-readonly');
  root.append(
    h('h1', { text: 'Queues' }),
    note,
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'queues-list' },
        h('thead', {}, h('tr', {},
          h('th', { text: 'Queue' }), h('th', { text: 'Status' }),
          h('th', { class: 'num', text: 'available' }), h('th', { class: 'num', text: 'scheduled' }),
          h('th', { class: 'num', text: 'retryable' }), h('th', { class: 'num', text: 'running' }),
          h('th', { text: 'Nodes (workers each)' }),
          h('th', { class: 'num', text: 'Concurrency', title: 'jobs of the queue the live nodes run at once, summed' }),
          h('th', { text: 'Claim policy' }), h('th', { text: 'Rate waits' }))),
        tbody)),
    empty,
    h('p', { class: 'note', testid: 'queues-note' },
      'Nodes are the live workers whose queues include the queue, each with how many of its jobs it runs at once as of its last heartbeat; ',
      'Concurrency is their sum. The claim policy is kept in the database and every node obeys it. ',
      `Times are shown in ${zoneName()}; hover one for UTC. Open a queue to change its policy.`),
  );

  function createRow(q) {
    const cells = {};
    const tr = h('tr', { testid: 'queues-list-row', data: { queue: q.queue } },
      h('td', {}, h('a', { testid: 'queues-list-name', href: queueHref(q.queue), text: q.queue })),
      h('td', {}, badge('', 'queues-list-paused')),
      ['available', 'scheduled', 'retryable', 'running'].map((s) => (cells[s] = h('td', { class: 'num' },
        h('a', { testid: `queues-list-${s}`, href: jobsHref(q.queue, s) })))),
      h('td', { testid: 'queues-list-nodes' }),
      h('td', { class: 'num', testid: 'queues-list-concurrency' }),
      h('td', { class: 'policy', testid: 'queues-list-policy' }),
      h('td', { testid: 'queues-list-waits' }));
    tr._cells = cells;
    return tr;
  }

  function updateRow(tr, q) {
    setData(tr, 'paused', q.paused);
    setBadge(tr.querySelector('[data-testid="queues-list-paused"]'), q.paused ? 'paused' : 'active');
    for (const [s, td] of Object.entries(tr._cells)) setText(td.firstChild, Number(q.counts[s] || 0));
    const nodes = tr.querySelector('[data-testid="queues-list-nodes"]');
    const conc = tr.querySelector('[data-testid="queues-list-concurrency"]');
    if (q.nodes) {
      setText(nodes, nodesText(q.nodes));
      nodes.title = '';
      setText(conc, concurrencyText(q.nodes));
      setData(conc, 'sum', q.nodes.sum);
    } else {
      setText(nodes, '—');
      nodes.title = 'listing workers needs the admin token';
      setText(conc, '—');
      setData(conc, 'sum', '');
    }
    const policy = tr.querySelector('[data-testid="queues-list-policy"]');
    setText(policy, q.limits ? policySummary(q.limits) : 'unavailable');
    policy.title = q.limitsError;
    const waits = tr.querySelector('[data-testid="queues-list-waits"]');
    const key = q.waits.map(rateWaitText).join('\n');
    if (waits.dataset.key !== key) {
      waits.dataset.key = key;
      fill(waits, rateWaitList(q.waits));
    }
  }

  return {
    async refresh() {
      const [qres, workers] = await Promise.all([api.get('/queues'), loadWorkers(api)]);
      if (!ctx.alive()) return;
      const queues = (Array.isArray(qres.queues) ? qres.queues : [])
        .map((q) => ({ queue: String(q.queue), paused: Boolean(q.paused), counts: q.counts && typeof q.counts === 'object' ? q.counts : {} }))
        .sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
      const limits = await Promise.all(queues.map((q) => readLimits(api, q.queue)));
      if (!ctx.alive()) return;
      queues.forEach((q, i) => {
        q.limitsError = limits[i].error || '';
        q.limits = limits[i].error ? null : limits[i].limits || {};
        q.waits = Array.isArray(limits[i].rate_waits) ? limits[i].rate_waits : [];
        q.nodes = workers ? nodesOf(workers, q.queue) : null;
      });
      note.hidden = workers !== null;
      reconcile(tbody, queues, (q) => q.queue, createRow, updateRow);
      empty.hidden = queues.length > 0;
    },
  };
}

// ---- one queue ---------------------------------------------------------------

// numInput is a number field; step "any" and the form's novalidate leave
// every check to the page and the server, whose errors are shown.
function numInput(testid, label) {
  return h('input', { type: 'number', step: 'any', min: '0', class: 'num-in', testid, attrs: { inputmode: 'decimal', 'aria-label': label } });
}

function field(label, input, hint) {
  return h('label', { class: 'field' }, h('span', { class: 'field-label', text: label }), input,
    hint ? h('span', { class: 'hint', text: hint }) : null);
}

export function mountQueue(ctx) {
  const { api, root, route } = ctx;
  const name = route.queue;

  const pauseBtn = h('button', { type: 'button', testid: 'queue-pause-toggle', text: 'Pause' });
  const status = badge('', 'queue-status');
  const msg = h('p', { class: 'action-msg', testid: 'queue-result', hidden: true });
  const err = h('p', { class: 'action-err', testid: 'queue-error', hidden: true });
  const note = readOnlyNote('queue-readonly');
  const counts = h('dl', { class: 'queue-counts', testid: 'queue-counts' });
  const policyLine = h('p', { class: 'policy', testid: 'queue-policy' });
  const waits = h('div', { testid: 'queue-rate-waits' });
  const nodesBody = h('tbody', { testid: 'queue-nodes-body' });
  const nodesTotal = h('tr', { class: 'totals', testid: 'queue-nodes-total' });
  const nodesNone = h('p', { class: 'empty', testid: 'queue-nodes-none', hidden: true, text: 'No live node works this queue.' });
  const nodesWrap = h('div', { class: 'table-wrap' },
    h('table', { testid: 'queue-nodes' },
      h('thead', {}, h('tr', {}, ['Node', 'Worker id', 'Workers for this queue', 'Last heartbeat'].map((t) => h('th', { text: t })))),
      nodesBody, h('tfoot', {}, nodesTotal)));

  // ---- the policy form ----
  const f = {
    maxRunning: numInput('limit-max-running', 'max running'),
    perPartition: numInput('limit-max-running-per-partition', 'max running per partition'),
    rateStarts: numInput('limit-rate-starts', 'queue rate: starts'),
    ratePer: numInput('limit-rate-per', 'queue rate: per seconds'),
    partStarts: numInput('limit-rate-partition-starts', 'rate per partition: starts'),
    partPer: numInput('limit-rate-partition-per', 'rate per partition: per seconds'),
    fair: h('input', { type: 'checkbox', testid: 'limit-fair' }),
    agingEvery: numInput('limit-aging-every', 'aging: one step every seconds'),
    agingSteps: numInput('limit-aging-max-steps', 'aging: at most steps'),
    workers: numInput('limit-workers-per-node', 'workers per node'),
  };
  const kindRows = h('tbody', { testid: 'limit-kind-rows' });
  const rateKindRows = h('tbody', { testid: 'limit-rate-kind-rows' });
  const addKind = h('button', { type: 'button', class: 'small', testid: 'limit-kind-add', text: 'Add kind' });
  const addRateKind = h('button', { type: 'button', class: 'small', testid: 'limit-rate-kind-add', text: 'Add kind' });
  const save = h('button', { type: 'submit', testid: 'limits-save', text: 'Save policy' });
  const revert = h('button', { type: 'button', class: 'quiet', testid: 'limits-revert', text: 'Discard changes' });
  const formErr = h('p', { class: 'action-err', testid: 'limits-error', hidden: true });
  const formMsg = h('p', { class: 'action-msg', testid: 'limits-result', hidden: true });
  const dirtyNote = h('span', { class: 'muted', testid: 'limits-dirty', hidden: true, text: 'unsaved changes' });
  const changedNote = h('p', { class: 'note action-err', testid: 'limits-changed', hidden: true,
    text: 'The policy was changed elsewhere since this form was filled in (it is shown above); saving replaces it with the form. Discard changes to start from it.' });

  const form = h('form', { class: 'limits-form', testid: 'limits-form', attrs: { novalidate: '' } },
    h('fieldset', {}, h('legend', { text: 'Concurrency (running jobs at once, across every node; empty or 0 = no limit)' }),
      field('Max running', f.maxRunning, 'the whole queue'),
      field('Max running per partition', f.perPartition, 'for every partition key'),
      h('div', { class: 'kind-table' },
        h('table', {}, h('thead', {}, h('tr', {}, ['Kind', 'Max running', ''].map((t) => h('th', { text: t })))), kindRows),
        addKind)),
    h('fieldset', {}, h('legend', { text: 'Rates (starts per period across every node, bursts up to the starts; empty or 0 starts = no rate)' }),
      h('div', { class: 'rate-row' }, h('span', { class: 'field-label', text: 'Queue' }),
        field('starts', f.rateStarts), field('per seconds', f.ratePer)),
      h('div', { class: 'rate-row' }, h('span', { class: 'field-label', text: 'Per partition' }),
        field('starts', f.partStarts), field('per seconds', f.partPer)),
      h('div', { class: 'kind-table' },
        h('table', {}, h('thead', {}, h('tr', {}, ['Kind', 'Starts', 'Per seconds', ''].map((t) => h('th', { text: t })))), rateKindRows),
        addRateKind)),
    h('fieldset', {}, h('legend', { text: 'Claim order' }),
      h('label', { class: 'field check' }, f.fair, h('span', { text: 'Fair: claims take turns across partition keys' })),
      h('div', { class: 'rate-row' }, h('span', { class: 'field-label', text: 'Priority aging' }),
        field('one step every seconds', f.agingEvery, '0 = off; at least 1 s'),
        field('at most steps', f.agingSteps, '0 = up to priority 1'))),
    h('fieldset', {}, h('legend', { text: 'Workers' }),
      field('Workers per node', f.workers, 'jobs of this queue each node runs at once, applied within a poll interval; 0 = each node\'s configured max workers')),
    changedNote,
    h('div', { class: 'actions' }, save, revert, dirtyNote),
    formErr, formMsg);

  let dirty = false;
  let admin = true; // until GET /workers or a save answers 403
  let stored = null; // the limits last read from the server
  let filledFrom = ''; // the JSON of the limits the form was filled from
  function setDirty(d) {
    dirty = d;
    dirtyNote.hidden = !d;
    setData(form, 'dirty', d);
  }
  form.addEventListener('input', () => setDirty(true));
  form.addEventListener('change', () => setDirty(true));

  function kindRow(kind, cells, removeTestid) {
    const kindIn = h('input', { class: 'kind-in', testid: 'limit-kind-name', placeholder: 'kind', spellcheck: 'false', autocomplete: 'off', attrs: { 'aria-label': 'kind' } });
    kindIn.value = kind;
    const rm = h('button', { type: 'button', class: 'small quiet', testid: removeTestid, text: 'Remove' });
    const tr = h('tr', {}, h('td', {}, kindIn), cells.map((c) => h('td', {}, c)), h('td', {}, rm));
    rm.addEventListener('click', () => { tr.remove(); setDirty(true); });
    tr._kind = kindIn;
    tr._cells = cells;
    return tr;
  }
  function addKindRow(kind, n) {
    const v = numInput('limit-kind-max', 'max running of the kind');
    v.value = n === undefined ? '' : String(n);
    kindRows.append(kindRow(kind, [v], 'limit-kind-remove'));
    return v;
  }
  function addRateKindRow(kind, r) {
    const s = numInput('limit-rate-kind-starts', 'starts of the kind');
    const p = numInput('limit-rate-kind-per', 'per seconds');
    s.value = r ? String(r.starts) : '';
    p.value = r ? String(r.per_seconds) : '';
    rateKindRows.append(kindRow(kind, [s, p], 'limit-rate-kind-remove'));
  }
  addKind.addEventListener('click', () => { addKindRow(''); setDirty(true); kindRows.lastChild._kind.focus(); });
  addRateKind.addEventListener('click', () => { addRateKindRow(''); setDirty(true); rateKindRows.lastChild._kind.focus(); });

  const num = (v) => (v ? String(v) : '');
  function fillForm(l) {
    l = l || {};
    f.maxRunning.value = num(l.max_running);
    f.perPartition.value = num(l.max_running_per_partition);
    f.rateStarts.value = hasRate(l.rate) ? String(l.rate.starts) : '';
    f.ratePer.value = hasRate(l.rate) ? String(l.rate.per_seconds) : '';
    f.partStarts.value = hasRate(l.rate_per_partition) ? String(l.rate_per_partition.starts) : '';
    f.partPer.value = hasRate(l.rate_per_partition) ? String(l.rate_per_partition.per_seconds) : '';
    f.fair.checked = Boolean(l.fair);
    f.agingEvery.value = l.aging ? num(l.aging.every_seconds) : '';
    f.agingSteps.value = l.aging ? num(l.aging.max_steps) : '';
    f.workers.value = num(l.workers_per_node);
    kindRows.replaceChildren();
    for (const [k, n] of entries(l.max_running_per_kind)) addKindRow(k, n);
    rateKindRows.replaceChildren();
    for (const [k, r] of entries(l.rate_per_kind)) addRateKindRow(k, r);
    filledFrom = JSON.stringify(l);
    changedNote.hidden = true;
    setDirty(false);
  }

  // readForm builds the policy the form describes, or throws an Error
  // naming the field the page cannot read. Values the page can read go to
  // the server as typed: it judges their range and says what is wrong.
  function readForm() {
    const read = (input, label) => {
      if (input.validity && input.validity.badInput) throw new Error(`${label}: not a number.`);
      const s = input.value.trim();
      if (!s) return 0;
      const n = Number(s);
      if (!Number.isFinite(n)) throw new Error(`${label}: not a number.`);
      return n;
    };
    const rate = (starts, per, label) => {
      const s = read(starts, `${label} starts`);
      const p = read(per, `${label} per seconds`);
      if (!s) return null; // no starts: no rate, whatever the period says
      return { starts: s, per_seconds: p };
    };
    const l = {};
    const put = (k, v) => { if (v) l[k] = v; };
    put('max_running', read(f.maxRunning, 'Max running'));
    put('max_running_per_partition', read(f.perPartition, 'Max running per partition'));
    const kinds = {};
    for (const tr of kindRows.children) {
      const k = tr._kind.value.trim();
      const n = read(tr._cells[0], `Max running of kind ${k || '(unnamed)'}`);
      if (!k && !n) continue;
      if (!k) throw new Error('A per-kind limit has no kind.');
      if (k in kinds) throw new Error(`Kind ${k} is named twice in the per-kind limits.`);
      kinds[k] = n;
    }
    if (Object.keys(kinds).length) l.max_running_per_kind = kinds;
    put('rate', rate(f.rateStarts, f.ratePer, 'Queue rate'));
    const rates = {};
    for (const tr of rateKindRows.children) {
      const k = tr._kind.value.trim();
      const r = rate(tr._cells[0], tr._cells[1], `Rate of kind ${k || '(unnamed)'}`);
      if (!k && !r) continue;
      if (!k) throw new Error('A per-kind rate has no kind.');
      if (k in rates) throw new Error(`Kind ${k} is named twice in the per-kind rates.`);
      if (r) rates[k] = r;
    }
    if (Object.keys(rates).length) l.rate_per_kind = rates;
    put('rate_per_partition', rate(f.partStarts, f.partPer, 'Per-partition rate'));
    if (f.fair.checked) l.fair = true;
    const every = read(f.agingEvery, 'Aging every');
    const steps = read(f.agingSteps, 'Aging max steps');
    if (every || steps) l.aging = { every_seconds: every, max_steps: steps };
    put('workers_per_node', read(f.workers, 'Workers per node'));
    return l;
  }

  function formNotify(text, isError) {
    setText(isError ? formErr : formMsg, text);
    (isError ? formErr : formMsg).hidden = false;
    (isError ? formMsg : formErr).hidden = true;
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!admin) return;
    let body;
    try {
      body = readForm();
    } catch (e) {
      formNotify(e.message, true);
      return;
    }
    const ok = await ctx.confirm(`Replace the claim policy of queue ${name}?`,
      `New policy: ${policySummary(body)}. It replaces the whole policy, in the database, for every node: claims obey it at once, and workers per node apply within a poll interval. Jobs already running keep running.`,
      'Save policy');
    if (!ok || !ctx.alive()) return;
    save.disabled = true;
    try {
      const res = await api.call('PUT', `/queues/${seg(name)}/limits`, body);
      if (!ctx.alive()) return;
      stored = res.limits || {};
      fillForm(stored);
      formNotify(`Saved. The policy now reads: ${policySummary(stored)}.`, false);
    } catch (e) {
      if (!ctx.alive()) return;
      if (e instanceof ApiError && e.status === 403) setAdmin(false);
      const detail = e instanceof ApiError && e.problem && typeof e.problem.detail === 'string' && e.problem.detail ? e.problem.detail : e.message;
      formNotify(`The server refused the policy: ${detail}`, true);
    } finally {
      save.disabled = !admin;
    }
    ctx.refresh();
  });
  revert.addEventListener('click', () => {
    fillForm(stored);
    formErr.hidden = true;
    formMsg.hidden = true;
  });

  function setAdmin(a) {
    admin = a;
    note.hidden = a;
    for (const el of form.querySelectorAll('input, button')) el.disabled = !a;
    pauseBtn.disabled = !a;
    setData(form, 'readonly', !a);
  }

  // ---- pause ----
  let paused = false;
  function notify(text, isError) {
    setText(isError ? err : msg, text);
    (isError ? err : msg).hidden = false;
    (isError ? msg : err).hidden = true;
  }
  pauseBtn.addEventListener('click', async () => {
    const pausing = !paused;
    if (pausing) {
      const ok = await ctx.confirm(`Pause queue ${name}?`,
        `No node will claim jobs of "${name}" until it is resumed. Running jobs finish normally.`, 'Pause');
      if (!ok || !ctx.alive()) return;
    }
    try {
      // The page may show a queue that has no jobs yet (configured, or with
      // limits only): pausing it here is deliberate, so create=true.
      await api.post(`/queues/${seg(name)}/${pausing ? 'pause' : 'resume'}?create=true`);
      if (ctx.alive()) notify(`Queue ${name} ${pausing ? 'paused' : 'resumed'}.`, false);
    } catch (e) {
      if (!ctx.alive()) return;
      if (e instanceof ApiError && e.status === 403) setAdmin(false);
      notify(`Could not ${pausing ? 'pause' : 'resume'} queue ${name}: ${e.message}`, true);
    }
    ctx.refresh();
  });

  const missing = h('p', { class: 'empty', testid: 'queue-missing', hidden: true, text: 'No jobs of this queue are stored and it has no record: it appears once a job is submitted or a node works it. Its policy can be set already.' });
  root.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/queues', text: 'Queues' }), ' / ', name),
    h('div', { class: 'title' }, h('h1', { testid: 'queue-name', text: `Queue ${name}` }), status, pauseBtn),
    note, msg, err, missing,
    counts,
    h('h2', { text: 'Nodes working it' }),
    nodesWrap, nodesNone,
    h('h2', { text: 'Claim policy' }),
    policyLine,
    h('h2', { text: 'Rate waits' }),
    waits,
    h('h2', { text: 'Change the policy' }),
    form,
    h('p', { class: 'note' },
      'The policy is one record per queue in the database: saving replaces all of it for every node. ',
      'Limits and rates are enforced inside each claim, cluster-wide; a claim skips jobs a limit holds back and takes those behind them. ',
      'A node\'s worker count is what it registered at its last heartbeat. ',
      `Times are shown in ${zoneName()}; hover one for UTC.`),
  );
  setData(root, 'queue', name);

  function createNode() {
    return h('tr', { testid: 'queue-node' },
      h('td', { testid: 'queue-node-name' }),
      h('td', { class: 'mono', testid: 'queue-node-id' }),
      h('td', { class: 'num', testid: 'queue-node-workers' }),
      h('td', { testid: 'queue-node-heartbeat' }));
  }
  let perNode = 0; // the policy's workers_per_node as last read
  function updateNode(tr, n) {
    setData(tr, 'workerId', n.id);
    setText(tr.querySelector('[data-testid="queue-node-name"]'), n.name);
    setText(tr.querySelector('[data-testid="queue-node-id"]'), n.id);
    const w = tr.querySelector('[data-testid="queue-node-workers"]');
    const pending = n.workers !== null && perNode > 0 && n.workers !== perNode;
    setText(w, n.workers === null ? 'not reported' : pending ? `${n.workers} (changing to ${perNode})` : n.workers);
    setData(tr, 'pending', pending);
    w.title = n.workers === null ? 'this worker does not register its worker count (remote workers may not)'
      : pending ? 'the node applies workers per node at its next poll and registers the new count at its next heartbeat' : '';
    const hb = tr.querySelector('[data-testid="queue-node-heartbeat"]');
    setText(hb, fmtAgo(n.heartbeat_at));
    hb.title = timeTitle(n.heartbeat_at) || fmtTime(n.heartbeat_at);
  }

  let formFilled = false;
  return {
    async refresh() {
      const [qres, lres, workers] = await Promise.all([
        api.get('/queues'),
        readLimits(api, name),
        loadWorkers(api),
      ]);
      if (!ctx.alive()) return;
      const q = (Array.isArray(qres.queues) ? qres.queues : []).find((x) => x && x.queue === name);
      missing.hidden = Boolean(q);
      paused = Boolean(q && q.paused);
      setBadge(status, paused ? 'paused' : 'active');
      setData(root, 'paused', paused);
      setText(pauseBtn, paused ? 'Resume' : 'Pause');
      const c = q && q.counts && typeof q.counts === 'object' ? q.counts : {};
      const key = JSON.stringify(c);
      if (counts.dataset.key !== key) {
        counts.dataset.key = key;
        fill(counts, STATES.map((s) => h('div', {}, h('dt', { text: s }),
          h('dd', {}, h('a', { testid: `queue-count-${s}`, href: jobsHref(name, s), text: Number(c[s] || 0) })))));
      }

      const limits = lres.error ? {} : lres.limits || {};
      form.hidden = Boolean(lres.error);
      perNode = Number(limits.workers_per_node) || 0;
      setText(policyLine, lres.error ? `The policy cannot be read: ${lres.error}` : policySummary(limits));
      const ws = Array.isArray(lres.rate_waits) ? lres.rate_waits : [];
      const wkey = ws.map(rateWaitText).join('\n');
      if (waits.dataset.key !== wkey || !waits.firstChild) {
        waits.dataset.key = wkey;
        fill(waits, rateWaitList(ws));
      }
      if (!lres.error) {
        stored = limits;
        // The form follows the stored policy while nobody edits it, and is
        // rebuilt only when that changes (a poll leaves focus alone).
        const now = JSON.stringify(limits);
        if (!formFilled || (!dirty && now !== filledFrom)) {
          fillForm(limits);
          formFilled = true;
        } else if (dirty) {
          changedNote.hidden = now === filledFrom;
        }
      }

      if (workers === null) {
        setAdmin(false);
        nodesWrap.hidden = true;
        nodesNone.hidden = false;
        setText(nodesNone, 'Listing the nodes needs the admin token.');
        return;
      }
      if (!admin) setAdmin(true);
      const n = nodesOf(workers, name);
      reconcile(nodesBody, n.nodes, (x) => x.id, createNode, updateNode);
      nodesWrap.hidden = n.nodes.length === 0;
      nodesNone.hidden = n.nodes.length > 0;
      setText(nodesNone, 'No live node works this queue.');
      fill(nodesTotal, h('th', { text: 'concurrency across workers' }), h('td'),
        h('td', { class: 'num', testid: 'queue-concurrency', data: { sum: n.sum }, text: concurrencyText(n) }), h('td'));
    },
  };
}
