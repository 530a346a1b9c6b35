"""The Python Kopf side of `operator-bench`: the same job as `bench-kopf-rs-operator`.

Run as `python -m kopf run --standalone -A bench/operators/kopf_operator.py` with BENCH_MODE
choosing the handlers (create, update, delete, startup, idle, busy, daemon) and BENCH_RUN the run id.
Every handler that writes returns {"at": <unix seconds>, "run": BENCH_RUN} (and "seq" for
updates), which Kopf stores in status.<handler id>; busy handlers and daemons print "BENCH-STARTED <name>".
Settings stay Kopf's defaults.
"""

import asyncio
import os
import time

import kopf

MODE = os.environ.get("BENCH_MODE", "create")
RUN = os.environ.get("BENCH_RUN", "0")
RESOURCE = ("kopf.dev", "v1", "kopfexamples")

if MODE not in ("create", "update", "delete", "startup", "idle", "busy", "daemon"):
    raise SystemExit(f"BENCH_MODE={MODE!r} is not one of create, update, delete, startup, idle, busy, daemon")


def mark(seq=None):
    value = {"at": time.time(), "run": RUN}
    if seq is not None:
        value["seq"] = seq
    return value


if MODE in ("create", "update", "delete", "startup"):
    @kopf.on.create(*RESOURCE)
    async def create_fn(**_):
        return mark()

if MODE == "update":
    @kopf.on.update(*RESOURCE)
    async def update_fn(spec, **_):
        return mark(spec.get("seq"))

if MODE == "startup":
    @kopf.on.resume(*RESOURCE)
    async def resume_fn(**_):
        return mark()

if MODE == "delete":
    @kopf.on.delete(*RESOURCE)
    async def delete_fn(**_):
        pass

if MODE == "idle":
    @kopf.on.event(*RESOURCE)
    async def event_fn(**_):
        pass

if MODE == "busy":
    @kopf.on.create(*RESOURCE)
    async def create_fn(name, **_):
        print(f"BENCH-STARTED {name}", flush=True)
        await asyncio.sleep(3600)
        return mark()

if MODE == "daemon":
    @kopf.daemon(*RESOURCE)
    async def daemon_fn(name, stopped, **_):
        print(f"BENCH-STARTED {name}", flush=True)
        await stopped.wait()
