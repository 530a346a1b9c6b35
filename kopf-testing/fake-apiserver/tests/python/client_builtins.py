"""The official Python client on the fake server's built-in kinds beyond the basics.

Exits non-zero on the first failure; prints "all good" at the end.
"""

from kubernetes import client, config

config.load_kube_config()
core = client.CoreV1Api()
batch = client.BatchV1Api()
apps = client.AppsV1Api()
authorization = client.AuthorizationV1Api()
policy = client.PolicyV1Api()
networking = client.NetworkingV1Api()

assert core.list_node().items == []

job = batch.create_namespaced_job("default", {
    "metadata": {"name": "once"},
    "spec": {"template": {"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
    }}},
})
assert job.spec.backoff_limit == 6, job.spec
assert job.metadata.generation == 1

stateful = apps.create_namespaced_stateful_set("default", {
    "metadata": {"name": "db"},
    "spec": {
        "serviceName": "db",
        "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}},
                     "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
    },
})
assert stateful.spec.pod_management_policy == "OrderedReady", stateful.spec
assert stateful.spec.replicas == 1

budget = policy.create_namespaced_pod_disruption_budget("default", {
    "metadata": {"name": "db"},
    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
})
assert budget.metadata.name == "db"

ingress = networking.create_namespaced_ingress("default", {
    "metadata": {"name": "web"},
    "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
})
assert ingress.metadata.generation == 1

review = authorization.create_self_subject_access_review({
    "spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}},
})
assert review.status.allowed is True, review.status

names = [sa.metadata.name for sa in core.list_namespaced_service_account("default").items]
assert names == ["default"], names

print("all good")
