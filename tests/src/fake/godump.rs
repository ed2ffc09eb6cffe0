//! How kube-apiserver prints objects inside "may not be changed" errors: the internal Go struct
//! marshalled with `json.MarshalIndent(v, "", " ")` (Go field names, every field present), then a
//! unified diff with three lines of context (go-difflib). Also `Semantic.DeepEqual`-style
//! normalization for comparing objects.

use serde_json::{Map, Value};

/// The shape of a Go field, enough to print it as Go would.
enum Shape {
    Str,
    Bool,
    Int,
    OptStr,
    OptBool,
    OptInt,
    StrList,
    Map,
    List(&'static Shape),
    Struct(&'static [Field]),
    Ptr(&'static Shape),
    /// A value struct: printed with its zero fields when absent.
    Inline(&'static Shape),
    Generic,
}

/// (JSON name, Go name, shape)
type Field = (&'static str, &'static str, Shape);

static GENERIC: Shape = Shape::Generic;

static CONTAINER_PORT: Shape = Shape::Struct(&[
    ("name", "Name", Shape::Str),
    ("hostPort", "HostPort", Shape::Int),
    ("containerPort", "ContainerPort", Shape::Int),
    ("protocol", "Protocol", Shape::Str),
    ("hostIP", "HostIP", Shape::Str),
]);

static ENV_SOURCE_REF: Shape = Shape::Struct(&[
    ("name", "Name", Shape::Str),
    ("optional", "Optional", Shape::OptBool),
]);

static ENV_FROM: Shape = Shape::Struct(&[
    ("prefix", "Prefix", Shape::Str),
    ("configMapRef", "ConfigMapRef", Shape::Ptr(&ENV_SOURCE_REF)),
    ("secretRef", "SecretRef", Shape::Ptr(&ENV_SOURCE_REF)),
]);

static ENV_VAR: Shape = Shape::Struct(&[
    ("name", "Name", Shape::Str),
    ("value", "Value", Shape::Str),
    ("valueFrom", "ValueFrom", Shape::Ptr(&GENERIC)),
]);

static RESOURCES: Shape = Shape::Struct(&[
    ("limits", "Limits", Shape::Map),
    ("requests", "Requests", Shape::Map),
    ("claims", "Claims", Shape::List(&GENERIC)),
]);

static VOLUME_MOUNT: Shape = Shape::Struct(&[
    ("name", "Name", Shape::Str),
    ("readOnly", "ReadOnly", Shape::Bool),
    ("recursiveReadOnly", "RecursiveReadOnly", Shape::OptStr),
    ("mountPath", "MountPath", Shape::Str),
    ("subPath", "SubPath", Shape::Str),
    ("mountPropagation", "MountPropagation", Shape::OptStr),
    ("subPathExpr", "SubPathExpr", Shape::Str),
]);

static VOLUME_DEVICE: Shape = Shape::Struct(&[
    ("name", "Name", Shape::Str),
    ("devicePath", "DevicePath", Shape::Str),
]);

static CAPABILITIES: Shape = Shape::Struct(&[
    ("add", "Add", Shape::StrList),
    ("drop", "Drop", Shape::StrList),
]);

static SE_LINUX: Shape = Shape::Struct(&[
    ("user", "User", Shape::Str),
    ("role", "Role", Shape::Str),
    ("type", "Type", Shape::Str),
    ("level", "Level", Shape::Str),
]);

static WINDOWS: Shape = Shape::Struct(&[
    (
        "gmsaCredentialSpecName",
        "GMSACredentialSpecName",
        Shape::OptStr,
    ),
    ("gmsaCredentialSpec", "GMSACredentialSpec", Shape::OptStr),
    ("runAsUserName", "RunAsUserName", Shape::OptStr),
    ("hostProcess", "HostProcess", Shape::OptBool),
]);

static PROFILE: Shape = Shape::Struct(&[
    ("type", "Type", Shape::Str),
    ("localhostProfile", "LocalhostProfile", Shape::OptStr),
]);

static SECURITY_CONTEXT: Shape = Shape::Struct(&[
    ("capabilities", "Capabilities", Shape::Ptr(&CAPABILITIES)),
    ("privileged", "Privileged", Shape::OptBool),
    ("seLinuxOptions", "SELinuxOptions", Shape::Ptr(&SE_LINUX)),
    ("windowsOptions", "WindowsOptions", Shape::Ptr(&WINDOWS)),
    ("runAsUser", "RunAsUser", Shape::OptInt),
    ("runAsGroup", "RunAsGroup", Shape::OptInt),
    ("runAsNonRoot", "RunAsNonRoot", Shape::OptBool),
    (
        "readOnlyRootFilesystem",
        "ReadOnlyRootFilesystem",
        Shape::OptBool,
    ),
    (
        "allowPrivilegeEscalation",
        "AllowPrivilegeEscalation",
        Shape::OptBool,
    ),
    ("procMount", "ProcMount", Shape::OptStr),
    ("seccompProfile", "SeccompProfile", Shape::Ptr(&PROFILE)),
    ("appArmorProfile", "AppArmorProfile", Shape::Ptr(&PROFILE)),
]);

/// `core.EphemeralContainer` (EphemeralContainerCommon, then TargetContainerName).
static EPHEMERAL_CONTAINER: Shape = Shape::Struct(&[
    ("name", "Name", Shape::Str),
    ("image", "Image", Shape::Str),
    ("command", "Command", Shape::StrList),
    ("args", "Args", Shape::StrList),
    ("workingDir", "WorkingDir", Shape::Str),
    ("ports", "Ports", Shape::List(&CONTAINER_PORT)),
    ("envFrom", "EnvFrom", Shape::List(&ENV_FROM)),
    ("env", "Env", Shape::List(&ENV_VAR)),
    ("resources", "Resources", Shape::Inline(&RESOURCES)),
    ("resizePolicy", "ResizePolicy", Shape::List(&GENERIC)),
    ("restartPolicy", "RestartPolicy", Shape::OptStr),
    (
        "restartPolicyRules",
        "RestartPolicyRules",
        Shape::List(&GENERIC),
    ),
    ("volumeMounts", "VolumeMounts", Shape::List(&VOLUME_MOUNT)),
    (
        "volumeDevices",
        "VolumeDevices",
        Shape::List(&VOLUME_DEVICE),
    ),
    ("livenessProbe", "LivenessProbe", Shape::Ptr(&GENERIC)),
    ("readinessProbe", "ReadinessProbe", Shape::Ptr(&GENERIC)),
    ("startupProbe", "StartupProbe", Shape::Ptr(&GENERIC)),
    ("lifecycle", "Lifecycle", Shape::Ptr(&GENERIC)),
    (
        "terminationMessagePath",
        "TerminationMessagePath",
        Shape::Str,
    ),
    (
        "terminationMessagePolicy",
        "TerminationMessagePolicy",
        Shape::Str,
    ),
    ("imagePullPolicy", "ImagePullPolicy", Shape::Str),
    (
        "securityContext",
        "SecurityContext",
        Shape::Ptr(&SECURITY_CONTEXT),
    ),
    ("stdin", "Stdin", Shape::Bool),
    ("stdinOnce", "StdinOnce", Shape::Bool),
    ("tty", "TTY", Shape::Bool),
    ("targetContainerName", "TargetContainerName", Shape::Str),
]);

/// Go's JSON string encoding (with its HTML escaping).
fn go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn pad(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push(' ');
    }
}

fn write_scalar(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => go_string(s, out),
        Value::Null => out.push_str("null"),
        other => out.push_str(&other.to_string()),
    }
}

fn capitalize(key: &str) -> String {
    let mut c = key.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn write_object<'a>(
    entries: impl ExactSizeIterator<Item = (String, Box<dyn FnOnce(&mut String) + 'a>)>,
    depth: usize,
    out: &mut String,
) {
    if entries.len() == 0 {
        out.push_str("{}");
        return;
    }
    out.push('{');
    let n = entries.len();
    for (i, (key, write)) in entries.enumerate() {
        pad(out, depth + 1);
        go_string(&key, out);
        out.push_str(": ");
        write(out);
        if i + 1 < n {
            out.push(',');
        }
    }
    pad(out, depth);
    out.push('}');
}

fn write_array(
    items: &[Value],
    depth: usize,
    out: &mut String,
    each: &dyn Fn(&Value, usize, &mut String),
) {
    if items.is_empty() {
        out.push_str("[]");
        return;
    }
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        pad(out, depth + 1);
        each(item, depth + 1, out);
        if i + 1 < items.len() {
            out.push(',');
        }
    }
    pad(out, depth);
    out.push(']');
}

fn write_generic(v: &Value, depth: usize, out: &mut String) {
    match v {
        Value::Object(m) => {
            let entries = m.iter().map(|(k, v)| {
                let w: Box<dyn FnOnce(&mut String)> =
                    Box::new(move |out: &mut String| write_generic(v, depth + 1, out));
                (capitalize(k), w)
            });
            write_object(entries.collect::<Vec<_>>().into_iter(), depth, out);
        }
        Value::Array(a) => write_array(a, depth, out, &write_generic),
        other => write_scalar(other, out),
    }
}

fn write_shaped(shape: &Shape, v: Option<&Value>, depth: usize, out: &mut String) {
    let v = v.filter(|v| !v.is_null());
    match shape {
        Shape::Str => go_string(v.and_then(Value::as_str).unwrap_or(""), out),
        Shape::Bool => out.push_str(if v.and_then(Value::as_bool).unwrap_or(false) {
            "true"
        } else {
            "false"
        }),
        Shape::Int => out.push_str(&v.map(Value::to_string).unwrap_or_else(|| "0".to_owned())),
        Shape::OptStr | Shape::OptBool | Shape::OptInt | Shape::Generic => match v {
            Some(v) => write_generic(v, depth, out),
            None => out.push_str("null"),
        },
        Shape::StrList => match v.and_then(Value::as_array) {
            Some(a) => write_array(a, depth, out, &write_generic),
            None => out.push_str("null"),
        },
        Shape::Map => match v.and_then(Value::as_object) {
            Some(m) => {
                let entries = m.iter().map(|(k, v)| {
                    let w: Box<dyn FnOnce(&mut String)> =
                        Box::new(move |out: &mut String| write_scalar(v, out));
                    (k.clone(), w)
                });
                write_object(entries.collect::<Vec<_>>().into_iter(), depth, out);
            }
            None => out.push_str("null"),
        },
        Shape::List(item) => match v.and_then(Value::as_array) {
            Some(a) => write_array(a, depth, out, &|x, d, out| {
                write_shaped(item, Some(x), d, out)
            }),
            None => out.push_str("null"),
        },
        Shape::Ptr(inner) => match v {
            Some(_) => write_shaped(inner, v, depth, out),
            None => out.push_str("null"),
        },
        Shape::Inline(inner) => write_shaped(inner, v, depth, out),
        Shape::Struct(fields) => {
            let obj = v.and_then(Value::as_object);
            let entries = fields.iter().map(|(json, go, shape)| {
                let field = obj.and_then(|o| o.get(*json));
                let w: Box<dyn FnOnce(&mut String)> =
                    Box::new(move |out: &mut String| write_shaped(shape, field, depth + 1, out));
                ((*go).to_owned(), w)
            });
            write_object(entries.collect::<Vec<_>>().into_iter(), depth, out);
        }
    }
}

/// An ephemeral container as kube-apiserver prints it in "may not be changed".
pub fn dump_ephemeral_container(ec: &Value) -> String {
    let mut out = String::new();
    write_shaped(&EPHEMERAL_CONTAINER, Some(ec), 0, &mut out);
    out
}

/// Any object with Go-style (capitalized) keys; only the keys present are printed.
pub fn dump_generic(v: &Value) -> String {
    let mut out = String::new();
    write_generic(v, 0, &mut out);
    out
}

/// Keys whose `false`, `0` or `""` is a Go zero value (not a set pointer) in the types the fake
/// compares, so absent and zero compare equal as `Semantic.DeepEqual` sees them.
const POINTER_FIELDS: &[&str] = &[
    "restartPolicy",
    "mountPropagation",
    "recursiveReadOnly",
    "procMount",
    "localhostProfile",
    "gmsaCredentialSpecName",
    "gmsaCredentialSpec",
    "runAsUserName",
    "privileged",
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "readOnlyRootFilesystem",
    "allowPrivilegeEscalation",
    "hostProcess",
    "optional",
    "activeDeadlineSeconds",
    "terminationGracePeriodSeconds",
];

/// Value structs whose empty object equals their absence.
const VALUE_STRUCTS: &[&str] = &["resources", "limits", "requests"];

/// Drops what `Semantic.DeepEqual` cannot tell from absence: nulls, empty lists, zero scalars of
/// non-pointer fields, empty value structs.
pub fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let n = normalize(v);
                let pointer = POINTER_FIELDS.contains(&k.as_str());
                let drop = match &n {
                    Value::Null => true,
                    Value::Array(a) => a.is_empty(),
                    Value::Object(o) => o.is_empty() && VALUE_STRUCTS.contains(&k.as_str()),
                    Value::String(s) => s.is_empty() && !pointer,
                    Value::Bool(b) => !b && !pointer,
                    Value::Number(x) => x.as_f64() == Some(0.0) && !pointer,
                };
                if !drop {
                    out.insert(k.clone(), n);
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Tag {
    Equal,
    Replace,
    Delete,
    Insert,
}

type Opcode = (Tag, usize, usize, usize, usize);

fn opcodes(a: &[&str], b: &[&str]) -> Vec<Opcode> {
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut matches = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] && lcs[i][j] == lcs[i + 1][j + 1] + 1 {
            matches.push((i, j));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    matches.push((n, m));
    let mut codes = Vec::new();
    let (mut i, mut j) = (0, 0);
    let mut k = 0;
    while k < matches.len() {
        let (mi, mj) = matches[k];
        let tag = match (i < mi, j < mj) {
            (true, true) => Some(Tag::Replace),
            (true, false) => Some(Tag::Delete),
            (false, true) => Some(Tag::Insert),
            (false, false) => None,
        };
        if let Some(tag) = tag {
            codes.push((tag, i, mi, j, mj));
        }
        if mi == n && mj == m {
            break;
        }
        let mut len = 0;
        while k < matches.len() && matches[k] == (mi + len, mj + len) && mi + len < n {
            len += 1;
            k += 1;
        }
        codes.push((Tag::Equal, mi, mi + len, mj, mj + len));
        i = mi + len;
        j = mj + len;
    }
    codes
}

fn grouped(mut codes: Vec<Opcode>, n: usize) -> Vec<Vec<Opcode>> {
    if codes.is_empty() {
        codes.push((Tag::Equal, 0, 1, 0, 1));
    }
    if let Some(first) = codes.first_mut()
        && first.0 == Tag::Equal
    {
        let (t, i1, i2, j1, j2) = *first;
        *first = (
            t,
            i1.max(i2.saturating_sub(n)),
            i2,
            j1.max(j2.saturating_sub(n)),
            j2,
        );
    }
    if let Some(last) = codes.last_mut()
        && last.0 == Tag::Equal
    {
        let (t, i1, i2, j1, j2) = *last;
        *last = (t, i1, i2.min(i1 + n), j1, j2.min(j1 + n));
    }
    let mut groups = Vec::new();
    let mut group = Vec::new();
    for (tag, mut i1, i2, mut j1, j2) in codes {
        if tag == Tag::Equal && i2 - i1 > 2 * n {
            group.push((tag, i1, i2.min(i1 + n), j1, j2.min(j1 + n)));
            groups.push(std::mem::take(&mut group));
            i1 = i1.max(i2 - n);
            j1 = j1.max(j2 - n);
        }
        group.push((tag, i1, i2, j1, j2));
    }
    let only_equal = group.len() == 1 && group[0].0 == Tag::Equal;
    if !group.is_empty() && !only_equal {
        groups.push(group);
    }
    groups
}

fn range(start: usize, stop: usize) -> String {
    let beginning = start + 1;
    let length = stop - start;
    match length {
        1 => format!("{beginning}"),
        0 => format!("{},0", beginning - 1),
        _ => format!("{beginning},{length}"),
    }
}

/// go-difflib's unified diff (no file header), three lines of context.
pub fn unified_diff(a: &str, b: &str) -> String {
    let a_lines: Vec<&str> = a.split('\n').collect();
    let b_lines: Vec<&str> = b.split('\n').collect();
    let mut out = String::new();
    for group in grouped(opcodes(&a_lines, &b_lines), 3) {
        let (first, last) = (group[0], group[group.len() - 1]);
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(first.1, last.2),
            range(first.3, last.4)
        ));
        for (tag, i1, i2, j1, j2) in group {
            if tag == Tag::Equal {
                for l in &a_lines[i1..i2] {
                    out.push_str(&format!(" {l}\n"));
                }
                continue;
            }
            if matches!(tag, Tag::Replace | Tag::Delete) {
                for l in &a_lines[i1..i2] {
                    out.push_str(&format!("-{l}\n"));
                }
            }
            if matches!(tag, Tag::Replace | Tag::Insert) {
                for l in &b_lines[j1..j2] {
                    out.push_str(&format!("+{l}\n"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_of_changed_image_matches_live_case_13() {
        let old = json!({"name": "debugger", "image": "busybox", "command": ["sh"], "stdin": true, "tty": true,
            "targetContainerName": "app", "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "Always", "resources": {}});
        let mut new = old.clone();
        new["image"] = json!("busybox:other");
        let d = unified_diff(
            &dump_ephemeral_container(&old),
            &dump_ephemeral_container(&new),
        );
        assert_eq!(
            d,
            "@@ -1,6 +1,6 @@\n {\n  \"Name\": \"debugger\",\n- \"Image\": \"busybox\",\n+ \"Image\": \"busybox:other\",\n  \"Command\": [\n   \"sh\"\n  ],\n"
        );
    }

    #[test]
    fn dump_prints_every_field() {
        let d = dump_ephemeral_container(&json!({"name": "x", "image": "busybox"}));
        assert!(d.contains("\"Resources\": {\n  \"Limits\": null,\n  \"Requests\": null,\n  \"Claims\": null\n }"), "{d}");
        assert!(d.ends_with(" \"TargetContainerName\": \"\"\n}"), "{d}");
    }

    #[test]
    fn normalize_like_semantic_equal() {
        assert_eq!(
            normalize(&json!({"command": [], "stdin": false, "resources": {}})),
            json!({})
        );
        assert_ne!(
            normalize(&json!({"securityContext": {"privileged": false}})),
            json!({})
        );
    }
}
