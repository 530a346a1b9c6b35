//! Memos: what handlers keep between calls, per object and for the whole operator (Kopf's
//! `memo`).
//!
//! An operator is given one memo ([`Operator::memo`](crate::operator::Operator::memo)). The first
//! time the operator sees an object, the object gets a memo of its own: a shallow copy of the
//! operator's. The object's memo is kept while the object lives (across its events and its
//! worker's restarts) and dropped when the object is deleted. Every handler of that object,
//! event handlers and change handlers alike, gets the same memo
//! ([`Invocation::memo`](crate::Invocation::memo)).
//!
//! A memo holds two kinds of things:
//!
//! - **typed values**, one per type, as in `http::Extensions`: clients, channels, caches,
//!   anything `Send + Sync + 'static`. They are kept in an `Arc`; "shallow copy" means that
//!   every object's memo shares the operator's `Arc`, so a value with interior mutability
//!   (a `Mutex`, an atomic, a channel sender) put into the operator memo is shared by all
//!   objects, while inserting a new value into one object's memo affects only that object;
//! - **JSON values** by key, for plain data (Kopf's `memo.key = value`). They are copied into
//!   each object's memo, so changing them in one object's memo never affects another.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use kopf::Memo;
//!
//! /// Shared by every object: the operator memo's value is seeded into each object's memo.
//! #[derive(Default)]
//! struct Seen(AtomicUsize);
//!
//! let operator_memo = Memo::new().with(Seen::default()).with_value("greeting", "hello");
//!
//! // In a handler, with `let memo = invocation.memo();`:
//! # let memo = operator_memo.clone();
//! memo.get::<Seen>().expect("seeded by the operator").0.fetch_add(1, Ordering::Relaxed);
//! let calls = memo.update(|values| {
//!     let calls = values.get("calls").and_then(|v| v.as_u64()).unwrap_or(0) + 1;
//!     values.insert("calls".into(), calls.into());
//!     calls
//! });
//! assert_eq!(calls, 1);
//! assert_eq!(memo.value_as::<String>("greeting").as_deref(), Some("hello"));
//! ```
//!
//! Invariants:
//! 1. A `Memo` is a handle: clones share one store. [`Memo::shallow_copy`] is the only way to
//!    make a second store, and it shares the typed values' `Arc`s.
//! 2. The lock is held only inside the memo's own methods, never while user code runs (except
//!    the closure given to [`Memo::update`], which must not use the same memo), and never
//!    across an `.await`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use crate::helpers::freeing::FreedApart;

type Typed = Arc<dyn Any + Send + Sync>;

/// A shared store for handlers' own state: typed values (one per type) and JSON values (by
/// key). Cloning gives another handle to the same store. Each object's memo starts as a
/// shallow copy of the operator's: typed values are shared (the same `Arc`), JSON values copied.
#[derive(Clone, Default)]
pub struct Memo {
    contents: Arc<Mutex<Contents>>,
}

#[derive(Clone, Default)]
struct Contents {
    /// By type; the type's name is kept for `Debug`.
    typed: HashMap<TypeId, (&'static str, Typed)>,
    values: Map<String, Value>,
}

impl Memo {
    /// An empty memo.
    pub fn new() -> Memo {
        Memo::default()
    }

    /// This memo with a typed value added: for building the operator's memo.
    ///
    /// ```
    /// let memo = kopf::Memo::new().with(String::from("shared"));
    /// assert_eq!(memo.get::<String>().as_deref().map(String::as_str), Some("shared"));
    /// ```
    pub fn with<T: Any + Send + Sync>(self, value: T) -> Memo {
        self.insert(value);
        self
    }

    /// This memo with a JSON value set under `key`: for building the operator's memo.
    pub fn with_value(self, key: impl Into<String>, value: impl Into<Value>) -> Memo {
        self.set(key, value);
        self
    }

    /// Keeps `value` as the memo's value of type `T`; returns the one it replaces.
    pub fn insert<T: Any + Send + Sync>(&self, value: T) -> Option<Arc<T>> {
        TYPED_KEPT.store(true, Ordering::Release);
        let value: Typed = Arc::new(value);
        let previous = self
            .lock()
            .typed
            .insert(TypeId::of::<T>(), (std::any::type_name::<T>(), value));
        previous.and_then(|(_, previous)| previous.downcast().ok())
    }

    /// The memo's value of type `T`, if any.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let value = self.lock().typed.get(&TypeId::of::<T>())?.1.clone();
        value.downcast().ok()
    }

    /// The memo's value of type `T`, made by `make` and kept if there is none. `make` runs
    /// without the memo locked; if two callers race, the first value kept wins.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// let memo = kopf::Memo::new();
    /// let names = memo.get_or_insert_with(|| Mutex::new(Vec::<String>::new()));
    /// names.lock().unwrap().push("one".into());
    /// assert_eq!(memo.get::<Mutex<Vec<String>>>().unwrap().lock().unwrap().len(), 1);
    /// ```
    pub fn get_or_insert_with<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        if let Some(value) = self.get::<T>() {
            return value;
        }
        TYPED_KEPT.store(true, Ordering::Release);
        let made: Typed = Arc::new(make());
        let kept = self
            .lock()
            .typed
            .entry(TypeId::of::<T>())
            .or_insert((std::any::type_name::<T>(), made))
            .1
            .clone();
        kept.downcast()
            .expect("values are kept under their own type's id")
    }

    /// Removes the memo's value of type `T`; returns it.
    pub fn remove<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let (_, value) = self.lock().typed.remove(&TypeId::of::<T>())?;
        value.downcast().ok()
    }

    /// Sets the JSON value under `key`; returns the one it replaces.
    pub fn set(&self, key: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        self.lock().values.insert(key.into(), value.into())
    }

    /// The JSON value under `key`, if any.
    pub fn value(&self, key: &str) -> Option<Value> {
        self.lock().values.get(key).cloned()
    }

    /// The JSON value under `key` deserialized into `T`; `None` when absent or of another
    /// shape.
    pub fn value_as<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        T::deserialize(self.lock().values.get(key)?).ok()
    }

    /// Removes the JSON value under `key`; returns it.
    pub fn remove_value(&self, key: &str) -> Option<Value> {
        self.lock().values.remove(key)
    }

    /// Reads and changes the JSON values at once, with no other handler's change in between
    /// (e.g. a counter). `f` must not use this memo itself: it runs with the memo locked.
    pub fn update<R>(&self, f: impl FnOnce(&mut Map<String, Value>) -> R) -> R {
        f(&mut self.lock().values)
    }

    /// A copy of the JSON values.
    pub fn values(&self) -> Map<String, Value> {
        self.lock().values.clone()
    }

    /// A new memo with the same contents: typed values shared (the same `Arc`s), JSON values
    /// copied. This is what each object's memo starts as (Kopf's shallow copy).
    pub fn shallow_copy(&self) -> Memo {
        let contents = self.lock().clone();
        Memo {
            contents: Arc::new(Mutex::new(contents)),
        }
    }

    /// Whether both handles reach the same store.
    pub fn ptr_eq(&self, other: &Memo) -> bool {
        Arc::ptr_eq(&self.contents, &other.contents)
    }

    /// Drops this memo's typed values here if this is the memo's only handle, and says whether
    /// it was: what is left then is plain data (JSON values), which no handler's `Drop` waits
    /// for.
    fn let_go_of_typed(&mut self) -> bool {
        let Some(contents) = Arc::get_mut(&mut self.contents) else {
            return false;
        };
        let contents = contents
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        drop(std::mem::take(&mut contents.typed));
        true
    }

    fn lock(&self) -> MutexGuard<'_, Contents> {
        self.contents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The memos of the objects the operator has seen, by uid: one store for every resource's
/// processor and for admission reviews, so that an admission handler of an existing object
/// gets the memo its other handlers get (Kopf's memories, keyed by uid).
#[derive(Clone, Default)]
pub(crate) struct ObjectMemos(Arc<Table>);

/// The memos by uid. When the last handle goes (at the operator's exit), the handlers' typed
/// values are dropped in place, since their `Drop`s are the handlers' own and may matter
/// before the process ends; the rest, plain data, is freed apart ([`FreedApart`]): a
/// thousand objects' memos took a millisecond of the exit's last, serial steps.
#[derive(Default)]
struct Table(Mutex<HashMap<String, Memo>>);

/// Whether any memo of the process was ever given a typed value: set as one is kept, read as
/// a table is dropped (at the operator's exit, after the handlers' tasks, which keep them,
/// have ended).
static TYPED_KEPT: AtomicBool = AtomicBool::new(false);

impl Drop for Table {
    fn drop(&mut self) {
        let memos = self
            .0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A memo with another handle still somewhere is dropped here too: that handle's
        // owner may drop it first, and this one's drop would then be the last. Without a
        // typed value in any memo, no memo is visited (each is a cache miss at the exit).
        if TYPED_KEPT.load(Ordering::Acquire) {
            memos.retain(|_, memo| memo.let_go_of_typed());
        }
        drop(FreedApart(std::mem::take(memos)));
    }
}

impl ObjectMemos {
    /// The object's memo, made on first sight as a shallow copy of `base`.
    pub(crate) fn get_or_copy(&self, uid: &str, base: &Memo) -> Memo {
        crate::helpers::sync::lock(&self.0.0)
            .entry(uid.to_owned())
            .or_insert_with(|| base.shallow_copy())
            .clone()
    }

    /// The object's memo, if the operator has seen the object.
    pub(crate) fn get(&self, uid: &str) -> Option<Memo> {
        crate::helpers::sync::lock(&self.0.0).get(uid).cloned()
    }

    /// Forgets the object's memo: the object is gone.
    pub(crate) fn forget(&self, uid: &str) {
        crate::helpers::sync::lock(&self.0.0).remove(uid);
    }
}

impl fmt::Debug for ObjectMemos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = crate::helpers::sync::lock(&self.0.0).len();
        f.debug_struct("ObjectMemos")
            .field("objects", &count)
            .finish()
    }
}

impl fmt::Debug for Memo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let contents = self.lock();
        let mut types: Vec<&str> = contents.typed.values().map(|(name, _)| *name).collect();
        types.sort_unstable();
        f.debug_struct("Memo")
            .field("typed", &types)
            .field("values", &contents.values)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_shallow_copy_shares_typed_values_and_copies_json_values() {
        let operator = Memo::new()
            .with(AtomicUsize::new(0))
            .with_value("key", "operator");
        let one = operator.shallow_copy();
        let two = operator.shallow_copy();
        assert!(!one.ptr_eq(&two));

        one.get::<AtomicUsize>()
            .unwrap()
            .fetch_add(1, Ordering::SeqCst);
        assert_eq!(two.get::<AtomicUsize>().unwrap().load(Ordering::SeqCst), 1);

        one.set("key", "one");
        one.insert(String::from("only in one"));
        assert_eq!(two.value("key"), Some(Value::from("operator")));
        assert_eq!(operator.value("key"), Some(Value::from("operator")));
        assert!(two.get::<String>().is_none());
    }

    #[test]
    fn typed_values_are_kept_one_per_type() {
        let memo = Memo::new();
        assert!(memo.insert(1_u32).is_none());
        assert_eq!(memo.insert(2_u32).as_deref(), Some(&1));
        memo.insert(3_u64);
        assert_eq!(memo.get::<u32>().as_deref(), Some(&2));
        assert_eq!(memo.remove::<u64>().as_deref(), Some(&3));
        assert!(memo.get::<u64>().is_none());
        assert_eq!(*memo.get_or_insert_with(|| 7_u64), 7);
        assert_eq!(*memo.get_or_insert_with(|| 8_u64), 7);
        assert_eq!(
            format!("{memo:?}"),
            r#"Memo { typed: ["u32", "u64"], values: {} }"#
        );
    }

    #[test]
    fn json_values_read_as_types() {
        let memo = Memo::new();
        memo.set("count", 3);
        assert_eq!(memo.value_as::<u32>("count"), Some(3));
        assert_eq!(memo.value_as::<String>("count"), None);
        assert_eq!(memo.remove_value("count"), Some(Value::from(3)));
        assert!(memo.values().is_empty());
    }

    /// Counts its drops, and tells on which thread they happened.
    struct Dropped(Arc<Mutex<Vec<std::thread::ThreadId>>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0
                .lock()
                .expect("the drops")
                .push(std::thread::current().id());
        }
    }

    /// When the operator ends, the memos' plain data may be freed apart, but not the handlers'
    /// typed values: their `Drop`s run where the memos are dropped, before the drop returns. A
    /// memo still held elsewhere keeps its values for its holder, whose drop of it is the last.
    #[test]
    fn the_handlers_values_are_dropped_in_place_when_the_memos_go() {
        let drops = Arc::new(Mutex::new(Vec::new()));
        let memos = ObjectMemos::default();
        let objects = 2 * crate::helpers::freeing::LARGE;
        for i in 0..objects {
            let memo = memos.get_or_copy(&format!("uid-{i}"), &Memo::new());
            memo.insert(Dropped(drops.clone()));
            memo.set("i", i);
        }
        let held = memos.get("uid-0").expect("seen");
        drop(memos);
        let here = std::thread::current().id();
        let dropped = drops.lock().expect("the drops").clone();
        assert_eq!(
            dropped.len(),
            objects - 1,
            "every value but the held memo's"
        );
        assert!(dropped.iter().all(|thread| *thread == here), "all in place");
        assert_eq!(
            held.value("i"),
            Some(Value::from(0)),
            "the held memo is whole"
        );
        assert!(held.get::<Dropped>().is_some());
        drop(held);
        assert_eq!(drops.lock().expect("the drops").len(), objects);
    }
}
