//! Which debug containers a list or watch returns beyond what the pod list selects: the
//! `metadata.name` terms of a field selector, and the `POD.NAME` naming of
//! `poddebugcontainers`.

/// The `metadata.name` terms of a field selector. They name objects of this API (`POD.NAME` for
/// `poddebugcontainers`, the debug name under `pods/POD/debug`), not pods, so they are applied
/// here instead of being passed to the pod list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameSelector {
    /// `metadata.name=X` / `metadata.name==X`.
    pub equal: Vec<String>,
    /// `metadata.name!=X`.
    pub not_equal: Vec<String>,
}

impl NameSelector {
    /// Whether the object's name satisfies every term.
    pub fn matches(&self, p: &poddebug_types::PodDebugContainer) -> bool {
        let name = p.metadata.name.as_deref().unwrap_or_default();
        self.equal.iter().all(|n| n == name) && self.not_equal.iter().all(|n| n != name)
    }
}

/// Split a field selector into its `metadata.name` terms and the rest, which goes to the pod
/// list as it is (`spec.nodeName=...`, `metadata.namespace=...`).
pub fn split_field_selector(selector: &str) -> (NameSelector, Option<String>) {
    let mut names = NameSelector::default();
    let mut rest = Vec::new();
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if let Some((k, v)) = term.split_once("!=") {
            if k.trim() == "metadata.name" {
                names.not_equal.push(v.trim().to_owned());
                continue;
            }
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('='))
            && k.trim() == "metadata.name"
        {
            names.equal.push(v.trim().to_owned());
            continue;
        }
        rest.push(term);
    }
    let rest = (!rest.is_empty()).then(|| rest.join(","));
    (names, rest)
}

/// Name a debug container as the `poddebugcontainers` resource names it: `POD.NAME`.
pub fn qualify(p: &mut poddebug_types::PodDebugContainer) {
    if let (Some(pod), Some(name)) = (
        p.status.as_ref().map(|s| s.pod_name.clone()),
        p.metadata.name.clone(),
    ) {
        p.metadata.name = Some(poddebug_types::resource::collection_name(&pod, &name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: &str) -> poddebug_types::PodDebugContainer {
        let mut p = poddebug_types::PodDebugContainer::default();
        p.metadata.name = Some(n.to_owned());
        p
    }

    #[test]
    fn name_terms_are_ours_the_rest_goes_to_the_pods() {
        let (names, rest) = split_field_selector("metadata.name=web.dbg,spec.nodeName=n1");
        assert_eq!(names.equal, ["web.dbg"]);
        assert_eq!(rest.as_deref(), Some("spec.nodeName=n1"));
        assert!(names.matches(&named("web.dbg")));
        assert!(!names.matches(&named("web.other")));

        let (names, rest) = split_field_selector("metadata.name!=a.b, metadata.name==a.c");
        assert_eq!(
            (names.not_equal.as_slice(), names.equal.as_slice()),
            (&["a.b".to_owned()][..], &["a.c".to_owned()][..])
        );
        assert_eq!(rest, None);
        assert!(names.matches(&named("a.c")));

        let (names, rest) = split_field_selector("");
        assert_eq!((names, rest), (NameSelector::default(), None));
        let (_, rest) = split_field_selector("metadata.namespace!=x");
        assert_eq!(rest.as_deref(), Some("metadata.namespace!=x"));
    }
}
