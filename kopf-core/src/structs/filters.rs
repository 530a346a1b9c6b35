//! Filters of resource handlers: on labels and annotations, and on the values of a field.
//!
//! These are the `labels=`, `annotations=`, `value=`, `old=` and `new=` options of Kopf's
//! decorators. A handler runs only if all of its filters match. As Kopf's callables get the
//! cause's kwargs besides the value, a callable filter may look at the whole object (its
//! `body`): [`MetaFilter::callable_with_body`], [`ValueFilter::callable_with_body`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::structs::diff::json_eq;

/// The function of a [`MetaFilter::Callable`]: given a label's or annotation's value (`None`
/// if absent) and the whole object, whether it passes.
pub type MetaFilterFn = Arc<dyn Fn(Option<&str>, &Value) -> bool + Send + Sync>;

/// The function of a [`ValueFilter::Callable`]: given a field's value (`None` if absent) and
/// the whole object, whether it passes.
pub type ValueFilterFn = Arc<dyn Fn(Option<&Value>, &Value) -> bool + Send + Sync>;

/// A filter on one label or annotation (Kopf's `labels={key: ...}` and
/// `annotations={key: ...}`).
#[derive(Clone)]
pub enum MetaFilter {
    /// The key must be present with exactly this value.
    Value(String),
    /// The key must be present, with any value (Kopf's `kopf.PRESENT`).
    Present,
    /// The key must be absent (Kopf's `kopf.ABSENT`).
    Absent,
    /// The function decides, given the value (`None` if the key is absent) and the object.
    Callable(MetaFilterFn),
}

impl MetaFilter {
    /// A filter that lets `f` decide, given the value or `None` if the key is absent.
    pub fn callable(f: impl Fn(Option<&str>) -> bool + Send + Sync + 'static) -> Self {
        MetaFilter::Callable(Arc::new(move |value, _| f(value)))
    }

    /// A filter that lets `f` decide, given the value (`None` if the key is absent) and the
    /// whole object, as Kopf's callables get the `body` among their kwargs:
    ///
    /// ```
    /// use kopf::filters::MetaFilter;
    /// // The label `owner` names the object's own `spec.owner`.
    /// let filter = MetaFilter::callable_with_body(|value, body| {
    ///     value.is_some() && value == body["spec"]["owner"].as_str()
    /// });
    /// let body = serde_json::json!({"spec": {"owner": "ann"}});
    /// assert!(filter.matches_in(Some("ann"), &body));
    /// assert!(!filter.matches_in(Some("bob"), &body));
    /// ```
    pub fn callable_with_body(
        f: impl Fn(Option<&str>, &Value) -> bool + Send + Sync + 'static,
    ) -> Self {
        MetaFilter::Callable(Arc::new(f))
    }

    /// Whether the label or annotation's actual value (`None` if absent) passes this filter,
    /// for a callable seeing no object (`null` as its body).
    pub fn matches(&self, actual: Option<&str>) -> bool {
        self.matches_in(actual, &Value::Null)
    }

    /// Whether the label or annotation's actual value (`None` if absent) of the object `body`
    /// passes this filter.
    pub fn matches_in(&self, actual: Option<&str>, body: &Value) -> bool {
        match self {
            MetaFilter::Value(expected) => actual == Some(expected.as_str()),
            MetaFilter::Present => actual.is_some(),
            MetaFilter::Absent => actual.is_none(),
            MetaFilter::Callable(f) => f(actual, body),
        }
    }
}

impl fmt::Debug for MetaFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaFilter::Value(value) => f.debug_tuple("Value").field(value).finish(),
            MetaFilter::Present => f.write_str("Present"),
            MetaFilter::Absent => f.write_str("Absent"),
            MetaFilter::Callable(_) => f.write_str("Callable(..)"),
        }
    }
}

impl From<&str> for MetaFilter {
    fn from(value: &str) -> Self {
        MetaFilter::Value(value.to_owned())
    }
}

impl From<String> for MetaFilter {
    fn from(value: String) -> Self {
        MetaFilter::Value(value)
    }
}

/// A filter on the value of a handler's field (Kopf's `value=`, `old=` and `new=`).
#[derive(Clone)]
pub enum ValueFilter {
    /// The field must be present and equal to this value. Numbers compare by value (`1`
    /// equals `1.0`), objects regardless of key order. `Value(Value::Null)` requires a present
    /// `null` (Kopf cannot express this: its `value=None` means "no filter").
    Value(Value),
    /// The field must be present, with any value, `null` included (Kopf's `kopf.PRESENT`).
    Present,
    /// The field must be absent (Kopf's `kopf.ABSENT`).
    Absent,
    /// The function decides, given the value (`None` if the field is absent) and the object.
    Callable(ValueFilterFn),
}

impl ValueFilter {
    /// A filter that lets `f` decide, given the value or `None` if the field is absent.
    pub fn callable(f: impl Fn(Option<&Value>) -> bool + Send + Sync + 'static) -> Self {
        ValueFilter::Callable(Arc::new(move |value, _| f(value)))
    }

    /// A filter that lets `f` decide, given the value (`None` if the field is absent) and the
    /// whole object, as Kopf's callables get the `body` among their kwargs.
    pub fn callable_with_body(
        f: impl Fn(Option<&Value>, &Value) -> bool + Send + Sync + 'static,
    ) -> Self {
        ValueFilter::Callable(Arc::new(f))
    }

    /// Whether the field's actual value (`None` if absent) passes this filter, for a callable
    /// seeing no object (`null` as its body).
    pub fn matches(&self, actual: Option<&Value>) -> bool {
        self.matches_in(actual, &Value::Null)
    }

    /// Whether the field's actual value (`None` if absent) in the object `body` passes this
    /// filter.
    pub fn matches_in(&self, actual: Option<&Value>, body: &Value) -> bool {
        match self {
            ValueFilter::Value(expected) => actual.is_some_and(|actual| json_eq(expected, actual)),
            ValueFilter::Present => actual.is_some(),
            ValueFilter::Absent => actual.is_none(),
            ValueFilter::Callable(f) => f(actual, body),
        }
    }
}

impl fmt::Debug for ValueFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueFilter::Value(value) => f.debug_tuple("Value").field(value).finish(),
            ValueFilter::Present => f.write_str("Present"),
            ValueFilter::Absent => f.write_str("Absent"),
            ValueFilter::Callable(_) => f.write_str("Callable(..)"),
        }
    }
}

impl From<Value> for ValueFilter {
    fn from(value: Value) -> Self {
        ValueFilter::Value(value)
    }
}

/// Whether the labels (or annotations) of the object `body` pass all the filters; no filters
/// always pass. Callables get the object too.
///
/// `None` stands for an object without labels. Values that are not strings (Kubernetes never
/// returns such) are treated as absent keys.
pub(crate) fn match_labels(
    filters: &BTreeMap<String, MetaFilter>,
    labels: Option<&Map<String, Value>>,
    body: &Value,
) -> bool {
    filters.iter().all(|(key, filter)| {
        let actual = labels
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str);
        filter.matches_in(actual, body)
    })
}

/// Whether the object's labels and annotations pass the filters.
pub(crate) fn match_metadata(
    labels: &BTreeMap<String, MetaFilter>,
    annotations: &BTreeMap<String, MetaFilter>,
    body: &Value,
) -> bool {
    let meta = &body["metadata"];
    match_labels(labels, meta["labels"].as_object(), body)
        && match_labels(annotations, meta["annotations"].as_object(), body)
}

/// A server-side `labelSelector` that preselects the objects the filters can match, or `None`
/// if no filter can be expressed (callables cannot: they are left to [`match_labels`]).
///
/// `Value` becomes `key=value`, `Present` becomes `key`, `Absent` becomes `!key`, joined with
/// commas in key order. Kopf does not send label selectors when watching (it filters only
/// client-side; it translates the same filters only into webhooks' `objectSelector`), so this
/// is a kopf-rs addition: a watch may use it only if every handler of the watched resource
/// has these filters, and it must remember that an object whose labels stop matching
/// disappears from such a watch as if deleted.
pub(crate) fn label_selector(filters: &BTreeMap<String, MetaFilter>) -> Option<String> {
    let requirements: Vec<String> = filters
        .iter()
        .filter_map(|(key, filter)| match filter {
            MetaFilter::Value(value) => Some(format!("{key}={value}")),
            MetaFilter::Present => Some(key.clone()),
            MetaFilter::Absent => Some(format!("!{key}")),
            MetaFilter::Callable(_) => None,
        })
        .collect();
    (!requirements.is_empty()).then(|| requirements.join(","))
}

/// Whether a field's values pass a handler's `value`, `old` and `new` filters (Kopf's
/// `_matches_field_values` and the filter part of `_matches_field_changes`).
///
/// Call it only for handlers with a field; `None` filters are "not set". `old_value` and
/// `new_value` are the field resolved in the old and new object (`None` if absent there, as is
/// everything on the old side of a creation). For causes without an old and new version
/// (events, daemons, timers), pass the current value as both.
///
/// - `value` passes if the new **or** the old value satisfies it (the new value is checked
///   first, so a callable is not asked about the old value when the new one passes). With no
///   `value` filter, the field must still be present on at least one side, as in Kopf.
/// - `old` and `new` must each be satisfied by their own side.
///
/// Callables get the object `body` too. On-update and on-field handlers additionally require
/// the field to have changed; see [`field_changed`].
pub(crate) fn match_field_change(
    value: Option<&ValueFilter>,
    old: Option<&ValueFilter>,
    new: Option<&ValueFilter>,
    old_value: Option<&Value>,
    new_value: Option<&Value>,
    body: &Value,
) -> bool {
    let value_passes = match value {
        None => new_value.is_some() || old_value.is_some(),
        Some(filter) => filter.matches_in(new_value, body) || filter.matches_in(old_value, body),
    };
    value_passes
        && old.is_none_or(|filter| filter.matches_in(old_value, body))
        && new.is_none_or(|filter| filter.matches_in(new_value, body))
}

/// Whether the object's `field` passes the `value` filter, for handlers that see one state of
/// the object, not a change (Kopf's `_matches_field_values` for events, indexes, daemons and
/// timers): with no `value` filter, the field must be present (a `null` is present).
pub(crate) fn match_field_value(
    field: &[String],
    value: Option<&ValueFilter>,
    body: &Value,
) -> bool {
    let actual = crate::structs::diff::resolve(body, field);
    match_field_change(value, None, None, actual, actual, body)
}

/// Whether a field's value differs between the old and the new object (Kopf's `old != new`
/// for handlers that need a change: on-update and on-field handlers with a field, and their
/// sub-handlers).
///
/// Unlike the diff, a present `null` differs from an absent field here, as in Kopf.
pub(crate) fn field_changed(old_value: Option<&Value>, new_value: Option<&Value>) -> bool {
    match (old_value, new_value) {
        (None, None) => false,
        (Some(old), Some(new)) => !json_eq(old, new),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels_match(
        filters: &BTreeMap<String, MetaFilter>,
        labels: Option<&Map<String, Value>>,
    ) -> bool {
        match_labels(filters, labels, &Value::Null)
    }

    fn filters(entries: &[(&str, MetaFilter)]) -> BTreeMap<String, MetaFilter> {
        entries
            .iter()
            .map(|(key, filter)| (key.to_string(), filter.clone()))
            .collect()
    }

    fn labels(value: Value) -> Map<String, Value> {
        value.as_object().expect("labels are an object").clone()
    }

    fn always() -> MetaFilter {
        MetaFilter::callable(|_| true)
    }

    fn never() -> MetaFilter {
        MetaFilter::callable(|_| false)
    }

    // Modeled on Kopf's tests/registries/test_matching_for_changing.py (labels; the same
    // function serves annotations).
    #[test]
    fn exact_labels() {
        let f = filters(&[("known", "value".into())]);
        assert!(labels_match(&f, Some(&labels(json!({"known": "value"})))));
        assert!(labels_match(
            &f,
            Some(&labels(json!({"known": "value", "extra": "other"})))
        ));
        assert!(!labels_match(&f, Some(&labels(json!({})))));
        assert!(!labels_match(&f, Some(&labels(json!({"known": "other"})))));
        assert!(!labels_match(&f, Some(&labels(json!({"extra": "other"})))));
        assert!(!labels_match(&f, None));
    }

    #[test]
    fn present_labels() {
        let f = filters(&[("known", MetaFilter::Present)]);
        assert!(labels_match(&f, Some(&labels(json!({"known": "value"})))));
        assert!(labels_match(&f, Some(&labels(json!({"known": "other"})))));
        assert!(!labels_match(&f, Some(&labels(json!({})))));
        assert!(!labels_match(&f, Some(&labels(json!({"extra": "other"})))));
        assert!(!labels_match(&f, None));
    }

    #[test]
    fn absent_labels() {
        let f = filters(&[("known", MetaFilter::Absent)]);
        assert!(!labels_match(&f, Some(&labels(json!({"known": "value"})))));
        assert!(!labels_match(&f, Some(&labels(json!({"known": "other"})))));
        assert!(labels_match(&f, Some(&labels(json!({})))));
        assert!(labels_match(&f, Some(&labels(json!({"extra": "other"})))));
        assert!(labels_match(&f, None));
    }

    #[test]
    fn callable_labels_decide_for_any_state() {
        for l in [
            json!({}),
            json!({"known": "value"}),
            json!({"known": "other"}),
        ] {
            let l = labels(l);
            assert!(labels_match(&filters(&[("known", always())]), Some(&l)));
            assert!(!labels_match(&filters(&[("known", never())]), Some(&l)));
        }
    }

    #[test]
    fn callable_labels_receive_the_value_or_none() {
        let f = filters(&[("known", MetaFilter::callable(|v| v == Some("value")))]);
        assert!(labels_match(&f, Some(&labels(json!({"known": "value"})))));
        assert!(!labels_match(&f, Some(&labels(json!({"known": "other"})))));
        let f = filters(&[("known", MetaFilter::callable(|v| v.is_none()))]);
        assert!(labels_match(&f, None));
        assert!(labels_match(&f, Some(&labels(json!({"extra": "x"})))));
    }

    #[test]
    fn callables_with_a_body_see_the_whole_object() {
        let body = json!({"metadata": {"labels": {"owner": "ann"}}, "spec": {"owner": "ann"}});
        let f = filters(&[(
            "owner",
            MetaFilter::callable_with_body(|value, body| value == body["spec"]["owner"].as_str()),
        )]);
        assert!(match_metadata(&f, &BTreeMap::new(), &body));
        let other = json!({"metadata": {"labels": {"owner": "bob"}}, "spec": {"owner": "ann"}});
        assert!(!match_metadata(&f, &BTreeMap::new(), &other));
        // Annotations likewise; a value filter too.
        assert!(match_metadata(
            &BTreeMap::new(),
            &f,
            &json!({"metadata": {"annotations": {"owner": "ann"}}, "spec": {"owner": "ann"}})
        ));
        let bigger = ValueFilter::callable_with_body(|value, body| {
            value.and_then(Value::as_i64) > body["spec"]["floor"].as_i64()
        });
        let body = json!({"spec": {"size": 3, "floor": 2}});
        assert!(match_field_value(
            &["spec".into(), "size".into()],
            Some(&bigger),
            &body
        ));
        let body = json!({"spec": {"size": 1, "floor": 2}});
        assert!(!match_field_value(
            &["spec".into(), "size".into()],
            Some(&bigger),
            &body
        ));
    }

    #[test]
    fn a_field_alone_must_be_present_in_the_object() {
        let field: Vec<String> = vec!["spec".into(), "flag".into()];
        assert!(match_field_value(
            &field,
            None,
            &json!({"spec": {"flag": false}})
        ));
        assert!(match_field_value(
            &field,
            None,
            &json!({"spec": {"flag": null}})
        ));
        assert!(!match_field_value(&field, None, &json!({"spec": {}})));
        assert!(match_field_value(
            &field,
            Some(&ValueFilter::Absent),
            &json!({"spec": {}})
        ));
        assert!(!match_field_value(
            &field,
            Some(&ValueFilter::Present),
            &json!({})
        ));
        let on = ValueFilter::Value(json!(true));
        assert!(match_field_value(
            &field,
            Some(&on),
            &json!({"spec": {"flag": true}})
        ));
        assert!(!match_field_value(
            &field,
            Some(&on),
            &json!({"spec": {"flag": false}})
        ));
    }

    #[test]
    fn no_filters_match_anything() {
        let f = BTreeMap::new();
        assert!(labels_match(&f, None));
        assert!(labels_match(&f, Some(&labels(json!({"known": "value"})))));
    }

    #[test]
    fn all_filters_must_match() {
        let f = filters(&[
            ("a", "1".into()),
            ("b", MetaFilter::Present),
            ("c", MetaFilter::Absent),
        ]);
        assert!(labels_match(&f, Some(&labels(json!({"a": "1", "b": "x"})))));
        assert!(!labels_match(
            &f,
            Some(&labels(json!({"a": "1", "b": "x", "c": "y"})))
        ));
        assert!(!labels_match(
            &f,
            Some(&labels(json!({"a": "2", "b": "x"})))
        ));
        assert!(!labels_match(&f, Some(&labels(json!({"a": "1"})))));
    }

    #[test]
    fn non_string_label_values_count_as_absent() {
        let f = filters(&[("known", MetaFilter::Absent)]);
        assert!(labels_match(&f, Some(&labels(json!({"known": 1})))));
        assert!(labels_match(&f, Some(&labels(json!({"known": null})))));
    }

    #[test]
    fn label_selector_from_non_callable_filters() {
        let f = filters(&[
            ("app", "web".into()),
            ("tier", MetaFilter::Present),
            ("legacy", MetaFilter::Absent),
            ("dynamic", always()),
            ("empty", "".into()),
        ]);
        assert_eq!(
            label_selector(&f).as_deref(),
            Some("app=web,empty=,!legacy,tier")
        );
        assert_eq!(label_selector(&filters(&[("dynamic", always())])), None);
        assert_eq!(label_selector(&BTreeMap::new()), None);
    }

    #[test]
    fn debug_hides_callables() {
        assert_eq!(format!("{:?}", always()), "Callable(..)");
        assert_eq!(format!("{:?}", MetaFilter::from("v")), "Value(\"v\")");
        assert_eq!(
            format!("{:?}", ValueFilter::callable(|_| true)),
            "Callable(..)"
        );
        assert_eq!(format!("{:?}", ValueFilter::Absent), "Absent");
    }

    // Field filters, after Kopf's registries._matches_field_values/_matches_field_changes.
    // The values below are the field's old and new values; `None` is absent.
    fn unfiltered(old: Option<Value>, new: Option<Value>) -> bool {
        match_field_change(None, None, None, old.as_ref(), new.as_ref(), &Value::Null)
    }

    fn with_value(filter: ValueFilter, old: Option<Value>, new: Option<Value>) -> bool {
        match_field_change(
            Some(&filter),
            None,
            None,
            old.as_ref(),
            new.as_ref(),
            &Value::Null,
        )
    }

    fn with_old_new(
        old_filter: Option<ValueFilter>,
        new_filter: Option<ValueFilter>,
        old: Option<Value>,
        new: Option<Value>,
    ) -> bool {
        match_field_change(
            None,
            old_filter.as_ref(),
            new_filter.as_ref(),
            old.as_ref(),
            new.as_ref(),
            &Value::Null,
        )
    }

    fn v(value: Value) -> ValueFilter {
        ValueFilter::Value(value)
    }

    #[test]
    fn without_filters_the_field_must_exist_on_some_side() {
        assert!(unfiltered(Some(json!("old")), Some(json!("new"))));
        assert!(unfiltered(None, Some(json!("new"))));
        assert!(unfiltered(Some(json!("old")), None));
        assert!(!unfiltered(None, None));
        // A present null is present.
        assert!(unfiltered(None, Some(Value::Null)));
    }

    #[test]
    fn value_matches_old_or_new() {
        let (old, new) = (Some(json!("old")), Some(json!("new")));
        assert!(with_value(v(json!("new")), old.clone(), new.clone()));
        assert!(with_value(v(json!("old")), old.clone(), new.clone()));
        assert!(!with_value(v(json!("other")), old.clone(), new.clone()));
        assert!(with_value(v(json!("new")), None, new.clone()));
        assert!(!with_value(v(json!("old")), None, new));
        assert!(with_value(v(json!(1)), None, Some(json!(1.0))));
    }

    #[test]
    fn value_present_and_absent_look_at_both_sides() {
        let new = Some(json!("new"));
        assert!(with_value(ValueFilter::Present, None, new.clone()));
        assert!(with_value(ValueFilter::Present, new.clone(), None));
        assert!(!with_value(ValueFilter::Present, None, None));
        // Absent on either side suffices: a creation passes `value=ABSENT` by its old side.
        assert!(with_value(ValueFilter::Absent, None, new.clone()));
        assert!(with_value(ValueFilter::Absent, None, None));
        assert!(!with_value(ValueFilter::Absent, new.clone(), new));
    }

    #[test]
    fn value_callable_asks_new_first_and_old_only_if_needed() {
        use std::sync::Mutex;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let filter = ValueFilter::callable(move |value| {
            log.lock().unwrap().push(value.cloned());
            value == Some(&json!("new"))
        });
        assert!(with_value(
            filter.clone(),
            Some(json!("old")),
            Some(json!("new"))
        ));
        assert_eq!(*seen.lock().unwrap(), [Some(json!("new"))]);
        seen.lock().unwrap().clear();
        assert!(!with_value(filter, Some(json!("old")), None));
        assert_eq!(*seen.lock().unwrap(), [None, Some(json!("old"))]);
    }

    #[test]
    fn old_and_new_filters_look_at_their_own_side() {
        let (old, new) = (Some(json!("old")), Some(json!("new")));
        let (is_old, is_new) = (Some(v(json!("old"))), Some(v(json!("new"))));
        assert!(with_old_new(
            is_old.clone(),
            is_new.clone(),
            old.clone(),
            new.clone()
        ));
        assert!(with_old_new(is_old.clone(), None, old.clone(), new.clone()));
        assert!(with_old_new(None, is_new.clone(), old.clone(), new.clone()));
        assert!(!with_old_new(
            is_new.clone(),
            None,
            old.clone(),
            new.clone()
        ));
        assert!(!with_old_new(
            None,
            is_old.clone(),
            old.clone(),
            new.clone()
        ));
        assert!(!with_old_new(is_new, is_old, old, new));
    }

    #[test]
    fn old_and_new_present_absent_and_callables() {
        let present = Some(ValueFilter::Present);
        let absent = Some(ValueFilter::Absent);
        let above_two = Some(ValueFilter::callable(|v| {
            v.and_then(Value::as_i64).is_some_and(|n| n > 2)
        }));
        let new = Some(json!(3));
        assert!(with_old_new(
            absent.clone(),
            present.clone(),
            None,
            new.clone()
        ));
        assert!(!with_old_new(present.clone(), present, None, new.clone()));
        assert!(with_old_new(None, above_two.clone(), None, new.clone()));
        assert!(!with_old_new(above_two, None, None, new));
        // The field must still be present on some side, as without filters.
        assert!(!with_old_new(absent.clone(), absent, None, None));
    }

    #[test]
    fn field_change_compares_as_kopf() {
        assert!(!field_changed(None, None));
        assert!(!field_changed(Some(&json!(1)), Some(&json!(1.0))));
        assert!(!field_changed(
            Some(&json!({"a": 1, "b": 2})),
            Some(&json!({"b": 2, "a": 1}))
        ));
        assert!(field_changed(Some(&json!(1)), Some(&json!(2))));
        assert!(field_changed(None, Some(&json!(1))));
        assert!(field_changed(Some(&json!(1)), None));
        assert!(field_changed(None, Some(&Value::Null)));
    }
}
