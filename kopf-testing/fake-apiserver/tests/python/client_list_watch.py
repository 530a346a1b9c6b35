"""Drives the fake API server with the official `kubernetes` Python client.

Run by kopf-testing/fake-apiserver/tests/apiserver/python.rs with KUBECONFIG pointing at the fake server.
Every step is one JSON line on stdout; the Rust test reads them and acts in between:

1. lists, creates and re-lists ConfigMaps (CoreV1Api);
2. watches ConfigMaps from the created object's resourceVersion (with timeoutSeconds) while
   the test creates, changes and deletes the ConfigMap "watched"; stops after its DELETED;
3. watches briefly with timeoutSeconds=1 and sees the server end the stream by itself;
4. lists, gets, merge-patches (main resource and status) a KopfExample (CustomObjectsApi),
   and gets a missing one (a 404 Status);
5. on a line from stdin (after the test compacted the history), watches from an expired
   resourceVersion and reports the 410.
"""

import json
import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NAMESPACE = "default"
GROUP, VERSION, PLURAL = "kopf.dev", "v1", "kopfexamples"


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def main():
    config.load_kube_config()  # from $KUBECONFIG
    core = client.CoreV1Api()

    # 1. List, create, list with a label selector.
    listed = core.list_namespaced_config_map(NAMESPACE)
    emit("listed",
         names=sorted(item.metadata.name for item in listed.items),
         resource_version=listed.metadata.resource_version)
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="from-python", labels={"made-by": "python"}),
        data={"hello": "world"},
    )
    created = core.create_namespaced_config_map(NAMESPACE, body)
    emit("created",
         name=created.metadata.name,
         uid=created.metadata.uid,
         resource_version=created.metadata.resource_version,
         data=created.data)
    relisted = core.list_namespaced_config_map(NAMESPACE, label_selector="made-by=python")
    emit("relisted", names=sorted(item.metadata.name for item in relisted.items))

    # 2. Watch from the created object's version: only the changes after it.
    emit("watching", resource_version=created.metadata.resource_version)
    w = watch.Watch()
    last_rv = created.metadata.resource_version
    for event in w.stream(core.list_namespaced_config_map, NAMESPACE,
                          resource_version=created.metadata.resource_version,
                          timeout_seconds=60):
        obj = event["object"]
        last_rv = obj.metadata.resource_version
        emit("event",
             type=event["type"],
             name=obj.metadata.name,
             resource_version=obj.metadata.resource_version,
             data=obj.data)
        if event["type"] == "DELETED" and obj.metadata.name == "watched":
            w.stop()
    emit("watch-ended")

    # 3. A short watch: the server ends it after timeoutSeconds, with no events.
    started = time.monotonic()
    events = [e["type"] for e in watch.Watch().stream(
        core.list_namespaced_config_map, NAMESPACE, resource_version=last_rv, timeout_seconds=1)]
    emit("short-watch-ended", events=events, seconds=time.monotonic() - started)

    # 4. Custom objects.
    custom = client.CustomObjectsApi()
    items = custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)
    emit("custom-listed",
         kind=items["kind"],
         api_version=items["apiVersion"],
         names=sorted(item["metadata"]["name"] for item in items["items"]))
    got = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "example-1")
    emit("custom-got", kind=got["kind"], spec=got["spec"], generation=got["metadata"].get("generation"))
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, PLURAL, "example-1",
        {"metadata": {"labels": {"patched-by": "python"}},
         "spec": {"field": "patched", "removed": None}},
    )
    emit("custom-patched",
         spec=patched["spec"],
         labels=patched["metadata"].get("labels"),
         generation=patched["metadata"].get("generation"))
    status_patched = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, NAMESPACE, PLURAL, "example-1", {"status": {"seen": True}},
    )
    emit("custom-status-patched",
         status=status_patched.get("status"),
         generation=status_patched["metadata"].get("generation"))
    try:
        custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "missing")
    except ApiException as e:
        status = json.loads(e.body)
        emit("custom-missing", code=e.status, reason=status.get("reason"), kind=status.get("kind"))
    else:
        emit("custom-missing", code=200)

    # 5. After the test compacts the history: a watch from an old version fails with 410.
    emit("ready-for-expired", resource_version=created.metadata.resource_version)
    sys.stdin.readline()
    try:
        for event in watch.Watch().stream(core.list_namespaced_config_map, NAMESPACE,
                                          resource_version=created.metadata.resource_version,
                                          timeout_seconds=5):
            emit("expired-event", type=event["type"])
    except ApiException as e:
        emit("expired", code=e.status, reason=e.reason)
    else:
        emit("expired", code=None)

    emit("done")


if __name__ == "__main__":
    main()
