// Every request the portal makes: relative to the origin it was served from (kubectl proxy, or
// an authenticating proxy), so kube-apiserver and poddebug authorize each one as the user.

export const GROUP = 'poddebug.dev';
export const GV = `/apis/${GROUP}/v1alpha1`;

// The API root: everything before `apis/poddebug.dev/v1alpha1/portal/` in the page's path, so
// a proxy serving the API under a prefix (kubectl proxy --api-prefix=/k8s/) works too.
export function apiRoot(pathname = window.location.pathname) {
  const at = pathname.indexOf(`${GV}/portal`);
  return at > 0 ? pathname.slice(0, at) : '';
}

// An error carrying the server's Status (or a description of what else came back).
export class ApiError extends Error {
  constructor(code, status, fallback) {
    super((status && status.message) || fallback || `HTTP ${code}`);
    this.code = code;
    this.status = status;
    this.reason = status && status.reason;
  }
}

async function errorOf(resp) {
  const text = await resp.text();
  let status = null;
  try {
    const parsed = JSON.parse(text);
    if (parsed && parsed.kind === 'Status') status = parsed;
  } catch (_) {
    // not JSON: a proxy's own page, or plain text from the kubelet
  }
  const fallback = `${resp.status} ${resp.statusText}${text ? `: ${text.slice(0, 300)}` : ''}`;
  return new ApiError(resp.status, status, fallback);
}

export async function request(method, path, body) {
  const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  // A GET that fails at the network level (a proxy's kept-alive connection closed under it)
  // is sent once more; a POST or DELETE is not, as it may have been applied.
  const attempts = method === 'GET' ? 2 : 1;
  let resp;
  for (let attempt = 1; ; attempt += 1) {
    try {
      resp = await fetch(apiRoot() + path, init);
      break;
    } catch (e) {
      if (attempt >= attempts) throw new ApiError(0, null, `cannot reach the server: ${e.message}`);
      await new Promise((r) => setTimeout(r, 300));
    }
  }
  if (!resp.ok) throw await errorOf(resp);
  const type = resp.headers.get('Content-Type') || '';
  return type.includes('json') ? resp.json() : resp.text();
}

export const get = (path) => request('GET', path);

// The attach ticket the server hands a page of its own origin with a debug container, a copy
// or a node debug container it reads (`Poddebug-Attach-Ticket`), or null.
export async function attachTicket(path) {
  try {
    const resp = await fetch(apiRoot() + path, {
      headers: { Accept: 'application/json' },
      credentials: 'same-origin',
      cache: 'no-store',
    });
    return resp.ok ? resp.headers.get('Poddebug-Attach-Ticket') : null;
  } catch (_) {
    return null;
  }
}
export const post = (path, body) => request('POST', path, body);
export const del = (path) => request('DELETE', path);

// GET that answers null on 404 (for optional APIs such as recordings).
export async function getOptional(path) {
  try {
    return await get(path);
  } catch (e) {
    if (e.code === 404) return null;
    throw e;
  }
}

// GET that answers null when the server or the connection failed for now (a 5xx, no answer),
// for reads worth making again; refusals and absence are thrown.
export async function getTransient(path) {
  try {
    return await get(path);
  } catch (e) {
    if (e.code === 0 || e.code >= 500) return null;
    throw e;
  }
}

const enc = encodeURIComponent;

export const paths = {
  namespaces: () => '/api/v1/namespaces',
  pods: (ns) => `/api/v1/namespaces/${enc(ns)}/pods`,
  pod: (ns, pod) => `/api/v1/namespaces/${enc(ns)}/pods/${enc(pod)}`,
  debugList: (ns, pod) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/debug`,
  debug: (ns, pod, name) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/debug/${enc(name)}`,
  log: (ns, pod, name) =>
    `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/log?container=${enc(name)}&tailLines=1000`,
  // `mode`: how to take part in another user's session (peer, observer, moderator); observers
  // and moderators never send input, so they attach without stdin.
  attach: (ns, pod, name, mode) => {
    const stdin = mode !== 'observer' && mode !== 'moderator';
    const base = `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/attach?container=${enc(name)}&stdin=${stdin}&stdout=true&tty=true`;
    return mode ? `${base}&mode=${enc(mode)}` : base;
  },
  sessions: (ns, pod) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/sessions`,
  session: (ns, pod, id) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/sessions/${enc(id)}`,
  recordings: (ns, pod) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/recordings`,
  recording: (ns, pod, name) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/recordings/${enc(name)}`,
  // The part of a recording a player needs from session time `start` (to `end`, null: the end).
  recordingRange: (ns, pod, name, start, end) =>
    `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/recordings/${enc(name)}?start=${Number(start)}${
      end === null || end === undefined ? '' : `&end=${Number(end)}`
    }`,
  recordingCommands: (ns, pod, name) =>
    `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/recordings/${enc(name)}/commands`,
  copy: (ns, pod) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/copy`,
  copies: (ns, pod) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/copies`,
  copyOf: (ns, pod, name) => `${GV}/namespaces/${enc(ns)}/pods/${enc(pod)}/copies/${enc(name)}`,
  // The copies of `pod` as core pods (poddebug labels each with the pod it copies).
  podsCopying: (ns, pod) => `/api/v1/namespaces/${enc(ns)}/pods?labelSelector=${enc(`poddebug.dev/copy-of=${pod}`)}`,
  nodes: () => '/api/v1/nodes',
  nodeDebugAll: () => `${GV}/nodedebugcontainers`,
  nodeDebugList: (node) => `${GV}/nodes/${enc(node)}/debug`,
  nodeDebug: (node, name) => `${GV}/nodes/${enc(node)}/debug/${enc(name)}`,
  nodeAttach: (node, name) => `${GV}/nodes/${enc(node)}/debug/${enc(name)}/attach?stdin=true&stdout=true&tty=true`,
  nodeLog: (node, name) => `${GV}/nodes/${enc(node)}/debug/${enc(name)}/log?tailLines=1000`,
  profiles: () => `${GV}/debugprofiles`,
  requests: (ns) => `${GV}/namespaces/${enc(ns)}/debugrequests`,
  request: (ns, name) => `${GV}/namespaces/${enc(ns)}/debugrequests/${enc(name)}`,
  allRequests: () => `${GV}/debugrequests`,
  ssar: () => '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
};

// Whether the user may `verb` the resource, asked with a SelfSubjectAccessReview.
export async function mayI(attrs) {
  const review = await post(paths.ssar(), {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: { resourceAttributes: attrs },
  });
  return Boolean(review && review.status && review.status.allowed);
}

// What the user may do with the live sessions of pod `pod` (one SelfSubjectAccessReview each):
// join or observe (`pods/debug`), moderate or terminate (`pods/sessions`). A failed review
// answers false: the button is not shown, and the server decides anyway.
export async function sessionRights(ns, pod) {
  const ask = (verb, subresource) =>
    mayI({ namespace: ns, group: GROUP, resource: 'pods', subresource, verb, name: pod }).catch(() => false);
  const [join, observe, moderate, terminate] = await Promise.all([
    ask('join', 'debug'),
    ask('observe', 'debug'),
    ask('moderate', 'sessions'),
    ask('delete', 'sessions'),
  ]);
  return { join, observe, moderate, terminate };
}

// The profiles the user may use: those that need no permission, and those a
// SelfSubjectAccessReview for `use` on `debugprofiles/NAME` allows.
export async function usableProfiles() {
  const list = await get(paths.profiles());
  const items = (list && list.items) || [];
  const checks = items.map(async (p) => {
    const name = p.metadata && p.metadata.name;
    if (!name) return null;
    if (!p.requiresUsePermission) return p;
    try {
      return (await mayI({ group: GROUP, resource: 'debugprofiles', verb: 'use', name })) ? p : null;
    } catch (_) {
      return null;
    }
  });
  return (await Promise.all(checks)).filter(Boolean);
}

// The profiles the user may run node debug containers with: every one a SelfSubjectAccessReview
// for `use` allows (a node debug container always needs it, whatever the profile).
export async function usableNodeProfiles() {
  const list = await get(paths.profiles());
  const names = ((list && list.items) || []).map((p) => p.metadata && p.metadata.name).filter(Boolean);
  const checks = names.map((name) =>
    mayI({ group: GROUP, resource: 'debugprofiles', verb: 'use', name }).then(
      (ok) => (ok ? name : null),
      () => null,
    ),
  );
  return (await Promise.all(checks)).filter(Boolean);
}

// A watch of the list at `path` from `resourceVersion`: `onEvent({type, object})` for every
// event, until the server ends it (resolves) or `signal` aborts it.
export async function watch(path, resourceVersion, signal, onEvent) {
  const sep = path.includes('?') ? '&' : '?';
  const rv = resourceVersion ? `&resourceVersion=${encodeURIComponent(resourceVersion)}` : '';
  const resp = await fetch(`${apiRoot()}${path}${sep}watch=true${rv}`, {
    headers: { Accept: 'application/json' },
    credentials: 'same-origin',
    signal,
  });
  if (!resp.ok) throw await errorOf(resp);
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let nl = buffer.indexOf('\n');
    while (nl >= 0) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (line) {
        try {
          onEvent(JSON.parse(line));
        } catch (_) {
          // a line that is not an event: ignored
        }
      }
      nl = buffer.indexOf('\n');
    }
  }
}

// The WebSocket URL of a path, on the page's own origin.
export function wsUrl(path) {
  const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${window.location.host}${apiRoot()}${path}`;
}
