//! Name and key checks: every validation message a client's string can reach.

use poddebug_types::names;

/// Invariants: a DNS-1123 label is a DNS-1123 subdomain; a name that is a valid subdomain is
/// also valid as a `generateName` prefix; the checks never panic on any UTF-8.
pub fn run(input: &[u8]) {
    let s = String::from_utf8_lossy(input);
    let label = names::dns1123_label_errors(&s);
    let subdomain = names::dns1123_subdomain_errors(&s);
    if label.is_empty() {
        assert!(subdomain.is_empty(), "label {s:?} is not a subdomain");
    }
    let as_name = names::name_is_dns_subdomain(&s, false);
    assert_eq!(as_name, subdomain);
    let as_prefix = names::name_is_dns_subdomain(&s, true);
    if subdomain.is_empty() && !s.ends_with('-') {
        assert!(as_prefix.is_empty(), "prefix {s:?} refused");
    }
    let _ = names::qualified_name_errors(&s);
    let _ = names::config_map_key_errors(&s);
    let _ = names::relaxed_env_var_name_errors(&s);
    let _ = names::port_name_errors(&s);
    let n = input.iter().take(8).fold(0i64, |acc, &b| {
        acc.wrapping_mul(256).wrapping_add(i64::from(b))
    });
    let _ = names::port_num_errors(n);
}

/// Names at and around each limit and rule.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = [
        "dbg",
        "my-name",
        "123-abc",
        "example.com",
        "a-",
        "-a",
        "\u{e9}-",
        "A",
        "kubernetes.io/name",
        "a/b/c",
        "_under",
        "PODDEBUG_NAME",
        "1abc",
        "http",
        "a--b",
        "",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    seeds.push(vec![b'a'; 63]);
    seeds.push(vec![b'a'; 64]);
    seeds.push(vec![b'a'; 253]);
    seeds.push(vec![b'a'; 254]);
    seeds
}
