// #/nodes and #/nodes/NODE: the nodes, their debug containers (NodeDebugContainer, from the
// cluster-wide `nodedebugcontainers`) with terminal, logs and Delete, and the form that starts
// one, waits until it runs and opens a terminal on it.

import { del, get, getTransient, paths, post, usableNodeProfiles } from './api.js';
import { endLineFrom, showLogs, showTerminal } from './panel.js';
import {
  age,
  clearError,
  describeState,
  enc,
  h,
  newestOnly,
  setCrumbs,
  showError,
  sleep,
  ttlField,
  ttlSeconds,
  waitRunning,
  whileBusy,
} from './ui.js';

// The profile of a node debug container that names none (the server's).
const DEFAULT_NODE_PROFILE = 'sysadmin';

const nodeLink = (node) => `#/nodes/${enc(node)}`;

function ready(n) {
  const conditions = (n.status && n.status.conditions) || [];
  const c = conditions.find((x) => x.type === 'Ready');
  if (!c) return '-';
  return c.status === 'True' ? 'Ready' : 'NotReady';
}

// The node and debug name of an item of the cluster-wide list (named NODE.NAME).
function namesOf(item) {
  const node = (item.status && item.status.nodeName) || '';
  const full = item.metadata.name;
  const name = node && full.startsWith(`${node}.`) ? full.slice(node.length + 1) : full;
  return { node, name };
}

// The container's state, with a pod that ended before its container ran shown as terminated.
function stateOf(obj) {
  const s = (obj && obj.status) || {};
  if (s.state && (s.state.running || s.state.terminated)) return s.state;
  if (s.phase === 'Terminated') return { terminated: { exitCode: '-', reason: 'its pod ended' } };
  return s.state || null;
}

// `node`: the node of #/nodes/NODE, or undefined for every node.
export async function nodesView(app, node) {
  setCrumbs(['nodes', '#/nodes'], ...(node ? [[node, nodeLink(node)]] : []));
  const nodesBox = h('section', { id: 'nodes-box' }, h('p', { class: 'muted' }, 'Loading…'));
  const table = h('tbody');
  const listNote = h('p', { class: 'muted', id: 'node-debug-note', hidden: true });
  const formBox = h('section', { id: 'node-create' });
  const progress = h('p', { class: 'muted', id: 'node-progress', hidden: true });
  const session = h('section', { id: 'session', hidden: true });
  app.replaceChildren(
    h('h2', {}, node ? `Node ${node}` : 'Nodes'),
    nodesBox,
    h('h3', {}, node ? 'Debug containers on this node' : 'Node debug containers'),
    listNote,
    h(
      'table',
      { id: 'node-debug-containers' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['name', 'node', 'status', 'profile', 'image', 'created by', 'age', 'expires', ''].map((c) => h('th', {}, c)),
        ),
      ),
      table,
    ),
    formBox,
    progress,
    session,
  );

  const listRead = newestOnly();
  const refresh = async () => {
    const current = listRead();
    let list;
    try {
      list = await get(paths.nodeDebugAll());
    } catch (e) {
      if (!current()) return [];
      listNote.textContent = `Node debug containers cannot be listed: ${e.message}`;
      listNote.hidden = false;
      table.replaceChildren();
      return [];
    }
    const items = (list.items || [])
      .filter((i) => !node || namesOf(i).node === node)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    if (!current()) return items;
    listNote.hidden = true;
    table.replaceChildren(...items.map((i) => row(i)));
    if (items.length === 0) {
      table.replaceChildren(h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No node debug containers.')));
    }
    return items;
  };

  const openTerminal = (n, name) => {
    const endLine = endLineFrom(name, async () => {
      const st = stateOf(await get(paths.nodeDebug(n, name)));
      return st && st.terminated;
    });
    showTerminal(session, {
      title: `Terminal: ${name} on node ${n}`,
      path: paths.nodeAttach(n, name),
      ticketPath: paths.nodeDebug(n, name),
      onEnd: async (line, code) => {
        const final = await endLine(line, code);
        refresh().catch(() => {});
        return final;
      },
    });
  };

  const remove = async (n, name, button) => {
    clearError();
    button.disabled = true;
    button.textContent = 'Deleting…';
    try {
      await del(paths.nodeDebug(n, name));
    } catch (e) {
      showError(e);
      await refresh();
      return;
    }
    // The pod goes after its grace period: read until it is gone (bounded, 20 reads, 1 s apart).
    for (let i = 0; i < 20; i += 1) {
      const items = await refresh();
      if (!items.some((it) => namesOf(it).node === n && namesOf(it).name === name)) break;
      await sleep(1000);
    }
  };

  function row(item) {
    const { node: n, name } = namesOf(item);
    const s = item.status || {};
    const c = item.container || {};
    const deleting = Boolean(item.metadata.deletionTimestamp);
    const running = s.phase === 'Running' && !deleting;
    const button = (cls, label, onclick) => h('button', { class: cls, 'data-name': name, 'data-node': n, onclick }, label);
    return h(
      'tr',
      { 'data-name': name, 'data-node': n },
      h('td', {}, name),
      h('td', {}, h('a', { href: nodeLink(n) }, n)),
      h('td', { class: 'phase' }, `${s.phase || '-'}${s.state && !s.state.running ? `: ${describeState(s.state)}` : ''}${deleting ? ' (deleting)' : ''}`),
      h('td', {}, item.profile || '-'),
      h('td', {}, c.image || '-'),
      h('td', {}, s.createdBy || '-'),
      h('td', {}, age(item.metadata.creationTimestamp)),
      h('td', { class: 'expires' }, s.expiresAt || '-'),
      h(
        'td',
        { class: 'actions' },
        running && c.stdin && c.tty ? button('attach', 'Terminal', () => openTerminal(n, name)) : null,
        button('logs', 'Logs', () => showLogs(session, `Logs: ${name} on node ${n}`, paths.nodeLog(n, name))),
        deleting ? null : button('delete stop', 'Delete', (ev) => remove(n, name, ev.target)),
      ),
    );
  }

  // The nodes (core `list nodes`); without that right, a field to type a node's name.
  let nodeNames = [];
  try {
    const nodes = await get(paths.nodes());
    const items = (nodes.items || []).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    nodeNames = items.map((n) => n.metadata.name);
    const shown = node ? items.filter((n) => n.metadata.name === node) : items;
    const body = h('tbody');
    body.replaceChildren(
      ...shown.map((n) =>
        h(
          'tr',
          { 'data-node': n.metadata.name },
          h('td', {}, h('a', { href: nodeLink(n.metadata.name) }, n.metadata.name)),
          h('td', {}, ready(n)),
          h('td', {}, (n.status && n.status.nodeInfo && n.status.nodeInfo.kubeletVersion) || '-'),
          h('td', {}, age(n.metadata.creationTimestamp)),
        ),
      ),
    );
    if (shown.length === 0) body.replaceChildren(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'No nodes.')));
    nodesBox.replaceChildren(
      h(
        'table',
        { id: 'nodes' },
        h('thead', {}, h('tr', {}, ...['name', 'status', 'version', 'age'].map((c) => h('th', {}, c)))),
        body,
      ),
    );
  } catch (e) {
    nodesBox.replaceChildren(h('p', { class: 'muted', id: 'nodes-note' }, `Nodes cannot be listed: ${e.message} Type one in the form below.`));
  }

  const profiles = await usableNodeProfiles().catch(() => []);
  const nodeField =
    nodeNames.length > 0
      ? h(
          'select',
          { name: 'node', required: true },
          ...nodeNames.map((n, i) => h('option', { value: n, selected: node ? n === node : i === 0 }, n)),
        )
      : h('input', { name: 'node', required: true, value: node || '' });
  // Only the profiles a SelfSubjectAccessReview says the user may use; the server's default is
  // chosen when it is one of them.
  const profileField =
    profiles.length > 0
      ? h(
          'select',
          { name: 'profile', id: 'node-profile' },
          ...profiles.map((p) =>
            h('option', { value: p, selected: p === DEFAULT_NODE_PROFILE }, p === DEFAULT_NODE_PROFILE ? `${p} (default)` : p),
          ),
        )
      : h('select', { name: 'profile', id: 'node-profile', disabled: true }, h('option', { value: '' }, 'none you may use'));
  const warning = h(
    'p',
    { class: 'warning', id: 'node-warning', role: 'alert' },
    'sysadmin is root on the node: the container runs privileged in the node\u2019s process, network and IPC namespaces with its filesystem at /host, so whoever attaches has full control of the node and of every pod on it.',
  );
  const startButton = h('button', { type: 'submit', id: 'node-create-button', disabled: profiles.length === 0 }, 'Start');
  const form = h(
    'form',
    { id: 'node-form', class: 'create' },
    h('h3', {}, 'New node debug container'),
    h('label', {}, 'Node ', nodeField),
    h('label', {}, 'Name ', h('input', { name: 'name', placeholder: 'generated', pattern: '[a-z0-9]([-a-z0-9]*[a-z0-9])?' })),
    h('label', {}, 'Image ', h('input', { name: 'image', placeholder: 'server default' })),
    h('label', {}, 'Command ', h('input', { name: 'command', placeholder: 'image default, e.g. sh' })),
    h('label', {}, 'Profile ', profileField),
    warning,
    ttlField(),
    startButton,
  );
  // Only the profiles the user may use are offered (none: nothing to start); the warning shows
  // while the one chosen is sysadmin.
  const showWarning = () => {
    warning.hidden = profileField.value !== 'sysadmin';
  };
  profileField.addEventListener('change', showWarning);
  showWarning();
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    const f = new FormData(form);
    const text = (k) => String(f.get(k) || '').trim();
    const n = text('node');
    const container = { stdin: true, tty: true };
    if (text('image')) container.image = text('image');
    const command = text('command').split(/\s+/).filter(Boolean);
    if (command.length) container.command = command;
    const body = { container };
    if (text('profile')) body.profile = text('profile');
    try {
      const ttl = ttlSeconds(form);
      if (ttl !== undefined) body.ttlSeconds = ttl;
    } catch (e) {
      showError(e);
      return;
    }
    const name = text('name');
    const button = form.querySelector('button[type=submit]');
    await whileBusy(button, 'Starting…', progress, refresh, async (say) => {
      const created = await post(name ? paths.nodeDebug(n, name) : paths.nodeDebugList(n), body);
      const made = created.metadata.name;
      refresh().catch(() => {});
      await waitRunning(
        `node debug container ${made} on ${n}`,
        async () => stateOf(await getTransient(paths.nodeDebug(n, made))),
        say,
      );
      progress.hidden = true;
      await refresh();
      openTerminal(n, made);
    });
  });
  formBox.replaceChildren(form);
  await refresh();
}
