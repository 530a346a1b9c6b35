"""Serves AdmissionReviews with Python Kopf's own admission engine (1.45.2), as its webhook
server does: one `{"review": ..., "id": ...}` per line on stdin, one `{"status": ..., "body":
...}` per line on stdout. The handlers are those of `admission.rs`, written for Kopf."""
import asyncio
import json
import sys

import kopf
from kopf._cogs.configs import configuration
from kopf._cogs.structs import ephemera, references
from kopf._core.engines import admission
from kopf._core.intents import registries
from kopf._core.reactor import inventory

registry = registries.OperatorRegistry()


@kopf.on.validate('kopf.dev', 'v1', 'kopfexamples', operations=['CREATE', 'UPDATE'], registry=registry)
def check_size(spec, memo, warnings, userinfo, **_):
    limit = memo.get('limit', 100)
    if spec.get('size') is None:
        warnings.append(f"{userinfo.get('username', 'someone')} left spec.size out")
    size = spec.get('size')
    if size is not None and size > limit:
        raise kopf.AdmissionError(f"spec.size is at most {limit}", code=422)


@kopf.on.mutate('kopfexamples', operations=['CREATE'], registry=registry)
def default_size(spec, patch, **_):
    if spec.get('size') is None:
        patch.spec['size'] = 1


@kopf.on.validate('kopfexamples', id='protect', labels={'protected': 'yes'}, registry=registry)
def protect(operation, name, **_):
    if operation == 'DELETE':
        raise kopf.AdmissionError(f"{name} is protected", code=403)


async def main() -> None:
    settings = configuration.OperatorSettings()
    insights = references.Insights()
    insights.webhook_resources.add(references.Resource(
        group='kopf.dev', version='v1', plural='kopfexamples', kind='KopfExample',
        singular='kopfexample', namespaced=True, preferred=True, verbs=['list', 'watch', 'patch'],
    ))
    memobase = kopf.Memo(limit=10)
    for line in sys.stdin:
        case = json.loads(line)
        try:
            response = await admission.serve_admission_request(
                case['review'],
                webhook=case.get('id'),
                settings=settings,
                memories=inventory.ResourceMemories(),
                memobase=memobase,
                registry=registry,
                insights=insights,
                indices={},
            )
            print(json.dumps({'status': 200, 'body': response}), flush=True)
        except admission.AmbiguousResourceError:
            print(json.dumps({'status': 409}), flush=True)
        except admission.UnknownResourceError:
            print(json.dumps({'status': 404}), flush=True)
        except admission.WebhookError:
            print(json.dumps({'status': 400}), flush=True)


asyncio.run(main())
