//! Fault injection: the next requests matching a method and a path fragment are answered with
//! an error Status instead of being served (429 with `Retry-After`, 409, 500, 503…), so tests
//! can storm one call of the server under test and watch how it retries and what it reports.
//! Delays make matching requests wait before they are served (a slow kubelet, a slow API).

use http::Method;

use super::http::Resp;
use super::status::KubeStatus;

/// One armed fault.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Only requests with this method.
    pub method: Method,
    /// Only paths (with query) containing this.
    pub path_contains: String,
    /// The HTTP code to answer.
    pub code: u16,
    /// How many more requests it hits.
    pub remaining: usize,
}

fn reason(code: u16) -> &'static str {
    match code {
        409 => "Conflict",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

/// A delay before requests are served ([`super::FakeKube::delay_requests`]).
#[derive(Clone, Debug)]
pub struct Delay {
    /// Only requests with this method.
    pub method: Method,
    /// Only paths (with query) containing this.
    pub path_contains: String,
    /// How long they wait.
    pub delay: std::time::Duration,
}

/// The longest delay armed for a request (zero when none matches).
pub fn delay(delays: &[Delay], method: &Method, path: &str) -> std::time::Duration {
    delays
        .iter()
        .filter(|d| d.method == *method && path.contains(&d.path_contains))
        .map(|d| d.delay)
        .max()
        .unwrap_or_default()
}

/// The answer of the first armed fault matching the request, consuming one of its hits.
pub fn take(faults: &mut Vec<Fault>, method: &Method, path: &str) -> Option<Resp> {
    let f = faults
        .iter_mut()
        .find(|f| f.remaining > 0 && f.method == *method && path.contains(&f.path_contains))?;
    f.remaining -= 1;
    let code = f.code;
    faults.retain(|f| f.remaining > 0);
    let message = match code {
        409 => "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again".to_owned(),
        _ => format!("injected fault {code}"),
    };
    let mut resp = KubeStatus::new(code, reason(code), message).into_response();
    if code == 429 {
        resp.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    Some(resp)
}
