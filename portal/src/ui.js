// What every view of the portal uses: the element builder, the error banner, the breadcrumbs,
// formatting, and the lifetime of what a view leaves running.

import { ApiError } from './api.js';

const errorBox = document.getElementById('error');
const crumbsNav = document.getElementById('crumbs');

// A small element builder: h('tag', {attrs, on*: handlers}, ...children). Children and
// attribute values are text, never markup.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function showError(e) {
  const message = e instanceof ApiError || e instanceof Error ? e.message : String(e);
  errorBox.textContent = message;
  errorBox.hidden = false;
}

export function clearError() {
  errorBox.textContent = '';
  errorBox.hidden = true;
}

// The breadcrumbs: [label, href] pairs, separated by slashes.
export function setCrumbs(...parts) {
  const out = [];
  parts.forEach(([label, href], i) => {
    if (i > 0) out.push(' / ');
    out.push(h('a', { href }, label));
  });
  crumbsNav.replaceChildren(...out);
}

export const enc = encodeURIComponent;

// A view's list is read again from several places (a session's end, a stop, a create, a
// timer), and overlapping reads may answer in any order. Only the newest read's answer is
// shown, so that an older one cannot put back a state a newer one replaced (a stopped container
// shown running again). `const begin = newestOnly();` once per list; per read,
// `const current = begin();` before it and `if (!current()) return;` once it answered.
export function newestOnly() {
  let started = 0;
  return () => {
    started += 1;
    const mine = started;
    return () => mine === started;
  };
}
export const sleep = (ms) => new Promise((resolve) => window.setTimeout(resolve, ms));

export function age(timestamp) {
  if (!timestamp) return '-';
  const then = Date.parse(timestamp);
  if (Number.isNaN(then)) return '-';
  let s = Math.max(0, Math.floor((Date.now() - then) / 1000));
  if (s < 120) return `${s}s`;
  s = Math.floor(s / 60);
  if (s < 120) return `${s}m`;
  s = Math.floor(s / 60);
  if (s < 48) return `${s}h`;
  return `${Math.floor(s / 24)}d`;
}

// A container state (`{waiting|running|terminated}`) in a few words.
export function describeState(state) {
  const st = state || {};
  if (st.running) return 'running';
  if (st.terminated) {
    const t = st.terminated;
    return `terminated (exit ${t.exitCode}${t.reason ? `, ${t.reason}` : ''})`;
  }
  if (st.waiting) return `waiting${st.waiting.reason ? ` (${st.waiting.reason})` : ''}`;
  return 'waiting';
}

// Waiting reasons after which a container does not start unless something changes: the server
// refuses to attach to a container in one of them, so the portal stops waiting there too.
const START_FAILURES = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'ImageInspectError',
  'RegistryUnavailable',
  'CreateContainerError',
  'CreateContainerConfigError',
  'PreCreateHookError',
  'PreStartHookError',
  'RunContainerError',
  'CrashLoopBackOff',
]);

// Reads `read()` (a container's state, or a thrown error) until the container runs: at most
// `reads` times, 1 s apart, with `progress(text)` after each read. Answers its state; throws
// when it terminated, cannot start, or did not run in time.
export async function waitRunning(what, read, progress, reads = 90) {
  let last = 'no status yet';
  for (let i = 0; i < reads; i += 1) {
    const state = await read();
    if (state && state.running) return state;
    if (state && state.terminated) throw new Error(`${what} has ${describeState(state)}.`);
    const waiting = state && state.waiting;
    if (waiting && START_FAILURES.has(waiting.reason)) {
      throw new Error(`${what} cannot start: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`);
    }
    last = describeState(state);
    progress(`Waiting for ${what}: ${last}…`);
    await sleep(1000);
  }
  throw new Error(`${what} was not running after ${reads} s (${last}).`);
}

// Runs a form's `action(say)` with its submit button disabled and labelled `busy`, `say(text)`
// showing progress in `progress` (the action hides it when done); a failure goes to the error banner and `refresh()` runs
// after it; the button comes back whatever happened.
export async function whileBusy(button, busy, progress, refresh, action) {
  const idle = button.textContent;
  button.disabled = true;
  button.textContent = busy;
  const say = (text) => {
    progress.textContent = text;
    progress.hidden = false;
  };
  try {
    await action(say);
  } catch (e) {
    progress.hidden = true;
    showError(e);
    refresh().catch(() => {});
  } finally {
    button.disabled = false;
    button.textContent = idle;
  }
}

// What the current view leaves running: a session (a WebSocket, a replay), ended when another
// opens and on navigation; and the view's own timers, ended on navigation only.
let sessionEnds = [];
let viewEnds = [];

export function onSessionEnd(...fns) {
  sessionEnds.push(...fns);
}

// `stop` runs before what is already registered (a replay stops before its terminal goes).
export function onSessionEndFirst(stop) {
  sessionEnds.unshift(stop);
}

export function endSession() {
  sessionEnds.forEach((f) => {
    try {
      f();
    } catch (_) {
      // already ended
    }
  });
  sessionEnds = [];
}

export function onLeave(fn) {
  viewEnds.push(fn);
}

export function leaveView() {
  endSession();
  viewEnds.forEach((f) => f());
  viewEnds = [];
}

// A duration as the plugin's --ttl and the server's flags take it (Go's time.ParseDuration,
// plus bare seconds): `90`, `90s`, `30m`, `1h30m`, `1.5h`. Whole seconds; throws on anything
// else, naming the field.
export function parseDuration(text, field = 'Time limit') {
  const s = String(text).trim();
  if (/^[0-9]+$/.test(s)) return Number.parseInt(s, 10);
  const units = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  const re = /([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let at = 0;
  while (s && at < s.length) {
    re.lastIndex = at;
    const m = re.exec(s);
    if (!m) throw new Error(`${field}: invalid duration "${s}" (e.g. 90s, 30m, 1h30m; 0 for none)`);
    total += Number.parseFloat(m[1]) * units[m[2]];
    at = re.lastIndex;
  }
  if (!s) throw new Error(`${field}: empty duration`);
  return Math.floor(total);
}

// The time-limit field of every create form: a duration like the plugin's --ttl, sent as
// ttlSeconds; empty means the server's default.
export function ttlField() {
  return h(
    'label',
    {},
    'Time limit ',
    h('input', { name: 'ttl', class: 'ttl', placeholder: 'server default, e.g. 30m or 1h30m (0: none)', title: 'as the plugin\u2019s --ttl: 90s, 30m, 1h30m; 0 for no limit' }),
  );
}

// The ttlSeconds of a create form's time-limit field, or undefined when left empty.
export function ttlSeconds(form) {
  const text = String(new FormData(form).get('ttl') || '').trim();
  return text ? parseDuration(text) : undefined;
}
