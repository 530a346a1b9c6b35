"""Prints the public surface of the installed Kopf, one name a line: `section<TAB>name`.

Read by `kopf-core/tests/coverage/main.rs`, which compares it with the coverage table. Everything
is read from Kopf itself (its exports, its decorators' signatures, its causes' keyword
arguments, its settings' dataclasses, its click commands), so a new Kopf name shows up
without anyone listing it by hand.
"""
import dataclasses
import inspect
import sys

import kopf
import kopf.on
from kopf._core.intents import causes
from kopf.cli import main as cli


def emit(section, name):
    print(f"{section}\t{name}")


def exports():
    """`kopf.__all__`, and the public functions that `dir(kopf)` has beyond it."""
    public = {
        name for name, value in vars(kopf).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    for name in sorted(set(kopf.__all__) | public):
        emit("export", f"kopf.{name}")


def decorators():
    """The decorators of `kopf.on` (`kopf.daemon`, `kopf.timer`, `kopf.index` are the same)."""
    return sorted(
        name for name, value in vars(kopf.on).items()
        if not name.startswith("_") and inspect.isfunction(value)
        and value.__module__ == kopf.on.__name__
        and name != "register"  # a function, not a decorator: `kopf.register` is exported
    )


def options():
    for decorator in decorators():
        signature = inspect.signature(getattr(kopf.on, decorator))
        for parameter in signature.parameters.values():
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
                emit("option", f"@kopf.on.{decorator}({parameter.name}=)")


class Anything:
    """A stand-in for every field of a cause, enough for the cause to list its kwargs."""

    def __getattr__(self, name):
        return Anything()

    def __iter__(self):
        return iter(())


# Which cause each decorator's handlers get (`kopf/_core/reactor`, `kopf/_core/engines`).
CAUSES = {
    "startup": causes.ActivityCause,
    "cleanup": causes.ActivityCause,
    "probe": causes.ActivityCause,
    "login": causes.ActivityCause,
    "resume": causes.ChangingCause,
    "create": causes.ChangingCause,
    "update": causes.ChangingCause,
    "delete": causes.ChangingCause,
    "field": causes.ChangingCause,
    "subhandler": causes.ChangingCause,
    "event": causes.WatchingCause,
    "index": causes.IndexingCause,
    "daemon": causes.DaemonCause,
    "timer": causes.DaemonCause,
    "validate": causes.WebhookCause,
    "mutate": causes.WebhookCause,
}

# What `execute_handler_once` adds to every cause's kwargs (`_core/actions/execution.py`).
INVOCATION = ["param", "retry", "started", "runtime"]


def arguments():
    missing = sorted(set(decorators()) - set(CAUSES))
    if missing:
        sys.exit(f"no cause known for the decorators {missing}: add them to CAUSES")
    for decorator, cause in CAUSES.items():
        instance = cause.__new__(cause)
        for field in dataclasses.fields(cause):
            setattr(instance, field.name, Anything())
        instance.indices = {}
        names = set(instance.async_kwargs) | set(INVOCATION)
        for name in sorted(names):
            emit("argument", f"@kopf.on.{decorator} fn({name})")


def settings():
    def walk(obj, prefix):
        cls = type(obj)
        for field in dataclasses.fields(obj):
            if field.name.startswith("_"):
                continue
            value = getattr(obj, field.name)
            if dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{field.name}.")
            else:
                emit("setting", f"{prefix}{field.name}")
        # Public properties: aliases and computed settings (`execution.max_workers`).
        for name, member in vars(cls).items():
            if isinstance(member, property) and not name.startswith("_"):
                emit("setting", f"{prefix}{name}")

    walk(kopf.OperatorSettings(), "settings.")


def commands():
    for command in ("run", "freeze", "resume"):
        for param in cli.commands[command].params:
            for opt in param.opts + param.secondary_opts:
                if opt.startswith("--") or param.param_type_name == "argument":
                    name = opt if opt.startswith("--") else opt.upper()
                    emit("cli", f"kopf {command} {name}")


exports()
options()
arguments()
settings()
commands()
