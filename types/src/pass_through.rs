//! Container fields that pass through to the cluster.
//!
//! The types are those of one Kubernetes version (1.34) while the cluster may be newer. A
//! create body's unknown container fields are therefore kept as they came (see
//! [`decode_create_body`](crate::decode::decode_create_body)) and put back into the ephemeral
//! container sent to kube-apiserver, which decides about them.

use serde_json::Value;

use crate::decode::{Segment, render_path};

/// Container fields these types do not know (a field added by a Kubernetes version newer than
/// the types), taken from the request as sent so that they reach kube-apiserver, which decides
/// about them (it drops a field it does not know either, and validates one it knows).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassThroughFields(Vec<(Vec<Segment>, Value)>);

impl PassThroughFields {
    /// The fields, each as its path inside `container` and its value.
    pub(crate) fn new(fields: Vec<(Vec<Segment>, Value)>) -> Self {
        PassThroughFields(fields)
    }

    /// True when the request had no such field.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields' paths in the request (`container.futureField`), sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self
            .0
            .iter()
            .map(|(p, _)| render_path(&[&[Segment::Key("container".to_owned())], &p[..]].concat()))
            .collect();
        paths.sort();
        paths
    }

    /// Put every field back into `container`, the JSON of the ephemeral container built from
    /// the request, at the same place. A field whose parent is not there any more (or is not
    /// an object) is left out; a field the container already has keeps the container's value.
    pub fn apply_to(&self, container: &mut Value) {
        for (path, value) in &self.0 {
            let Some((Segment::Key(last), parents)) = path.split_last() else {
                continue;
            };
            if let Some(obj) = value_at_mut(container, parents).and_then(Value::as_object_mut) {
                obj.entry(last.clone()).or_insert_with(|| value.clone());
            }
        }
    }
}

/// The value at `path` (relative to `root`), to change.
fn value_at_mut<'a>(root: &'a mut Value, path: &[Segment]) -> Option<&'a mut Value> {
    path.iter().try_fold(root, |at, seg| match seg {
        Segment::Key(k) => at.get_mut(k.as_str()),
        Segment::Index(i) => at.get_mut(*i),
    })
}

#[cfg(test)]
mod tests {
    use crate::decode::{decode_create_body, decode_pod_debug_container};

    #[test]
    fn unknown_container_fields_pass_through_on_create() {
        let body = br#"{"container": {"image": "busybox", "futureField": {"a": 1},
            "env": [{"name": "A", "value": "1", "newEnvThing": true}],
            "lifecycle": {"newHook": {"x": 2}}}, "profile": "general"}"#;
        let b = decode_create_body(body).unwrap();
        assert_eq!(b.object.container.image.as_deref(), Some("busybox"));
        assert_eq!(
            b.pass_through.paths(),
            [
                "container.env[0].newEnvThing",
                "container.futureField",
                "container.lifecycle.newHook"
            ]
        );
        let mut ec = serde_json::json!({"name": "d", "env": [{"name": "A", "value": "1"}]});
        b.pass_through.apply_to(&mut ec);
        assert_eq!(ec["futureField"], serde_json::json!({"a": 1}));
        assert_eq!(ec["env"][0]["newEnvThing"], true);
        assert!(ec.get("lifecycle").is_none(), "no parent, nothing added");
        // The strict decoder still refuses them.
        assert!(decode_pod_debug_container(body).is_err());
    }
}
