// The session panel a view shows below its tables: a terminal attached to a container (a debug
// container, a container of a copy, a node debug container) or a container's logs.

import { attachTicket, get } from './api.js';
import { attach, createTerminal } from './terminal.js';
import { clearError, endSession, h, onSessionEnd, showError, sleep } from './ui.js';

// Opens a terminal in `section` on the attach stream at `path`, with the attach ticket of a
// same-origin read of `ticketPath` (the container's own object). `mode` joins another user's
// session (peer, observer, moderator), read-only unless a peer. `onEnd(line, code)` answers
// (or resolves to) the end-of-session line shown under the terminal.
export function showTerminal(section, { title, path, ticketPath, mode, onEnd }) {
  endSession();
  clearError();
  const readOnly = mode === 'observer' || mode === 'moderator';
  const screen = h('div', { class: 'terminal', id: 'terminal', 'data-mode': mode || 'owner' });
  const endLine = h('p', { id: 'session-end', class: 'session-end' });
  section.replaceChildren(h('h3', {}, title), screen, endLine);
  section.hidden = false;
  const t = createTerminal(screen);
  screen.scrollIntoView({ block: 'nearest' });
  const conn = attach(
    path,
    t,
    async (line, code) => {
      endLine.textContent = `${line}…`;
      const final = await onEnd(line, code);
      endLine.textContent = final;
      return final;
    },
    attachTicket(ticketPath),
    { readOnly },
  );
  onSessionEnd(
    () => conn.close(),
    () => t.dispose(),
  );
}

// The end-of-session line of container `name`, from its own status: runtimes such as
// containerd report Success on the attach stream whatever the exit code. `terminated()`
// resolves to the container's `state.terminated` (or null). Bounded: 5 reads, 1 s apart.
export function endLineFrom(name, terminated) {
  return async (line, code) => {
    if (code !== null && code !== 0) return line;
    for (let i = 0; i < 5; i += 1) {
      const term = await terminated().catch(() => null);
      if (term) return `Session ended: exit code ${term.exitCode}`;
      await sleep(1000);
    }
    return line === 'Session ended: exit code 0' || line === 'Session ended'
      ? `Session ended; ${name} is still running`
      : line;
  };
}

// Shows the text at `path` (a log) in `section`.
export async function showLogs(section, title, path) {
  endSession();
  clearError();
  const pre = h('pre', { id: 'logs', class: 'logs' }, 'Loading…');
  section.replaceChildren(h('h3', {}, title), pre);
  section.hidden = false;
  try {
    const text = await get(path);
    pre.textContent = typeof text === 'string' ? text : JSON.stringify(text, null, 2);
  } catch (e) {
    pre.textContent = '';
    showError(e);
  }
}
