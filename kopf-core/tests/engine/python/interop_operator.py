"""A Python Kopf operator taking turns with a kopf-rs operator on the same KopfExample objects
(kopf.dev/v1, kopfexamples), run by kopf-core/tests/engine/interop.rs against the fake API
server:

    INTEROP_MODE=succeed kopf run --standalone --namespace default --verbose interop_operator.py

The handler ids are those of the kopf-rs operator in the tests: `create_fn` and `update_fn`
(and `event_fn`, which stores nothing). Every call is appended as a JSON line to the file
named by INTEROP_CALLS (default: calls.jsonl in the working folder), so the test sees exactly
what each handler was given. Storage settings stay Kopf's defaults: the progress annotations
`kopf.zalando.org/<handler-id>` and the diff-base `kopf.zalando.org/last-handled-configuration`.

Modes (INTEROP_MODE):
- succeed: create_fn and update_fn succeed and return what they saw.
- fail-once: create_fn raises a TemporaryError (delay=1) on its first attempt; a later attempt
  records itself and then waits until Kopf cancels it at exit, so nothing more is stored: the
  progress record stays as the first failure left it, whenever the test stops Kopf.
"""

import asyncio
import datetime
import json
import os

import kopf

GROUP, VERSION, PLURAL = "kopf.dev", "v1", "kopfexamples"
MODE = os.environ.get("INTEROP_MODE", "succeed")
CALLS = os.environ.get("INTEROP_CALLS", "calls.jsonl")


def record(**fields):
    with open(CALLS, "a", encoding="utf-8") as f:
        f.write(json.dumps(fields) + "\n")


def iso(moment):
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.isoformat(timespec="microseconds")


def plain_diff(diff):
    return [[getattr(op, "value", op), list(field), old, new] for op, field, old, new in diff]


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger, **_):
    settings.watching.server_timeout = 10
    settings.watching.client_timeout = 20
    settings.watching.connect_timeout = 5
    settings.watching.reconnect_backoff = 0.2
    settings.networking.request_timeout = 20
    settings.posting.enabled = False
    logger.info(f"INTEROP-CONFIGURED mode={MODE}")


@kopf.on.event(GROUP, VERSION, PLURAL)
def event_fn(type, name, **_):
    record(handler="event_fn", name=name, type=type)


@kopf.on.create(GROUP, VERSION, PLURAL)
async def create_fn(name, spec, retry, started, **_):
    record(handler="create_fn", name=name, retry=retry, started=iso(started), spec=dict(spec))
    if MODE == "fail-once":
        if retry == 0:
            raise kopf.TemporaryError("not ready yet", delay=1)
        record(handler="create_fn", name=name, retry=retry, waiting=True)
        await asyncio.Event().wait()  # until Kopf cancels it when it exits
    return {"by": "kopf", "retry": retry}


@kopf.on.update(GROUP, VERSION, PLURAL)
async def update_fn(name, old, new, diff, **_):
    record(handler="update_fn", name=name, old=old, new=new, diff=plain_diff(diff))
    return {"by": "kopf", "field": new.get("spec", {}).get("field")}
