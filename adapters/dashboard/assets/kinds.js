// Kinds: the kinds the job server knows (GET /kinds) with the defaults
// their jobs get: the attempts of a job enqueued without its own, the retry
// schedule and the bound of one attempt; the last row is any other kind.

import { h, setText, setData, reconcile, fmtDuration } from './dom.js';

// fmtSeconds shows a number of seconds, below one second in ms.
function fmtSeconds(s) {
  const n = Number(s) || 0;
  if (n > 0 && n < 1) return `${Math.round(n * 1000)} ms`;
  return fmtDuration(n);
}

// retryText is a retry description (core.RetryDescription) in one line.
export function retryText(r) {
  if (!r || typeof r !== 'object') return '';
  switch (r.policy) {
    case 'exponential':
      return `exponential from ${fmtSeconds(r.base_seconds)} up to ${fmtSeconds(r.max_seconds)}, ±${Math.round((Number(r.jitter) || 0) * 100)} %`;
    case 'delays': {
      const d = Array.isArray(r.delays_seconds) ? r.delays_seconds : [];
      if (d.length === 0) return 'at once';
      return `after ${d.map(fmtSeconds).join(', ')}${d.length > 1 ? ' (the last repeats)' : ' (repeats)'}`;
    }
    default:
      return 'custom (set in Go)';
  }
}

export function mountKinds(ctx) {
  const { api, root } = ctx;
  const tbody = h('tbody', { testid: 'kinds-body' });
  root.append(
    h('h1', { text: 'Kinds' }),
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'kinds-table' },
        h('thead', {}, h('tr', {},
          ['Kind', 'Runs here', 'Max attempts', 'Retries', 'Attempt timeout'].map((t) => h('th', { text: t })))),
        tbody)),
    h('p', { class: 'note', testid: 'kinds-note' },
      'The defaults come from the server\'s configuration (its handlers and retry_by_kind, or WithMaxAttempts, ',
      'WithRetries, WithRetry and WithTimeout in Go). Max attempts is what a job enqueued without its own gets; ',
      'a kind that does not run here is run by remote workers or other nodes, which apply the same retry schedule.'),
  );

  function createRow() {
    return h('tr', { testid: 'kind-row' },
      h('td', { class: 'mono', testid: 'kind-name' }),
      h('td', { testid: 'kind-handled' }),
      h('td', { testid: 'kind-max-attempts' }),
      h('td', { testid: 'kind-retry' }),
      h('td', { testid: 'kind-timeout' }));
  }

  function updateRow(tr, k) {
    setData(tr, 'kind', k.kind);
    setText(tr.querySelector('[data-testid="kind-name"]'), k.kind === '' ? '(any other kind)' : k.kind);
    setText(tr.querySelector('[data-testid="kind-handled"]'), k.kind === '' ? '—' : (k.handled ? 'yes' : 'no'));
    setText(tr.querySelector('[data-testid="kind-max-attempts"]'), String(k.max_attempts ?? ''));
    setText(tr.querySelector('[data-testid="kind-retry"]'), retryText(k.retry));
    setText(tr.querySelector('[data-testid="kind-timeout"]'), k.timeout_seconds > 0 ? fmtSeconds(k.timeout_seconds) : 'none');
  }

  return {
    async refresh() {
      const res = await api.get('/kinds');
      if (!ctx.alive()) return;
      const list = (res && Array.isArray(res.kinds) ? res.kinds : []).filter((k) => k && typeof k.kind === 'string' && k.kind !== '');
      if (res && res.unknown && typeof res.unknown === 'object') list.push({ ...res.unknown, kind: '' });
      reconcile(tbody, list, (k) => k.kind, createRow, updateRow);
    },
  };
}
