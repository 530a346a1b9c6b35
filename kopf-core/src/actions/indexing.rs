//! Indexes as handler arguments: [`Invocation::index`], the traits that let attributed
//! handlers take an index by its function's name, and the hand-over of an index function's
//! entries.

use crate::actions::activity::{ActivityInvocation, ActivityScope};
use crate::actions::extract::Scope;
use crate::actions::invocation::{HandlerResult, Invocation};
use crate::structs::errors::{Error, Result};
use crate::structs::indexes::{Index, IndexKey, IndexValue, IntoIndexEntries, deliver};

impl Invocation {
    /// The operator's index `id` (the name of its `#[kopf::index]` function, or its `id`), with
    /// the key and value types that its function returns; an error (permanent) when the
    /// operator has no such index or its types differ. Handlers written with the attribute
    /// macros ask for it as an argument instead.
    ///
    /// ```
    /// # async fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
    /// let pods = invocation.index::<String, String>("pods_by_app")?;
    /// let count = pods.get("web").map_or(0, |store| store.len());
    /// # Ok(Some(count.into()))
    /// # }
    /// ```
    pub fn index<K: IndexKey, V: IndexValue>(&self, id: &str) -> Result<&Index<K, V>> {
        self.indexes.get(id)
    }
}

/// The type that `#[kopf::index]` generates with its function's name: how handlers name the
/// index they take as an argument.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `#[kopf::index]` function",
    label = "this argument is neither a handler argument nor an index",
    note = "a parameter that is not one of the handler's arguments takes the index of the `#[kopf::index]` function of the same name, which must be in scope"
)]
pub trait IndexDescriptor {
    /// The index's keys.
    type Key: IndexKey;
    /// The index's values.
    type Value: IndexValue;
    /// The index's id.
    fn id() -> &'static str;
}

/// Implemented by the type that `#[kopf::index]` generates for the types of its index, so
/// that a handler's parameter of another type is reported as such.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `#[kopf::index]` function of a `kopf::Index<{K}, {V}>`",
    label = "not an index of this type",
    note = "a parameter that is not one of the handler's arguments takes the index of the `#[kopf::index]` function of that name, which must be in scope",
    note = "take an index as `&kopf::Index<K, V>` or `kopf::Index<K, V>`, with the key and value types that its function returns"
)]
pub trait IndexOf<K, V>: IndexDescriptor {}

/// An index taken by value (a handle to the same index), for the index `D`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the index `{D}` is not a `{Self}`",
    label = "not the type of this index",
    note = "take an index as `&kopf::Index<K, V>` or `kopf::Index<K, V>`, with the key and value types that its `#[kopf::index]` function returns"
)]
pub trait IndexArgument<D>: Sized {
    /// The index.
    fn extract(invocation: &Invocation) -> Result<Self>;
}

impl<D, K, V> IndexArgument<D> for Index<K, V>
where
    D: IndexOf<K, V>,
    K: IndexKey,
    V: IndexValue,
{
    fn extract(invocation: &Invocation) -> Result<Self> {
        invocation.index(D::id()).cloned()
    }
}

/// An index taken by reference, for the index `D`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the index `{D}` is not a `{Self}`",
    label = "not the type of this index",
    note = "take an index as `&kopf::Index<K, V>` or `kopf::Index<K, V>`, with the key and value types that its `#[kopf::index]` function returns"
)]
pub trait BorrowedIndexArgument<'a, D>: Sized {
    /// The index.
    fn borrow(scope: &mut Scope<'a>) -> Result<Self>;
}

impl<'a, D, K, V> BorrowedIndexArgument<'a, D> for &'a Index<K, V>
where
    D: IndexOf<K, V>,
    K: IndexKey,
    V: IndexValue,
{
    fn borrow(scope: &mut Scope<'a>) -> Result<Self> {
        scope.invocation().index(D::id())
    }
}

/// An index taken by value by an activity handler (`on_startup`, `on_cleanup`, `on_probe`),
/// for the index `D`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the index `{D}` is not a `{Self}`",
    label = "not the type of this index",
    note = "take an index as `&kopf::Index<K, V>` or `kopf::Index<K, V>`, with the key and value types that its `#[kopf::index]` function returns"
)]
pub trait ActivityIndexArgument<D>: Sized {
    /// The index.
    fn extract(invocation: &ActivityInvocation) -> Result<Self>;
}

impl<D, K, V> ActivityIndexArgument<D> for Index<K, V>
where
    D: IndexOf<K, V>,
    K: IndexKey,
    V: IndexValue,
{
    fn extract(invocation: &ActivityInvocation) -> Result<Self> {
        invocation.index(D::id()).cloned()
    }
}

/// An index taken by reference by an activity handler, for the index `D`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the index `{D}` is not a `{Self}`",
    label = "not the type of this index",
    note = "take an index as `&kopf::Index<K, V>` or `kopf::Index<K, V>`, with the key and value types that its `#[kopf::index]` function returns"
)]
pub trait BorrowedActivityIndexArgument<'a, D>: Sized {
    /// The index.
    fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self>;
}

impl<'a, D, K, V> BorrowedActivityIndexArgument<'a, D> for &'a Index<K, V>
where
    D: IndexOf<K, V>,
    K: IndexKey,
    V: IndexValue,
{
    fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self> {
        scope.invocation().index(D::id())
    }
}

/// The entries of an index function written with `#[kopf::index]` returning a `Result`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "an index function cannot return `{Self}`",
    label = "an index function's `Result` is `std::result::Result<T, E>` (or an alias of it)",
    note = "its `Ok` value is the object's entries (a map, a `Vec<(K, V)>`, a `(K, V)` pair, or an `Option` of one), its error converts into `kopf::Error`"
)]
pub trait IndexResult {
    /// The `Ok` type.
    type Entries: IntoIndexEntries;
}

impl<T: IntoIndexEntries, E: Into<Error>> IndexResult for std::result::Result<T, E> {
    type Entries = T;
}

/// Hands a generated index function's entries over to the indexing.
#[doc(hidden)]
pub fn index_output<T: IntoIndexEntries>(invocation: &Invocation, entries: T) -> HandlerResult {
    deliver(invocation.indexes.output.as_ref(), entries);
    Ok(None)
}

/// Hands a generated index function's `Ok` entries over, or returns its error.
#[doc(hidden)]
pub fn index_result_output<T: IntoIndexEntries, E: Into<Error>>(
    invocation: &Invocation,
    result: std::result::Result<T, E>,
) -> HandlerResult {
    match result {
        Ok(entries) => index_output(invocation, entries),
        Err(error) => Err(error.into()),
    }
}
