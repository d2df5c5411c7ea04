// The dashboard's entry point: configuration from the page's meta tags, hash
// routing between the screens, the poll loop (paused while the tab is
// hidden), the token prompt and the confirmation dialog.

import { Api, ApiError, getToken, setToken } from './api.js';
import { h, setText, setData } from './dom.js';
import { mountOverview } from './overview.js';
import { mountJobs } from './jobs.js';
import { mountJob } from './job.js';
import { mountWorkers } from './workers.js';
import { mountPeriodic } from './periodic.js';
import { mountQueues, mountQueue } from './queues.js';
import { mountUnique } from './unique.js';
import { mountKinds } from './kinds.js';
import { mountWorkflows, mountWorkflow, mountBatch } from './workflows.js';

function meta(name, fallback) {
  const el = document.querySelector(`meta[name="${name}"]`);
  return el ? el.getAttribute('content') : fallback;
}

const apiBase = meta('backlog-api-base', '/v1');
const pollMs = Math.max(250, Number(meta('backlog-poll-ms', '2000')) || 2000);

const view = document.getElementById('view');
const live = document.getElementById('live');
const banner = document.getElementById('banner');
const tokenDialog = document.getElementById('token-dialog');
const tokenForm = document.getElementById('token-form');
const tokenInput = document.getElementById('token-input');
const tokenReason = document.getElementById('token-reason');
const confirmDialog = document.getElementById('confirm-dialog');

let waitingForToken = false;

const api = new Api(apiBase, (err) => askToken(
  getToken()
    ? `The API refused the stored token: ${err.message}`
    : `The API needs a bearer token: ${err.message}`,
));

// ---- token prompt -------------------------------------------------------

function askToken(reason) {
  waitingForToken = true;
  setStatus('auth', 'waiting for a token');
  setText(tokenReason, reason);
  if (!tokenDialog.open) {
    tokenInput.value = '';
    tokenDialog.showModal();
    tokenInput.focus();
  }
}

tokenForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const t = tokenInput.value.trim();
  tokenInput.value = '';
  if (!t) return;
  setToken(t);
  waitingForToken = false;
  tokenDialog.close();
  refreshNow();
});
document.getElementById('token-clear').addEventListener('click', () => {
  setToken('');
  tokenInput.value = '';
  setText(tokenReason, 'The token was removed from this tab.');
  refreshNow();
});
document.getElementById('token-close').addEventListener('click', () => tokenDialog.close());
document.getElementById('token-button').addEventListener('click', () => {
  setText(tokenReason, getToken() ? 'A token is set for this tab. Enter another to replace it.' : 'No token is set for this tab.');
  tokenInput.value = '';
  if (!tokenDialog.open) tokenDialog.showModal();
  tokenInput.focus();
});

// ---- confirmation ---------------------------------------------------------

// confirmAction shows the confirmation dialog and resolves to true when the
// user confirms.
function confirmAction(title, text, okLabel) {
  return new Promise((resolve) => {
    setText(document.getElementById('confirm-title'), title);
    setText(document.getElementById('confirm-text'), text);
    setText(document.getElementById('confirm-ok'), okLabel || 'Confirm');
    confirmDialog.returnValue = '';
    const done = () => {
      // The close event of a previous confirmation is queued, not run at
      // once: it may arrive after this one opened. Only this dialog's own
      // close (the dialog is closed now) answers.
      if (confirmDialog.open) return;
      confirmDialog.removeEventListener('close', done);
      resolve(confirmDialog.returnValue === 'ok');
    };
    confirmDialog.addEventListener('close', done);
    confirmDialog.showModal();
  });
}

// ---- status line and banner ----------------------------------------------

function setStatus(state, text) {
  setData(live, 'state', state);
  setText(live, text);
}

function showBanner(text) {
  if (text) {
    setText(banner, text);
    banner.hidden = false;
  } else if (!banner.hidden) {
    banner.hidden = true;
    setText(banner, '');
  }
}

// ---- routing -------------------------------------------------------------

// parseRoute reads location.hash: #/ (overview), #/jobs?…, #/jobs/<id>,
// #/queues, #/queues/<name>, #/periodic, #/workers, #/unique, #/kinds,
// #/workflows, #/workflows/<id>, #/batches/<id>.
function parseRoute() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const qi = raw.indexOf('?');
  const path = qi >= 0 ? raw.slice(0, qi) : raw;
  const params = new URLSearchParams(qi >= 0 ? raw.slice(qi + 1) : '');
  const parts = path.split('/').filter(Boolean);
  if (parts.length === 0) return { name: 'overview', params };
  if (parts[0] === 'jobs' && parts.length === 1) return { name: 'jobs', params };
  if (parts[0] === 'jobs' && parts.length === 2 && /^[0-9]{1,18}$/.test(parts[1])) {
    return { name: 'job', id: Number(parts[1]), params };
  }
  if (parts[0] === 'jobs' && parts.length === 2) return { name: 'badJob', text: parts[1], params };
  if (parts[0] === 'queues' && parts.length === 1) return { name: 'queues', params };
  if (parts[0] === 'queues' && parts.length === 2) {
    let q = '';
    try { q = decodeURIComponent(parts[1]); } catch { q = ''; }
    if (/^[A-Za-z0-9_.:-]{1,255}$/.test(q)) return { name: 'queue', queue: q, params };
  }
  if (parts[0] === 'periodic' && parts.length === 1) return { name: 'periodic', params };
  if (parts[0] === 'workers' && parts.length === 1) return { name: 'workers', params };
  if (parts[0] === 'unique' && parts.length === 1) return { name: 'unique', params };
  if (parts[0] === 'kinds' && parts.length === 1) return { name: 'kinds', params };
  if (parts[0] === 'workflows' && parts.length === 1) return { name: 'workflows', params };
  if ((parts[0] === 'workflows' || parts[0] === 'batches') && parts.length === 2 && /^[0-9]{1,18}$/.test(parts[1])) {
    return { name: parts[0] === 'batches' ? 'batch' : 'workflow', id: Number(parts[1]), params };
  }
  return { name: 'missing', params };
}

const mounts = {
  overview: mountOverview,
  jobs: mountJobs,
  job: mountJob,
  queues: mountQueues,
  queue: mountQueue,
  periodic: mountPeriodic,
  workers: mountWorkers,
  unique: mountUnique,
  kinds: mountKinds,
  workflows: mountWorkflows,
  workflow: mountWorkflow,
  batch: mountBatch,
  badJob: (ctx) => {
    let text = ctx.route.text;
    try { text = decodeURIComponent(text); } catch { /* shown as typed */ }
    ctx.root.append(h('h1', { text: 'No such job' }),
      h('p', { class: 'action-err', testid: 'job-id-invalid', text: jumpProblem(text) }),
      h('p', { class: 'crumbs' }, h('a', { href: '#/jobs', testid: 'back-to-jobs', text: '← Jobs' })));
    return { refresh: async () => {} };
  },
  missing: (ctx) => {
    ctx.root.append(Object.assign(document.createElement('p'), { textContent: 'No such screen.' }));
    return { refresh: async () => {} };
  },
};

let current = null; // { route, screen, token }
let pollTimer = 0;
let inFlight = null;
let again = false; // a refresh was asked for while one was running

function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function route() {
  const r = parseRoute();
  if (current && current.screen.unmount) current.screen.unmount();
  for (const a of document.querySelectorAll('nav a[data-nav]')) {
    const active = a.dataset.nav === r.name || (r.name === 'job' && a.dataset.nav === 'jobs') ||
      (r.name === 'queue' && a.dataset.nav === 'queues') ||
      ((r.name === 'workflow' || r.name === 'batch') && a.dataset.nav === 'workflows');
    if (active) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  view.replaceChildren();
  const root = document.createElement('section');
  root.dataset.testid = `screen-${r.name}`;
  root.className = `screen screen-${r.name}`;
  view.append(root);
  const token = {};
  const ctx = {
    api,
    root,
    route: r,
    navigate,
    confirm: confirmAction,
    refresh: refreshNow,
    alive: () => current && current.token === token,
  };
  current = { route: r, token, screen: mounts[r.name](ctx) };
  refreshNow();
}

// ---- polling -------------------------------------------------------------

function schedule() {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(tick, pollMs);
}

function refreshNow() {
  clearTimeout(pollTimer);
  tick();
}

async function tick() {
  if (document.hidden) {
    setStatus('paused', 'paused while the tab is hidden');
    return; // visibilitychange restarts the loop
  }
  if (inFlight) { // a refresh is still running: run again right after it
    again = true;
    return;
  }
  const cur = current;
  if (!cur) return;
  const p = (async () => {
    try {
      await cur.screen.refresh();
      if (cur !== current) return;
      waitingForToken = false;
      showBanner('');
      const t = new Date();
      setStatus('live', `live · updated ${t.toLocaleTimeString()}`);
    } catch (e) {
      if (cur !== current) return;
      if (e instanceof ApiError && e.status === 401) {
        // askToken already ran through the Api callback.
      } else if (e instanceof ApiError) {
        setStatus('error', e.status ? `error (HTTP ${e.status})` : 'cannot reach the API');
        showBanner(e.message);
      } else {
        setStatus('error', 'error');
        showBanner(`The page failed: ${e && e.message ? e.message : e}`);
        console.error(e);
      }
    }
  })();
  inFlight = p;
  try { await p; } finally { inFlight = null; }
  if (again) {
    again = false;
    clearTimeout(pollTimer);
    tick();
  } else if (!waitingForToken) {
    schedule();
  }
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    clearTimeout(pollTimer);
    setStatus('paused', 'paused while the tab is hidden');
  } else {
    refreshNow();
  }
});

// ---- jump to a job ------------------------------------------------------

// jumpProblem says why text is not a job id ('' when it is one): ids are
// whole numbers from 1 (an optional leading "#" is allowed).
function jumpProblem(text) {
  const t = String(text).trim().replace(/^#/, '');
  if (!t) return 'Enter a job id, such as 42.';
  if (!/^[0-9]+$/.test(t)) return `"${t.length > 40 ? t.slice(0, 39) + '…' : t}" is not a job id: job ids are whole numbers, such as 42.`;
  const n = Number(t);
  if (!Number.isSafeInteger(n) || n < 1) return `${t.length > 40 ? t.slice(0, 39) + '…' : t} is not a job id: ids run from 1 to ${Number.MAX_SAFE_INTEGER}.`;
  return '';
}

const jumpForm = document.getElementById('jump');
const jumpInput = document.getElementById('jump-input');
const jumpMsg = document.getElementById('jump-msg');
jumpForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const problem = jumpProblem(jumpInput.value);
  setText(jumpMsg, problem);
  jumpMsg.hidden = !problem;
  if (problem) return;
  const id = Number(jumpInput.value.trim().replace(/^#/, ''));
  jumpInput.value = '';
  navigate(`#/jobs/${id}`);
});
jumpInput.addEventListener('input', () => { jumpMsg.hidden = true; });

window.addEventListener('hashchange', route);
route();
