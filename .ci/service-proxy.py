#!/usr/bin/env python3
"""What kube-proxy does for a Service, for the test cluster of .ci/live, which runs none.

../shared/realcluster has no kube-proxy and its kube-apiserver listens on 127.0.0.1 only, so
neither a pod reaching kube-apiserver through the `kubernetes` Service (10.96.0.1:443, what the
kubelet puts in KUBERNETES_SERVICE_HOST) nor the aggregator reaching poddebug's Service by its
ClusterIP would get anywhere. This forwards TCP connections made to a Service's ClusterIP and
port to one of its ready endpoints, read from its EndpointSlices (with kubectl, cached for a
second), as kube-proxy's userspace mode did. TLS passes through untouched.

    service-proxy.py CLUSTER_IP:PORT=NAMESPACE/SERVICE ...
    service-proxy.py CLUSTER_IP:PORT=HOST:PORT ...

The second form forwards to a fixed address: the `kubernetes` Service has no endpoints on this
cluster (kube-apiserver does not publish its loopback address), so its ClusterIP is forwarded to
kube-apiserver's 127.0.0.1:6443 directly. Each CLUSTER_IP must be an address of this host
(.ci/live adds them to `lo`), and pods need a default route to reach it. Runs until
killed; every connection is closed when either side closes. Hand-written because the test
cluster is the only place that needs it and no packaged kube-proxy is at hand.
"""

import asyncio
import json
import random
import subprocess
import sys
import time

CACHE_SECONDS = 1.0
_cache = {}


def endpoints(namespace, service):
    """Ready (address, port) pairs of the Service's EndpointSlices."""
    now = time.monotonic()
    hit = _cache.get((namespace, service))
    if hit and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    out = subprocess.run(
        ["kubectl", "get", "endpointslices", "-n", namespace,
         "-l", f"kubernetes.io/service-name={service}", "-o", "json"],
        capture_output=True, timeout=10, check=False)
    found = []
    if out.returncode == 0:
        for s in json.loads(out.stdout).get("items", []):
            ports = [p.get("port") for p in s.get("ports") or [] if p.get("port")]
            for e in s.get("endpoints") or []:
                if (e.get("conditions") or {}).get("ready") is False:
                    continue
                for a in e.get("addresses") or []:
                    found.extend((a, p) for p in ports[:1])
    _cache[(namespace, service)] = (now, found)
    return found


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except (ConnectionError, OSError):
            pass


def handler(target):
    async def handle(client_r, client_w):
        if "/" in target:
            namespace, service = target.split("/", 1)
            eps = await asyncio.to_thread(endpoints, namespace, service)
        else:
            host, port = target.rsplit(":", 1)
            eps = [(host, int(port))]
        if not eps:
            print(f"{target}: no ready endpoint", file=sys.stderr, flush=True)
            client_w.close()
            return
        host, port = random.choice(eps)
        try:
            up_r, up_w = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
        except (OSError, asyncio.TimeoutError) as e:
            print(f"{target}: {host}:{port}: {e}", file=sys.stderr, flush=True)
            client_w.close()
            return
        await asyncio.gather(pipe(client_r, up_w), pipe(up_r, client_w))
    return handle


async def main(specs):
    servers = []
    for spec in specs:
        listen, target = spec.split("=", 1)
        ip, port = listen.rsplit(":", 1)
        servers.append(await asyncio.start_server(
            handler(target), ip, int(port), reuse_address=True))
        print(f"forwarding {listen} to {target}", file=sys.stderr, flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1:]))
