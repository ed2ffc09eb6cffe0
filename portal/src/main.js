// The poddebug portal: namespace → pod → debug containers, create, terminal, logs, stop,
// live sessions (join, observe, moderate, terminate), recordings, copies of the pod, asking for
// a profile through a debug request; the nodes with their node debug containers; and the debug
// requests with their reviews. Deep links: #/namespaces/NS, #/namespaces/NS/pods/POD, #/nodes,
// #/nodes/NODE, #/requests and #/namespaces/NS/requests.

import { del, get, getOptional, paths, post, sessionRights, usableProfiles } from './api.js';
import { renderCopies } from './copies.js';
import { renderRequestForm, requestsView } from './requests.js';
import { nodesView } from './nodes.js';
import { endLineFrom, showLogs, showTerminal } from './panel.js';
import { createTerminal } from './terminal.js';
import { createPlayer } from './player.js';
import {
  age,
  clearError,
  enc,
  endSession,
  h,
  leaveView,
  newestOnly,
  onLeave,
  onSessionEnd,
  onSessionEndFirst,
  setCrumbs as setPath,
  showError,
  sleep,
  ttlField,
  ttlSeconds,
} from './ui.js';

const app = document.getElementById('app');

// The user the page acts as, once a SelfSubjectReview said so.
let me = null;

const nsLink = (ns) => `#/namespaces/${enc(ns)}`;
const podLink = (ns, pod) => `#/namespaces/${enc(ns)}/pods/${enc(pod)}`;

function setCrumbs(ns, pod) {
  const parts = [['namespaces', '#/']];
  if (ns) parts.push([ns, nsLink(ns)]);
  if (pod) parts.push([pod, podLink(ns, pod)]);
  setPath(...parts);
}

// #/ : the namespaces the user may list, or a field to type one.
async function namespacesView() {
  setCrumbs();
  const form = h(
    'form',
    {
      class: 'inline',
      onsubmit: (ev) => {
        ev.preventDefault();
        const ns = new FormData(ev.target).get('namespace');
        if (ns) window.location.hash = nsLink(String(ns).trim());
      },
    },
    h('label', {}, 'Namespace ', h('input', { name: 'namespace', id: 'namespace-input', required: true })),
    h('button', { type: 'submit' }, 'Open'),
  );
  const list = h('ul', { id: 'namespaces', class: 'links' });
  app.replaceChildren(h('h2', {}, 'Namespaces'), form, list);
  try {
    const nss = await get(paths.namespaces());
    const names = (nss.items || []).map((n) => n.metadata.name).sort();
    list.replaceChildren(...names.map((n) => h('li', {}, h('a', { href: nsLink(n) }, n))));
    if (names.length === 0) list.replaceChildren(h('li', { class: 'muted' }, 'No namespaces.'));
  } catch (e) {
    list.replaceChildren(
      h('li', { class: 'muted' }, `Namespaces cannot be listed: ${e.message} Type one above.`),
    );
  }
}

function podPhase(p) {
  const deleting = p.metadata.deletionTimestamp ? ' (terminating)' : '';
  return `${(p.status && p.status.phase) || '-'}${deleting}`;
}

// #/namespaces/NS : its pods.
async function podsView(ns) {
  setCrumbs(ns);
  const body = h('tbody');
  app.replaceChildren(
    h('h2', {}, `Pods in ${ns}`),
    h('table', { id: 'pods' }, h('thead', {}, h('tr', {}, h('th', {}, 'name'), h('th', {}, 'phase'), h('th', {}, 'age'))), body),
  );
  const pods = await get(paths.pods(ns));
  const items = (pods.items || []).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  body.replaceChildren(
    ...items.map((p) =>
      h(
        'tr',
        {},
        h('td', {}, h('a', { href: podLink(ns, p.metadata.name) }, p.metadata.name)),
        h('td', {}, podPhase(p)),
        h('td', {}, age(p.metadata.creationTimestamp)),
      ),
    ),
  );
  if (items.length === 0) body.replaceChildren(h('tr', {}, h('td', { colspan: 3, class: 'muted' }, 'No pods.')));
}

function dcPhase(dc) {
  const s = dc.status || {};
  const phase = s.phase || '-';
  const term = s.state && s.state.terminated;
  if (term) return `${phase} (exit ${term.exitCode}${term.reason ? `, ${term.reason}` : ''})`;
  const wait = s.state && s.state.waiting;
  if (wait && wait.reason) return `${phase} (${wait.reason})`;
  return phase;
}

function dcStarted(dc) {
  const st = (dc.status && dc.status.state) || {};
  return (st.running && st.running.startedAt) || (st.terminated && st.terminated.startedAt) || dc.metadata.creationTimestamp;
}

// #/namespaces/NS/pods/POD : its debug containers, the create form, terminal, logs, recordings.
async function podView(ns, pod, recording = null) {
  setCrumbs(ns, pod);
  const table = h('tbody');
  const session = h('section', { id: 'session', hidden: true });
  const recordings = h('section', { id: 'recordings', hidden: true });
  const sessions = h('section', { id: 'sessions' });
  const createBox = h('section', { id: 'create' }, h('p', { class: 'muted' }, 'Loading…'));
  const requestBox = h('section', { id: 'request-access' });
  const copiesBox = h('section', { id: 'pod-copies' });
  app.replaceChildren(
    h('h2', {}, `Pod ${pod}`),
    h(
      'table',
      { id: 'debug-containers' },
      h(
        'thead',
        {},
        h('tr', {}, ...['name', 'status', 'profile', 'image', 'target', 'age', 'expires', ''].map((c) => h('th', {}, c))),
      ),
      table,
    ),
    sessions,
    createBox,
    requestBox,
    copiesBox,
    session,
    recordings,
  );

  // The server's default profile, for containers created without one.
  let defaultProfile = '';
  const listRead = newestOnly();
  const refresh = async () => {
    const current = listRead();
    if (!defaultProfile) {
      const profiles = await get(paths.profiles()).catch(() => null);
      const d = ((profiles && profiles.items) || []).find((p) => p.default);
      defaultProfile = d ? d.metadata.name : '-';
    }
    const list = await get(paths.debugList(ns, pod));
    if (!current()) return;
    const items = (list.items || []).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    table.replaceChildren(...items.map((dc) => row(dc)));
    if (items.length === 0) {
      table.replaceChildren(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No debug containers yet.')));
    }
  };

  // A terminal on debug container `name`; `mode` joins another user's session (peer,
  // observer, moderator), read-only unless a peer.
  const openTerminal = (name, mode) => {
    const readOnly = mode === 'observer' || mode === 'moderator';
    const endLine = endLineFrom(name, async () => {
      const dc = await get(paths.debug(ns, pod, name));
      return dc && dc.status && dc.status.state && dc.status.state.terminated;
    });
    showTerminal(session, {
      title: mode ? `Terminal: ${name} (as ${mode}${readOnly ? ', read-only' : ''})` : `Terminal: ${name}`,
      path: paths.attach(ns, pod, name, mode),
      ticketPath: paths.debug(ns, pod, name),
      mode,
      onEnd: async (line, code) => {
        const final = await endLine(line, code);
        refresh().catch(showError);
        refreshSessions().catch(() => {});
        return final;
      },
    });
    window.setTimeout(() => refreshSessions().catch(() => {}), 500);
  };

  // The pod's live sessions, whichever replica relays them, with what the user may do to each
  // (SelfSubjectAccessReviews, asked once per view). Refreshed every 3 s while the view is open.
  let rights = null;
  const sessionsRead = newestOnly();
  const refreshSessions = async () => {
    const current = sessionsRead();
    if (!rights) rights = await sessionRights(ns, pod);
    let list;
    try {
      list = await get(paths.sessions(ns, pod));
    } catch (e) {
      if (!current()) return;
      sessions.replaceChildren(h('h3', {}, 'Live sessions'), h('p', { class: 'muted' }, `Sessions cannot be listed: ${e.message}`));
      return;
    }
    if (!current()) return;
    const items = (list.items || []).sort((a, b) =>
      String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)),
    );
    const body = h('tbody');
    body.replaceChildren(...items.map((s) => sessionRow(s)));
    if (items.length === 0) body.replaceChildren(h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'Nobody is attached.')));
    sessions.replaceChildren(
      h('h3', {}, 'Live sessions'),
      h(
        'table',
        { id: 'live-sessions' },
        h('thead', {}, h('tr', {}, ...['session', 'container', 'user', 'mode', 'age', 'state', ''].map((c) => h('th', {}, c)))),
        body,
      ),
    );
  };

  const terminate = async (s, button) => {
    clearError();
    button.disabled = true;
    try {
      await del(paths.session(ns, pod, s.metadata.name));
    } catch (e) {
      showError(e);
    }
    // The stream ends within the session store's bound; read until it is gone (10 reads).
    for (let i = 0; i < 10; i += 1) {
      await refreshSessions().catch(() => {});
      if (!sessions.querySelector(`tr[data-id="${CSS.escape(s.metadata.name)}"]`)) break;
      await sleep(500);
    }
  };

  function sessionRow(s) {
    const spec = s.spec || {};
    const st = s.status || {};
    const id = s.metadata.name;
    const others = me === null || spec.user !== me;
    const state = st.waitingForModerator ? 'waiting for a moderator' : st.moderated ? 'moderated' : '';
    const button = (cls, label, onclick) => h('button', { class: cls, 'data-id': id, onclick }, label);
    return h(
      'tr',
      { 'data-id': id, 'data-user': spec.user, 'data-mode': spec.mode },
      h('td', {}, id),
      h('td', {}, spec.container),
      h('td', {}, spec.user),
      h('td', {}, spec.mode),
      h('td', {}, age(s.metadata.creationTimestamp)),
      h('td', { class: 'state' }, state),
      h(
        'td',
        { class: 'actions' },
        others && rights.join && spec.tty && spec.stdin ? button('join', 'Join', () => openTerminal(spec.container, 'peer')) : null,
        others && rights.observe && spec.tty ? button('observe', 'Observe', () => openTerminal(spec.container, 'observer')) : null,
        others && rights.moderate && spec.tty ? button('moderate', 'Moderate', () => openTerminal(spec.container, 'moderator')) : null,
        rights.terminate ? button('terminate', 'Terminate', (ev) => terminate(s, ev.target)) : null,
      ),
    );
  }

  const logs = (name) => showLogs(session, `Logs: ${name}`, paths.log(ns, pod, name));

  const stop = async (name, button) => {
    clearError();
    button.disabled = true;
    button.textContent = 'Stopping…';
    try {
      await del(`${paths.debug(ns, pod, name)}?gracePeriodSeconds=5`);
    } catch (e) {
      showError(e);
      await refresh().catch(showError);
      return;
    }
    // A 202 means the signals went out but the kubelet has not reported it yet: read again,
    // bounded (15 reads, 2 s apart).
    for (let i = 0; i < 15; i += 1) {
      const dc = await get(paths.debug(ns, pod, name)).catch(() => null);
      if (!dc || !dc.status || dc.status.phase !== 'Running') break;
      await sleep(2000);
    }
    await refresh().catch(showError);
  };

  function row(dc) {
    const name = dc.metadata.name;
    const s = dc.status || {};
    const running = s.phase === 'Running';
    const c = dc.container || {};
    const stopButton = h('button', { class: 'stop', 'data-name': name, onclick: (ev) => stop(name, ev.target) }, 'Stop');
    return h(
      'tr',
      { 'data-name': name },
      h('td', {}, name),
      h('td', { class: 'phase' }, dcPhase(dc)),
      h('td', {}, dc.profile || (defaultProfile === '-' ? '-' : `${defaultProfile} (default)`)),
      h('td', {}, s.image || c.image || '-'),
      h('td', {}, dc.targetContainerName || '-'),
      h('td', {}, age(dcStarted(dc))),
      h('td', { class: 'expires' }, s.expiresAt || '-'),
      h(
        'td',
        { class: 'actions' },
        running && c.stdin && c.tty
          ? h('button', { class: 'attach', 'data-name': name, onclick: () => openTerminal(name) }, 'Terminal')
          : null,
        h('button', { class: 'logs', 'data-name': name, onclick: () => logs(name) }, 'Logs'),
        running ? stopButton : null,
      ),
    );
  }

  try {
    await refresh();
  } catch (e) {
    // Someone who may read the pod's recordings but not its debug containers (an auditor)
    // still gets the rest of the page, with the refusal shown.
    showError(e);
    table.replaceChildren(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'Debug containers cannot be listed.')));
  }
  refreshSessions().catch(() => {});
  const timer = window.setInterval(() => refreshSessions().catch(() => {}), 3000);
  onLeave(() => window.clearInterval(timer));
  // The pod's containers and the profiles the user may use, for both forms.
  const context = Promise.all([get(paths.pod(ns, pod)).catch(() => null), usableProfiles().catch(() => [])]);
  renderCreate(ns, pod, createBox, context, async (name, tty) => {
    await refresh();
    if (tty) openTerminal(name);
    else logs(name);
  }).catch(showError);
  renderRequestForm(ns, pod, requestBox, context, async (name, tty) => {
    await refresh();
    if (tty) openTerminal(name);
    else logs(name);
  }).catch(showError);
  renderCopies(ns, pod, copiesBox, session, context).catch(showError);
  renderRecordings(ns, pod, recordings, session, recording).catch((e) => {
    // recordings are optional; their absence says nothing to the user, unless one was asked for
    if (recording) showError(e);
  });
}

async function renderCreate(ns, pod, box, context, created) {
  const [podObj, profiles] = await context;
  const containers = ((podObj && podObj.spec && podObj.spec.containers) || []).map((c) => c.name);
  const profileDefault = profiles.find((p) => p.default);
  const form = h(
    'form',
    { id: 'create-form', class: 'create' },
    h('h3', {}, 'New debug container'),
    h('label', {}, 'Name ', h('input', { name: 'name', placeholder: 'generated', pattern: '[a-z0-9]([-a-z0-9]*[a-z0-9])?' })),
    h('label', {}, 'Image ', h('input', { name: 'image', placeholder: 'server default' })),
    // The first container is chosen unless the user picks another: a debug container with a
    // target shares its processes and can be stopped (the server defaults the same way).
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
    h(
      'label',
      {},
      'Profile ',
      h(
        'select',
        { name: 'profile', id: 'profile' },
        h('option', { value: '' }, profileDefault ? `(default: ${profileDefault.metadata.name})` : '(server default)'),
        ...profiles.map((p) => h('option', { value: p.metadata.name, title: p.description || '' }, p.metadata.name)),
      ),
    ),
    h('label', {}, 'Command ', h('input', { name: 'command', placeholder: 'image default, e.g. sh' })),
    ttlField(),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'tty', checked: true }), ' Interactive terminal (stdin + TTY)'),
    h('button', { type: 'submit', id: 'create-button' }, 'Create'),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    const f = new FormData(form);
    const tty = f.get('tty') === 'on';
    const container = { stdin: tty, tty };
    const image = String(f.get('image') || '').trim();
    if (image) container.image = image;
    const command = String(f.get('command') || '').trim();
    if (command) container.command = command.split(/\s+/);
    const body = { container };
    const target = String(f.get('target') || '');
    if (target) body.targetContainerName = target;
    const profile = String(f.get('profile') || '');
    if (profile) body.profile = profile;
    try {
      const ttl = ttlSeconds(form);
      if (ttl !== undefined) body.ttlSeconds = ttl;
    } catch (e) {
      showError(e);
      return;
    }
    const name = String(f.get('name') || '').trim();
    const path = `${name ? paths.debug(ns, pod, name) : paths.debugList(ns, pod)}?wait=true&timeoutSeconds=60`;
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    button.textContent = 'Creating…';
    try {
      const obj = await post(path, body);
      await created(obj.metadata.name, tty);
    } catch (e) {
      showError(e);
    } finally {
      button.disabled = false;
      button.textContent = 'Create';
    }
  });
  box.replaceChildren(form);
}

// Recordings, when the server has them (`.../recordings` answers 200); a 404 hides the section.
// With `open` ({ id, t }), that recording is played from session time t (the address
// `#/namespaces/NS/pods/POD/recordings/ID?t=SECONDS` asks for it).
async function renderRecordings(ns, pod, box, session, open = null) {
  const list = await getOptional(paths.recordings(ns, pod));
  const items = (list && list.items) || [];
  if (!list) return;
  box.hidden = false;
  const play = async (name, at = 0) => {
    endSession();
    clearError();
    const screen = h('div', { class: 'terminal', id: 'replay' });
    session.replaceChildren(h('h3', {}, `Recording: ${name}`), screen);
    session.hidden = false;
    const t = createTerminal(screen);
    onSessionEnd(() => t.dispose());
    const item = items.find((r) => ((r.metadata && r.metadata.name) || r.id) === name);
    const duration = (item && item.status && item.status.durationSeconds) || null;
    // The commands, when input was recorded (404 otherwise): each one a place to jump to.
    const commands = await getOptional(paths.recordingCommands(ns, pod, name)).catch(() => null);
    const player = createPlayer({
      term: t.term,
      load: (start, end) => get(paths.recordingRange(ns, pod, name, start, end)),
      duration,
      commands: (commands && commands.items) || [],
      at,
    });
    session.append(player.element);
    onSessionEndFirst(player.stop);
  };
  // Search: the recordings of this pod whose commands or output hold the text, each match a
  // place in the session to open the player at.
  const hits = h('ul', { class: 'links', id: 'search-hits' });
  const search = h(
    'form',
    { id: 'recording-search', class: 'inline' },
    h('input', { name: 'search', placeholder: 'text typed or printed (3+ characters)', minlength: 3, maxlength: 256 }),
    h('button', { type: 'submit' }, 'Search'),
  );
  search.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    const text = String(new FormData(search).get('search') || '').trim();
    try {
      const found = await get(`${paths.recordings(ns, pod)}?search=${encodeURIComponent(text)}`);
      const rows = [];
      for (const r of (found && found.items) || []) {
        const id = r.metadata && r.metadata.name;
        for (const m of (r.status && r.status.matches) || []) {
          rows.push(
            h(
              'li',
              {},
              h('button', { class: 'hit', 'data-id': id, 'data-offset': String(m.offset), onclick: () => play(id, m.offset) }, 'Play'),
              ` ${id} at ${Number(m.offset).toFixed(1)}s (${m.source}): `,
              h('code', {}, m.text),
            ),
          );
        }
      }
      hits.replaceChildren(...(rows.length ? rows : [h('li', { class: 'muted' }, 'No recording holds it.')]));
    } catch (e) {
      showError(e);
    }
  });
  box.replaceChildren(
    h('h3', {}, 'Recordings'),
    search,
    hits,
    items.length === 0
      ? h('p', { class: 'muted' }, 'No recordings.')
      : h(
          'ul',
          { class: 'links' },
          ...items.map((r) => {
            // A Recording as an API object (metadata), or as earlier servers listed it (id, start).
            const id = (r.metadata && r.metadata.name) || r.id;
            const started = (r.metadata && r.metadata.creationTimestamp) || r.start;
            return h(
              'li',
              { 'data-id': id },
              h('button', { class: 'replay', 'data-id': id, onclick: () => play(id) }, 'Replay'),
              ` ${id} `,
              h('span', { class: 'muted' }, started ? age(started) : ''),
            );
          }),
        ),
  );
  if (open) await play(open.id, open.t);
}

function parseRoute(hash) {
  const [path, query = ''] = hash.split('?');
  const parts = path.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'nodes') return { nodes: true, node: parts[1] };
  if (parts[0] === 'requests') return { requests: true };
  if (parts[0] === 'namespaces' && parts[1]) {
    if (parts[2] === 'requests') return { requests: true, ns: parts[1] };
    if (parts[2] === 'pods' && parts[3] && parts[4] === 'recordings' && parts[5]) {
      const t = Number(new URLSearchParams(query).get('t'));
      return { ns: parts[1], pod: parts[3], recording: { id: parts[5], t: Number.isFinite(t) && t > 0 ? t : 0 } };
    }
    if (parts[2] === 'pods' && parts[3]) return { ns: parts[1], pod: parts[3] };
    return { ns: parts[1] };
  }
  return {};
}

async function route() {
  leaveView();
  clearError();
  app.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  let r;
  try {
    r = parseRoute(window.location.hash);
  } catch (_) {
    r = {};
  }
  try {
    if (r.nodes) await nodesView(app, r.node);
    else if (r.requests) await requestsView(app, r.ns, () => me, iam);
    else if (r.pod) await podView(r.ns, r.pod, r.recording);
    else if (r.ns) await podsView(r.ns);
    else await namespacesView();
  } catch (e) {
    showError(e);
    if (app.querySelector('p.muted')) app.replaceChildren();
  }
}

// Who the page acts as: a SelfSubjectReview when the cluster has it; silent otherwise.
async function whoami() {
  try {
    const r = await post('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'SelfSubjectReview',
    });
    const user = r && r.status && r.status.userInfo && r.status.userInfo.username;
    if (user) {
      me = user;
      document.getElementById('whoami').textContent = user;
    }
  } catch (_) {
    // older clusters, or a proxy that does not allow it
  }
}

// Who the page acts as, asked once; the Requests page waits for it (its buttons depend on it).
const iam = whoami();
window.addEventListener('hashchange', route);
route();
