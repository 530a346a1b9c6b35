"""The Python Kopf side of the differential suite (kopf-rs' parity/): the operator that the
JSON file PARITY_SPEC describes, on KopfExamples (kopf.dev/v1, kopfexamples), each handler
appending its calls as JSON lines to the file PARITY_CALLS. Its twin for kopf-rs is
parity/src/operator.rs: the two must stay in step.

    PARITY_SPEC=spec.json PARITY_CALLS=calls.jsonl \
        kopf run --standalone --namespace default --log-format plain parity_operator.py
"""

import asyncio
import collections.abc
import json
import logging
import os

import kopf

GROUP, VERSION, PLURAL = "kopf.dev", "v1", "kopfexamples"
CALLS = os.environ["PARITY_CALLS"]
with open(os.environ["PARITY_SPEC"], encoding="utf-8") as spec_file:
    SPEC = json.load(spec_file)


# The bodies that change handlers saw, by object name, for the startup task's Events.
SEEN = {}
# The tasks of one's own, kept from the garbage collector.
TASKS = []


def record(call):
    with open(CALLS, "a", encoding="utf-8") as calls:
        calls.write(json.dumps(call) + "\n")


def plain(value):
    """Kopf's bodies and diffs as plain JSON."""
    return json.loads(json.dumps(value, default=lambda o: getattr(o, "value", str(o))))


def plain_diff(diff):
    return [[getattr(op, "value", op), list(field), plain(old), plain(new)]
            for op, field, old, new in diff]


def lookup(body, path):
    value = body
    for key in path.split("."):
        if not isinstance(value, collections.abc.Mapping) or key not in value:
            return None, False
        value = value[key]
    return value, True


def number(value):
    """A duration as a user writes it: 1 for a whole second, 0.5 otherwise (Kopf prints it)."""
    return int(value) if float(value).is_integer() else value


def match(filter_):
    """A label, annotation or value filter as Kopf takes it."""
    (kind, argument), = filter_.items() if isinstance(filter_, dict) else [(filter_, None)]
    if kind == "present":
        return kopf.PRESENT
    if kind == "absent":
        return kopf.ABSENT
    if kind == "equals":
        return argument
    if kind == "callable":
        return lambda value, **_: value == argument
    raise ValueError(f"unknown filter {filter_!r}")


def options(spec, change):
    """The keyword arguments of Kopf's decorators for this handler spec."""
    kwargs = {"id": spec["id"]}
    if spec.get("labels"):
        kwargs["labels"] = {key: match(f) for key, f in spec["labels"]}
    if spec.get("annotations"):
        kwargs["annotations"] = {key: match(f) for key, f in spec["annotations"]}
    if spec.get("when"):
        path, expected = spec["when"]

        def when(body, **_):
            value, found = lookup(body, path)
            return found and value == expected
        kwargs["when"] = when
    if spec.get("errors"):
        kwargs["errors"] = {
            "temporary": kopf.ErrorsMode.TEMPORARY,
            "permanent": kopf.ErrorsMode.PERMANENT,
            "ignored": kopf.ErrorsMode.IGNORED,
        }[spec["errors"]]
    if spec.get("retries") is not None:
        kwargs["retries"] = spec["retries"]
    for key in ("backoff", "timeout"):
        if spec.get(key) is not None:
            kwargs[key] = number(spec[key])
    if spec["kind"] in ("event", "daemon", "timer") and spec.get("field"):
        kwargs["field"] = spec["field"]
        if spec.get("value") is not None:
            kwargs["value"] = match(spec["value"])
    if change:
        if spec.get("field") and spec["kind"] != "field":
            kwargs["field"] = spec["field"]
        for key in ("value", "old", "new"):
            if spec.get(key) is not None:
                kwargs[key] = match(spec[key])
        if spec.get("optional"):
            kwargs["optional"] = True
        if spec.get("deleted"):
            kwargs["deleted"] = True
    return kwargs


def index_content(index):
    """An index as the suite records it: key -> the sorted names under it."""
    return {str(key): sorted(store) for key, store in index.items()}


def behaviour(spec, full_id):
    async def handler(name, namespace, retry=0, reason=None, old=None, new=None, diff=None,
                      type=None, **kwargs):
        call = {"handler": full_id, "namespace": namespace, "name": name}
        if spec["kind"] == "event":
            call.update(type=type)
        elif spec["kind"] == "timer":
            call.update(retry=retry, timer=True)
            if spec.get("field"):
                value, found = lookup(kwargs["body"], spec["field"])
                call.update(value=plain(value) if found else None)
        else:
            call.update(reason=reason, retry=retry, old=plain(old), new=plain(new),
                        diff=plain_diff(diff or []))
        if spec.get("reads"):
            call["index"] = index_content(kwargs[spec["reads"]])
        record(call)
        if reason is not None:
            key = name if namespace == "default" else f"{namespace}/{name}"
            SEEN[key] = dict(kwargs["body"])
        failures = spec.get("fail", [])
        if retry < len(failures):
            failure = failures[retry]
            (kind, argument), = failure.items() if isinstance(failure, dict) else [(failure, None)]
            if kind == "temporary":
                raise kopf.TemporaryError("failed", delay=number(argument))
            if kind == "permanent":
                raise kopf.PermanentError("failed")
            if kind == "arbitrary":
                raise RuntimeError("failed")
            if kind == "sleep":
                await asyncio.sleep(number(argument))
        if spec["kind"] in ("event", "timer"):
            # Nothing to store: Kopf would store a result of an event handler on every event
            # (of a timer on every tick), mostly writes that change nothing, after which it
            # skips the object's changes until its next event (kopf-rs does not; the README
            # lists it).
            return None
        if spec.get("posts_from_task"):
            TASKS.append(asyncio.create_task(post_from_task(dict(kwargs["body"]), full_id)))
        if spec.get("executes"):
            await kopf.execute(fns={
                sub["id"]: behaviour(sub, f"{full_id}/{sub['id']}")
                for sub in spec["executes"]
            })
        for sub in spec.get("subhandlers", []):
            kopf.subhandler(**options(sub, change=False))(
                behaviour(sub, f"{full_id}/{sub['id']}"))
        if spec.get("executes_registered"):
            await kopf.execute()
            await kopf.execute()
        return {"retry": retry}
    return handler


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.watching.server_timeout = 10
    settings.watching.client_timeout = 20
    settings.watching.connect_timeout = 5
    settings.watching.reconnect_backoff = 0.2
    settings.networking.request_timeout = 20
    # Kopf waits this long after a write that changed nothing (an event handler's result
    # stored again), as if its version could still come; kopf-rs does not wait. Shorter than
    # the driver's quiet window, so that Kopf is done when the driver takes it as idle.
    settings.persistence.consistency_timeout = 1
    # What handlers log is posted as Events too, to compare them (off by default since 1.44).
    settings.posting.loggers = True


async def post_when_seen(names):
    """Once a change handler has seen each object, posts Events about it, outside of any
    handler (the spec's `startup_posts`)."""
    for name in names:
        while name not in SEEN:
            await asyncio.sleep(0.05)
        try:
            kopf.info(SEEN[name], reason="Startup", message=f"seen {name}")
            kopf.event(SEEN[name], type="Warning", reason="Noticed", message=f"noticed {name}")
        except LookupError as error:
            # Kopf 1.45.2 keeps its event queue in a context variable set only in the
            # objects' workers (and the tasks they start): see outcome::ALLOWED.
            logging.getLogger("parity").warning("the startup task posted nothing: %r", error)


async def post_from_task(body, full_id):
    """What a handler's task of its own posts, after the handler's call."""
    await asyncio.sleep(0)
    kopf.info(body, reason="FromTask", message=f"posted by a task of {full_id}")


if SPEC.get("startup_posts"):
    @kopf.on.startup()
    async def start_poster(**_):
        # A task of one's own, outside of any handler.
        TASKS.append(asyncio.create_task(post_when_seen(SPEC["startup_posts"])))


def daemon(spec):
    async def handler(name, namespace, stopped, body, **_):
        record({"handler": spec["id"], "namespace": namespace, "name": name, "daemon": "started"})
        if spec.get("poll"):
            # Kopf's body is a live view: read in the loop, it shows the newest state.
            last, unseen = None, True
            while not stopped:
                value, found = lookup(body, spec["poll"])
                value = plain(value) if found else None
                if unseen or value != last:
                    record({"handler": spec["id"], "namespace": namespace, "name": name,
                            "daemon": "polled", "value": value})
                    last, unseen = value, False
                await stopped.wait(0.05)
        else:
            await stopped.wait()
        reason = stopped.reason or kopf.DaemonStoppingReason(0)
        if kopf.DaemonStoppingReason.RESOURCE_DELETED in reason:
            why = "deleted"
        elif kopf.DaemonStoppingReason.FILTERS_MISMATCH in reason:
            why = "filters"
        elif kopf.DaemonStoppingReason.OPERATOR_EXITING in reason:
            why = "exiting"
        else:
            why = "other"
        record({"handler": spec["id"], "namespace": namespace, "name": name, "daemon": why})
    return handler


def index(spec):
    def handler(name, body, **_):
        value, found = lookup(body, spec.get("field") or "spec")
        return {str(value) if not isinstance(value, bool) else str(value).lower(): name} \
            if found else None
    return handler


def background_options(spec):
    kwargs = options(spec, change=False)
    if spec.get("initial_delay") is not None:
        kwargs["initial_delay"] = number(spec["initial_delay"])
    return kwargs


def register(spec, function, behaving_as):
    """Registers the function with the decorator that the spec names."""
    kind = spec["kind"]
    if kind == "daemon":
        kopf.daemon(GROUP, VERSION, PLURAL, **background_options(spec))(daemon(behaving_as))
    elif kind == "timer":
        kwargs = background_options(spec)
        kwargs["interval"] = number(spec.get("interval") or 60)
        if spec.get("idle") is not None:
            kwargs["idle"] = number(spec["idle"])
        kopf.timer(GROUP, VERSION, PLURAL, **kwargs)(function)
    elif kind == "index":
        kopf.index(GROUP, VERSION, PLURAL, **options(spec, change=False))(index(spec))
    elif kind == "event":
        kopf.on.event(GROUP, VERSION, PLURAL, **options(spec, change=False))(function)
    elif kind == "field":
        kopf.on.field(GROUP, VERSION, PLURAL, field=spec["field"],
                      **options(spec, change=True))(function)
    else:
        decorator = getattr(kopf.on, kind)
        decorator(GROUP, VERSION, PLURAL, **options(spec, change=True))(function)


for handler_spec in SPEC["handlers"]:
    handler_function = behaviour(handler_spec, handler_spec["id"])
    register(handler_spec, handler_function, handler_spec)
    # Stacked decorators: the same function object, registered again (as the decorators above
    # the one nearest the function are applied after it).
    for stacked_spec in handler_spec.get("stacked", []):
        register(stacked_spec, handler_function, handler_spec)
