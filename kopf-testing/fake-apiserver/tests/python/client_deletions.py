"""The official Python client reads what deletions and pods' logs answer.

Run by kopf-testing/fake-apiserver/tests/apiserver/deletion.rs with KUBECONFIG pointing at the
fake server, where the KopfExample CRD is established. Exits non-zero on the first failure;
prints "all good" at the end.

1. Deleting a ConfigMap answers a V1Status naming it (kind: the plural), not the ConfigMap.
2. Deleting a custom object without finalizers answers the same Status, as a dict.
3. Deleting a pod answers the pod (its storage returns deleted objects).
4. The log of a pod on no node is empty.
"""

from kubernetes import client, config

NAMESPACE = "default"

config.load_kube_config()
core = client.CoreV1Api()
custom = client.CustomObjectsApi()

created = core.create_namespaced_config_map(
    NAMESPACE, {"metadata": {"name": "doomed"}, "data": {"k": "v"}})
status = core.delete_namespaced_config_map("doomed", NAMESPACE)
assert isinstance(status, client.V1Status), type(status)
assert status.status == "Success", status
assert status.details.name == "doomed", status
assert status.details.kind == "configmaps", status
assert status.details.uid == created.metadata.uid, status

example = custom.create_namespaced_custom_object(
    "kopf.dev", "v1", NAMESPACE, "kopfexamples",
    {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "doomed"}})
answer = custom.delete_namespaced_custom_object(
    "kopf.dev", "v1", NAMESPACE, "kopfexamples", "doomed")
assert answer["kind"] == "Status", answer
assert answer["details"] == {
    "name": "doomed", "group": "kopf.dev", "kind": "kopfexamples",
    "uid": example["metadata"]["uid"],
}, answer

core.create_namespaced_pod(NAMESPACE, {
    "metadata": {"name": "unscheduled"},
    "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
})
assert core.read_namespaced_pod_log("unscheduled", NAMESPACE) == ""
pod = core.delete_namespaced_pod("unscheduled", NAMESPACE)
assert isinstance(pod, client.V1Pod), type(pod)
assert pod.metadata.name == "unscheduled", pod.metadata

print("all good")
