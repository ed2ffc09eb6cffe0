//! Label and field selectors over pods held in memory, with kube-apiserver's grammar and
//! errors: labels `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`; fields
//! `=`, `==`, `!=` on the pod fields kube-apiserver indexes (an unknown one is 400).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use poddebug_types::ApiError;

#[derive(Clone, Debug, PartialEq, Eq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

/// Terms of a label selector, all of which must hold; empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<(String, LabelOp)>);

/// Split on commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out.into_iter().filter(|t| !t.is_empty()).collect()
}

fn bad_label(selector: &str, why: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "unable to parse requirement: {why} (in label selector {selector:?})"
    ))
}

fn label_key(k: &str, selector: &str) -> Result<String, ApiError> {
    let k = k.trim();
    let ok = !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(k.to_owned())
    } else {
        Err(bad_label(selector, &format!("invalid label key {k:?}")))
    }
}

fn label_value(v: &str, selector: &str) -> Result<String, ApiError> {
    let v = v.trim();
    let ok = v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(v.to_owned())
    } else {
        Err(bad_label(selector, &format!("invalid label value {v:?}")))
    }
}

fn label_set(rest: &str, selector: &str) -> Result<Vec<String>, ApiError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad_label(selector, "expected a parenthesised set of values"))?;
    inner.split(',').map(|v| label_value(v, selector)).collect()
}

impl LabelSelector {
    /// Parse `selector`; malformed is kube-apiserver's 400.
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in split_terms(selector) {
            let parsed = if let Some(k) = term.strip_prefix('!') {
                (label_key(k, selector)?, LabelOp::NotExists)
            } else if let Some((k, v)) = term.split_once("!=") {
                (
                    label_key(k, selector)?,
                    LabelOp::NotEq(label_value(v, selector)?),
                )
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (
                    label_key(k, selector)?,
                    LabelOp::Eq(label_value(v, selector)?),
                )
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                (
                    label_key(k, selector)?,
                    LabelOp::NotIn(label_set(rest, selector)?),
                )
            } else if let Some((k, rest)) = term.split_once(" in ") {
                (
                    label_key(k, selector)?,
                    LabelOp::In(label_set(rest, selector)?),
                )
            } else {
                (label_key(term, selector)?, LabelOp::Exists)
            };
            terms.push(parsed);
        }
        Ok(LabelSelector(terms))
    }

    /// Whether `labels` satisfy every term.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.0.iter().all(|(k, op)| {
            let v = labels.and_then(|l| l.get(k));
            match op {
                LabelOp::Eq(x) => v == Some(x),
                LabelOp::NotEq(x) => v != Some(x),
                LabelOp::In(xs) => v.is_some_and(|v| xs.contains(v)),
                LabelOp::NotIn(xs) => v.is_none_or(|v| !xs.contains(v)),
                LabelOp::Exists => v.is_some(),
                LabelOp::NotExists => v.is_none(),
            }
        })
    }
}

/// Terms of a pod field selector: (field, wanted value, equal?).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(String, String, bool)>);

/// The pod fields kube-apiserver supports in field selectors, and their value in `pod`.
fn field_value(pod: &Pod, field: &str) -> Option<String> {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    Some(match field {
        "metadata.name" => pod.metadata.name.clone().unwrap_or_default(),
        "metadata.namespace" => pod.metadata.namespace.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.restartPolicy" => spec
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_default(),
        "spec.schedulerName" => spec
            .and_then(|s| s.scheduler_name.clone())
            .unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "spec.hostNetwork" => spec
            .and_then(|s| s.host_network)
            .unwrap_or(false)
            .to_string(),
        "status.phase" => status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        "status.podIP" => status.and_then(|s| s.pod_ip.clone()).unwrap_or_default(),
        "status.nominatedNodeName" => status
            .and_then(|s| s.nominated_node_name.clone())
            .unwrap_or_default(),
        _ => return None,
    })
}

impl FieldSelector {
    /// Parse `selector`; a malformed term or an unsupported field is kube-apiserver's 400.
    pub(crate) fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, equal) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, v, true)
            } else {
                return Err(ApiError::BadRequest(format!(
                    "invalid selector: '{selector}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if field_value(&Pod::default(), field).is_none() {
                return Err(ApiError::BadRequest(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_owned(), value.trim().to_owned(), equal));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether `pod` satisfies every term.
    pub(crate) fn matches(&self, pod: &Pod) -> bool {
        self.0.iter().all(|(field, want, equal)| {
            (field_value(pod, field).as_deref() == Some(want.as_str())) == *equal
        })
    }
}

/// Which pods a list or watch reads: namespace, pod name, label and field selectors.
#[derive(Clone, Debug, Default)]
pub(crate) struct PodSelection {
    namespace: Option<String>,
    pod: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl PodSelection {
    /// The selection of `opts`; a malformed selector is 400.
    pub(crate) fn new(opts: &crate::ListOptions) -> Result<Self, ApiError> {
        Ok(PodSelection {
            namespace: opts.namespace.clone(),
            pod: opts.pod.clone(),
            labels: LabelSelector::parse(opts.label_selector.as_deref().unwrap_or(""))?,
            fields: FieldSelector::parse(opts.field_selector.as_deref().unwrap_or(""))?,
        })
    }

    /// Whether `pod` is selected.
    pub(crate) fn matches(&self, pod: &Pod) -> bool {
        let m = &pod.metadata;
        self.namespace
            .as_deref()
            .is_none_or(|ns| m.namespace.as_deref() == Some(ns))
            && self
                .pod
                .as_deref()
                .is_none_or(|p| m.name.as_deref() == Some(p))
            && self.labels.matches(m.labels.as_ref())
            && self.fields.matches(pod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn label_selectors_follow_kube_grammar() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(m(""));
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(!m("app!=web"));
        assert!(m("app in (web, api),!missing"));
        assert!(!m("tier notin (front)"));
        assert!(m("missing notin (x)"));
        assert!(!m("missing"));
        assert!(LabelSelector::parse("app in web").is_err());
        assert_eq!(LabelSelector::parse("a b=c").unwrap_err().code(), 400);
    }

    #[test]
    fn field_selectors_know_the_pod_fields() {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        });
        let m = |s: &str| FieldSelector::parse(s).unwrap().matches(&p);
        assert!(m("metadata.name=web,spec.nodeName==n1"));
        assert!(!m("spec.nodeName!=n1"));
        assert!(m("status.phase="));
        let err = FieldSelector::parse("spec.bogus=x").unwrap_err();
        assert_eq!(
            (err.code(), err.message()),
            (400, "field label not supported: spec.bogus".to_owned())
        );
    }
}
