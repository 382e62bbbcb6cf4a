//! TODO(skeleton): leader
