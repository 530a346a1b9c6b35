//! Invocations of the handlers of one resource's objects, made alike for every kind of
//! handler: change, event, index, daemon and timer handlers and sub-handlers.

use std::sync::Arc;

use serde_json::Value;

use crate::actions::invocation::{Invocation, Options, Reason};
use crate::aiokits::tasks::Tasks;
use crate::clients::posting::{Logger, Poster};
use crate::structs::bodies::Body;
use crate::structs::diff::Diff;
use crate::structs::indexes::Indexes;
use crate::structs::memos::Memo;
use crate::structs::resources::Resource;

/// What every invocation of one resource's handlers carries.
#[derive(Clone)]
pub(crate) struct Invocations {
    pub(crate) client: Arc<kube::Client>,
    pub(crate) resource: Arc<Resource>,
    pub(crate) poster: Poster,
    pub(crate) indexes: Indexes,
}

/// What one call is about: the cause and the change a handler sees (shared by the cycle's
/// invocations, not copied for each).
#[derive(Debug, Default)]
pub(crate) struct Change {
    pub(crate) reason: Option<Reason>,
    /// `None` for no change (daemons, timers, event handlers, index functions): no empty diff
    /// made and freed for each.
    pub(crate) diff: Option<Arc<Diff>>,
    pub(crate) old: Option<Arc<Value>>,
    pub(crate) new: Option<Arc<Value>>,
}

impl Invocations {
    /// An invocation of a handler with these options on the object's body, with the object's
    /// memo, running in `node`: usually a child of the caller's node, which stops it alone.
    pub(crate) fn make(
        &self,
        body: Arc<Body>,
        memo: Memo,
        change: Change,
        options: &Options,
        node: Tasks,
    ) -> Invocation {
        let events = self.poster.events_of(&body, &self.resource);
        Invocation {
            body,
            resource: self.resource.clone(),
            reason: change.reason,
            event_type: None,
            diff: change.diff,
            old: change.old,
            new: change.new,
            retry: 0,
            started: time::OffsetDateTime::now_utc(),
            param: options.param.clone(),
            client: self.client.clone(),
            node,
            logger: Logger::new(tracing::Span::none(), events.clone()),
            events,
            memo,
            indexes: self.indexes.clone(),
            gathered: Default::default(),
            counted_as: None,
            review: None,
            settings: None,
        }
    }
}
