"""A small Kopf operator for KopfExample objects (kopf.dev/v1, kopfexamples), run by
kopf-testing/fake-apiserver/tests/apiserver/python.rs against the fake API server:

    kopf run --standalone --namespace default --verbose kopf_operator.py

Every handler leaves something the test can see: the create and update handlers return
values, which Kopf stores in status.<handler id>; the create handler also posts a Kubernetes
Event; the delete handler writes a ConfigMap "deleted-<name>" and prints a marker to the log.
Storage settings stay Kopf's defaults, so the objects carry Kopf's usual annotations and
finalizer.
"""

import logging

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "kopf.dev", "v1", "kopfexamples"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger, **_):
    # Short timeouts: watches are re-established often, so slow shutdowns show up as failures.
    settings.watching.server_timeout = 10
    settings.watching.client_timeout = 20
    settings.watching.connect_timeout = 5
    settings.watching.reconnect_backoff = 0.2
    settings.networking.request_timeout = 20
    settings.posting.level = logging.INFO
    kubernetes.config.load_kube_config()  # for the delete handler's own requests
    logger.info("KOPF-OPERATOR-CONFIGURED")


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_fn(body, spec, name, logger, **_):
    logger.info(f"KOPF-CREATE-HANDLER name={name} field={spec.get('field')}")
    kopf.info(body, reason="Created", message=f"created with field={spec.get('field')}")
    return {"message": f"created with {spec.get('field')}"}


@kopf.on.update(GROUP, VERSION, PLURAL)
def update_fn(spec, name, diff, logger, **_):
    logger.info(f"KOPF-UPDATE-HANDLER name={name} diff={list(diff)!r}")
    return {"message": f"updated to {spec.get('field')}"}


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_fn(spec, name, namespace, logger, **_):
    core = kubernetes.client.CoreV1Api()
    try:
        core.create_namespaced_config_map(namespace, kubernetes.client.V1ConfigMap(
            metadata=kubernetes.client.V1ObjectMeta(name=f"deleted-{name}"),
            data={"field": str(spec.get("field"))},
        ))
    except kubernetes.client.ApiException as e:
        if e.status != 409:  # written by an earlier attempt of this handler
            raise
    logger.info(f"KOPF-DELETE-HANDLER name={name}")
