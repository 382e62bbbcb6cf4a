//! TODO(skeleton): actuator
