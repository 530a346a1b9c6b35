//! The scenarios: scripted ones, each about one part of Kopf's semantics, and generated ones
//! (seeded random sequences of steps over one operator with every kind of handler).

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Map, Value, json};

use crate::driver::{Scenario, Scope, Step};
use crate::spec::{Failure, HandlerSpec, Kind, Match, OperatorSpec};

/// Every scripted scenario.
pub fn scripted() -> Vec<Scenario> {
    vec![
        lifecycle(),
        fields_and_restarts(),
        filters(),
        errors(),
        subhandlers(),
        executed_subhandlers(),
        executed_registered_subhandlers(),
        startup_events(),
        resumes_and_events(),
        deletions(),
        daemons_and_timers(),
        live_views_and_field_filters(),
        indexes(),
        stacked(),
        namespace_patterns(),
        clusterwide(),
    ]
}

fn handler(kind: Kind, id: &str) -> HandlerSpec {
    HandlerSpec::new(kind, id)
}

fn operator(handlers: Vec<HandlerSpec>) -> OperatorSpec {
    OperatorSpec {
        handlers,
        startup_posts: Vec::new(),
    }
}

fn labelled(name: &str, spec: Value, labels: Value) -> Step {
    Step::Create {
        name: name.into(),
        spec,
        labels: labels.as_object().cloned().unwrap_or_default(),
        annotations: Map::new(),
    }
}

/// Creation, updates of the spec, labels and annotations, deletion with a delete handler (a
/// finalizer); and an object deleted without one.
pub fn lifecycle() -> Scenario {
    let mut update = handler(Kind::Update, "update_fn");
    update.deleted = false;
    Scenario {
        scope: Scope::default(),
        name: "lifecycle".into(),
        operator: operator(vec![
            handler(Kind::Create, "create_fn"),
            update,
            handler(Kind::Delete, "delete_fn"),
        ]),
        steps: vec![
            Step::create("one", json!({"field": "a", "items": [1, 2]})),
            Step::patch("one", json!({"spec": {"field": "b"}})),
            Step::patch(
                "one",
                json!({"spec": {"items": [1, 2, 3], "new": {"x": 1}}}),
            ),
            Step::patch("one", json!({"metadata": {"labels": {"tier": "gold"}}})),
            Step::patch("one", json!({"metadata": {"annotations": {"note": "hi"}}})),
            Step::patch("one", json!({"spec": {"field": null}})),
            Step::delete("one"),
        ],
    }
}

/// Field handlers and updates of a field; restarts without changes (nothing is called) and
/// with changes made while the operator was down.
pub fn fields_and_restarts() -> Scenario {
    let mut update = handler(Kind::Update, "update_field_fn");
    update.field = Some("spec.field".into());
    let mut field = handler(Kind::Field, "field_fn");
    field.field = Some("spec.field".into());
    let mut other = handler(Kind::Field, "other_fn");
    other.field = Some("spec.other".into());
    Scenario {
        scope: Scope::default(),
        name: "fields-and-restarts".into(),
        operator: operator(vec![
            handler(Kind::Create, "create_fn"),
            update,
            field,
            other,
        ]),
        steps: vec![
            Step::create("one", json!({"field": "a"})),
            Step::patch("one", json!({"spec": {"field": "b"}})),
            Step::patch("one", json!({"spec": {"unrelated": 1}})),
            Step::Restart { meanwhile: vec![] },
            Step::Restart {
                meanwhile: vec![
                    Step::patch("one", json!({"spec": {"field": "c", "other": 1}})),
                    Step::create("two", json!({"field": "z"})),
                ],
            },
            Step::patch("two", json!({"spec": {"other": 2}})),
            Step::delete("one"),
            Step::delete("two"),
        ],
    }
}

/// Labels and annotations with values, present, absent and callables; `when`; `value`, `old`
/// and `new` on a field.
pub fn filters() -> Scenario {
    let mut by_label = handler(Kind::Create, "gold_fn");
    by_label.labels = vec![("tier".into(), Match::Equals(json!("gold")))];
    let mut labelled_any = handler(Kind::Update, "labelled_fn");
    labelled_any.labels = vec![("tier".into(), Match::Present)];
    let mut unlabelled = handler(Kind::Update, "unlabelled_fn");
    unlabelled.labels = vec![("tier".into(), Match::Absent)];
    let mut callable = handler(Kind::Update, "silver_fn");
    callable.labels = vec![("tier".into(), Match::Callable(json!("silver")))];
    let mut annotated = handler(Kind::Update, "annotated_fn");
    annotated.annotations = vec![("note".into(), Match::Present)];
    let mut when = handler(Kind::Update, "when_fn");
    when.when = Some(("spec.flag".into(), json!(true)));
    let mut value = handler(Kind::Field, "value_fn");
    value.field = Some("spec.size".into());
    value.value = Some(Match::Equals(json!(3)));
    let mut old_new = handler(Kind::Field, "old_new_fn");
    old_new.field = Some("spec.size".into());
    old_new.old = Some(Match::Present);
    old_new.new = Some(Match::Callable(json!(5)));
    let mut appeared = handler(Kind::Field, "appeared_fn");
    appeared.field = Some("spec.size".into());
    appeared.old = Some(Match::Absent);
    Scenario {
        scope: Scope::default(),
        name: "filters".into(),
        operator: operator(vec![
            by_label,
            labelled_any,
            unlabelled,
            callable,
            annotated,
            when,
            value,
            old_new,
            appeared,
        ]),
        steps: vec![
            labelled("gold", json!({}), json!({"tier": "gold"})),
            Step::create("plain", json!({})),
            Step::patch("gold", json!({"spec": {"size": 3}})),
            Step::patch("plain", json!({"spec": {"size": 3, "flag": true}})),
            Step::patch("plain", json!({"metadata": {"labels": {"tier": "silver"}}})),
            Step::patch("plain", json!({"spec": {"size": 5}})),
            Step::patch("plain", json!({"metadata": {"annotations": {"note": "x"}}})),
            Step::patch("gold", json!({"spec": {"flag": false, "size": null}})),
        ],
    }
}

/// Temporary errors with a delay, permanent ones, arbitrary ones in each `errors=` mode, a
/// retries limit, a timeout.
pub fn errors() -> Scenario {
    let mut temporary = handler(Kind::Create, "temporary_fn");
    temporary.fail = vec![Failure::Temporary(1.0), Failure::Temporary(0.5)];
    let mut permanent = handler(Kind::Create, "permanent_fn");
    permanent.fail = vec![Failure::Permanent];
    let mut retried = handler(Kind::Create, "retried_fn");
    retried.fail = vec![Failure::Arbitrary, Failure::Arbitrary, Failure::Arbitrary];
    retried.retries = Some(2);
    retried.backoff = Some(0.5);
    let mut fatal = handler(Kind::Create, "fatal_fn");
    fatal.fail = vec![Failure::Arbitrary];
    fatal.errors = Some("permanent".into());
    let mut ignored = handler(Kind::Create, "ignored_fn");
    ignored.fail = vec![Failure::Arbitrary];
    ignored.errors = Some("ignored".into());
    let mut recovering = handler(Kind::Update, "recovering_fn");
    recovering.fail = vec![Failure::Arbitrary];
    recovering.backoff = Some(1.0);
    Scenario {
        scope: Scope::default(),
        name: "errors".into(),
        operator: operator(vec![
            temporary, permanent, retried, fatal, ignored, recovering,
        ]),
        steps: vec![
            Step::create("one", json!({})),
            Step::patch("one", json!({"spec": {"field": 1}})),
            Step::delete("one"),
        ],
    }
}

/// Sub-handlers, one failing once, one with sub-handlers of its own.
pub fn subhandlers() -> Scenario {
    let mut flaky = handler(Kind::Create, "flaky");
    flaky.fail = vec![Failure::Temporary(0.5)];
    let mut nested = handler(Kind::Create, "nested");
    nested.subhandlers = vec![handler(Kind::Create, "deep")];
    let mut parent = handler(Kind::Create, "parent_fn");
    parent.subhandlers = vec![handler(Kind::Create, "first"), flaky, nested];
    let mut updater = handler(Kind::Update, "updater_fn");
    updater.subhandlers = vec![handler(Kind::Update, "part")];
    Scenario {
        scope: Scope::default(),
        name: "subhandlers".into(),
        operator: operator(vec![parent, updater]),
        steps: vec![
            Step::create("one", json!({})),
            Step::patch("one", json!({"spec": {"field": 1}})),
        ],
    }
}

/// Sub-handlers run in place (Kopf's `await kopf.execute(fns=...)`): one failing once, so
/// that the parent is retried without calling the finished one again; under an update
/// handler too.
pub fn executed_subhandlers() -> Scenario {
    let mut flaky = handler(Kind::Create, "flaky");
    flaky.fail = vec![Failure::Temporary(0.5)];
    let mut parent = handler(Kind::Create, "parent_fn");
    parent.executes = vec![handler(Kind::Create, "first"), flaky];
    let mut updater = handler(Kind::Update, "updater_fn");
    updater.executes = vec![handler(Kind::Update, "part")];
    Scenario {
        scope: Scope::default(),
        name: "executed-subhandlers".into(),
        operator: operator(vec![parent, updater]),
        steps: vec![
            Step::create("one", json!({})),
            Step::patch("one", json!({"spec": {"field": 1}})),
        ],
    }
}

/// Registered sub-handlers run in place (Kopf's `await kopf.execute()` without arguments,
/// twice): one failing once, so that the parent is retried without calling the finished one
/// again; one running its own registered ones in place; under an update handler too.
pub fn executed_registered_subhandlers() -> Scenario {
    let mut flaky = handler(Kind::Create, "flaky");
    flaky.fail = vec![Failure::Temporary(0.5)];
    let mut nested = handler(Kind::Create, "nested");
    nested.subhandlers = vec![handler(Kind::Create, "deep")];
    nested.executes_registered = true;
    let mut parent = handler(Kind::Create, "parent_fn");
    parent.subhandlers = vec![handler(Kind::Create, "first"), flaky, nested];
    parent.executes_registered = true;
    let mut updater = handler(Kind::Update, "updater_fn");
    updater.subhandlers = vec![handler(Kind::Update, "part")];
    updater.executes_registered = true;
    Scenario {
        scope: Scope::default(),
        name: "executed-registered-subhandlers".into(),
        operator: operator(vec![parent, updater]),
        steps: vec![
            Step::create("one", json!({})),
            Step::patch("one", json!({"spec": {"field": 1}})),
        ],
    }
}

/// Events posted outside of handlers' calls: from a task that a startup handler started,
/// about objects its change handlers saw (again after a restart, when the object is resumed),
/// which Kopf does not post (see [`outcome::ALLOWED`](crate::outcome::ALLOWED)'s
/// `events-from-startup-tasks`); and from a task that a change handler started, which both
/// post.
pub fn startup_events() -> Scenario {
    let mut create = handler(Kind::Create, "create_fn");
    create.posts_from_task = true;
    let mut spec = operator(vec![create, handler(Kind::Resume, "resume_fn")]);
    spec.startup_posts = vec!["one".into()];
    Scenario {
        scope: Scope::default(),
        name: "startup-events".into(),
        operator: spec,
        steps: vec![
            Step::create("one", json!({"field": 1})),
            Step::Restart { meanwhile: vec![] },
        ],
    }
}

/// Resume handlers on restarts, event handlers on every event, and an optional delete
/// handler (no finalizer for it).
pub fn resumes_and_events() -> Scenario {
    let mut optional = handler(Kind::Delete, "optional_fn");
    optional.optional = true;
    Scenario {
        scope: Scope::default(),
        name: "resumes-and-events".into(),
        operator: operator(vec![
            handler(Kind::Create, "create_fn"),
            handler(Kind::Resume, "resume_fn"),
            handler(Kind::Event, "event_fn"),
            optional,
        ]),
        steps: vec![
            Step::create("one", json!({"field": 1})),
            Step::Restart { meanwhile: vec![] },
            Step::patch("one", json!({"spec": {"field": 2}})),
            Step::Restart {
                meanwhile: vec![Step::patch("one", json!({"spec": {"field": 3}}))],
            },
            Step::delete("one"),
        ],
    }
}

/// Deletions: a delete handler that fails once, an optional one, a resume handler that also
/// sees objects being deleted (`deleted=True`) when the operator restarts during a deletion,
/// and a timeout.
pub fn deletions() -> Scenario {
    let mut delete = handler(Kind::Delete, "delete_fn");
    delete.fail = vec![Failure::Temporary(0.5)];
    let mut optional = handler(Kind::Delete, "optional_fn");
    optional.optional = true;
    let mut resume = handler(Kind::Resume, "resume_fn");
    resume.deleted = true;
    let mut slow = handler(Kind::Create, "slow_fn");
    slow.timeout = Some(1.0);
    slow.fail = vec![
        Failure::Temporary(0.6),
        Failure::Temporary(0.6),
        Failure::Temporary(0.6),
    ];
    Scenario {
        scope: Scope::default(),
        name: "deletions".into(),
        operator: operator(vec![
            handler(Kind::Create, "create_fn"),
            slow,
            delete,
            optional,
            resume,
        ]),
        steps: vec![
            Step::create("one", json!({"field": 1})),
            Step::create("two", json!({"field": 2})),
            Step::delete("one"),
            // Deleted while the operator is down: its finalizer holds it until then.
            Step::Restart {
                meanwhile: vec![Step::delete("two")],
            },
        ],
    }
}

/// Daemons and timers: started for each object (after `initial_delay`; a timer with `idle`
/// only once the object is unchanged for that long), stopped on deletion and on a filter's
/// mismatch (and started again on a match), restarted with the operator.
pub fn daemons_and_timers() -> Scenario {
    let mut watcher = handler(Kind::Daemon, "watcher");
    watcher.initial_delay = Some(0.5);
    let mut gold = handler(Kind::Daemon, "gold_watcher");
    gold.labels = vec![("tier".into(), Match::Equals(json!("gold")))];
    let mut ticker = handler(Kind::Timer, "ticker");
    ticker.interval = Some(3600.0);
    let mut idler = handler(Kind::Timer, "idler");
    idler.interval = Some(3600.0);
    idler.idle = Some(1.0);
    Scenario {
        scope: Scope::default(),
        name: "daemons-and-timers".into(),
        operator: operator(vec![watcher, gold, ticker, idler]),
        steps: vec![
            labelled("one", json!({}), json!({"tier": "gold"})),
            Step::create("two", json!({})),
            Step::patch("one", json!({"metadata": {"labels": {"tier": "silver"}}})),
            Step::patch("one", json!({"metadata": {"labels": {"tier": "gold"}}})),
            Step::Restart { meanwhile: vec![] },
            Step::delete("one"),
        ],
    }
}

/// What Kopf users write for long-running work: a daemon that polls its object's body in a
/// loop and sees each change of the spec (Kopf's live views, `kopf::Live` in kopf-rs) without
/// a new attempt; a daemon and a timer with `field=` and `value=`, which start when the field
/// matches, stop when it no longer does, and start again when it matches again.
pub fn live_views_and_field_filters() -> Scenario {
    let mut poller = handler(Kind::Daemon, "poller");
    poller.poll = Some("spec.size".into());
    let mut gated = handler(Kind::Daemon, "gated");
    gated.field = Some("spec.phase".into());
    gated.value = Some(Match::Equals(json!("active")));
    let mut checker = handler(Kind::Timer, "checker");
    checker.interval = Some(3600.0);
    checker.field = Some("spec.phase".into());
    checker.value = Some(Match::Equals(json!("active")));
    let mut present = handler(Kind::Timer, "present");
    present.interval = Some(3600.0);
    present.field = Some("spec.owner".into());
    Scenario {
        scope: Scope::default(),
        name: "live-views-and-field-filters".into(),
        operator: operator(vec![poller, gated, checker, present]),
        steps: vec![
            Step::create("one", json!({"size": 1, "phase": "idle"})),
            Step::patch("one", json!({"spec": {"size": 2}})),
            Step::patch("one", json!({"spec": {"phase": "active"}})),
            Step::patch("one", json!({"spec": {"size": 3, "owner": "ann"}})),
            Step::patch("one", json!({"spec": {"phase": "idle"}})),
            Step::patch("one", json!({"spec": {"size": 4}})),
            Step::patch("one", json!({"spec": {"phase": "active"}})),
            Step::delete("one"),
        ],
    }
}

/// Indexes, read by change handlers: filled from the listing, updated on changes and on
/// deletions.
pub fn indexes() -> Scenario {
    let mut by_size = handler(Kind::Index, "by_size");
    by_size.field = Some("spec.size".into());
    let mut reader = handler(Kind::Create, "create_fn");
    reader.reads = Some("by_size".into());
    let mut updater = handler(Kind::Update, "update_fn");
    updater.reads = Some("by_size".into());
    Scenario {
        scope: Scope::default(),
        name: "indexes".into(),
        operator: operator(vec![by_size, reader, updater]),
        steps: vec![
            Step::create("one", json!({"size": 1})),
            Step::create("two", json!({"size": 1})),
            Step::patch("two", json!({"spec": {"size": 2}})),
            Step::Restart {
                meanwhile: vec![Step::create("three", json!({"size": 2}))],
            },
            Step::delete("one"),
            Step::patch("three", json!({"spec": {"size": 3}})),
        ],
    }
}

/// Stacked decorators: one function as resume, create and update handler (one id, so one
/// progress record; each cause's first attempt fails, to leave one), and one as a field handler
/// and an update handler of the same field (one id, so one call for a change of the field).
/// Restarts without changes (resumed), with changes (resumed and updated at once: called once,
/// as the update handler), with a creation (created, not resumed).
pub fn stacked() -> Scenario {
    let mut reconcile = handler(Kind::Update, "reconcile_fn");
    reconcile.fail = vec![Failure::Temporary(0.5)];
    reconcile.stacked = vec![
        handler(Kind::Create, "reconcile_fn"),
        handler(Kind::Resume, "reconcile_fn"),
    ];
    let mut sized = handler(Kind::Field, "sized_fn");
    sized.field = Some("spec.size".into());
    let mut sized_update = handler(Kind::Update, "sized_fn");
    sized_update.field = Some("spec.size".into());
    sized.stacked = vec![sized_update];
    Scenario {
        scope: Scope::default(),
        name: "stacked".into(),
        operator: operator(vec![reconcile, sized]),
        steps: vec![
            Step::create("one", json!({"size": 1})),
            Step::patch("one", json!({"spec": {"size": 2}})),
            Step::patch("one", json!({"spec": {"other": 1}})),
            Step::Restart { meanwhile: vec![] },
            Step::Restart {
                meanwhile: vec![
                    Step::patch("one", json!({"spec": {"size": 3}})),
                    Step::create("two", json!({"size": 1})),
                ],
            },
            Step::delete("one"),
        ],
    }
}

/// The handlers of the namespaced scenarios.
fn namespaced_operator() -> OperatorSpec {
    let mut field = handler(Kind::Field, "field_fn");
    field.field = Some("spec.field".into());
    operator(vec![
        handler(Kind::Create, "create_fn"),
        field,
        handler(Kind::Delete, "delete_fn"),
    ])
}

/// The steps of the namespaced scenarios: objects of one name in several namespaces.
fn namespaced_steps() -> Vec<Step> {
    vec![
        Step::create("team-a/one", json!({"field": 1})),
        Step::create("team-b/one", json!({"field": 1})),
        Step::create("other/one", json!({"field": 1})),
        Step::create("one", json!({"field": 1})),
        Step::patch("team-b/one", json!({"spec": {"field": 2}})),
        Step::patch("other/one", json!({"spec": {"field": 2}})),
        Step::Restart {
            meanwhile: vec![Step::patch("team-a/one", json!({"spec": {"field": 3}}))],
        },
        Step::delete("team-a/one"),
        Step::delete("other/one"),
    ]
}

/// `--namespace` with a glob and a name: objects in other namespaces are not served.
pub fn namespace_patterns() -> Scenario {
    Scenario {
        scope: Scope::Namespaces(vec!["team-*".into(), "default".into()]),
        name: "namespace-patterns".into(),
        operator: namespaced_operator(),
        steps: namespaced_steps(),
    }
}

/// `-A`: every namespace is served.
pub fn clusterwide() -> Scenario {
    Scenario {
        scope: Scope::Clusterwide,
        name: "clusterwide".into(),
        operator: namespaced_operator(),
        steps: namespaced_steps(),
    }
}

/// One operator with a handler of every kind and several filters: what generated scenarios
/// run.
pub fn rich_operator() -> OperatorSpec {
    let mut field = handler(Kind::Field, "field_fn");
    field.field = Some("spec.size".into());
    let mut gold = handler(Kind::Update, "gold_fn");
    gold.labels = vec![("tier".into(), Match::Equals(json!("gold")))];
    let mut flaky = handler(Kind::Update, "flaky_fn");
    flaky.fail = vec![Failure::Temporary(0.5)];
    flaky.when = Some(("spec.flag".into(), json!(true)));
    let mut small = handler(Kind::Field, "small_fn");
    small.field = Some("spec.size".into());
    small.new = Some(Match::Callable(json!(1)));
    operator(vec![
        handler(Kind::Create, "create_fn"),
        handler(Kind::Update, "update_fn"),
        handler(Kind::Resume, "resume_fn"),
        handler(Kind::Delete, "delete_fn"),
        field,
        gold,
        flaky,
        small,
    ])
}

/// A random scenario: `length` steps over two objects with [`rich_operator`], from `seed`.
pub fn generated(seed: u64, length: usize) -> Scenario {
    let mut rng = StdRng::seed_from_u64(seed);
    let names = ["alpha", "beta"];
    let mut exists = [false, false];
    let mut steps = Vec::new();
    while steps.len() < length {
        let which = rng.random_range(0..names.len());
        let name = names[which];
        let step = if !exists[which] {
            exists[which] = true;
            let size = rng.random_range(0..3);
            Step::create(name, json!({"size": size}))
        } else {
            match rng.random_range(0..10) {
                0..=2 => Step::patch(name, json!({"spec": {"size": rng.random_range(0..3)}})),
                3 => Step::patch(name, json!({"spec": {"flag": rng.random_bool(0.5)}})),
                4 => Step::patch(name, json!({"spec": {"other": rng.random_range(0..100)}})),
                5 => {
                    let tier = ["gold", "silver"][rng.random_range(0..2)];
                    Step::patch(name, json!({"metadata": {"labels": {"tier": tier}}}))
                }
                6 => Step::Restart { meanwhile: vec![] },
                7 => Step::Restart {
                    meanwhile: vec![Step::patch(
                        name,
                        json!({"spec": {"size": rng.random_range(0..3)}}),
                    )],
                },
                _ => {
                    exists[which] = false;
                    Step::delete(name)
                }
            }
        };
        steps.push(step);
    }
    Scenario {
        scope: Scope::default(),
        name: format!("generated-{seed}"),
        operator: rich_operator(),
        steps,
    }
}
