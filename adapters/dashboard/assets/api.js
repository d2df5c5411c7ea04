// The JSON API client: origin-relative URLs under the configured base, the
// bearer token from sessionStorage (never in a URL), problem+json errors.

import { noteServerDate } from './dom.js';

const TOKEN_KEY = 'backlog.dashboard.token';

// ApiError is a failed call. status is the HTTP status (0 when the API could
// not be reached); problem is the RFC 9457 body when there was one.
export class ApiError extends Error {
  constructor(status, problem, fallback) {
    super(describe(status, problem, fallback));
    this.name = 'ApiError';
    this.status = status;
    this.problem = problem || null;
  }
}

function describe(status, p, fallback) {
  if (p && typeof p === 'object') {
    const title = typeof p.title === 'string' && p.title ? p.title : `HTTP ${status}`;
    const detail = typeof p.detail === 'string' && p.detail ? `: ${p.detail}` : '';
    const corr = typeof p.correlation_id === 'string' && p.correlation_id ? ` (correlation id ${p.correlation_id})` : '';
    return `${title}${detail}${corr}`;
  }
  return fallback || `HTTP ${status}`;
}

export function getToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token lives for this call only */ }
}

// Api calls the server. onUnauthorized(error) runs on every 401.
export class Api {
  constructor(base, onUnauthorized) {
    this.base = base;
    this.onUnauthorized = onUnauthorized;
  }

  // call sends one request and resolves to the decoded JSON body (null for
  // 204), or rejects with an ApiError.
  async call(method, path, body, signal) {
    const headers = { Accept: 'application/json, application/problem+json' };
    const token = getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    const init = { method, headers, credentials: 'same-origin', cache: 'no-store', redirect: 'error', signal };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(this.base + path, init);
    } catch (e) {
      if (e && e.name === 'AbortError') throw e;
      throw new ApiError(0, null, 'The API cannot be reached (network error).');
    }
    noteServerDate(res.headers.get('Date'));
    if (res.status === 204) return null;
    const type = res.headers.get('Content-Type') || '';
    let data = null;
    if (type.includes('json')) {
      try { data = await res.json(); } catch { data = null; }
    } else {
      try { await res.text(); } catch { /* ignored */ }
    }
    if (!res.ok) {
      const problem = type.includes('problem+json') || (data && typeof data === 'object' && 'title' in data) ? data : null;
      const err = new ApiError(res.status, problem, `HTTP ${res.status} ${res.statusText || ''}`.trim());
      if (res.status === 401 && this.onUnauthorized) this.onUnauthorized(err);
      throw err;
    }
    if (data === null) throw new ApiError(res.status, null, `Unexpected response (${type || 'no content type'}).`);
    return data;
  }

  get(path, signal) { return this.call('GET', path, undefined, signal); }
  post(path, body) { return this.call('POST', path, body === undefined ? {} : body); }
  del(path) { return this.call('DELETE', path); }
}

// query builds "?a=1&b=2" from the non-empty values of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// seg escapes one path segment.
export function seg(s) { return encodeURIComponent(String(s)); }
