//! TODO(skeleton): status
