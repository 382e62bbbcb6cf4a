//! TODO(skeleton): informer
