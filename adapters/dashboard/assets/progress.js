// Progress of running jobs: a bar with the percent and message the job's
// attempt last reported (job.progress: {percent 0..100, message, at}),
// shown while the job runs and hidden otherwise.

import { h, setText, setData, timeTitle } from './dom.js';

// progressBar returns the (hidden) element setProgress fills; testid
// names it, its <progress> (testid-bar) and its label (testid-label).
export function progressBar(testid) {
  return h('span', { class: 'progress', testid, hidden: true },
    h('progress', { max: '100', testid: `${testid}-bar` }),
    h('span', { class: 'progress-label', testid: `${testid}-label` }));
}

// setProgress shows job's progress in el while the job is running and
// has reported some, and hides el otherwise.
export function setProgress(el, job) {
  const p = job && job.state === 'running' && job.progress && typeof job.progress === 'object' ? job.progress : null;
  const pct = p && Number.isFinite(p.percent) ? Math.min(100, Math.max(0, p.percent)) : null;
  if (pct === null) {
    if (!el.hidden) el.hidden = true;
    return;
  }
  el.hidden = false;
  const bar = el.firstChild;
  if (bar.value !== pct) bar.value = pct;
  setData(el, 'percent', pct);
  const rounded = Math.round(pct * 10) / 10;
  const msg = typeof p.message === 'string' ? p.message : '';
  setText(el.lastChild, msg ? `${rounded}% ${msg}` : `${rounded}%`);
  const title = p.at ? `reported ${timeTitle(p.at)}` : '';
  if (el.title !== title) el.title = title;
}
