//! Index handlers (Kopf's `@kopf.index`): the declaration of a function that builds an index.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::actions::invocation::{ErrorsMode, HandlerFn, HandlerFuture, Invocation, Options};
use crate::structs::errors::Result;
use crate::structs::indexes::{
    AnyIndex, IndexKey, IndexValue, IntoIndexEntries, deliver, new_index,
};
use crate::structs::resources::Selector;

/// A handler that builds an index (Kopf's `@kopf.index`): called for every event of the
/// selected resource; what it returns is kept in the [`Index`](crate::Index) named by its id.
///
/// An index is a mapping from keys to [`Store`](crate::indexes::Store)s: a store holds one value
/// from each object that returned that key. What an index function returns (see
/// [`IntoIndexEntries`]):
///
/// - a map (`BTreeMap<K, V>`, `HashMap<K, V>`), a `Vec<(K, V)>` or one `(K, V)` pair: the
///   object's entries, one value under each key; they replace the object's previous entries
///   (an empty map removes them all);
/// - `Option` of one of these: `None` leaves the object's entries as they are (Kopf's `None`);
/// - a value without a key: return `((), value)` and read it with `index.get(&())`.
///
/// An object's entries leave the index when the object is deleted or stops passing the index's
/// filters, and stores left empty are removed. Errors follow Kopf: by default
/// (`errors = "ignored"`), an arbitrary error is logged and the object's entries stay as they
/// were; a [`PermanentError`](crate::PermanentError) (or any error with `errors = "permanent"`)
/// removes them and excludes the object from this index until the operator restarts; a
/// [`TemporaryError`](crate::TemporaryError) (or any error with `errors = "temporary"`) removes
/// them and excludes the object until the delay (`backoff`) has passed and another event
/// comes, with `retries` and `timeout` counted as for other handlers.
///
/// When the operator starts, handlers of objects (change handlers, event handlers, daemons and
/// timers) wait until the operator has listed the resources it serves (as
/// [`Operator::ready`](crate::operator::Operator::ready)) and indexed every listed object of the
/// indexed ones, so that they see complete indexes, as in Kopf. An operator without indexes waits
/// for nothing.
///
/// ```
/// use kopf::registry::{IndexHandler, Registry};
/// use kopf::resources::Selector;
/// let registry = Registry::new().with(IndexHandler::new(
///     Selector::new("", "v1", "pods"),
///     "pods_by_node",
///     |invocation| async move {
///         let node = invocation.spec()["nodeName"].as_str().map(String::from);
///         Ok(node.map(|node| (node, invocation.name().to_string())))
///     },
/// ));
/// ```
#[derive(Clone)]
pub struct IndexHandler {
    pub(crate) id: String,
    pub(crate) selector: Selector,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
    make: fn() -> Arc<dyn AnyIndex>,
}

impl IndexHandler {
    /// An empty index of this handler's types.
    pub(crate) fn empty_index(&self) -> Arc<dyn AnyIndex> {
        (self.make)()
    }

    /// An index of the selected resource, named `id`, filled with what `function` returns for
    /// each object (see [`IntoIndexEntries`]).
    pub fn new<F, Fut, T>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
        T: IntoIndexEntries + 'static,
    {
        let function = Arc::new(function);
        let wrapped = move |invocation: Invocation| -> HandlerFuture {
            let output = invocation.indexes.output.clone();
            let called = function(invocation);
            Box::pin(async move {
                let entries = called.await?;
                deliver(output.as_ref(), entries);
                Ok(None)
            })
        };
        Self::generated::<T::Key, T::Value>(selector, id, wrapped)
    }

    /// The constructor that `#[kopf::index]` uses: its function hands the entries over through
    /// [`index_output`].
    #[doc(hidden)]
    pub fn generated<K: IndexKey, V: IndexValue>(
        selector: Selector,
        id: &str,
        function: impl Fn(Invocation) -> HandlerFuture + Send + Sync + 'static,
    ) -> Self {
        IndexHandler {
            id: id.into(),
            selector,
            function: Arc::new(function),
            options: Options {
                errors: ErrorsMode::Ignored,
                ..Options::default()
            },
            make: new_index::<K, V>,
        }
    }

    /// The index's name: what handlers ask for it by.
    pub fn id(&self) -> &str {
        &self.id
    }

    crate::actions::invocation::option_setters!();
    crate::actions::invocation::field_setters!(kept);
}

impl fmt::Debug for IndexHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexHandler")
            .field("id", &self.id)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}
