// DOM helpers. Everything that comes from the API is user data (job args,
// errors, names): it only ever reaches the page as text nodes or attribute
// values, never as markup.

// h builds an element. props: class, testid, text, title, href, type,
// disabled, hidden, data (object of data-* values), attrs (other
// attributes), on (event listeners). Children are nodes or strings (added
// as text); null, undefined and false are skipped; arrays are flattened.
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    switch (k) {
      case 'class': el.className = v; break;
      case 'testid': el.dataset.testid = v; break;
      case 'text': el.textContent = String(v); break;
      case 'data': for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = String(dv); break;
      case 'attrs': for (const [ak, av] of Object.entries(v)) el.setAttribute(ak, String(av)); break;
      case 'on': for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn); break;
      case 'hidden': case 'disabled': case 'open': el[k] = Boolean(v); break;
      default: el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// setText changes el's text only when it differs, so polling leaves the DOM
// (and a user's text selection) alone when nothing changed.
export function setText(el, text) {
  const s = text === null || text === undefined ? '' : String(text);
  if (el.textContent !== s) el.textContent = s;
}

// setData sets a data-* attribute only when it differs.
export function setData(el, key, value) {
  const s = String(value);
  if (el.dataset[key] !== s) el.dataset[key] = s;
}

// replaceChildren empties el and appends children (as h does).
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// reconcile keeps container's children in step with items, keyed by key(item):
// existing elements are updated in place with update(el, item), new ones made
// with create(item) (then updated), missing ones removed, and the order
// made to match. Returns the number of items.
export function reconcile(container, items, key, create, update) {
  const existing = new Map();
  for (const el of Array.from(container.children)) {
    if (el.dataset.key !== undefined) existing.set(el.dataset.key, el);
  }
  let prev = null;
  const seen = new Set();
  for (const item of items) {
    const k = String(key(item));
    if (seen.has(k)) continue;
    seen.add(k);
    let el = existing.get(k);
    if (!el) {
      el = create(item);
      el.dataset.key = k;
    }
    update(el, item);
    const want = prev ? prev.nextSibling : container.firstChild;
    if (want !== el) container.insertBefore(el, want);
    prev = el;
  }
  for (const [k, el] of existing) if (!seen.has(k)) el.remove();
  return seen.size;
}

// The server's clock minus this browser's, in ms, from the Date header of
// API responses; only applied when the gap is clearly larger than the
// header's one-second resolution.
let clockOffset = 0;
export function noteServerDate(dateHeader) {
  const t = Date.parse(dateHeader || '');
  if (Number.isNaN(t)) return;
  const off = t - Date.now();
  clockOffset = Math.abs(off) > 2500 ? off : 0;
}
// serverNow is the current time on the server's clock as best known, in ms.
export function serverNow() { return Date.now() + clockOffset; }

function pad(n, w = 2) { return String(n).padStart(w, '0'); }

// fmtTime shows an RFC 3339 time in the browser's local zone,
// YYYY-MM-DD HH:MM:SS.
export function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// fmtDuration renders a number of seconds as "12 s", "3 min 4 s", "2 h 5 min", "3 d 4 h".
export function fmtDuration(sec) {
  sec = Math.max(0, Math.round(sec));
  if (sec < 60) return `${sec} s`;
  const m = Math.floor(sec / 60), s = sec % 60;
  if (m < 60) return s ? `${m} min ${s} s` : `${m} min`;
  const hr = Math.floor(m / 60), mm = m % 60;
  if (hr < 48) return mm ? `${hr} h ${mm} min` : `${hr} h`;
  const d = Math.floor(hr / 24), hh = hr % 24;
  return hh ? `${d} d ${hh} h` : `${d} d`;
}

// fmtAgo renders an RFC 3339 time relative to the server's now: "12 s ago",
// "in 3 min".
export function fmtAgo(iso) {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const diff = (serverNow() - t) / 1000;
  if (Math.abs(diff) < 1) return 'now';
  return diff >= 0 ? `${fmtDuration(diff)} ago` : `in ${fmtDuration(-diff)}`;
}

// prettyJSON renders a JSON value with two-space indentation.
export function prettyJSON(v) {
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

// preview renders a JSON value on one line, cut at n characters.
export function preview(v, n = 80) {
  let s;
  try { s = JSON.stringify(v); } catch { s = String(v); }
  if (s === undefined) s = '';
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

// jobHref is the dashboard link to a job's detail; ids are checked to be
// integers so nothing else can end up in an href.
export function jobHref(id) {
  return Number.isSafeInteger(id) ? `#/jobs/${id}` : '#/jobs';
}

// badge is a small label whose class and data-value follow its value.
export function badge(value, testid) {
  const el = h('span', { class: 'badge', testid });
  setBadge(el, value);
  return el;
}

export function setBadge(el, value) {
  const v = String(value ?? '');
  setText(el, v);
  setData(el, 'value', v);
}

// zoneName is the browser's time zone (an IANA name such as Europe/Berlin).
export function zoneName() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
  } catch {
    return 'local time';
  }
}

// zoneAbbr is the short name of the browser's zone at the instant d (CET,
// GMT+2, UTC).
function zoneAbbr(d) {
  try {
    const part = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' }).formatToParts(d).find((p) => p.type === 'timeZoneName');
    return part ? part.value : '';
  } catch {
    return '';
  }
}

// fmtZoned shows an RFC 3339 time in the browser's zone, labelled with the
// zone: "2026-11-24 23:01:02 CET".
export function fmtZoned(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${fmtTime(iso)} ${zoneAbbr(d)}`.trim();
}

// timeTitle is the hover text of a time: local with the zone's name, and
// UTC.
export function timeTitle(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${fmtZoned(iso)} (${zoneName()}) · ${d.toISOString().replace(/\.\d+Z$/, 'Z')} UTC`;
}
