//! TODO(skeleton): api_calls
