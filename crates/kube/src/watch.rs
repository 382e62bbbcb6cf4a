//! TODO(skeleton): watch
