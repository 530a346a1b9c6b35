"""Talks to the fake API server over HTTPS with the official `kubernetes` Python client.

Run by kopf-testing/fake-apiserver/tests/apiserver/python_tls.rs against a server that serves TLS and requires
a token, with KUBECONFIG pointing at the kubeconfig it wrote:

    python client_tls.py CA_FILE TOKEN

Every check is one JSON line on stdout:

1. from the kubeconfig (its certificate-authority-data and token): lists namespaces and
   creates a ConfigMap;
2. configured by hand (host, ssl_ca_cert, the bearer token): reads the ConfigMap back and
   watches ConfigMaps until the server ends the watch;
3. without the CA: the handshake fails certificate verification;
4. with a wrong token: a 401 Status.
"""

import json
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NAMESPACE = "default"


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def main():
    ca_file, token = sys.argv[1:3]

    # 1. The kubeconfig the server wrote: its CA and its token.
    config.load_kube_config()
    from_kubeconfig = client.Configuration.get_default_copy()
    core = client.CoreV1Api()
    namespaces = core.list_namespace()
    emit("listed",
         host=from_kubeconfig.host,
         namespaces=sorted(item.metadata.name for item in namespaces.items))
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="from-python-tls"),
                              data={"over": "tls"})
    created = core.create_namespaced_config_map(NAMESPACE, body)
    emit("created", name=created.metadata.name, data=created.data)

    # 2. By hand: the host, the CA file, the token.
    configuration = client.Configuration()
    configuration.host = from_kubeconfig.host
    configuration.ssl_ca_cert = ca_file
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    configuration.retries = False
    core = client.CoreV1Api(client.ApiClient(configuration))
    read = core.read_namespaced_config_map("from-python-tls", NAMESPACE)
    events = [
        (event["type"], event["object"].metadata.name)
        for event in watch.Watch().stream(core.list_namespaced_config_map, NAMESPACE,
                                          timeout_seconds=1)
    ]
    emit("by-hand", data=read.data, events=events)

    # 3. Without the CA: the server's certificate is not trusted.
    untrusting = client.Configuration()
    untrusting.host = from_kubeconfig.host
    untrusting.api_key = configuration.api_key
    untrusting.api_key_prefix = configuration.api_key_prefix
    untrusting.retries = False
    try:
        client.CoreV1Api(client.ApiClient(untrusting)).list_namespace()
        emit("untrusted", error=None)
    except ApiException as error:  # the client's wrapping of urllib3's SSLError
        emit("untrusted", status=error.status, error=str(error.reason))

    # 4. A wrong token.
    wrong = client.Configuration()
    wrong.host = from_kubeconfig.host
    wrong.ssl_ca_cert = ca_file
    wrong.api_key = {"authorization": "wrong"}
    wrong.api_key_prefix = {"authorization": "Bearer"}
    wrong.retries = False
    try:
        client.CoreV1Api(client.ApiClient(wrong)).list_namespace()
        emit("wrong-token", status=None)
    except ApiException as error:
        emit("wrong-token", status=error.status, body=json.loads(error.body))

    emit("done")


if __name__ == "__main__":
    main()
