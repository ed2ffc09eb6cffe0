// Copies of a pod (PodDebugCopy) on the pod's view: the copies made of it, each with a terminal
// and Delete, and the form that makes one ("Debug a copy"), waits until the container to debug
// runs and opens a terminal on it.

import { del, get, getTransient, paths, post } from './api.js';
import { endLineFrom, showTerminal } from './panel.js';
import {
  age,
  clearError,
  describeState,
  enc,
  h,
  newestOnly,
  parseDuration,
  showError,
  sleep,
  ttlField,
  waitRunning,
  whileBusy,
} from './ui.js';

// The state of container `name` of a copy, as its status reports it (or null).
function stateOf(copy, name) {
  const statuses = (copy && copy.status && copy.status.containerStatuses) || [];
  const cs = statuses.find((s) => s.name === name);
  return (cs && cs.state) || null;
}

// `container=image` entries, separated by spaces or commas: the `setImage` map, or an Error.
function parseSetImage(text) {
  const out = {};
  for (const entry of text.split(/[\s,]+/).filter(Boolean)) {
    const at = entry.indexOf('=');
    if (at <= 0 || at === entry.length - 1) {
      throw new Error(`Set images: "${entry}" is not container=image (use * for every container).`);
    }
    out[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return out;
}

// The PodDebugCopy the form asks for, and the container to open a terminal on (null: the debug
// container, whose name the server answers).
function copyRequest(f) {
  const words = (name) => String(f.get(name) || '').trim().split(/\s+/).filter(Boolean);
  const text = (name) => String(f.get(name) || '').trim();
  const body = {
    metadata: {},
    shareProcesses: f.get('shareProcesses') === 'on',
  };
  const name = text('name');
  if (name) body.metadata.name = name;
  if (f.get('sameNode') === 'on') body.sameNode = true;
  const setImage = parseSetImage(text('setImage'));
  const target = text('container');
  const image = text('image');
  const command = words('command');
  if (target) {
    // A container of the pod, changed: its command (when given) and a terminal to attach to.
    const replace = { stdin: true, tty: true };
    if (command.length) replace.command = command;
    body.replace = { [target]: replace };
    if (image) setImage[target] = image;
  } else {
    const container = { stdin: true, tty: true };
    const debugName = text('debugName');
    if (debugName) container.name = debugName;
    if (image) container.image = image;
    if (command.length) container.command = command;
    body.container = container;
  }
  if (Object.keys(setImage).length) body.setImage = setImage;
  const profile = text('profile');
  if (profile) body.profile = profile;
  const ttl = text('ttl');
  if (ttl) body.ttlSeconds = parseDuration(ttl);
  return { body, target: target || null };
}

// The copies of `pod` and the "Debug a copy" form, in `box`; terminals open in `session`.
// `context` resolves to [the pod, the profiles the user may use].
export async function renderCopies(ns, pod, box, session, context) {
  const table = h('tbody');
  const listNote = h('p', { class: 'muted', id: 'copies-note', hidden: true });
  const progress = h('p', { class: 'muted', id: 'copy-progress', hidden: true });

  // The copies' containers a terminal can attach to (stdin and TTY), read from the copies' own
  // pods: copy name → container names. Without the right to list pods, a copy's debug
  // container, as the copy reports it.
  let interactive = () => null;
  const listRead = newestOnly();
  const refresh = async () => {
    const current = listRead();
    let list;
    try {
      const [copies, pods] = await Promise.all([
        get(paths.copies(ns, pod)),
        get(paths.podsCopying(ns, pod)).catch(() => null),
      ]);
      if (!current()) return copies.items || [];
      list = copies;
      const byCopy = new Map(
        ((pods && pods.items) || []).map((p) => [
          p.metadata.name,
          ((p.spec && p.spec.containers) || []).filter((c) => c.stdin && c.tty).map((c) => c.name),
        ]),
      );
      interactive = (name) => byCopy.get(name) || null;
    } catch (e) {
      if (!current()) return [];
      listNote.textContent = `Copies cannot be listed: ${e.message}`;
      listNote.hidden = false;
      table.replaceChildren();
      return [];
    }
    listNote.hidden = true;
    const items = (list.items || []).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    table.replaceChildren(...items.map((c) => row(c)));
    if (items.length === 0) {
      table.replaceChildren(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No copies of this pod.')));
    }
    return items;
  };

  const openTerminal = (copyName, container) => {
    const endLine = endLineFrom(container, async () => {
      const st = stateOf(await get(paths.copyOf(ns, pod, copyName)), container);
      return st && st.terminated;
    });
    showTerminal(session, {
      title: `Terminal: ${container} in copy ${copyName}`,
      path: paths.attach(ns, copyName, container),
      ticketPath: paths.copyOf(ns, pod, copyName),
      onEnd: async (line, code) => {
        const final = await endLine(line, code);
        refresh().catch(() => {});
        return final;
      },
    });
  };

  const remove = async (name, button) => {
    clearError();
    button.disabled = true;
    button.textContent = 'Deleting…';
    try {
      await del(paths.copyOf(ns, pod, name));
    } catch (e) {
      showError(e);
      await refresh();
      return;
    }
    // The pod goes after its grace period: read until it is gone (bounded, 20 reads, 1 s apart).
    for (let i = 0; i < 20; i += 1) {
      const items = await refresh();
      if (!items.some((c) => c.metadata.name === name)) break;
      await sleep(1000);
    }
  };

  function row(c) {
    const name = c.metadata.name;
    const s = c.status || {};
    const dcName = s.debugContainerName;
    const dc = c.container || {};
    const deleting = Boolean(c.metadata.deletionTimestamp);
    const attachable = (interactive(name) || (dcName && dc.stdin && dc.tty ? [dcName] : [])).filter(
      (n) => !deleting && (stateOf(c, n) || {}).running,
    );
    const states = (s.containerStatuses || []).map((cs) => `${cs.name}: ${describeState(cs.state)}`);
    return h(
      'tr',
      { 'data-name': name },
      h('td', {}, h('a', { href: `#/namespaces/${enc(ns)}/pods/${enc(name)}` }, name)),
      h('td', { class: 'phase' }, `${s.phase || '-'}${deleting ? ' (deleting)' : ''}`),
      h('td', {}, states.length ? states.join(', ') : '-'),
      h('td', {}, s.nodeName || '-'),
      h('td', {}, s.createdBy || '-'),
      h('td', {}, age(c.metadata.creationTimestamp)),
      h('td', { class: 'expires' }, s.expiresAt || '-'),
      h(
        'td',
        { class: 'actions' },
        ...attachable.map((n) =>
          h(
            'button',
            { class: 'attach', 'data-name': name, 'data-container': n, onclick: () => openTerminal(name, n) },
            attachable.length > 1 ? `Terminal: ${n}` : 'Terminal',
          ),
        ),
        deleting
          ? null
          : h('button', { class: 'delete stop', 'data-name': name, onclick: (ev) => remove(name, ev.target) }, 'Delete'),
      ),
    );
  }

  const [podObj, profiles] = await context;
  const containers = ((podObj && podObj.spec && podObj.spec.containers) || []).map((c) => c.name);
  const profileDefault = profiles.find((p) => p.default);
  const form = h(
    'form',
    { id: 'copy-form', class: 'create' },
    h('h3', {}, 'Debug a copy'),
    h('label', {}, 'Copy name ', h('input', { name: 'name', placeholder: `${pod}-debug-… (generated)` })),
    h(
      'label',
      {},
      'Container to debug ',
      h(
        'select',
        { name: 'container' },
        h('option', { value: '', selected: true }, 'a new debug container'),
        ...containers.map((c) => h('option', { value: c }, `${c} (changed in the copy)`)),
      ),
    ),
    h('label', {}, 'Debug container name ', h('input', { name: 'debugName', placeholder: 'debugger' })),
    h('label', {}, 'Image ', h('input', { name: 'image', placeholder: 'server default, or unchanged' })),
    h('label', {}, 'Command ', h('input', { name: 'command', placeholder: 'image default, e.g. sh' })),
    h('label', {}, 'Set images ', h('input', { name: 'setImage', placeholder: 'app=busybox:1.36 *=…' })),
    h(
      'label',
      {},
      'Profile ',
      h(
        'select',
        { name: 'profile' },
        h('option', { value: '' }, profileDefault ? `(default: ${profileDefault.metadata.name})` : '(server default)'),
        ...profiles.map((p) => h('option', { value: p.metadata.name, title: p.description || '' }, p.metadata.name)),
      ),
    ),
    ttlField(),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'shareProcesses', checked: true }), ' Share processes'),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'sameNode' }), ' Same node'),
    h('button', { type: 'submit', id: 'copy-button' }, 'Copy and debug'),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    const button = form.querySelector('button[type=submit]');
    let request;
    try {
      request = copyRequest(new FormData(form));
    } catch (e) {
      showError(e);
      return;
    }
    await whileBusy(button, 'Copying…', progress, refresh, async (say) => {
      const created = await post(paths.copy(ns, pod), request.body);
      const name = created.metadata.name;
      const container = request.target || (created.status && created.status.debugContainerName);
      refresh().catch(() => {});
      say(`Copy ${name} created.`);
      if (!container) return;
      await waitRunning(
        `container ${container} of copy ${name}`,
        async () => stateOf(await getTransient(paths.copyOf(ns, pod, name)), container),
        say,
      );
      progress.hidden = true;
      await refresh();
      openTerminal(name, container);
    });
  });

  box.replaceChildren(
    h('h3', {}, 'Copies of this pod'),
    listNote,
    h(
      'table',
      { id: 'copies' },
      h(
        'thead',
        {},
        h('tr', {}, ...['name', 'phase', 'containers', 'node', 'created by', 'age', 'expires', ''].map((c) => h('th', {}, c))),
      ),
      table,
    ),
    form,
    progress,
  );
  await refresh();
}
