//! A pod as kube-apiserver sent it, kept as its JSON text and split once into borrowed slices,
//! without building a tree of it.
//!
//! A create reads the pod, decides on it, and sends it back with one ephemeral container more
//! (`PUT pods/POD/ephemeralcontainers`); the update's answer is the pod again. On a pod with
//! many ephemeral containers each of these is a large document (the create benchmark's pod
//! grows to 200 of them, about 190 KB, a third of it `managedFields`), and parsing it into a
//! `serde_json::Value` (a map per object, a string per key), the typed pod from that tree, the
//! tree encoded again for the body and the whole answer decoded cost several milliseconds per
//! create. Here [`PodJson::parse`] notes where the members of the pod, of its `metadata` and of
//! its `spec` lie in the text ([`serde_json::value::RawValue`]: checked, not built); then
//! - [`PodJson::typed`] decodes the typed pod from those slices, leaving out `managedFields`,
//!   which nothing here reads;
//! - [`PodJson::put_body`] writes the update's body by copying the slices as they came (fields
//!   these types do not know, on existing ephemeral containers above all, go back byte for byte)
//!   and writing the new container before the list's closing bracket;
//! - [`PodJson::typed_with_only`] decodes the update's answer with only the new container and
//!   its status, all that the create's answer, its Event and its wait read.
//!
//! Written here rather than taken from a crate: serde_json does the parsing and checking; what
//! is added is which members to keep.

use std::borrow::Cow;
use std::fmt;

use std::ops::Range;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The members of one JSON object, in order, their values unparsed.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}

/// A member's name, borrowed from the text unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member's name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'a> Members<'a> {
    fn parse(raw: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(raw)
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// `"key":`, the key escaped as JSON.
fn write_key(out: &mut String, key: &str) {
    // Serializing a str to JSON cannot fail.
    out.push_str(&serde_json::to_string(key).unwrap_or_default());
    out.push(':');
}

/// One member of an object of the pod's text: its name and where its value lies.
#[derive(Debug)]
struct Member {
    key: String,
    at: Range<usize>,
}

/// The members of `m`, an object within `text`, with where each value lies in `text`.
fn located(text: &str, m: Members<'_>) -> Vec<Member> {
    let base = text.as_ptr() as usize;
    m.0.into_iter()
        .map(|(key, v)| {
            let start = v.get().as_ptr() as usize - base;
            Member {
                key: key.into_owned(),
                at: start..start + v.get().len(),
            }
        })
        .collect()
}

/// Only the name of a container or of a container's status.
#[derive(Deserialize)]
struct NameOnly<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// A pod's JSON text, as kube-apiserver sent it, split once into the members of the pod, of its
/// `metadata` and of its `spec`.
#[derive(Debug)]
pub struct PodJson {
    text: String,
    top: Vec<Member>,
    metadata: Vec<Member>,
    spec: Option<Vec<Member>>,
}

/// What is left out of `metadata` everywhere here: nothing reads it, and it is the server's to
/// keep.
const MANAGED_FIELDS: &str = "managedFields";

impl PodJson {
    /// Split `text`; an error when it is not JSON or not an object whose `metadata` and `spec`
    /// (when present and not null) are objects.
    pub fn parse(text: String) -> Result<Self, serde_json::Error> {
        let members = |m| located(&text, m);
        let top = Members::parse(&text)?;
        let object = |key: &str| -> Result<Option<Vec<Member>>, serde_json::Error> {
            match top.get(key) {
                Some(raw) if raw.get() != "null" => Ok(Some(members(Members::parse(raw.get())?))),
                _ => Ok(None),
            }
        };
        let metadata = object("metadata")?.unwrap_or_default();
        let spec = object("spec")?;
        let top = members(top);
        Ok(PodJson {
            text,
            top,
            metadata,
            spec,
        })
    }

    fn value<'a>(&'a self, members: &[Member], key: &str) -> Option<&'a str> {
        members
            .iter()
            .find(|m| m.key == key)
            .map(|m| &self.text[m.at.clone()])
            .filter(|v| *v != "null")
    }

    /// Write `{...}` of `members` without those in `skip`, then `more` (`"key":value` text,
    /// empty for none).
    fn write_object(&self, out: &mut String, members: &[Member], skip: &[&str], more: &str) {
        out.push('{');
        let mut first = true;
        for m in members.iter().filter(|m| !skip.contains(&m.key.as_str())) {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
            write_key(out, &m.key);
            out.push_str(&self.text[m.at.clone()]);
        }
        if !more.is_empty() {
            if !first {
                out.push(',');
            }
            out.push_str(more);
        }
        out.push('}');
    }

    fn typed_metadata(&self) -> Result<ObjectMeta, serde_json::Error> {
        let mut text = String::with_capacity(1024);
        self.write_object(&mut text, &self.metadata, &[MANAGED_FIELDS], "");
        serde_json::from_str(&text)
    }

    /// The typed pod, without `metadata.managedFields`.
    pub fn typed(&self) -> Result<Pod, serde_json::Error> {
        Ok(Pod {
            metadata: self.typed_metadata()?,
            spec: self
                .value(&self.top, "spec")
                .map(serde_json::from_str)
                .transpose()?,
            status: self
                .value(&self.top, "status")
                .map(serde_json::from_str)
                .transpose()?,
        })
    }

    /// The typed pod with, of its ephemeral containers and their statuses, only those named
    /// `ec_name`, and without `metadata.managedFields`: what a create needs of the update's
    /// answer (the object it answers, the Event, a wait), at a fraction of decoding the others.
    pub fn typed_with_only(&self, ec_name: &str) -> Result<Pod, serde_json::Error> {
        let spec = match &self.spec {
            Some(members) => {
                Some(self.decode_with_only(members, "ephemeralContainers", ec_name)?)
            }
            None => None,
        };
        let status = match self.value(&self.top, "status") {
            Some(raw) => {
                let members = located(&self.text, Members::parse(raw)?);
                Some(self.decode_with_only(&members, "ephemeralContainerStatuses", ec_name)?)
            }
            None => None,
        };
        Ok(Pod {
            metadata: self.typed_metadata()?,
            spec,
            status,
        })
    }

    /// The object of `members` decoded with, of its list member `key`, only the entries named
    /// `ec_name` (the list's other entries are checked to be JSON, never decoded).
    fn decode_with_only<T: serde::de::DeserializeOwned>(
        &self,
        members: &[Member],
        key: &str,
        ec_name: &str,
    ) -> Result<T, serde_json::Error> {
        let mut list = String::new();
        write_key(&mut list, key);
        list.push('[');
        let entries: Vec<&RawValue> = match self.value(members, key) {
            Some(v) => serde_json::from_str(v)?,
            None => Vec::new(),
        };
        let mut first = true;
        for entry in entries {
            if serde_json::from_str::<NameOnly>(entry.get())?.name == ec_name {
                if !std::mem::take(&mut first) {
                    list.push(',');
                }
                list.push_str(entry.get());
            }
        }
        list.push(']');
        let mut text = String::with_capacity(4096);
        self.write_object(&mut text, members, &[key], &list);
        serde_json::from_str(&text)
    }

    /// The body of `PUT pods/POD/ephemeralcontainers`: the pod as read, with `new_container`
    /// appended to `spec.ephemeralContainers`, and without `status`,
    /// `metadata.managedFields` and `metadata.resourceVersion` (see `create::put_body` for why
    /// each is left out). Every other member is copied as it came; the list of ephemeral
    /// containers too, the new one written before its closing bracket.
    pub fn put_body(
        &self,
        new_container: &serde_json::Value,
    ) -> Result<Box<RawValue>, serde_json::Error> {
        let new = serde_json::to_string(new_container)?;
        let mut list = String::with_capacity(new.len() + 32);
        write_key(&mut list, "ephemeralContainers");
        let existing = self
            .spec
            .as_deref()
            .and_then(|spec| self.value(spec, "ephemeralContainers"));
        match existing.map(|l| l.trim_end().strip_suffix(']')) {
            // The parse checked it is JSON: an array's text ends with `]`, and its entries are
            // all before it.
            Some(Some(open)) if open.starts_with('[') => {
                list.push_str(open);
                if !open[1..].trim_start().is_empty() {
                    list.push(',');
                }
                list.push_str(&new);
                list.push(']');
            }
            Some(_) => {
                return Err(serde::de::Error::custom(
                    "spec.ephemeralContainers is not a list",
                ));
            }
            None => {
                list.push('[');
                list.push_str(&new);
                list.push(']');
            }
        }
        let mut out = String::with_capacity(self.text.len() + new.len());
        out.push('{');
        for m in &self.top {
            match m.key.as_str() {
                "status" | "spec" => continue,
                "metadata" => {
                    write_key(&mut out, &m.key);
                    let skip = [MANAGED_FIELDS, "resourceVersion"];
                    self.write_object(&mut out, &self.metadata, &skip, "");
                }
                _ => {
                    write_key(&mut out, &m.key);
                    out.push_str(&self.text[m.at.clone()]);
                }
            }
            out.push(',');
        }
        write_key(&mut out, "spec");
        self.write_object(
            &mut out,
            self.spec.as_deref().unwrap_or_default(),
            &["ephemeralContainers"],
            &list,
        );
        out.push('}');
        RawValue::from_string(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn sample() -> Value {
        json!({
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
                "labels": {"app": "web", "we\"ird\\key\u{e9}": "v"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {
                "containers": [{"name": "app", "image": "nginx"}],
                "ephemeralContainers": [
                    {"name": "old", "image": "busybox", "futureField": {"x": [1, 2.50, "\u{1F600}"]}}
                ],
                "futureSpecField": true
            },
            "status": {"phase": "Running", "ephemeralContainerStatuses": [{"name": "old"}]}
        })
    }

    /// The text kube-apiserver would send: compact, and with one escape serde_json would not
    /// write itself, to show that the slices are copied as they came.
    fn text_of(v: &Value) -> String {
        v.to_string().replace("2.5", "2.50").replace('é', "\\u00e9")
    }

    #[test]
    fn typed_is_the_pod_without_its_managed_fields() {
        let v = sample();
        let typed = PodJson::parse(text_of(&v))
            .expect("parses")
            .typed()
            .expect("decodes");
        let mut expected: Pod = serde_json::from_value(v).expect("decodes");
        expected.metadata.managed_fields = None;
        assert_eq!(typed, expected);
        assert_eq!(typed.metadata.resource_version.as_deref(), Some("42"));
        assert!(
            typed
                .metadata
                .labels
                .as_ref()
                .expect("labels")
                .contains_key("we\"ird\\key\u{e9}")
        );
        assert_eq!(
            typed.status.and_then(|s| s.phase).as_deref(),
            Some("Running")
        );
    }

    #[test]
    fn the_body_sends_the_pod_back_with_one_container_more() {
        let v = sample();
        let text = text_of(&v);
        let body = PodJson::parse(text.clone())
            .expect("parses")
            .put_body(&json!({"name": "dbg", "image": "busybox"}))
            .expect("body");
        // The existing container exactly as it came, unknown fields and spelling included.
        let old = r#"{"futureField":{"x":[1,2.50,"😀"]},"image":"busybox","name":"old"}"#;
        assert!(text.contains(old), "{text}");
        assert!(body.get().contains(old), "{}", body.get());
        let body: Value = serde_json::from_str(body.get()).expect("valid JSON");
        let ecs = body["spec"]["ephemeralContainers"]
            .as_array()
            .expect("list");
        assert_eq!(ecs.len(), 2);
        assert_eq!(ecs[1], json!({"name": "dbg", "image": "busybox"}));
        assert_eq!(body["spec"]["futureSpecField"], json!(true));
        assert_eq!(body["spec"]["containers"], v["spec"]["containers"]);
        assert_eq!(body["kind"], "Pod");
        assert_eq!(body["metadata"]["uid"], "u-1");
        assert_eq!(body["metadata"]["labels"], v["metadata"]["labels"]);
        for gone in ["resourceVersion", "managedFields"] {
            assert!(body["metadata"].get(gone).is_none(), "{gone}: {body}");
        }
        assert!(body.get("status").is_none(), "{body}");
    }

    #[test]
    fn the_answer_keeps_only_the_new_container() {
        let mut v = sample();
        v["spec"]["ephemeralContainers"]
            .as_array_mut()
            .expect("list")
            .push(json!({"name": "dbg", "image": "busybox"}));
        v["status"]["ephemeralContainerStatuses"]
            .as_array_mut()
            .expect("list")
            .push(json!({"name": "dbg", "ready": false, "restartCount": 0, "image": "busybox", "imageID": ""}));
        let pod = PodJson::parse(text_of(&v)).expect("parses");
        let only = pod.typed_with_only("dbg").expect("decodes");
        let mut expected: Pod = serde_json::from_value(v).expect("decodes");
        expected.metadata.managed_fields = None;
        let spec = expected.spec.as_mut().expect("spec");
        spec.ephemeral_containers.as_mut().expect("list").remove(0);
        let status = expected.status.as_mut().expect("status");
        status
            .ephemeral_container_statuses
            .as_mut()
            .expect("list")
            .remove(0);
        assert_eq!(only, expected);
        // A name no container has: empty lists, the rest as it was.
        let none = pod.typed_with_only("nope").expect("decodes");
        assert_eq!(none.spec.and_then(|s| s.ephemeral_containers), Some(vec![]));
        assert_eq!(none.metadata, only.metadata);
    }

    #[test]
    fn the_body_starts_the_list_when_there_is_none() {
        // As text: the last one keeps the blank inside its empty list.
        for pod in [
            r#"{"metadata":{"name":"p"},"spec":{"containers":[]}}"#,
            r#"{"metadata":{"name":"p"},"spec":{"ephemeralContainers":null}}"#,
            r#"{"metadata":{"name":"p"}}"#,
            r#"{"metadata":{"name":"p"},"spec":{"ephemeralContainers":[ ]}}"#,
        ] {
            let body = PodJson::parse(pod.to_owned())
                .expect("parses")
                .put_body(&json!({"name": "dbg"}))
                .expect("body");
            let body: Value = serde_json::from_str(body.get()).expect("valid JSON");
            assert_eq!(
                body["spec"]["ephemeralContainers"],
                json!([{"name": "dbg"}]),
                "{pod}"
            );
            assert_eq!(body["metadata"]["name"], "p");
        }
    }

    #[test]
    fn what_is_not_a_pod_object_is_refused() {
        for text in ["[]", "\"pod\"", "{\"spec\": []}", "{\"metadata\": 1}", "{"] {
            assert!(PodJson::parse(text.to_owned()).is_err(), "{text}");
        }
        // A list of ephemeral containers that is not a list.
        let pod =
            PodJson::parse(r#"{"spec": {"ephemeralContainers": {}}}"#.to_owned()).expect("parses");
        assert!(pod.put_body(&json!({"name": "d"})).is_err());
        assert!(pod.typed().is_err());
    }
}
