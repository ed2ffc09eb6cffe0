//! Name formats of apimachinery (`k8s.io/apimachinery/pkg/util/validation`) and the generation
//! of debug container names.
//!
//! Each `*_errors` function returns the same list of messages as its Go counterpart (`IsDNS1123Label`,
//! `IsDNS1123Subdomain`, ...), in the same order. Callers turn each message into one
//! `FieldError::invalid(path, value, msg)`, as Go does, so the texts users see are identical.

use rand::Rng;

use crate::status::ApiError;

/// Maximum length of a DNS-1123 label (`DNS1123LabelMaxLength`).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Maximum length of a DNS-1123 subdomain (`DNS1123SubdomainMaxLength`).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case \
     alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower \
     case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
     must start and end with an alphanumeric character";
const LABEL_KEY_MAX_LENGTH: usize = 63;
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const RELAXED_ENV_VAR_NAME_ERR_MSG: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";

/// `validation.MaxLenError`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `validation.InclusiveRangeError`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// `validation.EmptyError`.
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `validation.RegexError`. Go joins the examples with `" or "` after a `", "` that ends each
/// example, hence the famous double space in `'my-name',  or '123-abc'`.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Whether `s` matches `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`.
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_lower_alnum(first)
                && is_lower_alnum(last)
                && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// Whether `s` matches the DNS-1123 subdomain regex (labels joined by dots).
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(is_dns1123_label)
}

/// `validation.IsDNS1123Label`: the messages for a value that is not a DNS-1123 label.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !is_dns1123_label(value) {
        if is_dns1123_subdomain(value) {
            // A valid subdomain that is not a valid label: since the length was checked
            // already, it must be the dots.
            errs.push("must not contain dots".to_owned());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `validation.IsDNS1123Subdomain`.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !is_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `apimachineryvalidation.NameIsDNSSubdomain(name, prefix)`: with `prefix`, a trailing dash
/// is allowed because a suffix will be appended (Go's `maskTrailingDash`, which replaces the
/// last *two* characters by `a`).
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    if prefix && name.len() > 1 && name.ends_with('-') {
        // `name[:len(name)-2] + "a"` in Go; byte slicing is safe here because the last byte
        // is the ASCII '-' and the one before it only matters if it is ASCII too.
        let cut = name.len() - 2;
        let masked = match name.get(..cut) {
            Some(head) => format!("{head}a"),
            // The second-to-last byte is inside a multi-byte character: the masked name
            // keeps non-ASCII bytes and fails the regex either way.
            None => format!("{}a", &name[..name.len() - 1]),
        };
        return dns1123_subdomain_errors(&masked);
    }
    dns1123_subdomain_errors(name)
}

fn is_label_key_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `validation.IsQualifiedName` (`content.IsLabelKey`): an optional DNS subdomain prefix and
/// `/`, then a name of at most 63 characters.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > LABEL_KEY_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(LABEL_KEY_MAX_LENGTH)));
    }
    if !is_label_key_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR_MSG,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `hasChDirPrefix`: `.`, `..` and a leading `..` are refused in keys that become file names.
fn ch_dir_prefix_errors(value: &str) -> Vec<String> {
    if value == "." {
        vec!["must not be '.'".to_owned()]
    } else if value == ".." {
        vec!["must not be '..'".to_owned()]
    } else if value.starts_with("..") {
        vec!["must not start with '..'".to_owned()]
    } else {
        Vec::new()
    }
}

/// `validation.IsConfigMapKey`: a key of a ConfigMap or Secret.
pub fn config_map_key_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let valid = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !valid {
        errs.push(regex_error(
            CONFIG_MAP_KEY_ERR_MSG,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(ch_dir_prefix_errors(value));
    errs
}

/// `validation.IsRelaxedEnvVarName`, the only env var name rule since
/// `RelaxedEnvironmentVariableValidation` went GA (1.34): printable ASCII except `=`.
pub fn relaxed_env_var_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push(format!("environment variable name {}", empty_error()));
    }
    // Go's unicode.IsPrint on ASCII: 0x20 (space) to 0x7e.
    if value.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(RELAXED_ENV_VAR_NAME_ERR_MSG.to_owned());
    }
    errs
}

/// `validation.IsValidPortNum`: 1 to 65535.
pub fn port_num_errors(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// `validation.IsValidPortName` (an IANA service name).
pub fn port_name_errors(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty()
        || !port
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned(),
        );
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_owned());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_owned());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_owned());
    }
    errs
}

/// Prefix of generated debug container names (kubectl's `debugger-`).
pub const DEBUG_NAME_PREFIX: &str = "debugger-";
/// Alphabet of the random suffix: apimachinery `utilrand.String` leaves out vowels and
/// look-alike characters so that no word (and no `0`/`o`, `1`/`l`) appears.
pub const DEBUG_NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of the random suffix.
pub const DEBUG_NAME_SUFFIX_LEN: usize = 5;
/// How many names are tried before giving up. With 27^5 (14 million) names, reaching this
/// bound means `is_taken` answers true for everything, not bad luck.
pub const DEBUG_NAME_MAX_TRIES: usize = 1000;

/// A name like kubectl's `computeDebugContainerName`: `debugger-` and five random characters,
/// drawn again while `is_taken` says the name is used (by a container, an init container or an
/// ephemeral container of the pod).
pub fn generate_debug_name<R: Rng + ?Sized>(
    is_taken: impl Fn(&str) -> bool,
    rng: &mut R,
) -> Result<String, ApiError> {
    for _ in 0..DEBUG_NAME_MAX_TRIES {
        let mut name = String::with_capacity(DEBUG_NAME_PREFIX.len() + DEBUG_NAME_SUFFIX_LEN);
        name.push_str(DEBUG_NAME_PREFIX);
        for _ in 0..DEBUG_NAME_SUFFIX_LEN {
            let i = rng.random_range(0..DEBUG_NAME_ALPHABET.len());
            name.push(char::from(DEBUG_NAME_ALPHABET[i]));
        }
        if !is_taken(&name) {
            return Ok(name);
        }
    }
    Err(ApiError::Internal(format!(
        "could not generate a free debug container name after {DEBUG_NAME_MAX_TRIES} tries"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::cell::Cell;

    const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    #[test]
    fn dns1123_labels() {
        let long = "a".repeat(64);
        let long_bad = format!("{}_", "a".repeat(63));
        let max = "a".repeat(63);
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("debugger", vec![]),
            ("a", vec![]),
            ("0", vec![]),
            ("my-name", vec![]),
            ("123-abc", vec![]),
            (&max, vec![]),
            ("", vec![LABEL_MSG]),
            ("Bad_Name", vec![LABEL_MSG]),
            ("-a", vec![LABEL_MSG]),
            ("a-", vec![LABEL_MSG]),
            ("UPPER", vec![LABEL_MSG]),
            ("a.b", vec!["must not contain dots"]),
            ("a..b", vec![LABEL_MSG]),
            ("é", vec![LABEL_MSG]),
            (&long, vec!["must be no more than 63 characters"]),
            (
                &long_bad,
                vec!["must be no more than 63 characters", LABEL_MSG],
            ),
        ];
        for (value, want) in cases {
            assert_eq!(dns1123_label_errors(value), want, "value {value:?}");
        }
    }

    #[test]
    fn dns1123_subdomains() {
        let long = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(63)
        );
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("example.com", vec![]),
            ("cm", vec![]),
            ("", vec![SUBDOMAIN_MSG]),
            ("a..b", vec![SUBDOMAIN_MSG]),
            ("Config", vec![SUBDOMAIN_MSG]),
            (&long, vec!["must be no more than 253 characters"]),
        ];
        for (value, want) in cases {
            assert_eq!(dns1123_subdomain_errors(value), want, "value {value:?}");
        }
    }

    #[test]
    fn prefixed_subdomain_masks_trailing_dash() {
        assert!(name_is_dns_subdomain("cm-", true).is_empty());
        assert_eq!(name_is_dns_subdomain("cm-", false), vec![SUBDOMAIN_MSG]);
        assert!(name_is_dns_subdomain("-", true).len() == 1);
    }

    #[test]
    fn regex_error_formats_examples_like_go() {
        assert_eq!(
            regex_error("m", "f", &[]),
            "m (regex used for validation is 'f')"
        );
        assert_eq!(
            regex_error("m", "f", &["a"]),
            "m (e.g. 'a', regex used for validation is 'f')"
        );
        assert_eq!(
            regex_error("m", "f", &["a", "b", "c"]),
            "m (e.g. 'a',  or 'b',  or 'c', regex used for validation is 'f')"
        );
    }

    #[test]
    fn qualified_names() {
        let long = "a".repeat(64);
        let name_msg = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("app", vec![]),
            ("example.com/My_Name.1", vec![]),
            ("/x", vec!["prefix part must be non-empty".to_owned()]),
            ("Ex/x", vec![format!("prefix part {SUBDOMAIN_MSG}")]),
            ("x/", vec!["name part must be non-empty".to_owned(), name_msg.to_owned()]),
            ("_x", vec![name_msg.to_owned()]),
            (&long, vec!["name part must be no more than 63 characters".to_owned()]),
            (
                "a/b/c",
                vec!["a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_owned()],
            ),
        ];
        for (value, want) in cases {
            assert_eq!(qualified_name_errors(value), want, "value {value:?}");
        }
    }

    #[test]
    fn config_map_keys() {
        let regex = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("key.name", vec![]),
            ("KEY_NAME", vec![]),
            ("a b", vec![regex]),
            ("", vec![regex]),
            (".", vec!["must not be '.'"]),
            ("..", vec!["must not be '..'"]),
            ("..x", vec!["must not start with '..'"]),
            ("../x", vec![regex, "must not start with '..'"]),
        ];
        for (value, want) in cases {
            assert_eq!(config_map_key_errors(value), want, "value {value:?}");
        }
    }

    #[test]
    fn relaxed_env_var_names() {
        let msg = "a valid environment variable name must consist only of printable ASCII characters other than '='";
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("PATH", vec![]),
            ("1st var with spaces!", vec![]),
            ("~", vec![]),
            ("A=B", vec![msg]),
            ("tab\there", vec![msg]),
            ("é", vec![msg]),
            ("", vec!["environment variable name must be non-empty"]),
        ];
        for (value, want) in cases {
            assert_eq!(relaxed_env_var_name_errors(value), want, "value {value:?}");
        }
    }

    #[test]
    fn port_names_and_numbers() {
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("http", vec![]),
            ("h2c-1", vec![]),
            (
                "HTTP",
                vec![
                    "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                    "must contain at least one letter (a-z)",
                ],
            ),
            ("80", vec!["must contain at least one letter (a-z)"]),
            ("a--b", vec!["must not contain consecutive hyphens"]),
            ("-ab", vec!["must not begin or end with a hyphen"]),
            (
                "abcdefghijklmnop",
                vec!["must be no more than 15 characters"],
            ),
        ];
        for (value, want) in cases {
            assert_eq!(port_name_errors(value), want, "value {value:?}");
        }
        assert!(port_num_errors(1).is_empty());
        assert!(port_num_errors(65535).is_empty());
        assert_eq!(
            port_num_errors(0),
            vec!["must be between 1 and 65535, inclusive"]
        );
        assert_eq!(
            port_num_errors(65536),
            vec!["must be between 1 and 65535, inclusive"]
        );
    }

    #[test]
    fn generated_names_use_the_kubectl_alphabet() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let name = generate_debug_name(|_| false, &mut rng).unwrap();
            assert_eq!(name.len(), 14);
            let suffix = name.strip_prefix("debugger-").unwrap();
            assert!(
                suffix.bytes().all(|c| DEBUG_NAME_ALPHABET.contains(&c)),
                "{name}"
            );
            assert!(dns1123_label_errors(&name).is_empty());
        }
    }

    #[test]
    fn generated_names_skip_taken_ones_and_are_deterministic() {
        let first = generate_debug_name(|_| false, &mut StdRng::seed_from_u64(42)).unwrap();
        let again = generate_debug_name(|_| false, &mut StdRng::seed_from_u64(42)).unwrap();
        assert_eq!(first, again);
        let calls = Cell::new(0);
        let taken = first.clone();
        let other = generate_debug_name(
            |n| {
                calls.set(calls.get() + 1);
                n == taken
            },
            &mut StdRng::seed_from_u64(42),
        )
        .unwrap();
        assert_ne!(other, first);
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn generation_gives_up_when_everything_is_taken() {
        let calls = Cell::new(0);
        let err = generate_debug_name(
            |_| {
                calls.set(calls.get() + 1);
                true
            },
            &mut StdRng::seed_from_u64(1),
        )
        .unwrap_err();
        assert_eq!(calls.get(), DEBUG_NAME_MAX_TRIES);
        assert_eq!(err.code(), 500);
        assert!(err.message().contains("after 1000 tries"));
    }
}
