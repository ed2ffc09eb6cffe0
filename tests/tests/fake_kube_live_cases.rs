//! Every answer of `live-ephemeral-statuses.md` (kube-apiserver v1.36.2) reproduced against the
//! fake: the same request sequence on the same pod, compared with the verbatim Status bodies,
//! once through the suite's client and once through the real kubectl.

use std::time::Duration;

use http::{Method, StatusCode};
use poddebug_tests::{ADMIN_TOKEN, FakeKube, TempDir};
use serde_json::{Value, json};

/// One row of the live reference.
struct LiveCase {
    id: &'static str,
    /// Sent to `pods/{name}` instead of `pods/{name}/ephemeralcontainers`.
    to_pod_itself: bool,
    pod: &'static str,
    content_type: &'static str,
    body: &'static str,
    code: u16,
    /// The verbatim Status, for failures.
    status: Option<&'static str>,
    /// `spec.ephemeralContainers` names of the answered Pod, for successes.
    names: Option<&'static str>,
}

const CASES: &[LiveCase] = &[
    LiveCase {
        id: "00-valid-debug",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"debugger","image":"busybox","command":["sh"],"stdin":true,"tty":true,"targetContainerName":"app"}]}}"#,
        code: 200,
        status: None,
        names: Some(r#"["debugger"]"#),
    },
    LiveCase {
        id: "01-ports",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"bad-ports","image":"busybox","ports":[{"containerPort":8080}]}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].ports"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "02-resources",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"bad-res","image":"busybox","resources":{"limits":{"cpu":"100m"},"requests":{"memory":"10Mi"}}}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].resources"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "03-probes",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"bad-probe","image":"busybox","livenessProbe":{"exec":{"command":["true"]}},"readinessProbe":{"exec":{"command":["true"]}},"startupProbe":{"exec":{"command":["true"]}}}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: [spec.ephemeralContainers[0].livenessProbe: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].startupProbe: Forbidden: cannot be set for an Ephemeral Container]",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].livenessProbe"
   },
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].readinessProbe"
   },
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].startupProbe"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "04-lifecycle",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"bad-lc","image":"busybox","lifecycle":{"postStart":{"exec":{"command":["true"]}}}}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].lifecycle"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "05-dup-name-container",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"app","image":"busybox"}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueDuplicate",
    "message": "Duplicate value: \"app\"",
    "field": "spec.ephemeralContainers[0].name"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "06-bad-target",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"t2","image":"busybox","targetContainerName":"nope"}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\"",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueNotFound",
    "message": "Not found: \"nope\"",
    "field": "spec.ephemeralContainers[0].targetContainerName"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "07-bad-name",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"Bad_Name","image":"busybox"}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueInvalid",
    "message": "Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    "field": "spec.ephemeralContainers[0].name"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "08-no-image",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"noimg"}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].image: Required value",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueRequired",
    "message": "Required value",
    "field": "spec.ephemeralContainers[0].image"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "09-restartPolicy",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"rp","image":"busybox","restartPolicy":"Always"}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].restartPolicy: Forbidden: cannot be set for an Ephemeral Container",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].restartPolicy"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "10-subpath",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"sp","image":"busybox","volumeMounts":[{"name":"data","mountPath":"/d","subPath":"x"}]}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].volumeMounts[0].subPath"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "11-unknown-volume",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"uv","image":"busybox","volumeMounts":[{"name":"nope","mountPath":"/d"}]}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].volumeMounts[0].name: Not found: \"nope\"",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueNotFound",
    "message": "Not found: \"nope\"",
    "field": "spec.ephemeralContainers[0].volumeMounts[0].name"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "12-resizePolicy",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"rsz","image":"busybox","resizePolicy":[{"resourceName":"cpu","restartPolicy":"NotRequired"}]}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers[0].resizePolicy: Forbidden: cannot be set for an Ephemeral Container",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].resizePolicy"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "13-modify-existing",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"debugger","image":"busybox:other"}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n@@ -1,6 +1,6 @@\n {\n  \"Name\": \"debugger\",\n- \"Image\": \"busybox\",\n+ \"Image\": \"busybox:other\",\n  \"Command\": [\n   \"sh\"\n  ],\n",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: existing ephemeral containers \"debugger\" may not be changed\n@@ -1,6 +1,6 @@\n {\n  \"Name\": \"debugger\",\n- \"Image\": \"busybox\",\n+ \"Image\": \"busybox:other\",\n  \"Command\": [\n   \"sh\"\n  ],\n",
    "field": "spec.ephemeralContainers"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "14-remove-existing",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: existing ephemeral containers \"debugger\" may not be removed\n",
    "field": "spec.ephemeralContainers"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "15-json-patch-add",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/json-patch+json",
        body: r#"[{"op":"add","path":"/spec/ephemeralContainers/-","value":{"name":"jp","image":"busybox","stdin":true,"tty":true}}]"#,
        code: 200,
        status: None,
        names: Some(r#"["debugger", "jp"]"#),
    },
    LiveCase {
        id: "16-pods-update-ec",
        to_pod_itself: true,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"via-pods","image":"busybox"}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n@@ -191,6 +191,38 @@\n  ],\n  \"EphemeralContainers\": [\n   {\n+   \"Name\": \"via-pods\",\n+   \"Image\": \"busybox\",\n+   \"Command\": null,\n+   \"Args\": null,\n+   \"WorkingDir\": \"\",\n+   \"Ports\": null,\n+   \"EnvFrom\": null,\n+   \"Env\": null,\n+   \"Resources\": {\n+    \"Limits\": null,\n+    \"Requests\": null,\n+    \"Claims\": null\n+   },\n+   \"ResizePolicy\": null,\n+   \"RestartPolicy\": null,\n+   \"RestartPolicyRules\": null,\n+   \"VolumeMounts\": null,\n+   \"VolumeDevices\": null,\n+   \"LivenessProbe\": null,\n+   \"ReadinessProbe\": null,\n+   \"StartupProbe\": null,\n+   \"Lifecycle\": null,\n+   \"TerminationMessagePath\": \"/dev/termination-log\",\n+   \"TerminationMessagePolicy\": \"File\",\n+   \"ImagePullPolicy\": \"Always\",\n+   \"SecurityContext\": null,\n+   \"Stdin\": false,\n+   \"StdinOnce\": false,\n+   \"TTY\": false,\n+   \"TargetContainerName\": \"\"\n+  },\n+  {\n    \"Name\": \"debugger\",\n    \"Image\": \"busybox\",\n    \"Command\": [\n",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n@@ -191,6 +191,38 @@\n  ],\n  \"EphemeralContainers\": [\n   {\n+   \"Name\": \"via-pods\",\n+   \"Image\": \"busybox\",\n+   \"Command\": null,\n+   \"Args\": null,\n+   \"WorkingDir\": \"\",\n+   \"Ports\": null,\n+   \"EnvFrom\": null,\n+   \"Env\": null,\n+   \"Resources\": {\n+    \"Limits\": null,\n+    \"Requests\": null,\n+    \"Claims\": null\n+   },\n+   \"ResizePolicy\": null,\n+   \"RestartPolicy\": null,\n+   \"RestartPolicyRules\": null,\n+   \"VolumeMounts\": null,\n+   \"VolumeDevices\": null,\n+   \"LivenessProbe\": null,\n+   \"ReadinessProbe\": null,\n+   \"StartupProbe\": null,\n+   \"Lifecycle\": null,\n+   \"TerminationMessagePath\": \"/dev/termination-log\",\n+   \"TerminationMessagePolicy\": \"File\",\n+   \"ImagePullPolicy\": \"Always\",\n+   \"SecurityContext\": null,\n+   \"Stdin\": false,\n+   \"StdinOnce\": false,\n+   \"TTY\": false,\n+   \"TargetContainerName\": \"\"\n+  },\n+  {\n    \"Name\": \"debugger\",\n    \"Image\": \"busybox\",\n    \"Command\": [\n",
    "field": "spec"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "17-multi-errors",
        to_pod_itself: false,
        pod: "target",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"multi","image":"busybox","ports":[{"containerPort":1}],"resources":{"limits":{"cpu":"1"}},"readinessProbe":{"exec":{"command":["true"]}}}]}}"#,
        code: 422,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "Pod \"target\" is invalid: [spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container]",
 "reason": "Invalid",
 "details": {
  "name": "target",
  "kind": "Pod",
  "causes": [
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].ports"
   },
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].resources"
   },
   {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: cannot be set for an Ephemeral Container",
    "field": "spec.ephemeralContainers[0].readinessProbe"
   }
  ]
 },
 "code": 422
}"#,
        ),
        names: None,
    },
    LiveCase {
        id: "18-missing-pod",
        to_pod_itself: false,
        pod: "nosuchpod",
        content_type: "application/strategic-merge-patch+json",
        body: r#"{"spec":{"ephemeralContainers":[{"name":"x","image":"busybox"}]}}"#,
        code: 404,
        status: Some(
            r#"{
 "kind": "Status",
 "apiVersion": "v1",
 "metadata": {},
 "status": "Failure",
 "message": "pods \"nosuchpod\" not found",
 "reason": "NotFound",
 "details": {
  "name": "nosuchpod",
  "kind": "pods"
 },
 "code": 404
}"#,
        ),
        names: None,
    },
];

/// The live test's starting point: pod `target` in `ephdemo` with container `app` and volume `data`.
async fn live_fake() -> FakeKube {
    let fake = FakeKube::start().await;
    fake.add_namespace("ephdemo", &[]);
    fake.add_simple_pod("ephdemo", "target");
    fake
}

fn path(case: &LiveCase) -> String {
    let base = format!("/api/v1/namespaces/ephdemo/pods/{}", case.pod);
    if case.to_pod_itself {
        base
    } else {
        format!("{base}/ephemeralcontainers")
    }
}

/// The cmp diff after "may not change fields other than ..." for a whole PodSpec cannot be
/// reproduced; compare the first line and everything else.
fn without_spec_diff(mut status: Value) -> Value {
    let cut = |v: &mut Value| {
        if let Some(s) = v.as_str() {
            let first = s.split("\n@@").next().unwrap_or(s).to_owned();
            *v = json!(first);
        }
    };
    cut(&mut status["message"]);
    if let Some(causes) = status["details"]["causes"].as_array_mut() {
        for c in causes {
            cut(&mut c["message"]);
        }
    }
    status
}

#[tokio::test]
async fn every_live_answer_is_reproduced_exactly() {
    let fake = live_fake().await;
    let admin = fake.client(ADMIN_TOKEN);
    for case in CASES {
        let body: Value = serde_json::from_str(case.body).expect("request body");
        let (code, answer) = admin
            .send_json(Method::PATCH, &path(case), case.content_type, &body)
            .await;
        assert_eq!(code.as_u16(), case.code, "{}: {answer}", case.id);
        if let Some(names) = case.names {
            let want: Value = serde_json::from_str(names).expect("names");
            let got: Vec<Value> = answer["spec"]["ephemeralContainers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| e["name"].clone())
                .collect();
            assert_eq!(Value::Array(got), want, "{}", case.id);
            assert_eq!(
                answer["kind"], "Pod",
                "{}: the whole Pod is returned",
                case.id
            );
        }
        if let Some(status) = case.status {
            let want: Value = serde_json::from_str(status).expect("status");
            if case.to_pod_itself {
                assert_eq!(
                    without_spec_diff(answer.clone()),
                    without_spec_diff(want),
                    "{}",
                    case.id
                );
                assert!(
                    answer["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("\n@@ ")),
                    "{}: a diff follows",
                    case.id
                );
            } else {
                assert_eq!(answer, want, "{}", case.id);
            }
        }
    }
    // Only the two successful cases changed the pod.
    let pod = fake.pod_json("ephdemo", "target").expect("pod");
    let names: Vec<&str> = pod["spec"]["ephemeralContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["debugger", "jp"]);
    assert_eq!(
        pod["spec"]["ephemeralContainers"][0]["imagePullPolicy"],
        "Always"
    );
    assert_eq!(
        pod["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"],
        "File"
    );
    assert_eq!(
        pod["spec"]["ephemeralContainers"][0]["terminationMessagePath"],
        "/dev/termination-log"
    );
}

#[tokio::test]
async fn a_full_list_put_that_drops_an_entry_is_invalid_not_a_conflict() {
    let fake = live_fake().await;
    let admin = fake.client(ADMIN_TOKEN);
    let ec_path = "/api/v1/namespaces/ephdemo/pods/target/ephemeralcontainers";
    let (_, mut pod) = admin.get_json(ec_path).await;
    let (code, _) = admin
        .patch_json(
            ec_path,
            "application/strategic-merge-patch+json",
            &json!({"spec": {"ephemeralContainers": [{"name": "first", "image": "busybox"}]}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    pod["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("resourceVersion");
    pod["spec"]["ephemeralContainers"] = json!([{"name": "second", "image": "busybox"}]);
    let (code, body) = admin.put_json(ec_path, &pod).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["message"],
        "Pod \"target\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"first\" may not be removed\n"
    );
    // A PUT that keeps the old entry appends at the end: indexes follow the merged list. The
    // fake's kubelet may report "first" starting between the read and the PUT (a 409 with the
    // read's resourceVersion, as from kube-apiserver): read again then, a bounded number of times.
    let mut answer = None;
    for _ in 0..10 {
        let (_, current) = admin.get_json(ec_path).await;
        let mut pod = current.clone();
        pod["spec"]["ephemeralContainers"]
            .as_array_mut()
            .expect("list")
            .push(json!({"name": "Bad", "image": "busybox"}));
        let (code, body) = admin.put_json(ec_path, &pod).await;
        if code != StatusCode::CONFLICT {
            answer = Some((code, body));
            break;
        }
    }
    let (code, body) = answer.expect("an answer other than 409 within 10 tries");
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["details"]["causes"][0]["field"],
        "spec.ephemeralContainers[1].name"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_live_answers() {
    if !std::path::Path::new("/usr/bin/kubectl").exists() {
        poddebug_tests::capability::missing("/usr/bin/kubectl");
        return;
    }
    let fake = live_fake().await;
    let kubeconfig = fake.write_kubeconfig(ADMIN_TOKEN);
    let cache = TempDir::new("kubectl-cache");
    for case in CASES {
        let patch_type = match case.content_type {
            "application/merge-patch+json" => "merge",
            "application/json-patch+json" => "json",
            _ => "strategic",
        };
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--cache-dir={}", cache.path().display()),
            "patch".to_owned(),
            "pod".to_owned(),
            case.pod.to_owned(),
            "-n".to_owned(),
            "ephdemo".to_owned(),
            format!("--type={patch_type}"),
            "-p".to_owned(),
            case.body.to_owned(),
        ];
        if !case.to_pod_itself {
            args.push("--subresource=ephemeralcontainers".to_owned());
        }
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::process::Command::new("/usr/bin/kubectl")
                .args(&args)
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("kubectl finished in time")
        .expect("kubectl ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.success(),
            case.code == 200,
            "{}: {stderr}",
            case.id
        );
        let Some(status) = case.status else { continue };
        let want: Value = serde_json::from_str(status).expect("status");
        if case.to_pod_itself {
            assert!(
                stderr.contains("pod updates may not change fields other than"),
                "{}: {stderr}",
                case.id
            );
            continue;
        }
        match want["details"]["causes"].as_array() {
            // kubectl prints "The Pod "target" is invalid: " and each cause as "field: message".
            Some(causes) => {
                assert!(
                    stderr.contains("The Pod \"target\" is invalid: "),
                    "{}: {stderr}",
                    case.id
                );
                for c in causes {
                    let line = format!(
                        "{}: {}",
                        c["field"].as_str().unwrap_or(""),
                        c["message"].as_str().unwrap_or("")
                    );
                    let first = line.lines().next().unwrap_or("");
                    assert!(
                        stderr.contains(first),
                        "{}: {first:?} not in {stderr}",
                        case.id
                    );
                }
            }
            None => {
                let line = format!(
                    "Error from server ({}): {}",
                    want["reason"].as_str().unwrap_or(""),
                    want["message"].as_str().unwrap_or("")
                );
                assert!(
                    stderr.contains(&line),
                    "{}: {line:?} not in {stderr}",
                    case.id
                );
            }
        }
    }
}
