//! Label selectors (`a=b,c!=d,e,!f,g in (x,y),h notin (z)`) and the field selectors the fake
//! supports (`metadata.name=x`, `status.phase!=Running`, ...).

use serde_json::Value;

use super::state::Kind;

#[derive(Clone, Debug, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<(String, Op)>);

/// Splits on commas outside parentheses.
fn split_terms(s: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' if depth == 0 => terms.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    terms.push(cur);
    terms
        .into_iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_set(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses a selector string; the error is kube's message.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let bad = || {
                format!(
                    "unable to parse requirement: found '{term}', expected: valid selector term"
                )
            };
            let req = if let Some(k) = term.strip_prefix('!') {
                (k.trim().to_owned(), Op::NotExists)
            } else if let Some((k, v)) = term.split_once("!=") {
                (k.trim().to_owned(), Op::NotEq(v.trim().to_owned()))
            } else if let Some((k, v)) = term.split_once("==") {
                (k.trim().to_owned(), Op::Eq(v.trim().to_owned()))
            } else if let Some((k, v)) = term.split_once('=') {
                (k.trim().to_owned(), Op::Eq(v.trim().to_owned()))
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                (
                    k.trim().to_owned(),
                    Op::NotIn(parse_set(rest).ok_or_else(bad)?),
                )
            } else if let Some((k, rest)) = term.split_once(" in ") {
                (
                    k.trim().to_owned(),
                    Op::In(parse_set(rest).ok_or_else(bad)?),
                )
            } else {
                (term.clone(), Op::Exists)
            };
            if !valid_key(&req.0) {
                return Err(bad());
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether `object.metadata.labels` satisfies every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.0.iter().all(|(k, op)| {
            let v = labels.get(k).and_then(Value::as_str);
            match op {
                Op::Eq(x) => v == Some(x.as_str()),
                Op::NotEq(x) => v != Some(x.as_str()),
                Op::In(set) => v.is_some_and(|v| set.iter().any(|s| s == v)),
                Op::NotIn(set) => v.is_none_or(|v| !set.iter().any(|s| s == v)),
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
            }
        })
    }
}

/// Selectable fields that are Go booleans: absent means `false`.
const BOOLEAN_FIELDS: [&str; 2] = ["spec.hostNetwork", "spec.unschedulable"];

/// A parsed field selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

fn supported_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Pod => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        Kind::ConfigMap | Kind::Namespace | Kind::Lease | Kind::Secret | Kind::EndpointSlice => {
            &["metadata.name", "metadata.namespace"]
        }
        // `ServiceSelectableFields`.
        Kind::Service => &[
            "metadata.name",
            "metadata.namespace",
            "spec.clusterIP",
            "spec.type",
        ],
        // `NodeToSelectableFields`: a cluster-scoped object's name, and whether it is cordoned.
        Kind::Node => &["metadata.name", "spec.unschedulable"],
        // The generic registry's: a cluster-scoped object's name (and an empty namespace).
        Kind::ApiService => &["metadata.name", "metadata.namespace"],
    }
}

impl FieldSelector {
    /// Parses `field=value,field!=value` for `kind`.
    pub fn parse(kind: Kind, s: &str) -> Result<FieldSelector, String> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            let supported = supported_fields(kind);
            if !supported.contains(&field) {
                // Kinds with no field selectors of their own (served by the generic registry's
                // default) say which ones there are.
                return Err(if kind == Kind::EndpointSlice {
                    let only: Vec<String> = supported.iter().map(|f| format!("{f:?}")).collect();
                    format!(
                        "{field:?} is not a known field selector: only {}",
                        only.join(", ")
                    )
                } else {
                    format!("field label not supported: {field}")
                });
            }
            reqs.push((field.to_owned(), eq, value.trim().to_owned()));
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the object's fields satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, eq, value)| {
            let mut v = object;
            for part in field.split('.') {
                v = &v[part];
            }
            let actual = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                // Go's zero value of a boolean field left out of the JSON.
                Value::Null if BOOLEAN_FIELDS.contains(&field.as_str()) => "false".to_owned(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *value) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_terms() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier!=back", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("tier in (front, back)", true),
            ("tier notin (front)", false),
            ("missing notin (x)", true),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).map(|s| s.matches(&obj)),
                Ok(want),
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a in x").is_err());
    }

    #[test]
    fn field_selector() {
        let pod = json!({"metadata": {"name": "p"}, "status": {"phase": "Running"}});
        assert!(FieldSelector::parse(Kind::Pod, "metadata.name=p").is_ok_and(|s| s.matches(&pod)));
        assert!(
            FieldSelector::parse(Kind::Pod, "status.phase!=Running")
                .is_ok_and(|s| !s.matches(&pod))
        );
        let node = json!({"metadata": {"name": "node-1"}, "spec": {}});
        assert!(
            FieldSelector::parse(Kind::Node, "spec.unschedulable=false")
                .is_ok_and(|s| s.matches(&node))
        );
        assert_eq!(
            FieldSelector::parse(Kind::Node, "status.phase=x"),
            Err("field label not supported: status.phase".to_owned())
        );
        assert_eq!(
            FieldSelector::parse(Kind::ConfigMap, "spec.x=1"),
            Err("field label not supported: spec.x".to_owned())
        );
        // kube-apiserver v1.36's answers (live): Services select on their ClusterIP and type;
        // EndpointSlices have only the generic fields and say so.
        let svc = json!({"metadata": {"name": "kubernetes"}, "spec": {"clusterIP": "10.96.0.1", "type": "ClusterIP"}});
        assert!(
            FieldSelector::parse(
                Kind::Service,
                "spec.clusterIP=10.96.0.1,spec.type=ClusterIP"
            )
            .is_ok_and(|s| s.matches(&svc))
        );
        assert_eq!(
            FieldSelector::parse(Kind::Service, "spec.ports=x"),
            Err("field label not supported: spec.ports".to_owned())
        );
        assert_eq!(
            FieldSelector::parse(Kind::EndpointSlice, "addressType=IPv4"),
            Err(r#""addressType" is not a known field selector: only "metadata.name", "metadata.namespace""#.to_owned())
        );
    }
}
