//! In-memory indexes over objects (Kopf's indexes): an [`Index`] maps keys to [`Store`]s of
//! values, one value per object; [`Indexes`] are the operator's indexes by id, and know when
//! they are filled after the start. What fills them is in `engines::indexing`.
//!
//! Invariants:
//! 1. An object's entries in an index are written only by the worker of that object, so the
//!    replacements of one object never interleave; the index's lock is held only for the
//!    short, synchronous updates and reads, never across an `.await`.
//! 2. Each listed object of an indexed resource is counted once when it is queued and once
//!    when it has been indexed: the indexes are filled when the first listings are done and
//!    both counts are equal. Once filled, they stay filled.

use std::any::Any;
use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::structs::errors::{Error, PermanentError, Result};

/// Which object an entry comes from: its namespace, name and uid (as Kopf's key).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ObjectRef {
    namespace: Option<String>,
    pub(crate) name: String,
    uid: String,
}

impl ObjectRef {
    /// The object of this body.
    pub(crate) fn of(body: &Value) -> ObjectRef {
        let meta = &body["metadata"];
        ObjectRef {
            namespace: meta["namespace"].as_str().map(String::from),
            name: meta["name"].as_str().unwrap_or_default().to_string(),
            uid: meta["uid"].as_str().unwrap_or_default().to_string(),
        }
    }
}

/// What an index's keys must be.
pub trait IndexKey: Hash + Eq + Clone + Send + Sync + 'static {}
impl<K: Hash + Eq + Clone + Send + Sync + 'static> IndexKey for K {}

/// What an index's values must be.
pub trait IndexValue: Send + Sync + 'static {}
impl<V: Send + Sync + 'static> IndexValue for V {}

/// The values of every object that returned one key, in the order of the objects' namespaces
/// and names. Never empty while in an index. A snapshot: it does not change when the index
/// does.
pub struct Store<V> {
    values: Vec<Arc<V>>,
}

impl<V> Store<V> {
    /// The values, one per object.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &V> {
        self.values.iter().map(|value| &**value)
    }

    /// How many objects have a value here.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no object has a value here (never so for a store taken from an index).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Whether some object has this value here.
    pub fn contains(&self, value: &V) -> bool
    where
        V: PartialEq,
    {
        self.iter().any(|v| v == value)
    }
}

impl<V> Clone for Store<V> {
    fn clone(&self) -> Self {
        Store {
            values: self.values.clone(),
        }
    }
}

impl<V: fmt::Debug> fmt::Debug for Store<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a, V> IntoIterator for &'a Store<V> {
    type Item = &'a V;
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Arc<V>>, fn(&'a Arc<V>) -> &'a V>;

    fn into_iter(self) -> Self::IntoIter {
        self.values.iter().map(|value| &**value)
    }
}

/// The keys and their objects' values.
struct Table<K, V> {
    stores: HashMap<K, BTreeMap<ObjectRef, Arc<V>>>,
    /// Where each object's values are, so that replacing them touches only its keys.
    objects: HashMap<ObjectRef, Vec<K>>,
}

impl<K: IndexKey, V> Table<K, V> {
    fn replace(&mut self, object: &ObjectRef, entries: Vec<(K, V)>) {
        let mut keys: Vec<K> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            self.stores
                .entry(key.clone())
                .or_default()
                .insert(object.clone(), Arc::new(value));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let old = self.objects.remove(object).unwrap_or_default();
        for key in old.iter().filter(|key| !keys.contains(key)) {
            self.remove_value(key, object);
        }
        if !keys.is_empty() {
            self.objects.insert(object.clone(), keys);
        }
    }

    fn discard(&mut self, object: &ObjectRef) {
        for key in self.objects.remove(object).unwrap_or_default() {
            self.remove_value(&key, object);
        }
    }

    fn remove_value(&mut self, key: &K, object: &ObjectRef) {
        if let Some(store) = self.stores.get_mut(key) {
            store.remove(object);
            if store.is_empty() {
                self.stores.remove(key);
            }
        }
    }
}

/// An index: keys, each with the [`Store`] of the values that objects returned for it.
/// Read-only for handlers, cheap to clone (clones share the same index), always up to date:
/// each read sees the index as it is at that moment.
///
/// Handlers get it by the name of its `#[kopf::index]` function, as `&kopf::Index<K, V>` or
/// `kopf::Index<K, V>`; see [`IndexHandler`](crate::registry::IndexHandler) and, for the plain API,
/// [`Invocation::index`](crate::Invocation::index).
pub struct Index<K, V> {
    table: Arc<RwLock<Table<K, V>>>,
}

impl<K, V> Clone for Index<K, V> {
    fn clone(&self) -> Self {
        Index {
            table: self.table.clone(),
        }
    }
}

impl<K: IndexKey, V: IndexValue> Default for Index<K, V> {
    fn default() -> Self {
        Index {
            table: Arc::new(RwLock::new(Table {
                stores: HashMap::new(),
                objects: HashMap::new(),
            })),
        }
    }
}

impl<K: IndexKey, V: IndexValue> Index<K, V> {
    /// An empty index, not filled by any operator (for tests of handler functions; collect one
    /// from `(key, value)` pairs for a filled one).
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table<K, V>> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table<K, V>> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The values under the key, if any object returned it.
    pub fn get<Q>(&self, key: &Q) -> Option<Store<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.read().stores.get(key).map(|store| Store {
            values: store.values().cloned().collect(),
        })
    }

    /// Whether some object returned the key.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.read().stores.contains_key(key)
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.read().stores.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.read().stores.is_empty()
    }

    /// The keys, in no particular order.
    pub fn keys(&self) -> Vec<K> {
        self.read().stores.keys().cloned().collect()
    }

    /// Every key with its store, in no particular order: a snapshot of the index.
    pub fn iter(&self) -> std::vec::IntoIter<(K, Store<V>)> {
        let table = self.read();
        let entries: Vec<(K, Store<V>)> = table
            .stores
            .iter()
            .map(|(key, store)| {
                let values = store.values().cloned().collect();
                (key.clone(), Store { values })
            })
            .collect();
        entries.into_iter()
    }
}

/// An index of these entries, each from an object of its own: for tests of handler
/// functions that take an index.
///
/// ```
/// let pods: kopf::Index<String, String> =
///     [("web".to_string(), "web-1".to_string()), ("web".to_string(), "web-2".to_string())]
///         .into_iter()
///         .collect();
/// assert_eq!(pods.get("web").map(|store| store.len()), Some(2));
/// ```
impl<K: IndexKey, V: IndexValue> FromIterator<(K, V)> for Index<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let index = Index::new();
        {
            let mut table = index.write();
            for (number, entry) in entries.into_iter().enumerate() {
                let object = ObjectRef {
                    namespace: None,
                    name: format!("{number:020}"),
                    uid: number.to_string(),
                };
                table.replace(&object, vec![entry]);
            }
        }
        index
    }
}

impl<K: IndexKey + fmt::Debug, V: IndexValue + fmt::Debug> fmt::Debug for Index<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// What an index function returns: the object's entries for the index (see
/// [`IndexHandler`](crate::registry::IndexHandler)). `None` (from [`Option`]) keeps the object's
/// entries as they are.
#[diagnostic::on_unimplemented(
    message = "an index function cannot return `{Self}`",
    label = "not the entries of an index",
    note = "return the object's entries: a map (`BTreeMap<K, V>`, `HashMap<K, V>`), a `Vec<(K, V)>`, one `(K, V)` pair, or an `Option` of one (`None` keeps the object's entries as they are); a value without a key is `((), value)`",
    note = "keys are `Hash + Eq + Clone + Send + Sync + 'static`; values are `Send + Sync + 'static`"
)]
pub trait IntoIndexEntries {
    /// The index's keys.
    type Key: IndexKey;
    /// The index's values.
    type Value: IndexValue;

    /// The entries, or `None` to keep the object's entries as they are.
    fn into_index_entries(self) -> Option<Vec<(Self::Key, Self::Value)>>;
}

impl<K: IndexKey + Ord, V: IndexValue> IntoIndexEntries for BTreeMap<K, V> {
    type Key = K;
    type Value = V;

    fn into_index_entries(self) -> Option<Vec<(K, V)>> {
        Some(self.into_iter().collect())
    }
}

impl<K: IndexKey, V: IndexValue, S> IntoIndexEntries for HashMap<K, V, S> {
    type Key = K;
    type Value = V;

    fn into_index_entries(self) -> Option<Vec<(K, V)>> {
        Some(self.into_iter().collect())
    }
}

/// One value per key: when a key repeats, its last value is kept.
impl<K: IndexKey, V: IndexValue> IntoIndexEntries for Vec<(K, V)> {
    type Key = K;
    type Value = V;

    fn into_index_entries(self) -> Option<Vec<(K, V)>> {
        let mut entries: Vec<(K, V)> = Vec::with_capacity(self.len());
        for (key, value) in self {
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(entry) => entry.1 = value,
                None => entries.push((key, value)),
            }
        }
        Some(entries)
    }
}

impl<K: IndexKey, V: IndexValue> IntoIndexEntries for (K, V) {
    type Key = K;
    type Value = V;

    fn into_index_entries(self) -> Option<Vec<(K, V)>> {
        Some(vec![self])
    }
}

impl<T: IntoIndexEntries> IntoIndexEntries for Option<T> {
    type Key = T::Key;
    type Value = T::Value;

    fn into_index_entries(self) -> Option<Vec<(T::Key, T::Value)>> {
        self.and_then(IntoIndexEntries::into_index_entries)
    }
}

/// An index whose key and value types are known only to itself.
pub(crate) trait AnyIndex: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    /// `entries` is the `Vec<(K, V)>` of the index's types.
    fn replace(&self, object: &ObjectRef, entries: Box<dyn Any + Send>) -> bool;
    fn discard(&self, object: &ObjectRef);
}

impl<K: IndexKey, V: IndexValue> AnyIndex for Index<K, V> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn replace(&self, object: &ObjectRef, entries: Box<dyn Any + Send>) -> bool {
        match entries.downcast::<Vec<(K, V)>>() {
            Ok(entries) => {
                self.write().replace(object, *entries);
                true
            }
            Err(_) => false,
        }
    }

    fn discard(&self, object: &ObjectRef) {
        self.write().discard(object);
    }
}

pub(crate) fn new_index<K: IndexKey, V: IndexValue>() -> Arc<dyn AnyIndex> {
    Arc::new(Index::<K, V>::new())
}

/// Where an index function's entries go for the one call (the function's `Ok` carries only
/// JSON, so the typed entries travel beside it).
pub(crate) type Output = Arc<Mutex<Option<Box<dyn Any + Send>>>>;

/// Hands an index function's entries over to the indexing, through the invocation's output.
pub(crate) fn deliver<T: IntoIndexEntries>(output: Option<&Output>, entries: T) {
    if let (Some(output), Some(entries)) = (output, entries.into_index_entries()) {
        *output.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(entries));
    }
}

/// When the indexes are filled after the start (see invariant 2).
struct Filling {
    /// The operator's readiness: every resource listed once.
    listed: watch::Receiver<bool>,
    /// Listed objects of indexed resources queued so far.
    expected: AtomicUsize,
    /// Listed objects of indexed resources indexed so far.
    indexed: watch::Sender<usize>,
    filled: AtomicBool,
}

/// The operator's indexes by id, given to every invocation.
#[derive(Clone)]
pub(crate) struct Indexes {
    all: Arc<BTreeMap<String, Arc<dyn AnyIndex>>>,
    filling: Arc<Filling>,
    /// Set for the invocations of index functions only.
    pub(crate) output: Option<Output>,
}

impl Default for Indexes {
    fn default() -> Self {
        Indexes::new([], watch::channel(true).1)
    }
}

impl fmt::Debug for Indexes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.all.keys()).finish()
    }
}

impl Indexes {
    /// The indexes by id, empty; `listed` tells when every resource was listed once.
    pub(crate) fn new(
        indexes: impl IntoIterator<Item = (String, Arc<dyn AnyIndex>)>,
        listed: watch::Receiver<bool>,
    ) -> Indexes {
        let mut all: BTreeMap<String, Arc<dyn AnyIndex>> = BTreeMap::new();
        for (id, index) in indexes {
            if all.contains_key(&id) {
                tracing::warn!(target: "kopf::indexing", index = %id, "two index functions have the id {id:?}: the second is ignored; give one another `id`");
                continue;
            }
            all.insert(id, index);
        }
        Indexes {
            all: Arc::new(all),
            filling: Arc::new(Filling {
                listed,
                expected: AtomicUsize::new(0),
                indexed: watch::channel(0).0,
                filled: AtomicBool::new(false),
            }),
            output: None,
        }
    }

    /// The index `id`, whatever its types.
    pub(crate) fn by_id(&self, id: &str) -> Option<&Arc<dyn AnyIndex>> {
        self.all.get(id)
    }

    /// The index `id` with these types, or an error saying what is wrong.
    pub(crate) fn get<K: IndexKey, V: IndexValue>(&self, id: &str) -> Result<&Index<K, V>> {
        let index = self.all.get(id).ok_or_else(|| {
            let known: Vec<&str> = self.all.keys().map(String::as_str).collect();
            Error::from(PermanentError::new(format!(
                "the operator has no index `{id}`: add its `#[kopf::index]` function to the registry (indexes: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )))
        })?;
        index
            .as_any()
            .downcast_ref::<Index<K, V>>()
            .ok_or_else(|| {
                PermanentError::new(format!(
                    "the index `{id}` is not a kopf::Index<{}, {}>: ask for the key and value types its function returns",
                    std::any::type_name::<K>(),
                    std::any::type_name::<V>()
                ))
                .into()
            })
    }

    /// The counts of one processor of a resource with indexes (invariant 2).
    pub(crate) fn filler(&self) -> Filler {
        Filler {
            filling: self.filling.clone(),
            expected: AtomicUsize::new(0),
            indexed: AtomicUsize::new(0),
        }
    }

    /// Whether the indexes are known to be filled after the start (or there are none): then
    /// [`Indexes::filled`] would not wait.
    pub(crate) fn is_filled(&self) -> bool {
        self.all.is_empty() || self.filling.filled.load(Ordering::SeqCst)
    }

    /// Waits until the indexes are filled after the start; `false` if stopped first.
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: it only waits.
    pub(crate) async fn filled(&self, stop: &CancellationToken) -> bool {
        let filling = &self.filling;
        if self.all.is_empty() || filling.filled.load(Ordering::SeqCst) {
            return true;
        }
        let filled = async {
            let mut listed = filling.listed.clone();
            if listed.wait_for(|listed| *listed).await.is_err() {
                // The operator is stopping without having listed everything.
                std::future::pending::<()>().await;
            }
            let mut indexed = filling.indexed.subscribe();
            let _ = indexed
                .wait_for(|n| *n >= filling.expected.load(Ordering::SeqCst))
                .await;
            if !filling.filled.swap(true, Ordering::SeqCst) {
                tracing::debug!(target: "kopf::indexing", "the indexes are filled");
            }
        };
        tokio::select! {
            _ = stop.cancelled() => false,
            _ = filled => true,
        }
    }
}

/// One processor's share of the filling (invariant 2): what it counted as queued and as
/// indexed. A processor that ends before indexing what it was given (its resource restarted
/// or gone) gives the rest up when dropped, so that nobody waits for it.
pub(crate) struct Filler {
    filling: Arc<Filling>,
    expected: AtomicUsize,
    indexed: AtomicUsize,
}

impl Filler {
    /// Counts an event queued for indexing.
    pub(crate) fn expect(&self, listed: bool) {
        if listed && !self.filling.filled.load(Ordering::SeqCst) {
            self.expected.fetch_add(1, Ordering::SeqCst);
            self.filling.expected.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Counts an event as indexed: the counterpart of [`expect`](Self::expect).
    pub(crate) fn indexed(&self, listed: bool) {
        if listed && self.indexed.load(Ordering::SeqCst) < self.expected.load(Ordering::SeqCst) {
            self.indexed.fetch_add(1, Ordering::SeqCst);
            self.filling.indexed.send_modify(|n| *n += 1);
        }
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        let left = self
            .expected
            .get_mut()
            .saturating_sub(*self.indexed.get_mut());
        if left > 0 {
            self.filling.indexed.send_modify(|n| *n += left);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(namespace: &str, name: &str) -> ObjectRef {
        ObjectRef::of(
            &json!({"metadata": {"namespace": namespace, "name": name, "uid": format!("uid-{name}")}}),
        )
    }

    fn values(index: &Index<String, i32>, key: &str) -> Vec<i32> {
        index
            .get(key)
            .map(|store| store.iter().copied().collect())
            .unwrap_or_default()
    }

    fn replace(
        index: &Index<String, i32>,
        object: &ObjectRef,
        entries: impl IntoIndexEntries<Key = String, Value = i32>,
    ) {
        if let Some(entries) = entries.into_index_entries() {
            index.write().replace(object, entries);
        }
    }

    #[test]
    fn objects_merge_under_their_keys_and_replace_their_own_entries() {
        let index = Index::<String, i32>::new();
        let (a, b) = (object("ns", "a"), object("ns", "b"));
        replace(
            &index,
            &a,
            BTreeMap::from([("x".to_string(), 1), ("y".to_string(), 2)]),
        );
        replace(&index, &b, ("x".to_string(), 3));
        assert_eq!(values(&index, "x"), [1, 3]);
        assert_eq!(values(&index, "y"), [2]);
        assert_eq!(index.len(), 2);
        assert!(index.contains_key("y"));

        // An update of `a` replaces all of its entries; the store `y`, left empty, goes.
        replace(&index, &a, ("x".to_string(), 10));
        assert_eq!(values(&index, "x"), [10, 3]);
        assert!(!index.contains_key("y"));
        assert_eq!(index.len(), 1);

        // `None` keeps the object's entries; an empty map removes them.
        replace(&index, &a, None::<(String, i32)>);
        assert_eq!(values(&index, "x"), [10, 3]);
        replace(&index, &a, HashMap::<String, i32>::new());
        assert_eq!(values(&index, "x"), [3]);

        index.write().discard(&b);
        assert!(index.is_empty());
        assert!(index.get("x").is_none());
    }

    #[test]
    fn stores_are_snapshots_in_the_order_of_the_objects() {
        let index = Index::<String, i32>::new();
        replace(&index, &object("ns", "b"), ("k".to_string(), 2));
        replace(&index, &object("ns", "a"), ("k".to_string(), 1));
        let store = index.get("k").expect("the key is in the index");
        replace(&index, &object("ns", "c"), ("k".to_string(), 3));
        assert_eq!(store.iter().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(store.len(), 2);
        assert!(!store.is_empty());
        assert!(store.contains(&2));
        assert!(!store.contains(&3));
        assert_eq!((&store).into_iter().sum::<i32>(), 3);
        assert_eq!(format!("{store:?}"), "[1, 2]");
        let all: Vec<(String, Vec<i32>)> = index
            .iter()
            .map(|(key, store)| (key, store.iter().copied().collect()))
            .collect();
        assert_eq!(all, [("k".to_string(), vec![1, 2, 3])]);
        assert_eq!(index.keys(), ["k"]);
        // A clone is the same index.
        let clone = index.clone();
        index.write().discard(&object("ns", "a"));
        assert_eq!(values(&clone, "k"), [2, 3]);
    }

    #[test]
    fn entries_convert_from_maps_pairs_vectors_and_options() {
        assert_eq!(("k", 1).into_index_entries(), Some(vec![("k", 1)]));
        assert_eq!(
            vec![("k", 1), ("j", 2), ("k", 3)].into_index_entries(),
            Some(vec![("k", 3), ("j", 2)])
        );
        assert_eq!(
            BTreeMap::from([("b", 2), ("a", 1)]).into_index_entries(),
            Some(vec![("a", 1), ("b", 2)])
        );
        assert_eq!(
            HashMap::from([("a", 1)]).into_index_entries(),
            Some(vec![("a", 1)])
        );
        assert_eq!(Some(("k", 1)).into_index_entries(), Some(vec![("k", 1)]));
        assert_eq!(None::<(&str, i32)>.into_index_entries(), None);
        assert_eq!(
            Some(Vec::<(&str, i32)>::new()).into_index_entries(),
            Some(vec![])
        );
        assert_eq!(
            ((), "unkeyed").into_index_entries(),
            Some(vec![((), "unkeyed")])
        );
    }

    /// One index, `by_x`, of `String` keys and `i32` values.
    fn by_x() -> [(String, Arc<dyn AnyIndex>); 1] {
        [("by_x".to_string(), new_index::<String, i32>())]
    }

    #[test]
    fn handlers_get_indexes_by_id_and_type() {
        let indexes = Indexes::new(by_x(), watch::channel(true).1);
        assert!(indexes.get::<String, i32>("by_x").is_ok());
        let wrong = indexes.get::<String, String>("by_x").unwrap_err();
        assert!(wrong.is_permanent());
        assert!(
            wrong
                .to_string()
                .starts_with("the index `by_x` is not a kopf::Index<"),
            "{wrong}"
        );
        let missing = indexes.get::<String, i32>("by_y").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "the operator has no index `by_y`: add its `#[kopf::index]` function to the registry (indexes: by_x)"
        );
    }

    #[tokio::test]
    async fn filled_after_the_listing_and_every_listed_object_indexed() {
        let (listed, listing) = watch::channel(false);
        let indexes = Indexes::new(by_x(), listing);
        let stop = CancellationToken::new();
        let filler = indexes.filler();
        filler.expect(true);
        filler.expect(false); // a watch event is not counted
        let waiting = tokio::spawn({
            let indexes = indexes.clone();
            let stop = stop.clone();
            async move { indexes.filled(&stop).await }
        });
        listed.send_replace(true);
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "one listed object is not indexed yet"
        );
        filler.indexed(true);
        assert!(waiting.await.expect("the waiting task"));
        // Filled for good: later objects do not make anyone wait.
        filler.expect(true);
        assert!(indexes.filled(&stop).await);

        let stopped = CancellationToken::new();
        stopped.cancel();
        let (_listed, listing) = watch::channel(false);
        let unfilled = Indexes::new(by_x(), listing);
        assert!(!unfilled.filled(&stopped).await);
        // A processor that ends with objects not indexed gives them up.
        let (listed, listing) = watch::channel(true);
        let restarted = Indexes::new(by_x(), listing);
        let gone = restarted.filler();
        gone.expect(true);
        gone.expect(true);
        gone.indexed(true);
        drop(gone);
        assert!(restarted.filled(&stop).await);
        drop(listed);
        assert!(
            Indexes::default().filled(&stopped).await,
            "no indexes: no waiting"
        );
    }
}
