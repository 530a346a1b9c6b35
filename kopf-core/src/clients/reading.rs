//! Reading the objects of lists and watch events as the engine keeps them ([`Body`]): with
//! `metadata.managedFields` kept apart as its text (by default), or without it at all
//! (`settings.watching.strip_managed_fields`).
//!
//! Server-side apply records which manager owns which fields in `metadata.managedFields`: an
//! entry per manager and operation, each a tree of field names, so often the larger part of a
//! small object. It is read past, never built: kept apart, its text is copied whole (one
//! allocation) and built only if a handler asks for the whole object; stripped, nothing is
//! kept. Either is what makes reading cheaper than building the whole object: no allocation
//! per key, nothing to free, less to keep per object.

use std::fmt;

use serde::de::value::SeqAccessDeserializer;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::structs::bodies::{Body, Managed};

/// An object as read from a list or a watch event, made the [`Body`] that the engine keeps.
pub(crate) trait Object: DeserializeOwned + Send + 'static {
    fn into_body(self) -> Body;
}

/// The object with its `metadata.managedFields` kept apart, unbuilt.
#[derive(Debug)]
pub(crate) struct Deferred(Body);

impl Object for Deferred {
    fn into_body(self) -> Body {
        self.0
    }
}

impl<'de> Deserialize<'de> for Deferred {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut managed = None;
        let value = Level::Object(Some(&mut managed)).deserialize(deserializer)?;
        Ok(Deferred(Body::with_managed(value, managed)))
    }
}

/// The object without `metadata.managedFields`; everything else as read, in its order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unmanaged(Value);

impl Object for Unmanaged {
    fn into_body(self) -> Body {
        Body::from(self.0)
    }
}

impl<'de> Deserialize<'de> for Unmanaged {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Level::Object(None).deserialize(deserializer).map(Unmanaged)
    }
}

/// One page of a list: its items, and what the next request needs.
#[derive(Debug, Deserialize)]
#[serde(bound = "K: Object")]
pub(crate) struct Page<K> {
    #[serde(default)]
    pub(crate) metadata: PageMetadata,
    /// `null` (as some servers send for an empty list) is no items.
    #[serde(default)]
    pub(crate) items: Option<Vec<K>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct PageMetadata {
    pub(crate) resource_version: Option<String>,
    #[serde(rename = "continue")]
    pub(crate) next: Option<String>,
    /// Present (and not `null`) only from servers that applied the `shardSelector`.
    pub(crate) shard_info: Option<IgnoredAny>,
}

/// Where in the object a value is read: the object itself (its `metadata` is read as such),
/// its `metadata` (whose `managedFields` is skipped, or kept apart where given).
enum Level<'a> {
    Object(Option<&'a mut Option<Managed>>),
    Metadata(Option<&'a mut Option<Managed>>),
}

impl<'de> DeserializeSeed<'de> for Level<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Builds any JSON value as `serde_json` does; only a map's entries depend on the level.
impl<'de> Visitor<'de> for Level<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        match self {
            Level::Object(mut apart) => {
                while let Some(key) = access.next_key::<String>()? {
                    let value = if key == "metadata" {
                        // A repeated key's last value is the one kept, as `Value` keeps it.
                        if let Some(slot) = apart.as_deref_mut() {
                            *slot = None;
                        }
                        access.next_value_seed(Level::Metadata(apart.as_deref_mut()))?
                    } else {
                        access.next_value::<Value>()?
                    };
                    map.insert(key, value);
                }
            }
            Level::Metadata(mut apart) => {
                while let Some(key) = access.next_key::<String>()? {
                    if key != "managedFields" {
                        let value = access.next_value::<Value>()?;
                        map.insert(key, value);
                    } else if let Some(slot) = apart.as_deref_mut() {
                        let text = access.next_value::<Box<RawValue>>()?;
                        *slot = Some(Managed::new(text, map.len()));
                    } else {
                        access.next_value::<IgnoredAny>()?;
                    }
                }
            }
        }
        Ok(Value::Object(map))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, access: A) -> Result<Value, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(access))
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn unmanaged(text: &str) -> Value {
        serde_json::from_str::<Unmanaged>(text)
            .expect("valid JSON")
            .0
    }

    #[test]
    fn managed_fields_are_left_out_and_the_rest_kept_in_its_order() {
        let text = r#"{"kind":"KopfExample","apiVersion":"kopf.dev/v1",
            "metadata":{"name":"a","managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{}}}],
                        "uid":"u","labels":{"z":"1","a":"2"}},
            "spec":{"managedFields":[1],"list":[1,-2,3.5,"x",null,true,{"b":[]}]},
            "status":null}"#;
        let stripped = unmanaged(text);
        let mut whole: Value = serde_json::from_str(text).unwrap();
        whole["metadata"]
            .as_object_mut()
            .unwrap()
            .shift_remove("managedFields");
        assert_eq!(stripped, whole);
        // The order of the keys is the text's, as for a whole object.
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(&stripped),
            ["kind", "apiVersion", "metadata", "spec", "status"]
        );
        assert_eq!(keys(&stripped["metadata"]), ["name", "uid", "labels"]);
        assert_eq!(keys(&stripped["metadata"]["labels"]), ["z", "a"]);
        // Only the object's own metadata loses the key: a field of that name elsewhere stays.
        assert_eq!(stripped["spec"]["managedFields"], json!([1]));
        assert_eq!(
            serde_json::to_string(&stripped).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
    }

    #[test]
    fn managed_fields_kept_apart_are_read_past_and_whole_on_demand() {
        let text = r#"{"kind":"KopfExample","apiVersion":"kopf.dev/v1",
            "metadata":{"name":"a","managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{}}}],
                        "uid":"u"},
            "spec":{"managedFields":[1]}}"#;
        let body = serde_json::from_str::<Deferred>(text).unwrap().into_body();
        let whole: Value = serde_json::from_str(text).unwrap();
        // What the engine reads lacks them; the whole object is as read, in its order.
        assert_eq!(*body.value(), unmanaged(text));
        assert_eq!(*body.whole(), whole);
        assert_eq!(
            serde_json::to_string(body.whole()).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
        // Without managed fields, or not an object: nothing is kept apart.
        for text in [
            r#"{"metadata":{"name":"a"}}"#,
            r#"{"metadata":[{"managedFields":1}]}"#,
        ] {
            let body = serde_json::from_str::<Deferred>(text).unwrap().into_body();
            assert!(std::ptr::eq(body.whole(), body.value()));
            assert_eq!(*body.whole(), serde_json::from_str::<Value>(text).unwrap());
        }
        // A repeated key: the last value, as `Value` reads it.
        let twice = r#"{"metadata":{"managedFields":[1]},"metadata":{"name":"b"}}"#;
        let body = serde_json::from_str::<Deferred>(twice).unwrap().into_body();
        assert_eq!(*body.whole(), serde_json::from_str::<Value>(twice).unwrap());
        assert!(serde_json::from_str::<Deferred>(r#"{"metadata":{"managedFields":[}}"#).is_err());
    }

    #[test]
    fn odd_objects_are_read_as_they_are() {
        assert_eq!(unmanaged(r#"{"metadata":null}"#), json!({"metadata": null}));
        assert_eq!(
            unmanaged(r#"{"metadata":[{"managedFields":1}]}"#),
            json!({"metadata": [{"managedFields": 1}]})
        );
        assert_eq!(unmanaged(r#"{"metadata":"x"}"#)["metadata"], json!("x"));
        assert_eq!(unmanaged("[1,2]"), json!([1, 2]));
        assert!(serde_json::from_str::<Unmanaged>(r#"{"metadata":{"managedFields":[}}"#).is_err());
    }

    #[test]
    fn pages_tell_their_version_continuation_and_shard_info() {
        let page: Page<Unmanaged> = serde_json::from_str(
            r#"{"metadata":{"resourceVersion":"7","continue":"next","shardInfo":{"selector":"s"}},
                "items":[{"metadata":{"name":"a","managedFields":[]}}]}"#,
        )
        .unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(page.metadata.next.as_deref(), Some("next"));
        assert!(page.metadata.shard_info.is_some());
        let items: Vec<Value> = page
            .items
            .unwrap()
            .into_iter()
            .map(|item| item.into_body().whole().clone())
            .collect();
        assert_eq!(items, [json!({"metadata": {"name": "a"}})]);
        let empty: Page<Deferred> =
            serde_json::from_str(r#"{"metadata":{"shardInfo":null},"items":null}"#).unwrap();
        assert!(empty.metadata.shard_info.is_none() && empty.items.is_none());
        assert!(empty.metadata.resource_version.is_none());
    }

    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1000i32..1000).prop_map(|n| Value::from(f64::from(n) / 8.0)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 12, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
                prop::collection::vec(("[a-z]{1,2}", inner), 0..12)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// Objects with maps and arrays of any size at every level, and managed fields anywhere
    /// among the keys of `metadata` (or none).
    fn objects() -> impl Strategy<Value = Value> {
        (
            prop::collection::vec(("[a-z]{1,2}", json_value()), 0..10),
            prop::collection::vec(("[a-z]{1,2}", json_value()), 0..14),
            prop::option::of((json_value(), any::<prop::sample::Index>())),
        )
            .prop_map(|(object, metadata, managed)| {
                let mut metadata: serde_json::Map<String, Value> = metadata.into_iter().collect();
                if let Some((fields, at)) = managed {
                    let at = at.index(metadata.len() + 1);
                    metadata.shift_insert(at, "managedFields".into(), fields);
                }
                let mut object: serde_json::Map<String, Value> = object.into_iter().collect();
                object.insert("metadata".into(), Value::Object(metadata));
                Value::Object(object)
            })
    }

    proptest! {
        #[test]
        fn objects_are_read_as_serde_json_reads_them(object in objects()) {
            let text = serde_json::to_string(&object).unwrap();
            let mut stripped = object.clone();
            stripped["metadata"].as_object_mut().unwrap().shift_remove("managedFields");

            let deferred = serde_json::from_str::<Deferred>(&text).unwrap().into_body();
            prop_assert_eq!(deferred.value(), &stripped);
            prop_assert_eq!(serde_json::to_string(deferred.whole()).unwrap(), text.clone());
            prop_assert_eq!(unmanaged(&text), stripped);
        }
    }
}
