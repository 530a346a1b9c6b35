//! Lifecycles: which of the due change handlers run in one processing cycle, and in which
//! order (Kopf's `kopf/_core/actions/lifecycles.py`).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use rand::Rng as _;
use rand::seq::SliceRandom as _;

/// Which of the change handlers that are due run in one processing cycle, and in which order.
///
/// A cycle ends with one write of the handlers' progress and results, and the next cycle
/// waits until that write comes back from the API server (Kopf's consistency rule). So a
/// lifecycle that runs one handler per cycle costs a PATCH per handler, while
/// [`AllAtOnce`](Lifecycle::AllAtOnce) handles a cause in one cycle and one PATCH.
///
/// Only *due* handlers take part: those not finished yet and not delayed (after a temporary
/// error) beyond now. They are offered in registration order. Set the lifecycle in
/// [`ExecutionSettings::lifecycle`](crate::settings::ExecutionSettings::lifecycle), as Kopf's
/// `kopf.run(lifecycle=...)` or `kopf.set_default_lifecycle(...)` do:
///
/// ```
/// let mut settings = kopf::Settings::default();
/// settings.execution.lifecycle = kopf::settings::Lifecycle::AllAtOnce;
/// ```
///
/// Or a function of your own, as Kopf takes any callable ([`Lifecycle::custom`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lifecycle {
    /// All due handlers in one cycle, one after another in registration order.
    AllAtOnce,
    /// The first due handler in registration order.
    OneByOne,
    /// One due handler, picked at random.
    Randomized,
    /// All due handlers in one cycle, in a random order.
    Shuffled,
    /// The due handler with the fewest retries so far (the first registered among equals):
    /// a failing handler lets the others run before it is retried. Kopf's default.
    #[default]
    Asap,
    /// A function of the user's ([`Lifecycle::custom`]).
    Custom(CustomLifecycle),
}

/// A due handler as a lifecycle sees it (what Kopf gives a lifecycle: the handler and its
/// state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DueHandler<'a> {
    /// Its id (`parent/child` for a sub-handler).
    pub id: &'a str,
    /// How many attempts of it failed (or were retried) so far for this cause.
    pub retries: u32,
    /// When its first attempt for this cause started; `None` before the first.
    pub started: Option<time::OffsetDateTime>,
}

impl<'a> DueHandler<'a> {
    /// A due handler with this id and retry count, not started yet (to test a lifecycle).
    pub fn new(id: &'a str, retries: u32) -> Self {
        DueHandler {
            id,
            retries,
            started: None,
        }
    }

    /// When its first attempt started.
    pub fn started(mut self, started: time::OffsetDateTime) -> Self {
        self.started = Some(started);
        self
    }
}

/// The function of a [`Lifecycle::Custom`]: given the due handlers in registration order, the
/// positions of those to run, in the order to run them. Equal to another only if it is the
/// same function (a clone of it).
#[derive(Clone)]
pub struct CustomLifecycle {
    name: String,
    function: Arc<LifecycleFn>,
}

/// What [`Lifecycle::custom`] takes.
type LifecycleFn = dyn Fn(&[DueHandler<'_>]) -> Vec<usize> + Send + Sync;

impl fmt::Debug for CustomLifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CustomLifecycle").field(&self.name).finish()
    }
}

impl PartialEq for CustomLifecycle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.function, &other.function)
    }
}

impl Eq for CustomLifecycle {}

impl Hash for CustomLifecycle {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.function).cast::<()>().hash(state);
    }
}

impl Lifecycle {
    /// A lifecycle of your own (Kopf's callable lifecycles): given the due handlers in
    /// registration order (their ids, retries, first starts), the positions of those to run
    /// in this cycle, in the order to run them. `name` names it in logs.
    ///
    /// What it returns is checked: a position out of range or given twice, or no position
    /// at all while handlers are due (the object would be processed again at once, forever),
    /// is logged as an error and the cycle runs as [`Asap`](Lifecycle::Asap) would; so is a
    /// panic of the function. The operator keeps running.
    ///
    /// ```
    /// use kopf::settings::{DueHandler, Lifecycle};
    ///
    /// // The handlers whose ids start with "critical-" first, all in one cycle.
    /// let critical_first = Lifecycle::custom("critical-first", |due: &[DueHandler<'_>]| {
    ///     let (mut critical, others): (Vec<usize>, Vec<usize>) =
    ///         (0..due.len()).partition(|&i| due[i].id.starts_with("critical-"));
    ///     critical.extend(others);
    ///     critical
    /// });
    /// let due = [DueHandler::new("a", 0), DueHandler::new("critical-b", 0)];
    /// assert_eq!(critical_first.plan(&due), [1, 0]);
    ///
    /// let mut settings = kopf::Settings::default();
    /// settings.execution.lifecycle = critical_first;
    /// ```
    pub fn custom(
        name: impl Into<String>,
        function: impl Fn(&[DueHandler<'_>]) -> Vec<usize> + Send + Sync + 'static,
    ) -> Self {
        Lifecycle::Custom(CustomLifecycle {
            name: name.into(),
            function: Arc::new(function),
        })
    }

    /// Plans one cycle: given the due handlers in registration order, the positions of those
    /// to run, in the order to run them.
    ///
    /// ```
    /// use kopf::settings::{DueHandler, Lifecycle};
    ///
    /// let due = [2, 0, 1, 0].map(|retries| DueHandler::new("h", retries));
    /// assert_eq!(Lifecycle::AllAtOnce.plan(&due), [0, 1, 2, 3]);
    /// assert_eq!(Lifecycle::OneByOne.plan(&due), [0]);
    /// assert_eq!(Lifecycle::Asap.plan(&due), [1]);
    /// assert_eq!(Lifecycle::Randomized.plan(&due).len(), 1);
    /// assert_eq!(Lifecycle::Shuffled.plan(&due).len(), 4);
    /// assert!(Lifecycle::Asap.plan(&[]).is_empty());
    /// ```
    pub fn plan(&self, due: &[DueHandler<'_>]) -> Vec<usize> {
        if due.is_empty() {
            return Vec::new();
        }
        let all = 0..due.len();
        match self {
            Lifecycle::AllAtOnce => all.collect(),
            Lifecycle::OneByOne => vec![0],
            Lifecycle::Randomized => vec![rand::rng().random_range(all)],
            Lifecycle::Shuffled => {
                let mut plan: Vec<usize> = all.collect();
                plan.shuffle(&mut rand::rng());
                plan
            }
            // `min_by_key` keeps the first of equals, as Kopf's stable `sorted(...)[:1]`.
            Lifecycle::Asap => all.min_by_key(|&i| due[i].retries).into_iter().collect(),
            Lifecycle::Custom(custom) => custom
                .checked(due)
                .unwrap_or_else(|| Lifecycle::Asap.plan(due)),
        }
    }
}

impl CustomLifecycle {
    /// The function's plan, if it returned one that can be followed; else `None`, with the
    /// problem logged.
    fn checked(&self, due: &[DueHandler<'_>]) -> Option<Vec<usize>> {
        let name = &self.name;
        let ids = || due.iter().map(|d| d.id).collect::<Vec<_>>().join(", ");
        let planned = match std::panic::catch_unwind(AssertUnwindSafe(|| (self.function)(due))) {
            Ok(planned) => planned,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|m| (*m).to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(a non-string panic payload)".into());
                tracing::error!(target: "kopf::lifecycle", "The lifecycle '{name}' panicked on the due handlers [{}]: {message}; this cycle runs as the 'asap' lifecycle would; fix the lifecycle so that it returns instead", ids());
                return None;
            }
        };
        let mut seen = vec![false; due.len()];
        let problem = if planned.is_empty() {
            Some(
                "it chose none of them (the object would be processed again at once, forever)"
                    .to_string(),
            )
        } else {
            planned.iter().find_map(|&i| match seen.get_mut(i) {
                None => Some(format!(
                    "position {i} is out of range (there are {} due)",
                    due.len()
                )),
                Some(true) => Some(format!("position {i} ({}) is given twice", due[i].id)),
                Some(seen) => {
                    *seen = true;
                    None
                }
            })
        };
        match problem {
            None => Some(planned),
            Some(problem) => {
                tracing::error!(target: "kopf::lifecycle", "The lifecycle '{name}' returned {planned:?} for the due handlers [{}]: {problem}; this cycle runs as the 'asap' lifecycle would; return distinct positions of the handlers given", ids());
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn due(retries: &[u32]) -> Vec<DueHandler<'static>> {
        retries.iter().map(|&r| DueHandler::new("h", r)).collect()
    }

    #[test]
    fn nothing_due_plans_nothing() {
        for lifecycle in [
            Lifecycle::AllAtOnce,
            Lifecycle::OneByOne,
            Lifecycle::Randomized,
            Lifecycle::Shuffled,
            Lifecycle::Asap,
        ] {
            assert!(lifecycle.plan(&due(&[])).is_empty(), "{lifecycle:?}");
        }
    }

    #[test]
    fn asap_takes_the_fewest_retries_and_the_first_of_equals() {
        assert_eq!(Lifecycle::Asap.plan(&due(&[0, 0, 0])), [0]);
        assert_eq!(Lifecycle::Asap.plan(&due(&[1, 0, 0])), [1]);
        assert_eq!(Lifecycle::Asap.plan(&due(&[3, 2, 5])), [1]);
    }

    #[test]
    fn one_by_one_takes_the_first_whatever_its_retries() {
        assert_eq!(Lifecycle::OneByOne.plan(&due(&[5, 0, 0])), [0]);
    }

    #[test]
    fn random_lifecycles_cover_every_handler_once() {
        let mut picked = BTreeSet::new();
        for _ in 0..200 {
            let plan = Lifecycle::Randomized.plan(&due(&[0, 0, 0]));
            assert_eq!(plan.len(), 1);
            picked.insert(plan[0]);

            let mut shuffled = Lifecycle::Shuffled.plan(&due(&[0, 0, 0]));
            shuffled.sort_unstable();
            assert_eq!(shuffled, [0, 1, 2]);
        }
        assert_eq!(picked, BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn a_custom_lifecycle_sees_the_ids_and_retries_and_its_plan_is_followed() {
        let reversed = Lifecycle::custom("reversed", |due: &[DueHandler<'_>]| {
            assert_eq!(
                due.iter().map(|d| d.id).collect::<Vec<_>>(),
                ["a", "b", "c"]
            );
            (0..due.len()).rev().collect()
        });
        let due = [
            DueHandler::new("a", 0),
            DueHandler::new("b", 1),
            DueHandler::new("c", 2),
        ];
        assert_eq!(reversed.plan(&due), [2, 1, 0]);
        assert_eq!(reversed.clone(), reversed, "a clone is the same function");
        assert_ne!(
            reversed,
            Lifecycle::custom("reversed", |_: &[DueHandler<'_>]| vec![0])
        );
    }

    #[test]
    fn a_custom_lifecycle_that_returns_nonsense_or_panics_runs_as_asap() {
        let due = due(&[3, 0, 1]);
        let returning = |plan: Vec<usize>| {
            Lifecycle::custom("broken", move |_: &[DueHandler<'_>]| plan.clone())
        };
        for nonsense in [vec![], vec![3], vec![usize::MAX], vec![1, 1], vec![0, 2, 0]] {
            assert_eq!(returning(nonsense.clone()).plan(&due), [1], "{nonsense:?}");
        }
        let panicking =
            Lifecycle::custom("panicking", |_: &[DueHandler<'_>]| panic!("no plan today"));
        assert_eq!(panicking.plan(&due), [1]);
        assert!(
            panicking.plan(&[]).is_empty(),
            "not called when none is due"
        );
    }
}
