//! The grammar of the coverage table: one row per Kopf name, and what checks each row.
//!
//! A row is `"kopf name" => STATE;`, where STATE is one of:
//!
//! - a check: the kopf-rs counterpart, implemented. `path(kopf::Memo)` is imported,
//!   `value(kopf::registry::Registry::collected)` is evaluated, `field(posting.level)` is read
//!   from a `kopf::Settings`, `attr(on_create, field = "spec.x")` is an attribute on a handler
//!   (the resource is added), `attr(on_create("kex"))` an attribute as written,
//!   `arg(on_create, spec: &Value)` a handler's argument (the resource, and the options that
//!   the kind requires, are added): the compiler checks all of them, so a wrong row does not
//!   build. `cli("run", "--namespace")`
//!   is looked for in the `--help` of the operator's own command line when the test runs.
//! - `pending("branch") CHECK`: a branch brings it; the check is not compiled yet. Once that
//!   branch is merged, deleting `pending("branch")` makes the row implemented and checked.
//! - `different("reason")`: a deliberate difference, with the reason the chapter prints.
//! - `missing("note") [CHECK]`: not in kopf-rs yet; the check, if any, is what it would be.

/// The table: a `ROWS` constant to compare and print, and one compile-time check per
/// implemented row.
macro_rules! surface {
    ($($kopf:literal => $head:ident ($($h:tt)*) $($kind:ident ($($c:tt)*))? ;)*) => {
        /// Every row of the table, in its order.
        pub(crate) const ROWS: &[crate::Row] = &[
            $(surface!(@row $kopf => $head ($($h)*) $($kind ($($c)*))?)),*
        ];
        $(surface!(@check $head ($($h)*) $($kind ($($c)*))?);)*
    };

    (@row $kopf:literal => pending ($branch:literal) $kind:ident ($($c:tt)*)) => {
        crate::Row {
            kopf: $kopf,
            state: crate::State::Pending($branch),
            check: Some(crate::Check { kind: stringify!($kind), text: stringify!($($c)*) }),
        }
    };
    (@row $kopf:literal => missing ($note:literal) $($kind:ident ($($c:tt)*))?) => {
        crate::Row {
            kopf: $kopf,
            state: crate::State::Missing($note),
            check: surface!(@maybe $($kind ($($c)*))?),
        }
    };
    (@row $kopf:literal => different ($reason:literal)) => {
        crate::Row { kopf: $kopf, state: crate::State::Different($reason), check: None }
    };
    (@row $kopf:literal => $kind:ident ($($c:tt)*)) => {
        crate::Row {
            kopf: $kopf,
            state: crate::State::Implemented,
            check: Some(crate::Check { kind: stringify!($kind), text: stringify!($($c)*) }),
        }
    };
    (@maybe) => { None };
    (@maybe $kind:ident ($($c:tt)*)) => {
        Some(crate::Check { kind: stringify!($kind), text: stringify!($($c)*) })
    };

    (@check pending $($rest:tt)*) => {};
    (@check missing $($rest:tt)*) => {};
    (@check different $($rest:tt)*) => {};
    (@check cli $($rest:tt)*) => {};
    (@check path ($($path:ident)::+)) => {
        const _: () = {
            #[allow(unused_imports, reason = "the import is the check")]
            use $($path)::+ as _;
        };
    };
    (@check value ($value:expr)) => {
        const _: () = {
            #[allow(dead_code, reason = "compiled, never called")]
            fn check() {
                let _ = || $value;
            }
        };
    };
    (@check field ($($field:ident).+)) => {
        const _: () = {
            #[allow(dead_code, reason = "compiled, never called")]
            fn check(settings: &kopf::Settings) {
                let _ = &settings.$($field).+;
            }
        };
    };
    (@check attr ($attr:ident ($($args:tt)*))) => {
        surface!(@handler $attr [$($args)*] ());
    };
    // Activities serve no resource; the others get one added (the row's options follow).
    (@check attr (on_startup $(, $($options:tt)*)?)) => {
        surface!(@handler on_startup [$($($options)*)?] ());
    };
    (@check attr (on_cleanup $(, $($options:tt)*)?)) => {
        surface!(@handler on_cleanup [$($($options)*)?] ());
    };
    (@check attr (on_probe $(, $($options:tt)*)?)) => {
        surface!(@handler on_probe [$($($options)*)?] ());
    };
    (@check attr (on_login $(, $($options:tt)*)?)) => {
        surface!(@handler on_login [$($($options)*)?] ());
    };
    (@check attr ($attr:ident $(, $($options:tt)*)?)) => {
        surface!(@handler $attr ["kopf.dev", "v1", "kopfexamples" $(, $($options)*)?] ());
    };
    // An argument's handler gets what its kind requires: a resource, a field, an interval.
    (@check arg (on_startup, $($param:tt)*)) => {
        surface!(@handler on_startup [] ($($param)*));
    };
    (@check arg (on_cleanup, $($param:tt)*)) => {
        surface!(@handler on_cleanup [] ($($param)*));
    };
    (@check arg (on_probe, $($param:tt)*)) => {
        surface!(@handler on_probe [] ($($param)*));
    };
    (@check arg (on_login, $($param:tt)*)) => {
        surface!(@handler on_login [] ($($param)*));
    };
    (@check arg (on_field, $($param:tt)*)) => {
        surface!(@handler on_field ["kopf.dev", "v1", "kopfexamples", field = "spec"] ($($param)*));
    };
    (@check arg (timer, $($param:tt)*)) => {
        surface!(@handler timer ["kopf.dev", "v1", "kopfexamples", interval = 1] ($($param)*));
    };
    (@check arg ($attr:ident, $($param:tt)*)) => {
        surface!(@handler $attr ["kopf.dev", "v1", "kopfexamples"] ($($param)*));
    };

    // A handler of the kind, with what it must return.
    (@handler on_login [$($args:tt)*] ($($param:tt)*)) => {
        surface!(@expand on_login [$($args)*] ($($param)*) -> Option<kopf::login::ConnectionInfo> { None });
    };
    (@handler index [$($args:tt)*] ($($param:tt)*)) => {
        surface!(@expand index [$($args)*] ($($param)*) -> Option<(String, String)> { None });
    };
    (@handler $attr:ident [$($args:tt)*] ($($param:tt)*)) => {
        surface!(@expand $attr [$($args)*] ($($param)*) -> () {});
    };
    (@expand $attr:ident [$($args:tt)*] ($($param:tt)*) -> $output:ty $body:block) => {
        const _: () = {
            #[allow(dead_code, unused_variables, reason = "compiled, never called")]
            #[kopf::$attr($($args)*)]
            async fn check($($param)*) -> $output $body
        };
    };
}

pub(crate) use surface;
