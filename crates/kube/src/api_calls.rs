//! TODO(skeleton): api_calls
// Placeholder until the API-call list lands (merged from the actuation work).
#[cfg(test)]
pub(crate) fn is_declared(_m: &http::Method, _uri: &str) -> bool {
    true
}
