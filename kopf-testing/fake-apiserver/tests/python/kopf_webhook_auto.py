"""Python Kopf's WebhookAutoServer against the fake API server over TLS, run by
kopf-testing/fake-apiserver/tests/apiserver/python_tls.rs:

    kopf run --standalone --namespace default --verbose kopf_webhook_auto.py

WebhookAutoServer guesses what cluster it runs next to from the API server's certificate: it
fetches it (`ssl.get_server_certificate` on the API server's host and port, which fails on a
plain-HTTP server), checks it for the server's hostname with certvalidator (the certificate as
its own trust root), and reads /version. Then it serves the webhooks over HTTPS with a
self-signed certificate (certbuilder), and Kopf writes a Validating- and a
MutatingWebhookConfiguration that point at them, with that certificate as the CA bundle; the
fake API server then calls them on writes of ConfigMaps (as Kopf's examples/17-admission).
"""

import re

import kopf


def load_oscrypto():
    """Loads oscrypto (under certvalidator and certbuilder) on OpenSSL 3.0.10 and later.

    oscrypto 1.3.0, the latest on PyPI, reads OpenSSL's version with a pattern that takes one
    digit per part, so "3.0.10" fails with "Error detecting the version of libcrypto"; its
    upstream fix is unreleased. The pattern is widened as that fix does, for this one import.
    """
    original = re.search

    def search(pattern, string, flags=0):
        if pattern == r"\b(\d\.\d\.\d[a-z]*)\b":
            pattern = r"\b(\d+\.\d+\.\d+[a-z]*)\b"
        return original(pattern, string, flags)

    re.search = search
    try:
        import oscrypto.asymmetric  # noqa: F401 (finds libcrypto and checks its version)
    finally:
        re.search = original


load_oscrypto()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger, **_):
    settings.admission.server = kopf.WebhookAutoServer(addr="127.0.0.1")
    settings.admission.managed = "kopf-rs-tls.kopf.dev"
    logger.info("KOPF-WEBHOOK-CONFIGURED")


@kopf.on.validate("configmaps", id="no-forbidden")
def no_forbidden(body, **_):
    if body.get("data", {}).get("forbidden"):
        raise kopf.AdmissionError("forbidden data", code=422)


@kopf.on.mutate("configmaps", id="add-label")
def add_label(patch, **_):
    patch.metadata.setdefault("labels", {})["mutated-by"] = "kopf"
