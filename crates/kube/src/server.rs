//! TODO(skeleton): server
