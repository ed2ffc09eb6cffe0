//! Just enough of the container image reference grammar (`github.com/distribution/reference`,
//! `ParseNormalizedNamed`) to find an image's tag and digest, which decide the default
//! `imagePullPolicy` (k/k `pkg/util/parsers.ParseImageName`).
//!
//! ```text
//! reference      := name [ ":" tag ] [ "@" digest ]
//! name           := [domain "/"] path-component ["/" path-component]*
//! domain         := host [":" port]            host := domain-name | "[" IPv6 "]"
//! path-component := [a-z0-9]+ (separator [a-z0-9]+)*     separator := [._] | "__" | "-"+
//! tag            := [\w][\w.-]{0,127}
//! digest         := algorithm ":" hex             (sha256/384/512, lowercase hex)
//! ```

/// The parts of a reference that matter for defaulting.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ImageRef {
    /// The tag, if the reference has one.
    pub tag: Option<String>,
    /// The digest, if the reference has one.
    pub digest: Option<String>,
}

/// Longest repository name accepted (`NameTotalLengthMax`).
const NAME_TOTAL_LENGTH_MAX: usize = 255;

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn is_path_component(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !is_lower_alnum(b[0]) || !is_lower_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_lower_alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: ".", "_", "__" or one or more "-".
        let start = i;
        while i < b.len() && !is_lower_alnum(b[i]) {
            i += 1;
        }
        let sep = &s[start..i];
        let ok = matches!(sep, "." | "_" | "__") || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// `[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`
fn is_domain_component(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
}

/// `host[:port]`, host being a dotted name or a bracketed IPv6 address.
fn is_domain(s: &str) -> bool {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return false;
        };
        let v6 = &rest[..end];
        if v6.is_empty()
            || !v6
                .bytes()
                .all(|c| c.is_ascii_hexdigit() || c == b':' || c == b'.')
        {
            return false;
        }
        let after = &rest[end + 1..];
        match after.strip_prefix(':') {
            Some(port) => ("", Some(port)),
            None if after.is_empty() => ("", None),
            None => return false,
        }
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let host_ok = host.is_empty() && s.starts_with('[') || host.split('.').all(is_domain_component);
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()));
    host_ok && port_ok
}

/// `[\w][\w.-]{0,127}`
fn is_tag(s: &str) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && word(b[0])
        && b.iter().all(|&c| word(c) || c == b'.' || c == b'-')
}

/// A digest that both matches the grammar and validates (`digest.Parse`): a registered
/// algorithm and lowercase hex of its exact length.
fn is_valid_digest(s: &str) -> bool {
    let Some((alg, hex)) = s.split_once(':') else {
        return false;
    };
    let len = match alg {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return false,
    };
    hex.len() == len
        && hex
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// Parse an image reference as `ParseNormalizedNamed` does. `None` when it does not parse (an
/// empty string, whitespace, upper-case repository names, bad digests...).
pub(crate) fn parse(image: &str) -> Option<ImageRef> {
    // A bare 64-hex string would be an image ID, which is refused as a name.
    if image.len() == 64
        && image
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    {
        return None;
    }
    // splitDockerDomain then the lowercase check on the repository part (before any ':').
    let remainder = match image.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.to_lowercase() != first =>
        {
            rest
        }
        _ => image,
    };
    let remote_name = remainder.split(':').next().unwrap_or(remainder);
    if remote_name.to_lowercase() != remote_name {
        return None;
    }

    let (name_and_tag, digest) = match image.split_once('@') {
        Some((left, d)) => (left, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest
        && !is_valid_digest(d)
    {
        return None;
    }
    let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_and_tag[..last_slash + i],
            Some(&name_and_tag[last_slash + i + 1..]),
        ),
        None => (name_and_tag, None),
    };
    if tag.is_some_and(|t| !is_tag(t)) {
        return None;
    }
    let components: Vec<&str> = name.split('/').collect();
    let all_paths = components.iter().all(|c| is_path_component(c));
    let domain_then_paths = components.len() >= 2
        && is_domain(components[0])
        && components[1..].iter().all(|c| is_path_component(c));
    if !(all_paths || domain_then_paths) || name.len() > NAME_TOTAL_LENGTH_MAX {
        return None;
    }
    Some(ImageRef {
        tag: tag.map(str::to_owned),
        digest: digest.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// (tag, digest) when the reference parses.
    type Parsed = Option<(Option<String>, Option<String>)>;

    fn tag_digest(image: &str) -> Parsed {
        parse(image).map(|r| (r.tag, r.digest))
    }

    #[test]
    fn references() {
        let s = |x: &str| Some(x.to_owned());
        let cases: Vec<(String, Parsed)> = vec![
            ("busybox".into(), Some((None, None))),
            ("busybox:latest".into(), Some((s("latest"), None))),
            ("busybox:1.36".into(), Some((s("1.36"), None))),
            ("library/busybox:1.36".into(), Some((s("1.36"), None))),
            ("docker.io/library/busybox".into(), Some((None, None))),
            ("host:5000/img".into(), Some((None, None))),
            ("host:5000/img:v1".into(), Some((s("v1"), None))),
            ("localhost/img:latest".into(), Some((s("latest"), None))),
            ("[::1]:5000/img:x".into(), Some((s("x"), None))),
            ("img:5000".into(), Some((s("5000"), None))),
            (format!("busybox@{SHA}"), Some((None, s(SHA)))),
            (format!("busybox:latest@{SHA}"), Some((s("latest"), s(SHA)))),
            (
                "registry.k8s.io/e2e-test-images/agnhost:2.53".into(),
                Some((s("2.53"), None)),
            ),
            ("my_repo/a__b/c-d--e".into(), Some((None, None))),
            ("".into(), None),
            (" busybox".into(), None),
            ("Busybox".into(), None),
            ("REGISTRY.io/busybox".into(), Some((None, None))),
            ("busybox:".into(), None),
            ("busybox:-x".into(), None),
            ("busybox@sha256:abc".into(), None),
            ("busybox@md5:0123456789abcdef0123456789abcdef".into(), None),
            (
                format!("busybox@{}", SHA.to_uppercase().replace("SHA256", "sha256")),
                None,
            ),
            ("a//b".into(), None),
            ("a/".into(), None),
            ("a..b".into(), None),
            (
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into(),
                None,
            ),
            (format!("{}:1", "a".repeat(256)), None),
        ];
        for (image, want) in cases {
            assert_eq!(tag_digest(&image), want, "image {image:?}");
        }
    }
}
