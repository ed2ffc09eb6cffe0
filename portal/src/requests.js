// Just-in-time access in the portal: the Requests page (#/requests, #/namespaces/NS/requests),
// the approver's queue with Approve, Deny and Revoke where a SelfSubjectAccessReview allows,
// live through a watch; and, on a pod's page, the form that asks for a profile the user may not
// use, waits for the decision and then makes the debug container under the request.

import { GROUP, get, mayI, paths, post, del, watch } from './api.js';
import { age, clearError, enc, h, onLeave, setCrumbs, showError } from './ui.js';

const requestsLink = (ns) => (ns ? `#/namespaces/${enc(ns)}/requests` : '#/requests');

function target(r) {
  const s = r.spec || {};
  return s.mode === 'node' ? `node/${s.node}` : `pod/${s.pod}`;
}

// What an approval lets the requester run, as the approver must read it before deciding: the
// container the request binds, field by field, and its target — or any container.
function runs(r) {
  const s = r.spec || {};
  if (!s.container) return 'any container (not bound)';
  const target = s.targetContainerName ? ` in ${s.targetContainerName}'s namespaces` : '';
  return `${JSON.stringify(s.container)}${target}`;
}

function approversOf(r) {
  const seen = [];
  for (const rev of (r.status && r.status.reviews) || []) {
    if (rev.decision === 'Approve' && !seen.includes(rev.user)) seen.push(rev.user);
  }
  return seen;
}

function lastReview(r) {
  const reviews = (r.status && r.status.reviews) || [];
  return reviews[reviews.length - 1];
}

// Whether the user may review requests for `profile` in `ns` (approve on debugrequests named
// after the profile), asked once per pair; a failed review answers false (the server decides).
function reviewRights() {
  const cache = new Map();
  return (ns, profile) => {
    const key = `${ns}/${profile}`;
    if (!cache.has(key)) {
      cache.set(
        key,
        mayI({ namespace: ns, group: GROUP, resource: 'debugrequests', verb: 'approve', name: profile }).catch(() => false),
      );
    }
    return cache.get(key);
  };
}

// Keeps `items` (namespace/name → request) up to date from a watch of `path` until the view is
// left: every change calls `changed()`, a refused list `failed(error)`. A watch that ends is
// made again from a fresh list.
export function follow(path, items, changed, failed = () => {}) {
  const abort = new AbortController();
  onLeave(() => abort.abort());
  const key = (r) => `${r.metadata.namespace}/${r.metadata.name}`;
  (async () => {
    while (!abort.signal.aborted) {
      try {
        const list = await get(path);
        items.clear();
        for (const r of list.items || []) items.set(key(r), r);
        changed();
        await watch(path, list.metadata && list.metadata.resourceVersion, abort.signal, (ev) => {
          if (!ev.object || !ev.object.metadata) return;
          if (ev.type === 'DELETED') items.delete(key(ev.object));
          else if (ev.type === 'ADDED' || ev.type === 'MODIFIED') items.set(key(ev.object), ev.object);
          changed();
        });
      } catch (e) {
        if (abort.signal.aborted) return;
        if (e && e.code >= 400 && e.code < 500) failed(e);
      }
      await new Promise((r) => window.setTimeout(r, 1000));
    }
  })();
}

// #/requests and #/namespaces/NS/requests: the requests, live, with the reviews the user may
// make. `me()` is the user the page acts as (null when unknown), once `known` has settled.
export async function requestsView(app, ns, me, known) {
  setCrumbs(['requests', '#/requests'], ...(ns ? [[ns, requestsLink(ns)]] : []));
  const body = h('tbody');
  const form = h(
    'form',
    {
      class: 'inline',
      onsubmit: (ev) => {
        ev.preventDefault();
        const v = String(new FormData(ev.target).get('namespace') || '').trim();
        window.location.hash = requestsLink(v);
      },
    },
    h('label', {}, 'Namespace ', h('input', { name: 'namespace', value: ns || '', placeholder: 'all' })),
    h('button', { type: 'submit' }, 'Show'),
  );
  const comment = h('input', { id: 'review-comment', placeholder: 'recorded with your review' });
  app.replaceChildren(
    h('h2', {}, ns ? `Debug requests in ${ns}` : 'Debug requests'),
    form,
    h('p', {}, h('label', {}, 'Comment ', comment)),
    h(
      'table',
      { id: 'requests' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['name', 'namespace', 'requester', 'target', 'profile', 'runs', 'phase', 'approvers', 'reason', 'expires', 'age', ''].map((c) =>
            h('th', {}, c),
          ),
        ),
      ),
      body,
    ),
  );
  const mayReview = reviewRights();
  const items = new Map();
  const review = async (r, decision, button) => {
    clearError();
    button.disabled = true;
    const text = comment.value.trim();
    try {
      await post(`${paths.request(r.metadata.namespace, r.metadata.name)}/approval`, {
        decision,
        ...(text ? { comment: text } : {}),
      });
    } catch (e) {
      showError(e);
      button.disabled = false;
    }
  };
  const withdraw = async (r, button) => {
    clearError();
    button.disabled = true;
    try {
      await del(paths.request(r.metadata.namespace, r.metadata.name));
    } catch (e) {
      showError(e);
      button.disabled = false;
    }
  };
  const row = async (r) => {
    const s = r.spec || {};
    const st = r.status || {};
    const name = r.metadata.name;
    const phase = st.phase || 'Pending';
    const mine = me() !== null && s.requester === me();
    const allowed = !mine && (await mayReview(r.metadata.namespace, s.profile));
    const button = (cls, label, onclick) => h('button', { class: cls, 'data-name': name, onclick }, label);
    const decided = lastReview(r);
    return h(
      'tr',
      { 'data-name': name, 'data-phase': phase },
      h('td', {}, name),
      h('td', {}, r.metadata.namespace),
      h('td', {}, s.requester || '-'),
      h('td', {}, target(r)),
      h('td', {}, s.profile),
      h('td', { class: 'runs' }, runs(r)),
      h('td', { class: 'phase', title: decided && decided.comment ? decided.comment : '' }, phase),
      h('td', {}, approversOf(r).join(', ') || '-'),
      h('td', { class: 'reason' }, s.ticket ? `${s.reason} (${s.ticket})` : s.reason),
      h('td', {}, st.expiresAt || '-'),
      h('td', {}, age(r.metadata.creationTimestamp)),
      h(
        'td',
        { class: 'actions' },
        allowed && phase === 'Pending' ? button('approve', 'Approve', (ev) => review(r, 'Approve', ev.target)) : null,
        allowed && phase === 'Pending' ? button('deny', 'Deny', (ev) => review(r, 'Deny', ev.target)) : null,
        allowed && phase === 'Approved' ? button('revoke', 'Revoke', (ev) => review(r, 'Revoke', ev.target)) : null,
        mine && (phase === 'Pending' || phase === 'Approved') ? button('withdraw', 'Withdraw', (ev) => withdraw(r, ev.target)) : null,
      ),
    );
  };
  let drawing = Promise.resolve();
  const draw = () => {
    drawing = drawing.then(async () => {
      const sorted = [...items.values()].sort((a, b) =>
        String(b.metadata.creationTimestamp).localeCompare(String(a.metadata.creationTimestamp)),
      );
      const rows = await Promise.all(sorted.map(row));
      body.replaceChildren(...rows);
      if (rows.length === 0) body.replaceChildren(h('tr', {}, h('td', { colspan: 12, class: 'muted' }, 'No debug requests.')));
    });
  };
  body.replaceChildren(h('tr', {}, h('td', { colspan: 12, class: 'muted' }, 'Loading…')));
  await known;
  follow(ns ? paths.requests(ns) : paths.allRequests(), items, draw, (e) =>
    body.replaceChildren(
      h('tr', {}, h('td', { colspan: 12, class: 'muted' }, `Requests cannot be listed: ${e.message} Choose a namespace above.`)),
    ),
  );
}

// On a pod's page: when a profile can be requested that the user may not use, the form that
// asks for it. Once the request is approved (followed live), the debug container is made
// under it and `created(name, tty)` opens its terminal.
export async function renderRequestForm(ns, pod, box, context, created) {
  const [podObj, usable] = await context;
  const list = await get(paths.profiles()).catch(() => null);
  const usableNames = new Set(usable.map((p) => p.metadata.name));
  const requestable = ((list && list.items) || []).filter(
    (p) => p.approvalsRequired && !usableNames.has(p.metadata.name),
  );
  if (requestable.length === 0) {
    box.replaceChildren();
    return;
  }
  const containers = ((podObj && podObj.spec && podObj.spec.containers) || []).map((c) => c.name);
  const status = h('p', { id: 'request-status', class: 'muted', hidden: true });
  const form = h(
    'form',
    { id: 'request-form', class: 'create' },
    h('h3', {}, 'Request access to a profile'),
    h(
      'label',
      {},
      'Profile ',
      h(
        'select',
        { name: 'profile' },
        ...requestable.map((p) =>
          h('option', { value: p.metadata.name }, `${p.metadata.name} (${p.approvalsRequired} approval${p.approvalsRequired > 1 ? 's' : ''})`),
        ),
      ),
    ),
    h('label', {}, 'Reason ', h('input', { name: 'reason', required: true, placeholder: 'why, e.g. INC-123: disk full' })),
    h('label', {}, 'Ticket ', h('input', { name: 'ticket', placeholder: 'optional' })),
    h('label', {}, 'Duration ', h('input', { name: 'duration', value: '30m', pattern: '[0-9hms.]+' })),
    h('label', {}, 'Image ', h('input', { name: 'image', placeholder: 'server default' })),
    h('label', {}, 'Command ', h('input', { name: 'command', placeholder: 'e.g. sh' })),
    h(
      'label',
      {},
      'Target container ',
      h(
        'select',
        { name: 'target' },
        h('option', { value: '' }, '(server default)'),
        ...containers.map((c, i) => h('option', { value: c, selected: i === 0 }, c)),
      ),
    ),
    h('button', { type: 'submit', id: 'request-button' }, 'Request'),
    status,
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    const f = new FormData(form);
    const profile = String(f.get('profile'));
    const image = String(f.get('image') || '').trim();
    const command = String(f.get('command') || '').trim();
    // The request binds the whole container the page will make under it (an approval binds
    // every field of it, and its target): an interactive shell.
    const container = { stdin: true, tty: true };
    if (image) container.image = image;
    if (command) container.command = command.split(/\s+/);
    const targetName = String(f.get('target') || '');
    const spec = {
      pod,
      profile,
      reason: String(f.get('reason') || '').trim(),
      duration: String(f.get('duration') || '').trim() || undefined,
    };
    const ticket = String(f.get('ticket') || '').trim();
    if (ticket) spec.ticket = ticket;
    if (image || command) {
      spec.container = container;
      if (targetName) spec.targetContainerName = targetName;
    }
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    let made;
    try {
      made = await post(paths.requests(ns), {
        apiVersion: 'poddebug.dev/v1alpha1',
        kind: 'DebugRequest',
        metadata: { generateName: `${pod.slice(0, 40)}-${profile}-` },
        spec,
      });
    } catch (e) {
      showError(e);
      button.disabled = false;
      return;
    }
    const name = made.metadata.name;
    status.hidden = false;
    status.dataset.name = name;
    status.dataset.phase = 'Pending';
    status.textContent = `Request ${name} is waiting for approval.`;
    const items = new Map();
    let done = false;
    follow(`${paths.requests(ns)}?fieldSelector=${enc(`metadata.name=${name}`)}`, items, async () => {
      const r = items.get(`${ns}/${name}`);
      if (!r || done) return;
      const st = r.status || {};
      status.dataset.phase = st.phase;
      const last = lastReview(r);
      const by = last ? ` by ${last.user}${last.comment ? `: "${last.comment}"` : ''}` : '';
      if (st.phase === 'Pending') {
        status.textContent = `Request ${name} is waiting for approval (${approversOf(r).length} of ${st.approvalsRequired || 1}).`;
        return;
      }
      done = true;
      button.disabled = false;
      if (st.phase !== 'Approved') {
        status.textContent = `Request ${name} was ${st.phase.toLowerCase()}${by}.`;
        return;
      }
      status.textContent = `Request ${name} was approved${by} until ${st.expiresAt}: creating the debug container…`;
      const body = { debugRequest: name, profile, container };
      if (targetName) body.targetContainerName = targetName;
      try {
        const obj = await post(`${paths.debugList(ns, pod)}?wait=true&timeoutSeconds=60`, body);
        status.textContent = `Request ${name} was approved${by} until ${st.expiresAt}: debug container ${obj.metadata.name} made under it.`;
        await created(obj.metadata.name, true);
      } catch (e) {
        showError(e);
      }
    });
  });
  box.replaceChildren(form);
}
