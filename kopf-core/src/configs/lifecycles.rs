//! Lifecycles: which of the due change handlers run in one processing cycle, and in which
//! order (Kopf's `kopf/_core/actions/lifecycles.py`).

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
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
}

impl Lifecycle {
    /// Plans one cycle: given the retry counts of the due handlers in registration order,
    /// the positions of those to run, in the order to run them.
    ///
    /// ```
    /// use kopf::settings::Lifecycle;
    ///
    /// let retries = [2, 0, 1, 0];
    /// assert_eq!(Lifecycle::AllAtOnce.plan(&retries), [0, 1, 2, 3]);
    /// assert_eq!(Lifecycle::OneByOne.plan(&retries), [0]);
    /// assert_eq!(Lifecycle::Asap.plan(&retries), [1]);
    /// assert_eq!(Lifecycle::Randomized.plan(&retries).len(), 1);
    /// assert_eq!(Lifecycle::Shuffled.plan(&retries).len(), 4);
    /// assert!(Lifecycle::Asap.plan(&[]).is_empty());
    /// ```
    pub fn plan(self, retries: &[u32]) -> Vec<usize> {
        if retries.is_empty() {
            return Vec::new();
        }
        let all = 0..retries.len();
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
            Lifecycle::Asap => all.min_by_key(|&i| retries[i]).into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn nothing_due_plans_nothing() {
        for lifecycle in [
            Lifecycle::AllAtOnce,
            Lifecycle::OneByOne,
            Lifecycle::Randomized,
            Lifecycle::Shuffled,
            Lifecycle::Asap,
        ] {
            assert!(lifecycle.plan(&[]).is_empty(), "{lifecycle:?}");
        }
    }

    #[test]
    fn asap_takes_the_fewest_retries_and_the_first_of_equals() {
        assert_eq!(Lifecycle::Asap.plan(&[0, 0, 0]), [0]);
        assert_eq!(Lifecycle::Asap.plan(&[1, 0, 0]), [1]);
        assert_eq!(Lifecycle::Asap.plan(&[3, 2, 5]), [1]);
    }

    #[test]
    fn one_by_one_takes_the_first_whatever_its_retries() {
        assert_eq!(Lifecycle::OneByOne.plan(&[5, 0, 0]), [0]);
    }

    #[test]
    fn random_lifecycles_cover_every_handler_once() {
        let mut picked = BTreeSet::new();
        for _ in 0..200 {
            let plan = Lifecycle::Randomized.plan(&[0, 0, 0]);
            assert_eq!(plan.len(), 1);
            picked.insert(plan[0]);

            let mut shuffled = Lifecycle::Shuffled.plan(&[0, 0, 0]);
            shuffled.sort_unstable();
            assert_eq!(shuffled, [0, 1, 2]);
        }
        assert_eq!(picked, BTreeSet::from([0, 1, 2]));
    }
}
