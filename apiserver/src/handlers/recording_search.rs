//! Search of recordings (`?search=TEXT` on the three lists of recordings): the list restricted
//! to the recordings whose commands or output hold `TEXT` (case-insensitive), each with its
//! first matches (`status.matches`, `status.matchCount`).
//!
//! The work of one request is bounded: a search reads the recordings' search indexes
//! ([`poddebug_recording::index`], at most
//! [`MAX_INDEX_OBJECT`](poddebug_recording::recorder::store::MAX_INDEX_OBJECT) bytes each, [`READS`] at a
//! time), never the recordings; at most [`MAX_INDEXES_PER_PAGE`] of them per page, after
//! which the page ends with a `continue` token from where it stopped (as a page of
//! kube-apiserver may hold fewer items than `limit`); at most [`MAX_MATCHES`] matches per
//! recording are returned. A replica runs at most [`MAX_SEARCHES`] searches at once, and at
//! most [`MAX_SEARCHES_PER_USER`] for one user; past those a search is refused with 429 and
//! `Retry-After`. An index that does not carry the record key's MAC over its place is ignored
//! (and counted), never searched.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use poddebug_recording::index::{Found, MAX_SEARCH, MIN_SEARCH, Needle};
use poddebug_recording::recorder::store::{IndexRead, Store};
use poddebug_types::{ApiError, ErrorList, FieldError, RecordingRecord};

use crate::error::Error;

/// Most matches returned per recording (`status.matchCount` counts them all).
pub const MAX_MATCHES: usize = 10;
/// Most indexes one page of a search reads.
pub const MAX_INDEXES_PER_PAGE: usize = 100;
/// Indexes read at once.
pub const READS: usize = 8;
/// Searches one replica runs at once.
pub const MAX_SEARCHES: usize = 8;
/// Searches one replica runs at once for one user.
pub const MAX_SEARCHES_PER_USER: usize = 2;

/// The query's `search`, checked: `None` without one; 400 with a cause on the field `search`
/// for text that cannot be searched for.
pub fn needle(q: &BTreeMap<String, String>) -> Result<Option<Needle>, Error> {
    let Some(text) = q.get("search") else {
        return Ok(None);
    };
    Needle::new(text).map(Some).map_err(|e| {
        let mut errors = ErrorList::new();
        errors.push(if text.len() > MAX_SEARCH {
            FieldError::too_long("search", MAX_SEARCH)
        } else if text.len() < MIN_SEARCH {
            FieldError::invalid(
                "search",
                text.as_str(),
                format!("must be at least {MIN_SEARCH} bytes long"),
            )
        } else {
            FieldError::invalid("search", text.as_str(), e.to_string())
        });
        ApiError::BadParameters(errors).into()
    })
}

/// The searches running on this replica, in all and per user.
#[derive(Default)]
pub struct Searches {
    running: Mutex<HashMap<String, usize>>,
}

/// A running search: its slot is given back when it is dropped.
pub struct SearchPermit {
    searches: Arc<Searches>,
    user: String,
}

impl Searches {
    /// A slot for a search by `user`, or 429 when this replica runs too many searches, or too
    /// many of `user`'s.
    pub fn start(self: &Arc<Self>, user: &str) -> Result<SearchPermit, Error> {
        let busy = |message: String| -> Error {
            ApiError::TooManyRequests {
                message,
                retry_after_seconds: 1,
            }
            .into()
        };
        let mut running = self
            .running
            .lock()
            .map_err(|_| busy("too many searches of recordings at once".to_owned()))?;
        let all: usize = running.values().sum();
        if all >= MAX_SEARCHES {
            return Err(busy(format!(
                "too many searches of recordings at once (at most {MAX_SEARCHES} per server)"
            )));
        }
        let mine = running.entry(user.to_owned()).or_default();
        if *mine >= MAX_SEARCHES_PER_USER {
            return Err(busy(format!(
                "too many searches of recordings at once by this user (at most \
                 {MAX_SEARCHES_PER_USER})"
            )));
        }
        *mine += 1;
        Ok(SearchPermit {
            searches: self.clone(),
            user: user.to_owned(),
        })
    }
}

impl Drop for SearchPermit {
    fn drop(&mut self) {
        if let Ok(mut running) = self.searches.running.lock()
            && let Some(n) = running.get_mut(&self.user)
        {
            *n -= 1;
            if *n == 0 {
                running.remove(&self.user);
            }
        }
    }
}

/// One page of a search.
#[derive(Debug, Default)]
pub struct Page {
    /// The recordings that hold the text, with what was found in each, in list order.
    pub items: Vec<(RecordingRecord, Found)>,
    /// The last recording examined, when recordings after it were not: the page's
    /// `continue` starts after it.
    pub last_examined: Option<RecordingRecord>,
}

/// Search the indexes of `records` (in list order) for `needle`: up to `limit` recordings
/// that hold it (0: no limit), reading at most [`MAX_INDEXES_PER_PAGE`] indexes.
pub async fn search(
    store: &Store,
    records: Vec<RecordingRecord>,
    needle: &Needle,
    limit: usize,
) -> Result<Page, Error> {
    let total = records.len();
    let mut reads = futures::stream::iter(records.into_iter().take(MAX_INDEXES_PER_PAGE))
        .map(|r| async move {
            let read = store.read_index(&r.namespace, &r.pod, &r.id).await;
            (r, read)
        })
        .buffered(READS);
    let mut page = Page::default();
    let mut examined = 0;
    let mut last = None;
    while let Some((r, read)) = reads.next().await {
        examined += 1;
        let read = read.map_err(|e| super::recordings::storage_failed(&e))?;
        if let IndexRead::Found(index) = read {
            let found = index.search(needle, MAX_MATCHES);
            if found.total > 0 {
                page.items.push((r.clone(), found));
            }
        }
        last = Some(r);
        if limit > 0 && page.items.len() >= limit {
            break;
        }
    }
    if examined < total {
        page.last_examined = last;
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("search".to_owned(), text.to_owned())])
    }

    #[test]
    fn search_text_is_bounded_with_a_cause_on_the_field() {
        assert!(needle(&BTreeMap::new()).unwrap().is_none());
        assert!(needle(&q("abc")).unwrap().is_some());
        for bad in ["ab", &"x".repeat(MAX_SEARCH + 1), "a\u{7}bc"] {
            let Err(Error::Api(e)) = needle(&q(bad)) else {
                panic!("{bad:?} was taken")
            };
            let s = e.to_status();
            assert_eq!(s.code, Some(400));
            assert_eq!(s.reason.as_deref(), Some("BadRequest"));
            let causes = s.details.unwrap().causes.unwrap();
            assert_eq!(causes[0].field.as_deref(), Some("search"), "{bad:?}");
        }
    }

    #[test]
    fn searches_are_bounded_per_user_and_per_replica() {
        let s = Arc::new(Searches::default());
        let a1 = s.start("alice").unwrap();
        let _a2 = s.start("alice").unwrap();
        assert!(s.start("alice").is_err(), "alice's third");
        drop(a1);
        let _a3 = s.start("alice").unwrap();
        let others: Vec<SearchPermit> = (0..MAX_SEARCHES - MAX_SEARCHES_PER_USER)
            .map(|i| s.start(&format!("user{i}")).unwrap())
            .collect();
        assert!(s.start("bob").is_err(), "the replica's bound");
        drop(others);
        assert!(s.start("bob").is_ok());
    }
}
