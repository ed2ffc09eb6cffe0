//! `ValidateSecurityContext` and the profile validators it calls (k/k
//! `pkg/apis/core/validation/validation.go`).

use k8s_openapi::api::core::v1::{
    AppArmorProfile, Capabilities, SELinuxOptions, SeccompProfile, SecurityContext,
    WindowsSecurityContextOptions,
};

use super::{child, validate_local_descending_path};
use crate::field::{ErrorList, FieldError, FieldValue, go_json_quote};
use crate::names::{dns1123_subdomain_errors, inclusive_range_error};

/// Largest UID/GID accepted (`maxUserID`/`maxGroupID` in apimachinery). kube-apiserver 1.36
/// still limits IDs to int32; a later apimachinery raised it to uint32 (k/k #138525).
pub const MAX_USER_ID: i64 = i32::MAX as i64;

const SECCOMP_TYPES: [&str; 3] = ["Localhost", "RuntimeDefault", "Unconfined"];
const APPARMOR_TYPES: [&str; 3] = ["Localhost", "RuntimeDefault", "Unconfined"];
const MAX_LOCALHOST_PROFILE_LENGTH: usize = 4095;
const MAX_GMSA_CREDENTIAL_SPEC_KIB: usize = 64;
const MAX_RUN_AS_USER_NAME_DOMAIN_LENGTH: usize = 256;
const MAX_RUN_AS_USER_NAME_USER_LENGTH: usize = 104;

/// `ValidateSecurityContext(sc, path, hostUsers)`, with privileged containers allowed (the
/// `--allow-privileged` default of kube-apiserver).
pub(super) fn validate_security_context(
    sc: Option<&SecurityContext>,
    path: &str,
    host_users: bool,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(sc) = sc else { return errs };

    if let Some(uid) = sc.run_as_user
        && !(0..=MAX_USER_ID).contains(&uid)
    {
        errs.push(FieldError::invalid(
            child(path, "runAsUser"),
            uid,
            inclusive_range_error(0, MAX_USER_ID),
        ));
    }
    if let Some(gid) = sc.run_as_group
        && !(0..=MAX_USER_ID).contains(&gid)
    {
        errs.push(FieldError::invalid(
            child(path, "runAsGroup"),
            gid,
            inclusive_range_error(0, MAX_USER_ID),
        ));
    }
    if let Some(pm) = sc.proc_mount.as_deref() {
        let pm_path = child(path, "procMount");
        if pm != "Default" && pm != "Unmasked" {
            errs.push(FieldError::not_supported(
                &pm_path,
                FieldValue::json_str(pm),
                &["Default", "Unmasked"],
            ));
        }
        if host_users && pm == "Unmasked" {
            errs.push(FieldError::invalid(
                &pm_path,
                FieldValue::json_str(pm),
                "`hostUsers` must be false to use `Unmasked`",
            ));
        }
    }
    errs.extend(validate_seccomp_profile(
        sc.seccomp_profile.as_ref(),
        &child(path, "seccompProfile"),
    ));
    if sc.allow_privilege_escalation == Some(false) {
        if sc.privileged == Some(true) {
            errs.push(FieldError::invalid(
                path,
                FieldValue::Raw(security_context_go_json(sc)),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let adds = sc.capabilities.as_ref().and_then(|c| c.add.as_ref());
        for cap in adds.into_iter().flatten() {
            if cap == "CAP_SYS_ADMIN" {
                errs.push(FieldError::invalid(
                    path,
                    FieldValue::Raw(security_context_go_json(sc)),
                    "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
                ));
            }
        }
    }
    errs.extend(validate_windows_options(
        sc.windows_options.as_ref(),
        &child(path, "windowsOptions"),
    ));
    errs.extend(validate_app_armor_profile(
        sc.app_armor_profile.as_ref(),
        &child(path, "appArmorProfile"),
    ));
    errs
}

/// `validateSeccompProfileField`.
fn validate_seccomp_profile(sp: Option<&SeccompProfile>, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(sp) = sp else { return errs };
    match sp.type_.as_str() {
        "Localhost" | "RuntimeDefault" | "Unconfined" => {}
        "" => errs.push(FieldError::required(
            child(path, "type"),
            "type is required when seccompProfile is set",
        )),
        other => errs.push(FieldError::not_supported(
            child(path, "type"),
            FieldValue::json_str(other),
            &SECCOMP_TYPES,
        )),
    }
    let lp_path = child(path, "localhostProfile");
    if sp.type_ == "Localhost" {
        match sp.localhost_profile.as_deref() {
            None => errs.push(FieldError::required(
                &lp_path,
                "must be set when seccomp type is Localhost",
            )),
            Some(lp) => errs.extend(validate_local_descending_path(lp, &lp_path)),
        }
    } else if sp.localhost_profile.is_some() {
        errs.push(FieldError::invalid(
            &lp_path,
            FieldValue::Raw(profile_go_json(&sp.type_, sp.localhost_profile.as_deref())),
            "can only be set when seccomp type is Localhost",
        ));
    }
    errs
}

/// `ValidateAppArmorProfileField`.
fn validate_app_armor_profile(profile: Option<&AppArmorProfile>, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(profile) = profile else { return errs };
    let lp_path = child(path, "localhostProfile");
    match profile.type_.as_str() {
        "Localhost" => match profile.localhost_profile.as_deref() {
            None => errs.push(FieldError::required(
                &lp_path,
                "must be set when AppArmor type is Localhost",
            )),
            Some(lp) => {
                let trimmed = lp.trim();
                if trimmed != lp {
                    errs.push(FieldError::invalid(
                        &lp_path,
                        lp,
                        "must not be padded with whitespace",
                    ));
                } else if trimmed.is_empty() {
                    errs.push(FieldError::required(
                        &lp_path,
                        "must be set when AppArmor type is Localhost",
                    ));
                }
                if lp.len() > MAX_LOCALHOST_PROFILE_LENGTH {
                    errs.push(FieldError::too_long(&lp_path, MAX_LOCALHOST_PROFILE_LENGTH));
                }
            }
        },
        "RuntimeDefault" | "Unconfined" => {
            if let Some(lp) = profile.localhost_profile.as_deref() {
                errs.push(FieldError::invalid(
                    &lp_path,
                    FieldValue::json_str(lp),
                    "can only be set when AppArmor type is Localhost",
                ));
            }
        }
        "" => errs.push(FieldError::required(
            child(path, "type"),
            "type is required when appArmorProfile is set",
        )),
        other => errs.push(FieldError::not_supported(
            child(path, "type"),
            FieldValue::json_str(other),
            &APPARMOR_TYPES,
        )),
    }
    errs
}

/// A NetBIOS domain: 1 to 15 characters, none of `\ / : * ? " < > |`, not starting with `.`.
fn is_netbios_domain(d: &str) -> bool {
    let bad = |c: char| matches!(c, '\\' | '/' | ':' | '*' | '?' | '"' | '<' | '>' | '|');
    let mut chars = d.chars();
    match chars.next() {
        Some(first) if !bad(first) && first != '.' => {}
        _ => return false,
    }
    let rest: Vec<char> = chars.collect();
    rest.len() <= 14 && !rest.iter().any(|&c| bad(c))
}

/// A DNS domain for Windows user names: labels of 1 to 63 alphanumerics and dashes.
fn is_windows_dns_domain(d: &str) -> bool {
    d.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
    })
}

/// `validateWindowsSecurityContextOptions`. The bad values are `*string`s, which Go prints as
/// JSON.
fn validate_windows_options(w: Option<&WindowsSecurityContextOptions>, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(w) = w else { return errs };
    if let Some(name) = w.gmsa_credential_spec_name.as_deref() {
        for msg in dns1123_subdomain_errors(name) {
            errs.push(FieldError::invalid(
                child(path, "gmsaCredentialSpecName"),
                FieldValue::json_str(name),
                msg,
            ));
        }
    }
    if let Some(spec) = w.gmsa_credential_spec.as_deref() {
        let p = child(path, "gmsaCredentialSpec");
        if spec.is_empty() {
            errs.push(FieldError::invalid(
                p,
                FieldValue::json_str(spec),
                "gmsaCredentialSpec cannot be an empty string",
            ));
        } else if spec.len() > MAX_GMSA_CREDENTIAL_SPEC_KIB * 1024 {
            errs.push(FieldError::invalid(
                p,
                FieldValue::json_str(spec),
                format!("gmsaCredentialSpec size must be under {MAX_GMSA_CREDENTIAL_SPEC_KIB} KiB"),
            ));
        }
    }
    if let Some(user_name) = w.run_as_user_name.as_deref() {
        let p = child(path, "runAsUserName");
        let mut bad = |msg: String| {
            errs.push(FieldError::invalid(
                &p,
                FieldValue::json_str(user_name),
                msg,
            ))
        };
        let parts: Vec<&str> = user_name.split('\\').collect();
        if user_name.is_empty() {
            bad("runAsUserName cannot be an empty string".to_owned());
        } else if user_name.bytes().any(|c| c.is_ascii_control()) {
            bad("runAsUserName cannot contain control characters".to_owned());
        } else if parts.len() > 2 {
            bad("runAsUserName cannot contain more than one backslash".to_owned());
        } else {
            let (domain, user) = match parts.as_slice() {
                [domain, user] => (Some(*domain), *user),
                _ => (None, user_name),
            };
            let domain_str = domain.unwrap_or("");
            if domain_str.len() >= MAX_RUN_AS_USER_NAME_DOMAIN_LENGTH {
                bad(format!(
                    "runAsUserName's Domain length must be under {MAX_RUN_AS_USER_NAME_DOMAIN_LENGTH} characters"
                ));
            }
            if domain.is_some()
                && !(is_netbios_domain(domain_str) || is_windows_dns_domain(domain_str))
            {
                bad(
                    "runAsUserName's Domain doesn't match the NetBios nor the DNS format"
                        .to_owned(),
                );
            }
            if user.is_empty() {
                bad("runAsUserName's User cannot be empty".to_owned());
            } else if user.len() > MAX_RUN_AS_USER_NAME_USER_LENGTH {
                bad(format!(
                    "runAsUserName's User length must not be longer than {MAX_RUN_AS_USER_NAME_USER_LENGTH} characters"
                ));
            }
            if !user.is_empty() && user.chars().all(|c| c == '.' || c == ' ') {
                bad("runAsUserName's User cannot contain only periods or spaces".to_owned());
            }
            if user.contains([
                '"', '/', '\\', ':', ';', '|', '=', ',', '+', '*', '?', '<', '>', '@', '[', ']',
            ]) {
                bad("runAsUserName's User cannot contain the following characters: \"/\\:;|=,+*?<>@[]".to_owned());
            }
        }
    }
    errs
}

fn opt_json_str(v: Option<&str>) -> String {
    v.map_or_else(|| "null".to_owned(), go_json_quote)
}

fn opt_json<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| v.to_string())
}

fn string_list_json(v: Option<&Vec<String>>) -> String {
    match v {
        None => "null".to_owned(),
        Some(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|s| go_json_quote(s))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

fn capabilities_go_json(c: Option<&Capabilities>) -> String {
    match c {
        None => "null".to_owned(),
        Some(c) => format!(
            r#"{{"Add":{},"Drop":{}}}"#,
            string_list_json(c.add.as_ref()),
            string_list_json(c.drop.as_ref())
        ),
    }
}

fn se_linux_go_json(o: Option<&SELinuxOptions>) -> String {
    match o {
        None => "null".to_owned(),
        Some(o) => format!(
            r#"{{"User":{},"Role":{},"Type":{},"Level":{}}}"#,
            go_json_quote(o.user.as_deref().unwrap_or("")),
            go_json_quote(o.role.as_deref().unwrap_or("")),
            go_json_quote(o.type_.as_deref().unwrap_or("")),
            go_json_quote(o.level.as_deref().unwrap_or("")),
        ),
    }
}

fn windows_go_json(w: Option<&WindowsSecurityContextOptions>) -> String {
    match w {
        None => "null".to_owned(),
        Some(w) => format!(
            r#"{{"GMSACredentialSpecName":{},"GMSACredentialSpec":{},"RunAsUserName":{},"HostProcess":{}}}"#,
            opt_json_str(w.gmsa_credential_spec_name.as_deref()),
            opt_json_str(w.gmsa_credential_spec.as_deref()),
            opt_json_str(w.run_as_user_name.as_deref()),
            opt_json(w.host_process),
        ),
    }
}

/// An internal `SeccompProfile` / `AppArmorProfile` as `json.Marshal` prints it.
fn profile_go_json(type_: &str, localhost_profile: Option<&str>) -> String {
    format!(
        r#"{{"Type":{},"LocalhostProfile":{}}}"#,
        go_json_quote(type_),
        opt_json_str(localhost_profile)
    )
}

/// The internal `core.SecurityContext` as apimachinery prints it in an `Invalid value`:
/// `json.Marshal` of a struct without JSON tags, so Go field names in declaration order and
/// `null` for nil pointers.
pub(super) fn security_context_go_json(sc: &SecurityContext) -> String {
    format!(
        concat!(
            r#"{{"Capabilities":{},"Privileged":{},"SELinuxOptions":{},"WindowsOptions":{},"#,
            r#""RunAsUser":{},"RunAsGroup":{},"RunAsNonRoot":{},"ReadOnlyRootFilesystem":{},"#,
            r#""AllowPrivilegeEscalation":{},"ProcMount":{},"SeccompProfile":{},"AppArmorProfile":{}}}"#
        ),
        capabilities_go_json(sc.capabilities.as_ref()),
        opt_json(sc.privileged),
        se_linux_go_json(sc.se_linux_options.as_ref()),
        windows_go_json(sc.windows_options.as_ref()),
        opt_json(sc.run_as_user),
        opt_json(sc.run_as_group),
        opt_json(sc.run_as_non_root),
        opt_json(sc.read_only_root_filesystem),
        opt_json(sc.allow_privilege_escalation),
        opt_json_str(sc.proc_mount.as_deref()),
        sc.seccomp_profile.as_ref().map_or_else(
            || "null".to_owned(),
            |p| profile_go_json(&p.type_, p.localhost_profile.as_deref())
        ),
        sc.app_armor_profile.as_ref().map_or_else(
            || "null".to_owned(),
            |p| profile_go_json(&p.type_, p.localhost_profile.as_deref())
        ),
    )
}
