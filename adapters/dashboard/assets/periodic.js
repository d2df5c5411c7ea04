// Periodic: the job server's periodic jobs (GET /periodic) with their
// schedule, kind, queue, missed-occurrence policy, paused state, last run
// (linked to its job) and next run, shown in UTC, with Pause/Resume and
// Run now (admin).

import { seg } from './api.js';
import { h, setText, setData, reconcile, fill, badge, setBadge, fmtAgo, jobHref } from './dom.js';

function pad(n) { return String(n).padStart(2, '0'); }

// fmtUTC shows an RFC 3339 time in UTC, YYYY-MM-DD HH:MM:SS UTC.
function fmtUTC(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
}

const MISSED = {
  skip: 'skip: missed occurrences are dropped',
  once: 'once: the newest missed occurrence runs',
  each: 'each: every missed occurrence runs, oldest first',
};

export function mountPeriodic(ctx) {
  const { api, root } = ctx;
  const msg = h('p', { class: 'action-msg', testid: 'action-result', hidden: true });
  const err = h('p', { class: 'action-err', testid: 'action-error', hidden: true });
  const tbody = h('tbody', { testid: 'periodic-body' });
  const empty = h('p', { class: 'empty', testid: 'periodic-empty', hidden: true, text: 'This server has no periodic jobs configured.' });
  root.append(
    h('h1', { text: 'Periodic jobs' }),
    msg, err,
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'periodic-table' },
        h('thead', {}, h('tr', {},
          ['Name', 'Schedule', 'Kind', 'Queue', 'Missed', 'Status', 'Last run (UTC)', 'Next run (UTC)', ''].map((t) => h('th', { text: t })))),
        tbody)),
    empty,
    h('p', { class: 'note', testid: 'periodic-note' },
      'Times are shown in UTC; a schedule without a CRON_TZ= prefix is read in UTC too. ',
      'The schedules come from the server\'s configuration. While one is paused no node enqueues its occurrences, ',
      'and resuming does not run what fell during the pause. Run now enqueues one job at once, outside the schedule. ',
      'Pause, Resume and Run now need the admin token.'),
  );

  function notify(isError, ...parts) {
    fill(isError ? err : msg, ...parts);
    (isError ? err : msg).hidden = false;
    (isError ? msg : err).hidden = true;
  }

  async function togglePause(p) {
    const pausing = !p.paused;
    if (pausing) {
      const ok = await ctx.confirm(`Pause periodic job ${p.name}?`,
        `No node will enqueue occurrences of "${p.name}" until it is resumed; occurrences that fall meanwhile are not run later. Jobs already enqueued are left alone.`, 'Pause');
      if (!ok) return;
    }
    try {
      const res = await api.post(`/periodic/${seg(p.name)}/${pausing ? 'pause' : 'resume'}`);
      const name = res && res.periodic_job && res.periodic_job.name ? res.periodic_job.name : p.name;
      notify(false, `Periodic job ${name} ${pausing ? 'paused' : 'resumed'}.`);
    } catch (e) {
      notify(true, `Could not ${pausing ? 'pause' : 'resume'} periodic job ${p.name}: ${e.message}`);
    }
    ctx.refresh();
  }

  async function runNow(p) {
    const ok = await ctx.confirm(`Run periodic job ${p.name} now?`,
      `One job of kind "${p.kind}" is enqueued on queue "${p.queue}" now, outside the schedule.`, 'Run now');
    if (!ok) return;
    try {
      const res = await api.post(`/periodic/${seg(p.name)}/run`);
      const id = res && res.job ? res.job.id : undefined;
      if (Number.isSafeInteger(id)) {
        notify(false, `Periodic job ${p.name} enqueued `, h('a', { href: jobHref(id), testid: 'run-job-link', text: `job ${id}` }), '.');
      } else {
        notify(false, `Periodic job ${p.name} enqueued.`);
      }
    } catch (e) {
      notify(true, `Could not run periodic job ${p.name}: ${e.message}`);
    }
    ctx.refresh();
  }

  function createRow() {
    const pauseBtn = h('button', { type: 'button', class: 'small', testid: 'periodic-pause-toggle' });
    pauseBtn.addEventListener('click', () => togglePause(pauseBtn._item));
    const runBtn = h('button', { type: 'button', class: 'small', testid: 'periodic-run-now', text: 'Run now' });
    runBtn.addEventListener('click', () => runNow(runBtn._item));
    const tr = h('tr', { testid: 'periodic-row' },
      h('td', { testid: 'periodic-name' }),
      h('td', { class: 'mono', testid: 'periodic-schedule' }),
      h('td', { testid: 'periodic-kind' }),
      h('td', {}, h('a', { testid: 'periodic-queue' })),
      h('td', { testid: 'periodic-missed' }),
      h('td', {}, badge('', 'periodic-paused')),
      h('td', { testid: 'periodic-last-run' }),
      h('td', { testid: 'periodic-next-run' }),
      h('td', {}, pauseBtn, ' ', runBtn));
    tr._pause = pauseBtn;
    tr._run = runBtn;
    return tr;
  }

  function updateRow(tr, p) {
    tr._pause._item = p;
    tr._run._item = p;
    setData(tr, 'name', p.name);
    setData(tr, 'paused', p.paused);
    setText(tr.querySelector('[data-testid="periodic-name"]'), p.name);
    setText(tr.querySelector('[data-testid="periodic-schedule"]'), p.schedule);
    setText(tr.querySelector('[data-testid="periodic-kind"]'), p.kind);
    const q = tr.querySelector('[data-testid="periodic-queue"]');
    setText(q, p.queue);
    const href = `#/jobs?${new URLSearchParams({ queue: p.queue })}`;
    if (q.getAttribute('href') !== href) q.setAttribute('href', href);
    const missed = tr.querySelector('[data-testid="periodic-missed"]');
    setText(missed, p.missed);
    missed.title = MISSED[p.missed] || '';
    setBadge(tr.querySelector('[data-testid="periodic-paused"]'), p.paused ? 'paused' : 'active');

    const last = tr.querySelector('[data-testid="periodic-last-run"]');
    const lastKey = `${p.last_run_at}|${p.last_job_id}`;
    if (last.dataset.key !== lastKey) {
      last.dataset.key = lastKey;
      if (!p.last_run_at) {
        fill(last, h('span', { class: 'muted', text: 'never' }));
      } else if (Number.isSafeInteger(p.last_job_id) && p.last_job_id > 0) {
        fill(last, fmtUTC(p.last_run_at), ' ',
          h('a', { href: jobHref(p.last_job_id), testid: 'periodic-last-job', text: `job ${p.last_job_id}` }));
      } else {
        fill(last, fmtUTC(p.last_run_at));
      }
    }
    last.title = p.last_run_at ? fmtAgo(p.last_run_at) : '';
    const next = tr.querySelector('[data-testid="periodic-next-run"]');
    setText(next, p.next_run_at ? fmtUTC(p.next_run_at) : (p.paused ? '— (paused)' : '—'));
    next.title = p.next_run_at ? fmtAgo(p.next_run_at) : '';
    setText(tr._pause, p.paused ? 'Resume' : 'Pause');
  }

  return {
    async refresh() {
      const res = await api.get('/periodic');
      if (!ctx.alive()) return;
      const list = (res && Array.isArray(res.periodic) ? res.periodic : [])
        .filter((p) => p && typeof p.name === 'string')
        .map((p) => ({
          name: p.name,
          schedule: String(p.schedule ?? ''),
          kind: String(p.kind ?? ''),
          queue: String(p.queue ?? ''),
          missed: String(p.missed ?? ''),
          paused: Boolean(p.paused),
          last_run_at: typeof p.last_run_at === 'string' ? p.last_run_at : '',
          last_job_id: Number(p.last_job_id || 0),
          next_run_at: typeof p.next_run_at === 'string' ? p.next_run_at : '',
        }));
      reconcile(tbody, list, (p) => p.name, createRow, updateRow);
      empty.hidden = list.length > 0;
    },
  };
}

