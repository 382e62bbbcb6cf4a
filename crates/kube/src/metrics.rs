//! TODO(skeleton): metrics
