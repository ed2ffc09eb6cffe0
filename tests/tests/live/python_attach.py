"""Attach to a poddebug debug container with the official Kubernetes Python client (PyPI
`kubernetes`), as a program using the library does: `kubernetes.stream.stream()` over an API
method written as the generated `CoreV1Api.connect_get_namespaced_pod_attach` is, so that the
library's own WebSocket (websocket-client) makes the handshake and sends the `Origin` it always
sends: the server it dials.

usage: python_attach.py SERVER NAMESPACE POD CONTAINER TEXT EXPECT

Loads the kubeconfig ($KUBECONFIG), dials SERVER instead of the kubeconfig's server (same CA and
credentials), types TEXT into CONTAINER and reads its output until EXPECT shows (30 s at most).
Prints one JSON object: `origin` (the Origin header the library sent), and `output`, or
`refused` (the handshake's status line and body). Exit code 0 when EXPECT was read, 3 when the
handshake was refused with 403, 1 otherwise.
"""

import json
import sys
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream
from websocket import _handshake

# Only observes: the library builds its handshake as it always does; the Origin it wrote is
# recorded so that the test can say which one the server judged.
SENT = {}
_build_headers = _handshake._get_handshake_headers


def _recording_headers(*args, **kwargs):
    headers, key = _build_headers(*args, **kwargs)
    for line in headers:
        name, _, value = line.partition(":")
        if name.strip().lower() == "origin":
            SENT["origin"] = value.strip()
    return headers, key


_handshake._get_handshake_headers = _recording_headers


class PoddebugV1alpha1Api:
    """The attach of poddebug.dev/v1alpha1, shaped as the generated API methods are."""

    def __init__(self, api_client):
        self.api_client = api_client

    def connect_get_namespaced_pod_debug_attach(
        self,
        name,
        namespace,
        container,
        stdin=False,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=True,
        _request_timeout=None,
    ):
        params = self.api_client.param_serialize(
            method="GET",
            resource_path="/apis/poddebug.dev/v1alpha1/namespaces/{namespace}/pods/{name}/attach",
            path_params={"name": name, "namespace": namespace},
            query_params=[
                ("container", container),
                ("stderr", stderr),
                ("stdin", stdin),
                ("stdout", stdout),
                ("tty", tty),
            ],
            header_params={"Accept": "*/*"},
            auth_settings=["BearerToken"],
        )
        return self.api_client.call_api(*params, _request_timeout=_request_timeout).response


def main():
    server, namespace, pod, container, text, expect = sys.argv[1:7]
    configuration = client.Configuration()
    config.load_kube_config(client_configuration=configuration)
    configuration.host = server
    api = PoddebugV1alpha1Api(client.ApiClient(configuration))
    try:
        session = stream(
            api.connect_get_namespaced_pod_debug_attach,
            pod,
            namespace,
            container=container,
            stdin=True,
            stdout=True,
            stderr=True,
            tty=False,
            _preload_content=False,
        )
    except ApiException as e:
        refused = "Handshake status 403" in str(e.reason)
        print(json.dumps({"origin": SENT.get("origin"), "refused": str(e.reason)[:2000]}))
        return 3 if refused else 1
    session.write_stdin(text)
    output = ""
    deadline = time.monotonic() + 30
    while session.is_open() and time.monotonic() < deadline and expect not in output:
        session.update(timeout=1)
        if session.peek_stdout():
            output += session.read_stdout()
    session.close()
    print(json.dumps({"origin": SENT.get("origin"), "output": output}))
    return 0 if expect in output else 1


if __name__ == "__main__":
    sys.exit(main())
