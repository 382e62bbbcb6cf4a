//! List paging (`limit` and `continue`), as the API server does it: the first page of a list
//! fixes the matching objects and the `resourceVersion` they were read at, and every later page
//! of that list is served from the same snapshot, whatever changed meanwhile. The snapshot holds
//! shared objects (`Arc`), so it costs one pointer per item.
//!
//! It decides what each page holds and which continue token is handed out; it never reads or
//! writes the world itself. Only the most recent lists are remembered: a token of a forgotten
//! list answers `410 Expired`, after which clients relist, as they do with a real API server
//! whose continue token expired.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

/// How many paged lists are remembered at once.
const REMEMBERED: usize = 64;

/// A list in progress: the matching objects and the version they were read at.
#[derive(Debug)]
struct Snapshot {
    id: u64,
    rv: u64,
    items: Arc<Vec<Arc<Value>>>,
}

/// One page of a list.
#[derive(Debug)]
pub(crate) struct Page {
    /// The objects of this page.
    pub items: Vec<Arc<Value>>,
    /// The version the whole list was read at.
    pub rv: u64,
    /// The token of the next page, if any.
    pub next: Option<String>,
    /// How many objects follow this page.
    pub remaining: usize,
}

/// Why a page cannot be served.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PagingError {
    /// The token is not one this facade hands out.
    #[error("invalid continue token {0:?}")]
    Invalid(String),
    /// The list the token belongs to is forgotten.
    #[error("the provided continue parameter is too old to display a consistent list result")]
    Expired,
}

/// The remembered lists.
#[derive(Debug, Default)]
pub(crate) struct Pager {
    lists: VecDeque<Snapshot>,
    next_id: u64,
}

impl Pager {
    /// The first page (of at most `limit` objects) of the list `items` read at `rv`; the rest
    /// is remembered when it does not fit.
    pub fn first(&mut self, items: Vec<Arc<Value>>, rv: u64, limit: usize) -> Page {
        let limit = limit.max(1);
        if items.len() <= limit {
            return Page {
                items,
                rv,
                next: None,
                remaining: 0,
            };
        }
        self.next_id += 1;
        let id = self.next_id;
        let items = Arc::new(items);
        let page = page_of(id, rv, &items, 0, limit);
        if self.lists.len() >= REMEMBERED {
            self.lists.pop_front();
        }
        self.lists.push_back(Snapshot { id, rv, items });
        page
    }

    /// The page that `token` points to, of at most `limit` objects. A list whose last page is
    /// served is forgotten.
    pub fn next(&mut self, token: &str, limit: usize) -> Result<Page, PagingError> {
        let invalid = || PagingError::Invalid(token.to_string());
        let (id, offset) = token.split_once(':').ok_or_else(invalid)?;
        let id: u64 = id.parse().map_err(|_| invalid())?;
        let offset: usize = offset.parse().map_err(|_| invalid())?;
        let at = self
            .lists
            .iter()
            .position(|s| s.id == id)
            .ok_or(PagingError::Expired)?;
        let s = &self.lists[at];
        if offset > s.items.len() {
            return Err(invalid());
        }
        let page = page_of(id, s.rv, &s.items, offset, limit.max(1));
        if page.next.is_none() {
            self.lists.remove(at);
        }
        Ok(page)
    }
}

fn page_of(id: u64, rv: u64, items: &[Arc<Value>], offset: usize, limit: usize) -> Page {
    let end = offset.saturating_add(limit).min(items.len());
    let remaining = items.len() - end;
    Page {
        items: items[offset..end].to_vec(),
        rv,
        next: (remaining > 0).then(|| format!("{id}:{end}")),
        remaining,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(n: usize) -> Vec<Arc<Value>> {
        (0..n).map(|i| Arc::new(json!({"i": i}))).collect()
    }

    fn numbers(p: &Page) -> Vec<u64> {
        p.items.iter().filter_map(|v| v["i"].as_u64()).collect()
    }

    #[test]
    fn pages_walk_one_snapshot_to_the_end_then_forget_it() {
        let mut pager = Pager::default();
        let p = pager.first(items(5), 42, 2);
        assert_eq!((numbers(&p), p.rv, p.remaining), (vec![0, 1], 42, 3));
        let token = p.next.expect("more");
        let p = pager.next(&token, 2).expect("page 2");
        assert_eq!((numbers(&p), p.rv, p.remaining), (vec![2, 3], 42, 1));
        let last = p.next.expect("more");
        let p = pager.next(&last, 2).expect("page 3");
        assert_eq!((numbers(&p), p.next), (vec![4], None));
        assert_eq!(pager.next(&last, 2).err(), Some(PagingError::Expired));
    }

    #[test]
    fn a_list_that_fits_is_not_remembered_and_bad_tokens_are_refused() {
        let mut pager = Pager::default();
        let p = pager.first(items(2), 7, 2);
        assert_eq!((p.items.len(), p.next, p.remaining), (2, None, 0));
        assert!(pager.lists.is_empty());
        assert!(matches!(pager.next("x", 2), Err(PagingError::Invalid(_))));
        let p = pager.first(items(3), 7, 1);
        let token = p.next.expect("more");
        let (id, _) = token.split_once(':').expect("id:offset");
        assert!(matches!(
            pager.next(&format!("{id}:9"), 1),
            Err(PagingError::Invalid(_))
        ));
    }

    #[test]
    fn only_the_latest_lists_are_remembered() {
        let mut pager = Pager::default();
        let first = pager.first(items(3), 1, 1).next.expect("more");
        for _ in 0..REMEMBERED {
            pager.first(items(3), 1, 1);
        }
        assert_eq!(pager.next(&first, 1).err(), Some(PagingError::Expired));
    }
}
