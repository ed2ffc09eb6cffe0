// A terminal attached to a debug container over WebSocket `v5.channel.k8s.io`: channel 0 is
// stdin, 1 stdout, 2 stderr, 3 the final Status, 4 resize (`{"Width":W,"Height":H}`), and 255
// closes a channel (v5).

import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { wsUrl } from './api.js';
import { mirrorInlineStyles } from './styles.js';

const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
const ERROR = 3;
const RESIZE = 4;
const CLOSE = 255;
// Type-ahead kept while the WebSocket connects.
const PENDING_LIMIT = 64 * 1024;

const encoder = new TextEncoder();

function frame(channel, bytes) {
  const out = new Uint8Array(bytes.length + 1);
  out[0] = channel;
  out.set(bytes, 1);
  return out;
}

// The exit code a channel-3 Status carries: 0 for Success, the `ExitCode` cause of a
// `NonZeroExitCode` failure, null when the Status is some other failure.
export function exitCodeOf(status) {
  if (!status || status.status === 'Success') return 0;
  if (status.reason === 'NonZeroExitCode') {
    const causes = (status.details && status.details.causes) || [];
    const cause = causes.find((c) => c.reason === 'ExitCode');
    const code = cause ? Number.parseInt(cause.message, 10) : Number.NaN;
    return Number.isNaN(code) ? null : code;
  }
  return null;
}

export function createTerminal(container) {
  const term = new Terminal({
    cursorBlink: true,
    convertEol: false,
    fontFamily: 'ui-monospace, Menlo, Consolas, "DejaVu Sans Mono", monospace',
    fontSize: 14,
    scrollback: 5000,
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const unmirror = mirrorInlineStyles(container);
  term.open(container);

  try {
    fit.fit();
  } catch (_) {
    // not laid out yet; the next resize fits it
  }
  const dispose = () => {
    term.dispose();
    unmirror();
  };
  return { term, fit, dispose };
}

// Attaches `term` to `path`. `onEnd(line, exitCode)` is called once when the session ends and
// answers (or resolves to) the end-of-session line to print. `ticket` resolves to the attach
// ticket the server handed this page (or null): offered as a subprotocol, it tells the server
// that the handshake comes from a page of its own origin, which a WebSocket cannot otherwise
// show behind kubectl proxy. The socket is opened once it is known; keys typed meanwhile wait.
// With `readOnly` (an observer, a moderator) nothing typed is sent: the server refuses their
// input anyway.
export function attach(path, { term, fit }, onEnd, ticket = Promise.resolve(null), { readOnly = false } = {}) {
  let ws = null;
  let closedEarly = false;
  const decoder = new TextDecoder();
  let statusText = '';
  let ended = false;
  const disposables = [];

  // What the user types while the socket still connects is kept (up to PENDING_LIMIT bytes)
  // and sent in order once it opens, as a local terminal keeps type-ahead.
  const screen = term.element && term.element.parentElement;
  const setState = (state) => {
    if (screen) screen.dataset.state = state;
  };
  setState('connecting');
  let pending = [];
  let pendingBytes = 0;
  const send = (channel, bytes) => {
    if (ws && ws.readyState === WebSocket.OPEN) {
      ws.send(frame(channel, bytes));
    } else if ((!ws || ws.readyState === WebSocket.CONNECTING) && !ended && channel !== RESIZE) {
      if (pendingBytes + bytes.length > PENDING_LIMIT) return;
      pending.push(frame(channel, bytes));
      pendingBytes += bytes.length;
    }
  };
  const sendSize = () => {
    if (term.element && term.element.parentElement) {
      term.element.parentElement.dataset.size = `${term.cols}x${term.rows}`;
    }
    send(RESIZE, encoder.encode(JSON.stringify({ Width: term.cols, Height: term.rows })));
  };
  // Refit whenever the terminal's box changes size (window resize, layout); xterm reports
  // the new cols/rows through onResize.
  const observer = new ResizeObserver(() => {
    try {
      fit.fit();
    } catch (_) {
      // detached
    }
  });

  const end = (line, code) => {
    if (ended) return;
    ended = true;
    setState('ended');
    pending = [];
    disposables.forEach((d) => d.dispose());
    observer.disconnect();
    term.options.disableStdin = true;
    Promise.resolve(onEnd(line, code)).then((final) => {
      term.write(`\r\n\x1b[1m${final || line}\x1b[0m\r\n`);
    });
  };

  const open = (t) => {
    if (closedEarly) return;
    const protocols = ['v5.channel.k8s.io'];
    if (t) protocols.push(`ticket.poddebug.dev.${t}`);
    ws = new WebSocket(wsUrl(path), protocols);
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => {
      setState('open');
      term.focus();
      sendSize();
      const queued = pending;
      pending = [];
      pendingBytes = 0;
      queued.forEach((f) => ws.send(f));
    };
    ws.onmessage = (ev) => {
      const data = new Uint8Array(ev.data);
      if (data.length === 0) return;
      const body = data.subarray(1);
      switch (data[0]) {
        case STDOUT:
        case STDERR:
          term.write(body);
          break;
        case ERROR:
          statusText += decoder.decode(body, { stream: true });
          break;
        default:
          break;
      }
    };
    ws.onclose = (ev) => {
      let status = null;
      try {
        status = statusText ? JSON.parse(statusText) : null;
      } catch (_) {
        status = null;
      }
      // The Status carries the exit code when the runtime reports it; containerd reports
      // Success whatever the code, so the caller also reads the container's own status.
      if (status) {
        const code = exitCodeOf(status);
        if (code === null) end(`Session ended: ${status.message || status.reason || 'failure'}`, null);
        else end(`Session ended: exit code ${code}`, code);
      } else if (ev.code === 1000 || ev.code === 1005) {
        end('Session ended', null);
      } else {
        end(`Session ended: the connection closed (${ev.code}${ev.reason ? ` ${ev.reason}` : ''})`, null);
      }
    };
    ws.onerror = () => {
      // onclose follows with the code; a refused upgrade has no body a browser can read
    };
  };
  ticket.then(open, () => open(null));

  if (readOnly) {
    term.options.disableStdin = true;
  } else {
    disposables.push(term.onData((d) => send(STDIN, encoder.encode(d))));
    disposables.push(term.onBinary((d) => send(STDIN, Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff))));
  }
  disposables.push(term.onResize(() => sendSize()));
  if (term.element && term.element.parentElement) observer.observe(term.element.parentElement);

  return {
    // Ends input (v5 CLOSE of stdin), as Ctrl-D at an empty prompt would.
    closeStdin: () => send(CLOSE, Uint8Array.of(STDIN)),
    close: () => {
      closedEarly = true;
      if (ws) ws.close(1000);
    },
  };
}
