//! A watch request's answer read as events: a JSON object per line, `{"type": …, "object":
//! …}`, each changed object read as the engine keeps it ([`Object`]).
//!
//! kube-rs reads these lines too, but buffers the object whenever it cannot know the type
//! first, and reads it from that buffer: an object read that way cannot keep a part of itself
//! as the text it was (as [`Deferred`](crate::clients::reading::Deferred) keeps
//! `metadata.managedFields`). Here, an object before its type is kept as its text and read
//! once the type is known; in what servers send, the type comes first and the object is read
//! straight from the line. Each line is read into one buffer, reused for the next.

use std::marker::PhantomData;
use std::pin::Pin;

use futures::io::{AsyncBufRead, AsyncBufReadExt as _};
use kube::core::WatchEvent;
use kube::core::watch::Bookmark;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::clients::reading::Object;

/// The events of one watch request, in the order the server sent them.
pub(crate) struct Events<K> {
    answer: Pin<Box<dyn AsyncBufRead + Send>>,
    line: Vec<u8>,
    objects: PhantomData<fn() -> K>,
}

/// Why a watch stream ended before the server ended it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Broken {
    /// The connection failed while the answer was read.
    #[error("reading the watch stream failed: {0}")]
    Read(#[from] std::io::Error),
    /// A line was not a watch event.
    #[error("a line of the watch stream is not a watch event: {0}")]
    Line(#[from] serde_json::Error),
}

impl<K: Object> Events<K> {
    /// Sends the watch request; an answer other than a success is `kube::Error::Api`.
    pub(crate) async fn open(
        client: &kube::Client,
        mut request: http::Request<Vec<u8>>,
    ) -> Result<Events<K>, kube::Error> {
        // A compressed watch stream cannot be read as it comes (kube-rs asks for none either).
        request
            .headers_mut()
            .entry(http::header::ACCEPT_ENCODING)
            .or_insert(http::HeaderValue::from_static("identity"));
        let answer = client.request_stream(request).await?;
        Ok(Events {
            answer: Box::pin(answer),
            line: Vec::new(),
            objects: PhantomData,
        })
    }

    /// The next event; `None` once the server ended the stream (a last line cut short by the
    /// end is not an event).
    pub(crate) async fn next(&mut self) -> Option<Result<WatchEvent<K>, Broken>> {
        loop {
            // Whatever of a line was read stays in the buffer until the line is whole, so an
            // abandoned call loses nothing of the stream.
            match self.answer.read_until(b'\n', &mut self.line).await {
                Err(error) => return Some(Err(error.into())),
                Ok(_) if !self.line.ends_with(b"\n") => {
                    self.line.clear();
                    return None;
                }
                Ok(_) => {}
            }
            let line = self.line.trim_ascii();
            if line.is_empty() {
                self.line.clear();
                continue;
            }
            let event = serde_json::from_slice::<Line<K>>(line);
            self.line.clear();
            return Some(event.map(|line| line.0).map_err(Broken::from));
        }
    }
}

/// One line of a watch stream.
struct Line<K>(WatchEvent<K>);

impl<'de, K: Object> Deserialize<'de> for Line<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(LineVisitor(PhantomData))
            .map(Line)
    }
}

struct LineVisitor<K>(PhantomData<fn() -> K>);

impl<'de, K: Object> Visitor<'de> for LineVisitor<K> {
    type Value = WatchEvent<K>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a watch event: {\"type\": …, \"object\": …}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<WatchEvent<K>, A::Error> {
        let mut kind: Option<Kind> = None;
        let mut event = None;
        let mut early: Option<&'de RawValue> = None;
        while let Some(key) = access.next_key::<Field>()? {
            match key {
                Field::Type => kind = Some(access.next_value()?),
                Field::Object => match kind {
                    Some(kind) => event = Some(access.next_value_seed(kind.typed::<K>())?),
                    None => early = Some(access.next_value()?),
                },
                Field::Other => {
                    access.next_value::<IgnoredAny>()?;
                }
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        match (event, early) {
            (Some(event), _) => Ok(event),
            (None, Some(text)) => {
                let mut object = serde_json::Deserializer::from_str(text.get());
                kind.typed::<K>()
                    .deserialize(&mut object)
                    .map_err(de::Error::custom)
            }
            (None, None) => Err(de::Error::missing_field("object")),
        }
    }
}

/// A key of a watch event.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Type,
    Object,
    #[serde(other)]
    Other,
}

/// A watch event's type.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
enum Kind {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl Kind {
    fn typed<K>(self) -> Typed<K> {
        Typed(self, PhantomData)
    }
}

/// Reads an event's object as what its type says it is.
struct Typed<K>(Kind, PhantomData<fn() -> K>);

impl<'de, K: Object> DeserializeSeed<'de> for Typed<K> {
    type Value = WatchEvent<K>;

    fn deserialize<D: Deserializer<'de>>(self, object: D) -> Result<WatchEvent<K>, D::Error> {
        Ok(match self.0 {
            Kind::Added => WatchEvent::Added(K::deserialize(object)?),
            Kind::Modified => WatchEvent::Modified(K::deserialize(object)?),
            Kind::Deleted => WatchEvent::Deleted(K::deserialize(object)?),
            Kind::Bookmark => WatchEvent::Bookmark(Bookmark::deserialize(object)?),
            Kind::Error => WatchEvent::Error(Box::new(Deserialize::deserialize(object)?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::clients::reading::Deferred;

    fn line(text: &str) -> WatchEvent<Deferred> {
        serde_json::from_str::<Line<Deferred>>(text)
            .expect("a watch event")
            .0
    }

    fn whole(event: WatchEvent<Deferred>) -> Value {
        match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                object.into_body().whole().clone()
            }
            other => panic!("not a change: {other:?}"),
        }
    }

    #[test]
    fn objects_are_read_whichever_key_comes_first() {
        let object = json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}});
        let first = format!(r#"{{"type":"ADDED","object":{object}}}"#);
        let last = format!(r#"{{"object":{object},"other":[1],"type":"MODIFIED"}}"#);
        assert_eq!(whole(line(&first)), object);
        assert_eq!(whole(line(&last)), object);
        assert!(matches!(line(&last), WatchEvent::Modified(_)));
    }

    #[test]
    fn bookmarks_and_errors_are_read_as_kube_rs_reads_them() {
        let bookmark = r#"{"type":"BOOKMARK","object":{"kind":"KopfExample","apiVersion":"kopf.dev/v1",
            "metadata":{"resourceVersion":"12"}}}"#;
        match line(bookmark) {
            WatchEvent::Bookmark(bookmark) => assert_eq!(bookmark.metadata.resource_version, "12"),
            other => panic!("not a bookmark: {other:?}"),
        }
        let error = r#"{"object":{"kind":"Status","apiVersion":"v1","status":"Failure",
            "message":"too old resource version","reason":"Expired","code":410},"type":"ERROR"}"#;
        match line(error) {
            WatchEvent::Error(status) => assert_eq!(status.code, 410),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn lines_that_are_not_events_are_errors() {
        for text in [
            r#"{"type":"ADDED"}"#,
            r#"{"object":{}}"#,
            r#"{"type":"UNKNOWN","object":{}}"#,
            r#"{"kind":"Status","code":500}"#,
            r#"[1]"#,
            r#"{"type":"ADDED","object":{"metadata":{"managedFields":[}}}"#,
        ] {
            assert!(
                serde_json::from_str::<Line<Deferred>>(text).is_err(),
                "{text}"
            );
        }
    }

    #[tokio::test]
    async fn a_stream_is_read_line_by_line_and_a_cut_last_line_is_dropped() {
        let text = concat!(
            r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#,
            "\n\n  \r\n",
            r#"{"type":"DELETED","object":{"metadata":{"name":"b"}}}"#,
            "\nnot json\n",
            r#"{"type":"ADDED","object":{"metadata":{"na"#,
        );
        let mut events = Events::<Deferred> {
            answer: Box::pin(futures::io::Cursor::new(text.as_bytes().to_vec())),
            line: Vec::new(),
            objects: PhantomData,
        };
        let name = |event: Option<Result<WatchEvent<Deferred>, Broken>>| match event {
            Some(Ok(WatchEvent::Added(object) | WatchEvent::Deleted(object))) => {
                object.into_body()["metadata"]["name"].clone()
            }
            other => panic!("not a change: {other:?}"),
        };
        assert_eq!(name(events.next().await), "a");
        assert_eq!(name(events.next().await), "b");
        assert!(matches!(events.next().await, Some(Err(Broken::Line(_)))));
        assert!(events.next().await.is_none());
    }
}
