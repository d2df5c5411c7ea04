// Job detail: args, metadata, tags, every attempt with its start, end and
// duration, why a discarded job was discarded, every attempt's error with
// its cause and trace, the result, a timeline (times in the browser's zone, named,
// with UTC on hover), and the admin actions retry (run now, for a scheduled
// job), cancel and delete (each confirmed first; a refusal shows the API's
// problem detail). A job of a workflow or batch links to its page and
// names its step; a job with dependencies lists them, and while it
// waits how many it still waits for.

import { ApiError } from './api.js';
import { h, setText, setData, fill, badge, setBadge, fmtAgo, fmtDuration, serverNow, prettyJSON, fmtZoned, timeTitle, jobHref } from './dom.js';
import { progressBar, setProgress } from './progress.js';
import { flowHref } from './workflows.js';

const FINAL = ['completed', 'cancelled', 'discarded'];

// What each error entry's cause means (core's Cause* constants); a cause
// not listed is shown as it is.
const CAUSES = {
  handler_error: 'the handler returned an error',
  panic: 'the handler panicked',
  timeout: 'the attempt ran past its timeout',
  deadline: "the job's deadline ended the attempt",
  unknown_kind: 'no handler for this kind on the worker that claimed it',
  decrypt_failed: "the job's sealed args could not be opened",
  invalid_continue: 'the handler asked for a continuation the engine refused',
  shutdown: "the worker's hard stop ended the attempt",
  lease_expired: 'rescued: its lease ran out',
  worker_dead: 'rescued: its worker was declared dead',
  claim_lost: 'handed back: the worker never received the claim',
  lease_unrenewed: 'handed back: the worker could not renew the lease',
  undeliverable: 'handed back: the job server could not deliver it to its worker',
};

// Why a job was discarded (an error entry's discard_reason, core's
// Reason* constants).
const DISCARD_REASONS = {
  exhausted: 'its attempts were used up',
  deadline: 'its deadline passed',
  permanent: 'the handler gave up on it (a permanent error)',
  worker_lost: 'its worker was lost on the last attempt',
};

// fmtSpan renders a duration in milliseconds: "85 ms", "4.2 s", then as
// fmtDuration does ("3 min 4 s").
export function fmtSpan(ms) {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return fmtDuration(ms / 1000);
}

// attemptRows lists job j's attempts, oldest first: one per error entry
// (its start when recorded, its end, its cause) and the current attempt
// when no entry ends it (running, or completed: from attempted_at to now
// or finished_at).
export function attemptRows(j) {
  const es = Array.isArray(j.errors) ? j.errors : [];
  const rows = es.map((e) => ({
    attempt: e.attempt, start: e.started_at || '', end: e.at || '',
    outcome: e.cause || 'failed', discarded: Boolean(e.discard_reason), error: e,
  }));
  const last = es[es.length - 1];
  const endedByEntry = Boolean(last && j.attempted_at && last.started_at &&
    Date.parse(last.started_at) === Date.parse(j.attempted_at));
  if (j.attempted_at && !endedByEntry && (j.state === 'running' || j.state === 'completed' ||
      (!last || Date.parse(last.at) < Date.parse(j.attempted_at)))) {
    const running = j.state === 'running';
    rows.push({
      attempt: j.attempt, start: j.attempted_at, end: running ? '' : (j.finished_at || ''),
      outcome: running ? 'running' : j.state, discarded: false, error: null, running,
    });
  }
  return rows;
}

export function mountJob(ctx) {
  const { api, root, route } = ctx;
  const id = route.id;

  const title = h('h1', {}, `Job ${id}`);
  const state = badge('', 'job-detail-state');
  const kind = h('span', { class: 'kind', testid: 'job-detail-kind' });
  const progress = progressBar('job-detail-progress');
  const checkpoint = h('pre', { class: 'json', testid: 'job-checkpoint' });
  const checkpointSection = h('section', { hidden: true }, h('h2', { text: 'Checkpoint' }), checkpoint);
  const msg = h('p', { class: 'action-msg', testid: 'action-result', hidden: true });
  const err = h('p', { class: 'action-err', testid: 'action-error', hidden: true });
  const missing = h('p', { class: 'empty', testid: 'job-missing', hidden: true });

  const btn = (action, label, cls) => h('button', { type: 'button', class: cls, testid: `action-${action}`, text: label, disabled: true });
  const retryBtn = btn('retry', 'Retry', '');
  const cancelBtn = btn('cancel', 'Cancel', 'warn');
  const deleteBtn = btn('delete', 'Delete', 'danger');

  const summary = h('dl', { class: 'summary', testid: 'job-summary' });
  const deps = h('dl', { class: 'summary', testid: 'job-dependencies' });
  const depsSection = h('section', { hidden: true, testid: 'job-dependencies-section' }, h('h2', { text: 'Workflow and dependencies' }), deps);
  const timeline = h('tbody', { testid: 'job-timeline' });
  const args = h('pre', { class: 'json', testid: 'job-args' });
  const result = h('pre', { class: 'json', testid: 'job-result' });
  const metadata = h('tbody', { testid: 'job-metadata' });
  const tags = h('div', { class: 'tags', testid: 'job-tags' });
  const errors = h('div', { class: 'errors', testid: 'job-errors' });
  const discard = h('p', { class: 'discard-reason', testid: 'job-discard-reason', hidden: true });
  const attempts = h('tbody', { testid: 'job-attempts' });
  const body = h('div', { class: 'detail', testid: 'job-detail', data: { jobId: id }, hidden: true },
    h('div', { class: 'actions' }, retryBtn, cancelBtn, deleteBtn),
    msg, err, discard,
    h('div', { class: 'grid' },
      h('section', {}, h('h2', { text: 'Summary' }), summary),
      h('section', {}, h('h2', { text: 'Timeline' }),
        h('table', { class: 'timeline' }, timeline))),
    depsSection,
    h('section', {}, h('h2', { text: 'Attempts' }),
      h('div', { class: 'table-wrap' }, h('table', { class: 'attempts', testid: 'job-attempts-table' },
        h('thead', {}, h('tr', {}, ['Attempt', 'Started', 'Ended', 'Duration', 'Outcome'].map((t) => h('th', { text: t })))),
        attempts))),
    h('section', {}, h('h2', { text: 'Args' }), args),
    h('section', {}, h('h2', { text: 'Result' }), result),
    checkpointSection,
    h('div', { class: 'grid' },
      h('section', {}, h('h2', { text: 'Metadata' }), h('table', { class: 'kv' }, metadata)),
      h('section', {}, h('h2', { text: 'Tags' }), tags)),
    h('section', {}, h('h2', { text: 'Errors' }), errors));

  root.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/jobs', testid: 'back-to-jobs', text: '← Jobs' })),
    h('div', { class: 'title' }, title, state, kind, progress),
    missing, body);

  let job = null;
  const last = {}; // JSON of each section as last rendered
  const changed = (key, v) => {
    const s = JSON.stringify(v === undefined ? null : v);
    if (last[key] === s) return false;
    last[key] = s;
    return true;
  };

  function notify(text, isError) {
    setText(isError ? err : msg, text);
    (isError ? err : msg).hidden = false;
    (isError ? msg : err).hidden = true;
  }

  async function act(action) {
    if (!job) return;
    // A scheduled job is not retried but run early: the same call makes
    // it available now.
    const runNow = action === 'retry' && job.state === 'scheduled';
    const what = {
      retry: runNow
        ? ['Run now', `Run job ${id} (${job.kind}) now instead of at ${fmtZoned(job.run_at)}?`]
        : ['Retry', `Make job ${id} (${job.kind}) available to run again now?`],
      cancel: ['Cancel', `Cancel job ${id} (${job.kind})? A cancelled job is never retried unless retried by hand.`],
      delete: ['Delete', `Delete job ${id} (${job.kind}) for good? Its history is lost.`],
    }[action];
    const ok = await ctx.confirm(`${what[0]} job ${id}?`, what[1], what[0]);
    if (!ok || !ctx.alive()) return;
    try {
      if (action === 'delete') {
        await api.del(`/jobs/${id}`);
        ctx.navigate('#/jobs');
        return;
      }
      const res = await api.post(`/jobs/${id}/${action}`);
      if (!ctx.alive()) return;
      if (res && res.job) render(res.job);
      notify(action === 'retry' ? (runNow ? `Job ${id} is available now.` : `Job ${id} is available again.`) : `Job ${id} was cancelled.`, false);
    } catch (e) {
      if (!ctx.alive()) return;
      notify(`${what[0]} failed: ${e.message}`, true);
    }
    ctx.refresh();
  }
  retryBtn.addEventListener('click', () => act('retry'));
  cancelBtn.addEventListener('click', () => act('cancel'));
  deleteBtn.addEventListener('click', () => act('delete'));

  function render(j) {
    job = j;
    body.hidden = false;
    missing.hidden = true;
    setBadge(state, j.state);
    setData(body, 'state', j.state);
    setData(body, 'archived', j.archived ? 'true' : 'false');
    setText(kind, j.kind);
    setText(retryBtn, j.state === 'scheduled' ? 'Run now' : 'Retry');
    setData(retryBtn, 'action', j.state === 'scheduled' ? 'run-now' : 'retry');
    retryBtn.disabled = j.state === 'running' || j.state === 'waiting';
    retryBtn.title = j.state === 'running' ? 'A running job cannot be retried; cancel it first.'
      : j.state === 'waiting' ? 'A waiting job runs once its dependencies are settled; it cannot be run before.' : '';
    cancelBtn.disabled = FINAL.includes(j.state);
    cancelBtn.title = cancelBtn.disabled ? `A ${j.state} job cannot be cancelled.` : '';
    deleteBtn.disabled = j.state === 'running';
    deleteBtn.title = j.state === 'running' ? 'A running job cannot be deleted; cancel it first.' : '';
    if (j.archived) {
      for (const b of [retryBtn, cancelBtn, deleteBtn]) {
        b.disabled = true;
        b.title = 'An archived job is kept as it finished: it cannot be retried, cancelled or deleted.';
      }
    }

    const sum = [
      ['Queue', j.queue], ['Kind', j.kind], ['State', j.state], ['Priority', j.priority],
      ['Attempt', `${j.attempt} of ${j.max_attempts}`], ['Unique key', j.unique_key], ['Worker', j.worker_id],
      ['Archived', j.archived ? 'yes: moved to the archive past its retention' : ''],
    ];
    if (changed('summary', sum)) {
      fill(summary, sum.filter(([, v]) => v !== undefined && v !== '').map(([k, v]) =>
        [h('dt', { text: k }), h('dd', { testid: `summary-${k.toLowerCase().replace(/ /g, '-')}`, text: v })]));
    }

    renderDeps(j);

    const times = [
      ['created', j.created_at], ['run at', j.run_at], ['attempted', j.attempted_at],
      ['finished', j.finished_at], ['lease until', j.lease_until], ['deadline', j.deadline],
    ].filter(([, t]) => t);
    // Relative times move every poll, so the timeline is redrawn each time.
    fill(timeline, times.map(([k, t]) => h('tr', { testid: `timeline-${k.replace(/ /g, '-')}` },
      h('th', { text: k }), h('td', { text: fmtZoned(t), title: timeTitle(t) }), h('td', { class: 'ago', text: fmtAgo(t) }))));

    setProgress(progress, j);
    if (changed('checkpoint', j.checkpoint)) {
      checkpointSection.hidden = j.checkpoint === undefined;
      setText(checkpoint, j.checkpoint === undefined ? '' : prettyJSON(j.checkpoint));
    }
    if (changed('args', j.args)) setText(args, prettyJSON(j.args === undefined ? {} : j.args));
    if (changed('result', j.result)) {
      setText(result, j.result === undefined ? '(none)' : prettyJSON(j.result));
      result.classList.toggle('none', j.result === undefined);
    }
    const md = j.metadata && typeof j.metadata === 'object' ? Object.entries(j.metadata) : [];
    if (changed('metadata', md)) {
      fill(metadata, md.length ? md.map(([k, v]) => h('tr', {}, h('th', { text: k }), h('td', { text: typeof v === 'string' ? v : JSON.stringify(v) })))
        : h('tr', {}, h('td', { class: 'none', text: '(none)' })));
    }
    const tg = Array.isArray(j.tags) ? j.tags : [];
    if (changed('tags', tg)) {
      fill(tags, tg.length ? tg.map((t) => h('span', { class: 'tag', testid: 'job-tag', text: t })) : h('span', { class: 'none', text: '(none)' }));
    }
    const es = Array.isArray(j.errors) ? j.errors : [];
    if (changed('errors', es)) renderErrors(es);
    renderDiscard(j, es);
    // A running attempt's duration moves every poll: redrawn each time.
    renderAttempts(j);
  }

  // renderDeps shows the job's workflow or batch (a link to its page),
  // step, dependencies (links to their jobs), what it still waits for and
  // how its settled dependencies ended.
  function renderDeps(j) {
    const wf = Number.isSafeInteger(j.workflow_id) && j.workflow_id > 0 ? j.workflow_id : 0;
    const dep = Array.isArray(j.depends_on) ? j.depends_on.filter(Number.isSafeInteger) : [];
    const ends = j.dependency_ends && typeof j.dependency_ends === 'object' ? j.dependency_ends : null;
    const key = JSON.stringify([wf, j.step || '', dep, j.state, j.waiting_for || 0, j.on_dependency_failure || '', ends]);
    if (!changed('deps', key)) return;
    depsSection.hidden = !wf && !dep.length;
    if (depsSection.hidden) {
      fill(deps);
      return;
    }
    // A batch's jobs have no step, its callbacks on_finish or on_success
    // (a workflow's step of that name links to the batch page, which
    // sends it on to the workflow's).
    const batch = !j.step || j.step === 'on_finish' || j.step === 'on_success';
    const rows = [];
    if (wf) {
      rows.push(['Workflow', h('a', { href: flowHref(wf, batch), testid: 'job-workflow-link', data: { batch } },
        `${batch ? 'batch' : 'workflow'} ${wf}`)]);
    }
    if (j.step) rows.push(['Step', h('span', { class: 'mono', testid: 'job-step', text: j.step })]);
    if (dep.length) {
      rows.push(['Depends on', h('span', { testid: 'job-depends-on' },
        dep.slice(0, 100).map((d, i) => [i ? ', ' : '', h('a', { href: jobHref(d), testid: 'job-dependency', text: d })]),
        dep.length > 100 ? ` and ${dep.length - 100} more` : '')]);
    }
    if (j.state === 'waiting') {
      const n = Number(j.waiting_for) || 0;
      rows.push(['Waiting for', h('span', { testid: 'job-waiting-for', text: `${n} of ${dep.length} job${dep.length === 1 ? '' : 's'} not yet settled` })]);
    }
    if (dep.length) {
      rows.push(['If one fails', j.on_dependency_failure === 'run' ? 'runs anyway (run)' : 'is cancelled (cancel)']);
    }
    if (ends && (ends.completed || ends.cancelled || ends.discarded)) {
      rows.push(['Dependencies ended', h('span', { testid: 'job-dependency-ends',
        text: `${Number(ends.completed) || 0} completed, ${Number(ends.cancelled) || 0} cancelled, ${Number(ends.discarded) || 0} discarded` })]);
    }
    fill(deps, rows.map(([k, v]) => [h('dt', { text: k }), h('dd', {}, v)]));
  }

  // renderDiscard says why a discarded job was discarded: the reason the
  // engine recorded on the entry that discarded it, and that entry's
  // message.
  function renderDiscard(j, es) {
    if (j.state !== 'discarded') {
      discard.hidden = true;
      return;
    }
    const e = [...es].reverse().find((x) => x.discard_reason) || es[es.length - 1];
    const reason = e && e.discard_reason ? e.discard_reason : '';
    const why = reason ? (DISCARD_REASONS[reason] || reason) : 'no reason was recorded (an entry written before reasons were)';
    const text = e ? (typeof e.error === 'string' ? e.error : JSON.stringify(e.error)).split('\n', 1)[0] : '';
    const key = JSON.stringify([reason, text, e && e.attempt, j.attempt, j.max_attempts]);
    setData(discard, 'reason', reason || 'unknown');
    discard.hidden = false;
    if (discard.dataset.key === key) return;
    discard.dataset.key = key;
    fill(discard,
      h('strong', { text: 'Discarded' }), ` because ${why}`,
      reason === 'exhausted' ? ` (${j.attempt} of ${j.max_attempts} attempts)` : '',
      text ? h('span', {}, ` — attempt ${e.attempt}: `, h('span', { testid: 'job-discard-message', text })) : '',
      '.');
  }

  function renderAttempts(j) {
    const rows = attemptRows(j);
    if (!rows.length) {
      fill(attempts, h('tr', {}, h('td', { class: 'none', attrs: { colspan: 5 }, text: '(not run yet)' })));
      return;
    }
    fill(attempts, rows.slice().reverse().map((r) => {
      const s = Date.parse(r.start), e = r.running ? serverNow() : Date.parse(r.end);
      const dur = Number.isNaN(s) || Number.isNaN(e) ? '' : fmtSpan(e - s);
      return h('tr', { testid: 'job-attempt', data: { attempt: r.attempt, outcome: r.outcome } },
        h('td', { class: 'num', text: r.attempt }),
        h('td', { testid: 'attempt-start', text: r.start ? fmtZoned(r.start) : '—', title: r.start ? timeTitle(r.start) : 'not recorded (an entry written before start times were)' }),
        h('td', { testid: 'attempt-end', text: r.running ? 'running' : (r.end ? fmtZoned(r.end) : '—'), title: r.end ? timeTitle(r.end) : '' }),
        h('td', { class: 'dur', testid: 'attempt-duration', text: dur ? (r.running ? `${dur} so far` : dur) : '—' }),
        h('td', {},
          r.error ? h('span', { class: 'cause', testid: 'attempt-outcome', title: CAUSES[r.outcome] || 'the attempt failed', text: r.outcome })
            : badge(r.outcome, 'attempt-outcome'),
          r.discarded ? [' ', badge('discarded', 'attempt-discarded')] : null));
    }));
  }

  function renderErrors(es) {
    const open = new Set(Array.from(errors.querySelectorAll('details[open]')).map((d) => d.dataset.key));
    if (!es.length) {
      fill(errors, h('p', { class: 'none', text: '(no errors)' }));
      return;
    }
    // Newest first; the latest attempt's error starts expanded.
    const items = es.map((e, i) => ({ e, key: `${i}:${e.attempt}:${e.at}` })).reverse();
    fill(errors, items.map(({ e, key }, i) => {
      const text = typeof e.error === 'string' ? e.error : JSON.stringify(e.error);
      const first = text.split('\n', 1)[0];
      const d = h('details', { testid: 'job-error', data: { attempt: e.attempt, key }, open: open.size ? open.has(key) : i === 0 },
        h('summary', {},
          h('span', { class: 'attempt', text: `Attempt ${e.attempt}` }),
          h('span', { class: 'at', text: fmtZoned(e.at), title: timeTitle(e.at) }),
          typeof e.cause === 'string' && e.cause
            ? h('span', { class: 'cause', testid: 'job-error-cause', text: e.cause, title: CAUSES[e.cause] || 'cause' })
            : null,
          h('span', { class: 'first', testid: 'job-error-message', text: first })),
        h('pre', { class: 'error', testid: 'job-error-text', text }),
        e.trace ? h('details', { class: 'trace' },
          h('summary', { text: 'trace' }),
          h('pre', { testid: 'job-error-trace', text: e.trace })) : null);
      return d;
    }));
  }

  return {
    async refresh() {
      try {
        // While the job is not final the read is a short long-poll
        // (GET /jobs/{id}?wait=1s): its end shows the moment it happens,
        // not at the next poll.
        const live = job && job.id === id && !FINAL.includes(job.state) && !job.archived;
        const res = await api.get(`/jobs/${id}${live ? '?wait=1s' : ''}`);
        if (!ctx.alive()) return;
        if (!res.job || res.job.id !== id) throw new ApiError(500, null, 'The API answered with another job.');
        render(res.job);
      } catch (e) {
        if (e instanceof ApiError && e.status === 404 && ctx.alive()) {
          job = null;
          body.hidden = true;
          missing.hidden = false;
          discard.hidden = true;
          setBadge(state, 'gone');
          setText(missing, `Job ${id} does not exist (it may have been deleted, or pruned after its retention). ${e.message}`);
          return;
        }
        throw e;
      }
    },
  };
}

