//! One call of a login handler: what its function returns, the sync adapter, and the
//! conversion of what attributed functions return into credentials.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::actions::invocation::Invocation;
use crate::helpers::sync::lock;
use crate::structs::credentials::{ConnectionInfo, Credentials};
use crate::structs::errors::{Error, Result};

/// What a login handler's function returns: credentials, or `None` when it has none to give
/// (the next login handler is asked).
pub type LoginResult = Result<Option<Credentials>>;

/// A boxed login future.
pub type LoginFuture = Pin<Box<dyn Future<Output = LoginResult> + Send + 'static>>;

/// A login function as the framework stores it.
pub type LoginFn = Arc<dyn Fn(Invocation) -> LoginFuture + Send + Sync>;

/// A sync login function, run on the operator's threads (as [`crate::registry::blocking`] does for
/// other handlers). Used by `#[kopf::on_login]` on a plain `fn`.
#[doc(hidden)]
pub fn blocking_login<F>(function: F) -> impl Fn(Invocation) -> LoginFuture + Send + Sync + 'static
where
    F: Fn(Invocation) -> LoginResult + Send + Sync + 'static,
{
    let function = Arc::new(function);
    move |invocation| -> LoginFuture {
        let slot: Arc<Mutex<Option<Credentials>>> = Arc::default();
        let (function, given) = (function.clone(), slot.clone());
        let handler = crate::actions::blocking::blocking(move |invocation| {
            *lock(&given) = function(invocation)?;
            Ok(None)
        });
        let attempt = handler(invocation);
        Box::pin(async move {
            attempt.await?;
            Ok(lock(&slot).take())
        })
    }
}

/// What `#[kopf::on_login]` functions may return: credentials, optional credentials, or a
/// `Result` of either.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a login handler returns credentials, not `{Self}`",
    label = "not credentials",
    note = "return `kopf::login::ConnectionInfo` or `kube::Config`, an `Option` of either (`None`: no credentials from this handler), or a `kopf::Result` of those"
)]
pub trait LoginOutput {
    /// The credentials, as the framework stores them.
    fn into_login_result(self) -> LoginResult;
}

impl LoginOutput for ConnectionInfo {
    fn into_login_result(self) -> LoginResult {
        Ok(Some(self.into()))
    }
}

impl LoginOutput for kube::Config {
    fn into_login_result(self) -> LoginResult {
        Ok(Some(self.into()))
    }
}

impl LoginOutput for Credentials {
    fn into_login_result(self) -> LoginResult {
        Ok(Some(self))
    }
}

impl<T: Into<Credentials>> LoginOutput for Option<T> {
    fn into_login_result(self) -> LoginResult {
        Ok(self.map(Into::into))
    }
}

impl<T: LoginOutput, E: Into<Error>> LoginOutput for std::result::Result<T, E> {
    fn into_login_result(self) -> LoginResult {
        self.map_err(Into::into)?.into_login_result()
    }
}
