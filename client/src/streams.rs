//! The pods of the poddebug.dev API as kube-rs sees them, so that kube-rs's own attach (WebSocket
//! `v5.channel.k8s.io`, else v4) and log streaming run against poddebug's paths
//! (`/apis/poddebug.dev/v1alpha1/namespaces/NS/pods/POD/attach?container=NAME`,
//! `.../pods/POD/log?container=NAME`) instead of core's.

use std::borrow::Cow;

use kube::api::ObjectMeta;
use kube::core::NamespaceResourceScope;
use serde::Deserialize;

/// `pods` in group `poddebug.dev`: only a path for kube-rs's `attach` and `log_stream`, never
/// read or written as an object.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct DebugPod {
    metadata: ObjectMeta,
}

impl kube::Resource for DebugPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        poddebug_types::GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        poddebug_types::VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::api::Attach for DebugPod {}
impl kube::api::Log for DebugPod {}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn paths_are_poddebugs() {
        let r = kube::api::Request::new(DebugPod::url_path(&(), Some("shop")));
        let ap = kube::api::AttachParams {
            container: Some("dbg".into()),
            stdin: true,
            stderr: false,
            tty: true,
            ..Default::default()
        };
        let uri = r.attach("web", &ap).unwrap().uri().to_string();
        assert!(
            uri.starts_with("/apis/poddebug.dev/v1alpha1/namespaces/shop/pods/web/attach?"),
            "{uri}"
        );
        for q in ["container=dbg", "stdin=true", "stdout=true", "tty=true"] {
            assert!(uri.contains(q), "{uri}");
        }
        assert!(!uri.contains("stderr=true"), "{uri}");
        let lp = kube::api::LogParams {
            container: Some("dbg".into()),
            follow: true,
            ..Default::default()
        };
        let uri = r.logs("web", &lp).unwrap().uri().to_string();
        assert!(
            uri.starts_with("/apis/poddebug.dev/v1alpha1/namespaces/shop/pods/web/log?"),
            "{uri}"
        );
        assert!(
            uri.contains("container=dbg") && uri.contains("follow=true"),
            "{uri}"
        );
    }
}
