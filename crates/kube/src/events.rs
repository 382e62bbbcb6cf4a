//! TODO(skeleton): events
