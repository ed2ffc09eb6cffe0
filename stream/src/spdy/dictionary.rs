//! The SPDY/3 header-compression dictionary: SPDY/3 header blocks are zlib streams primed with
//! it, so reading a SYN_STREAM's `streamType` needs it.

use std::sync::OnceLock;

/// The SPDY/3 header-compression dictionary (draft 3, §2.6.10.1): length-prefixed header names
/// and values, then a run of common strings.
pub fn dictionary() -> &'static [u8] {
    static DICT: OnceLock<Vec<u8>> = OnceLock::new();
    DICT.get_or_init(|| {
        const WORDS: [&str; 65] = [
            "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset",
            "accept-encoding", "accept-language", "accept-ranges", "age", "allow", "authorization",
            "cache-control", "connection", "content-base", "content-encoding", "content-language",
            "content-length", "content-location", "content-md5", "content-range", "content-type",
            "date", "etag", "expect", "expires", "from", "host", "if-match", "if-modified-since",
            "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
            "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range",
            "referer", "retry-after", "server", "te", "trailer", "transfer-encoding", "upgrade",
            "user-agent", "vary", "via", "warning", "www-authenticate", "method", "get", "status",
            "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin",
        ];
        const TAIL: &str = concat!(
            "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
            "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
            "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error",
            "501 Not Implemented503 Service Unavailable",
            "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
            "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT",
            "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,",
            "text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch",
            "charset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
        );
        let mut d = Vec::with_capacity(1423);
        for w in WORDS {
            d.extend_from_slice(&(w.len() as u32).to_be_bytes());
            d.extend_from_slice(w.as_bytes());
        }
        d.extend_from_slice(TAIL.as_bytes());
        d
    })
}
