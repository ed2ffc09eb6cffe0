// The recording player: plays an asciicast v2 recording into a terminal at 0.5× to 8× its
// pace, pauses and resumes, cuts pauses longer than the idle limit, and seeks with a scrubber,
// from the recording's commands, or to a time given in the page's address
// (`#/namespaces/NS/pods/POD/recordings/ID?t=SECONDS`).
//
// It never downloads the whole recording: it reads a window of session time at a time
// (`…/recordings/ID?start=S&end=E`), which the server answers with the header and the events
// of the part holding S, from that part's start, up to E. The events before S draw the screen
// as it was at S, at once; playback goes on from S, and the next window is fetched as the
// current one runs out.

import { h } from './ui.js';

// The address of recording `id` of a pod played from session time `t` (seconds): what a
// search hit links to.
export function recordingLink(ns, pod, id, t = 0) {
  const base = `#/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(pod)}/recordings/${encodeURIComponent(id)}`;
  return t > 0 ? `${base}?t=${Number(t)}` : base;
}

// Session seconds fetched at a time.
export const WINDOW = 120;
export const SPEEDS = [0.5, 1, 2, 4, 8];
// Idle limits offered, in seconds (0: pauses kept).
export const IDLE_LIMITS = [0, 0.5, 1, 2, 5];

// The events of an asciicast document: [[t, code, data], ...], and its header (or null).
export function parseCast(text) {
  const events = [];
  let header = null;
  for (const line of String(text).split('\n')) {
    if (line.trim() === '') continue;
    try {
      const v = JSON.parse(line);
      if (Array.isArray(v)) {
        if (typeof v[0] === 'number' && typeof v[2] === 'string') events.push(v);
      } else if (v && typeof v === 'object' && header === null) {
        header = v;
      }
    } catch (_) {
      // not a line of the format: skipped
    }
  }
  return { header, events };
}

// The real milliseconds between two events `gap` session seconds apart.
export function waitMs(gap, speed, idle) {
  let g = Math.max(0, Number.isFinite(gap) ? gap : 0);
  if (idle > 0) g = Math.min(g, idle);
  return (g / speed) * 1000;
}

function clock(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const hh = Math.floor(s / 3600);
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, '0');
  const ss = String(s % 60).padStart(2, '0');
  return hh > 0 ? `${hh}:${mm}:${ss}` : `${mm}:${ss}`;
}

// A player of the recording `load(start, end)` reads (answers the asciicast text of that
// range), `duration` seconds long (null: unknown, the first window tells), into `term`.
// `commands`: [{offset, line}] to jump to. Answers { element, seek, stop }.
export function createPlayer({ term, load, duration, commands = [], at = 0 }) {
  const state = {
    events: [], // the events fetched, in order
    windowEnd: 0, // session time up to which `events` holds everything (Infinity: the end)
    next: 0, // index of the next event to play
    pos: 0, // session time played to
    speed: 1,
    idle: 0,
    playing: false,
    timer: null,
    generation: 0, // bumped by each seek: a late answer of an earlier one is dropped
    fetches: 0,
    duration: duration || 0,
  };

  const root = h('div', { id: 'player', class: 'player', 'data-state': 'loading' });
  const playButton = h('button', { type: 'button', id: 'player-play' }, 'Pause');
  const scrubber = h('input', {
    type: 'range',
    id: 'player-scrubber',
    min: '0',
    max: String(Math.max(1, Math.ceil(state.duration))),
    step: '0.1',
    value: '0',
  });
  const time = h('span', { id: 'player-time', class: 'muted' }, '');
  const speedSelect = h(
    'select',
    { id: 'player-speed', title: 'Speed' },
    ...SPEEDS.map((s) => h('option', { value: String(s), ...(s === 1 ? { selected: 'selected' } : {}) }, `${s}×`)),
  );
  const idleSelect = h(
    'select',
    { id: 'player-idle', title: 'Skip idle time longer than' },
    ...IDLE_LIMITS.map((s) => h('option', { value: String(s) }, s === 0 ? 'Keep pauses' : `Skip idle > ${s}s`)),
  );
  const commandList = commands.length
    ? h(
        'ol',
        { id: 'player-commands', class: 'commands' },
        ...commands.map((c) =>
          h(
            'li',
            {},
            h(
              'button',
              { type: 'button', class: 'command', 'data-offset': String(c.offset), onclick: () => seek(c.offset) },
              clock(c.offset),
            ),
            ' ',
            h('code', {}, c.line),
          ),
        ),
      )
    : null;

  root.append(
    h('div', { class: 'player-controls' }, playButton, scrubber, time, speedSelect, idleSelect),
    ...(commandList ? [h('h4', {}, 'Commands'), commandList] : []),
  );

  const show = () => {
    root.dataset.position = state.pos.toFixed(3);
    root.dataset.fetches = String(state.fetches);
    root.dataset.speed = String(state.speed);
    root.dataset.idle = String(state.idle);
    if (document.activeElement !== scrubber) scrubber.value = String(state.pos);
    time.textContent = `${clock(state.pos)} / ${clock(state.duration)}`;
    playButton.textContent = state.playing ? 'Pause' : 'Play';
  };
  const setState = (s) => {
    root.dataset.state = s;
    show();
  };

  const clearTimer = () => {
    if (state.timer !== null) window.clearTimeout(state.timer);
    state.timer = null;
  };

  // Fetch the window from `start` (to the end when the duration is unknown: a recording
  // without a time table is read from its start anyway), keeping only the events after `after`
  // (what was already held). Answers false when a later seek made it moot.
  const fetchWindow = async (start, after, gen) => {
    const end = state.duration ? start + WINDOW : null;
    state.fetches += 1;
    root.dataset.lastRange = end === null ? `start=${start}` : `start=${start}&end=${end}`;
    const text = await load(start, end);
    if (gen !== state.generation) return false;
    const { header, events } = parseCast(text);
    if (header && header.width && header.height && after < 0) {
      try {
        term.resize(header.width, header.height);
      } catch (_) {
        // the terminal keeps its size
      }
    }
    for (const ev of events) if (after < 0 || ev[0] > after) state.events.push(ev);
    const last = events.length ? events[events.length - 1][0] : 0;
    state.windowEnd = end === null ? Infinity : end;
    if (last > state.duration) {
      state.duration = last;
      scrubber.max = String(Math.max(1, Math.ceil(state.duration)));
    }
    return true;
  };

  // Wait for the next event as the pace says.
  const schedule = () => {
    const following = state.events[state.next];
    const wait = following ? waitMs(following[0] - state.pos, state.speed, state.idle) : 0;
    state.timer = window.setTimeout(step, wait);
  };

  const step = async () => {
    state.timer = null;
    if (!state.playing) return;
    const gen = state.generation;
    if (state.next >= state.events.length) {
      if (state.windowEnd >= state.duration) {
        state.playing = false;
        state.pos = Math.max(state.pos, state.duration);
        term.write('\r\n\x1b[1mEnd of recording\x1b[0m\r\n');
        setState('ended');
        return;
      }
      setState('loading');
      try {
        if (!(await fetchWindow(state.windowEnd, state.windowEnd, gen))) return;
      } catch (e) {
        state.playing = false;
        root.dataset.error = e.message || String(e);
        setState('error');
        return;
      }
      setState('playing');
      schedule();
      return;
    }
    const [t, code, data] = state.events[state.next];
    state.next += 1;
    if (code === 'o') term.write(data);
    state.pos = Math.max(state.pos, t);
    show();
    schedule();
  };

  // Show the screen at session time `t` and play on from it (or stay paused).
  const seek = async (t) => {
    const target = Math.max(0, Number(t) || 0);
    clearTimer();
    state.generation += 1;
    const gen = state.generation;
    const resume = state.playing || root.dataset.state === 'loading' || root.dataset.state === 'ended';
    state.playing = false;
    state.events = [];
    state.next = 0;
    state.pos = target;
    setState('loading');
    try {
      if (!(await fetchWindow(target, -1, gen))) return;
    } catch (e) {
      root.dataset.error = e.message || String(e);
      setState('error');
      return;
    }
    term.reset();
    // What the part recorded before the target draws the screen as it was, at once.
    let drawn = '';
    while (state.next < state.events.length && state.events[state.next][0] <= target) {
      const [, code, data] = state.events[state.next];
      if (code === 'o') drawn += data;
      state.next += 1;
    }
    if (drawn) term.write(drawn);
    state.pos = target;
    root.dataset.seeked = target.toFixed(3);
    state.playing = resume;
    setState(resume ? 'playing' : 'paused');
    if (resume) schedule();
  };

  playButton.addEventListener('click', () => {
    if (state.playing) {
      state.playing = false;
      clearTimer();
      setState('paused');
    } else if (root.dataset.state === 'ended') {
      state.playing = true;
      seek(0);
    } else {
      state.playing = true;
      setState('playing');
      step();
    }
  });
  scrubber.addEventListener('change', () => seek(Number(scrubber.value)));
  speedSelect.addEventListener('change', () => {
    state.speed = Number(speedSelect.value) || 1;
    show();
  });
  idleSelect.addEventListener('change', () => {
    state.idle = Number(idleSelect.value) || 0;
    show();
  });

  state.playing = true;
  seek(at);
  return {
    element: root,
    seek,
    stop: () => {
      state.generation += 1;
      state.playing = false;
      clearTimer();
      return state.pos;
    },
  };
}
