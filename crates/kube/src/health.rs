//! TODO(skeleton): health
