//! CEL device selectors (`selectors[].cel.expression` of DeviceClasses and claim requests),
//! compiled and evaluated with the `cel` crate in the Kubernetes DRA environment: one variable,
//! `device`, with `driver` (a string), `attributes` (a map from domain to a map from attribute
//! name to its value; unqualified names belong to the driver's domain) and `capacity` (the same
//! shape, the values quantities), and Kubernetes' `quantity("40Gi")` with the quantity methods
//! `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `sign`.
//!
//! Decides whether one device matches one expression. Never panics on any expression or device:
//! an expression that does not compile, is too long or fails to evaluate is an error text, which
//! the DRA filter turns into a reason on the pod. Its cost is bounded by the API's limits: an
//! expression is at most [`MAX_EXPRESSION_LEN`] characters (refused above, as the API server
//! refuses it), and a device carries at most [`MAX_DEVICE_ENTRIES`] attributes and capacities;
//! the only loops CEL has are macros over those bounded maps.
//!
//! Known simplifications: quantities are whole thousandths of a unit (CEL integers), so
//! `quantity("1Gi") == device.capacity[...].memory` compares exactly, but their arithmetic
//! methods (`add`, `sub`, `asApproximateFloat`) and the `semver` library are not provided (an
//! expression using them fails with a reason); version attributes are strings.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::extractors::This;
use cel::{Context, Program, Value};

use super::{AttrValue, Device};

/// The longest expression accepted (the API server's limit for a device selector).
pub const MAX_EXPRESSION_LEN: usize = 10 * 1024;

/// The most attributes plus capacities of one device (the API server's limit).
pub const MAX_DEVICE_ENTRIES: usize = 32;

/// A compiled CEL selector: the expression and its program, or why it did not compile.
#[derive(Clone)]
pub struct CelSelector {
    /// The expression as written.
    pub expression: Arc<str>,
    program: Result<Arc<Program>, Arc<str>>,
}

impl std::fmt::Debug for CelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CelSelector({:?})", self.expression)
    }
}

impl PartialEq for CelSelector {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression
    }
}

impl Eq for CelSelector {}

impl std::hash::Hash for CelSelector {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.expression.hash(state);
    }
}

impl CelSelector {
    /// Compiles `expression`; a failure is kept and reported when the selector is used.
    pub fn compile(expression: &str) -> CelSelector {
        let program = if expression.len() > MAX_EXPRESSION_LEN {
            Err(Arc::from(format!(
                "expression is {} characters long, more than the limit of {MAX_EXPRESSION_LEN}",
                expression.len()
            )))
        } else {
            // The parser is third-party code fed with user text: a panic in it must not take
            // the autoscaler down.
            match std::panic::catch_unwind(|| Program::compile(expression)) {
                Ok(Ok(p)) => Ok(Arc::new(p)),
                Ok(Err(e)) => Err(Arc::from(format!("compilation failed: {e}"))),
                Err(_) => Err(Arc::from("compilation failed: the CEL parser gave up")),
            }
        };
        CelSelector {
            expression: Arc::from(expression),
            program,
        }
    }

    /// An identity of the compiled program, stable while any clone of this selector lives
    /// (`None` when it did not compile).
    pub(crate) fn program_id(&self) -> Option<usize> {
        self.program
            .as_ref()
            .ok()
            .map(|p| Arc::as_ptr(p).cast::<u8>() as usize)
    }

    /// Whether the expression compiled (else the reason it did not).
    pub fn compile_error(&self) -> Option<&str> {
        self.program.as_ref().err().map(|e| &**e)
    }

    /// Whether `device` of `driver` matches: the expression must evaluate to a boolean.
    pub fn matches(&self, driver: &str, device: &Device) -> Result<bool, String> {
        let program = self.program.as_ref().map_err(|e| e.to_string())?;
        let value = device_value(driver, device);
        let run = std::panic::AssertUnwindSafe(|| {
            let mut ctx = Context::with_env(ENV.clone());
            add_quantity_functions(&mut ctx);
            ctx.add_variable_from_value("device", value.clone());
            program.execute(&ctx)
        });
        match std::panic::catch_unwind(run) {
            Ok(Ok(Value::Bool(b))) => Ok(b),
            Ok(Ok(other)) => Err(format!(
                "CEL expression {:?} must return a boolean, got {other:?}",
                excerpt(&self.expression)
            )),
            Ok(Err(e)) => Err(format!(
                "CEL runtime error in {:?}: {e}",
                excerpt(&self.expression)
            )),
            Err(_) => Err(format!(
                "CEL runtime error in {:?}: evaluation gave up",
                excerpt(&self.expression)
            )),
        }
    }
}

/// The standard environment, built once.
static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| Arc::new(cel::Env::stdlib()));

/// The first characters of a long expression, for messages.
fn excerpt(expression: &str) -> String {
    const MAX: usize = 120;
    match expression.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &expression[..at]),
        None => expression.to_string(),
    }
}

/// Kubernetes' quantity library over quantities held as thousandths of a unit.
fn add_quantity_functions(ctx: &mut Context<'_, '_>) {
    // Errors are only "name taken", impossible with these names on the standard library.
    let _ = ctx.add_function(
        "quantity",
        |s: Arc<String>| -> Result<Value, cel::ExecutionError> {
            crate::quantity::parse(&s)
                .map(|q| Value::Int(milli(&q)))
                .map_err(|e| cel::ExecutionError::function_error("quantity", e))
        },
    );
    let _ = ctx.add_function("compareTo", |This(a): This<i64>, b: i64| -> i64 {
        a.cmp(&b) as i64
    });
    let _ = ctx.add_function("isGreaterThan", |This(a): This<i64>, b: i64| a > b);
    let _ = ctx.add_function("isLessThan", |This(a): This<i64>, b: i64| a < b);
    let _ = ctx.add_function("asInteger", |This(a): This<i64>| a.div_euclid(1000));
    let _ = ctx.add_function("sign", |This(a): This<i64>| a.signum());
}

/// A quantity in thousandths of a unit, saturated at the `i64` range (no device has such a
/// capacity; saturation keeps comparisons meaningful).
pub(crate) fn milli(q: &crate::quantity::Quantity) -> i64 {
    q.to_milli_ceil()
        .unwrap_or(if q.as_nanos() < 0 { i64::MIN } else { i64::MAX })
}

/// The `device` variable of `device` published by `driver`.
fn device_value(driver: &str, device: &Device) -> Value {
    let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
    attributes.entry(driver.to_string()).or_default();
    for (name, value) in &device.attributes {
        let (domain, id) = split_qualified(driver, name);
        let v = match value {
            AttrValue::Bool(b) => Value::Bool(*b),
            AttrValue::Int(i) => Value::Int(*i),
            AttrValue::String(s) | AttrValue::Version(s) => Value::from(s.to_string()),
        };
        attributes
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), v);
    }
    let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
    capacity.entry(driver.to_string()).or_default();
    for (name, q) in &device.capacity {
        let (domain, id) = split_qualified(driver, name);
        capacity
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), Value::Int(milli(q)));
    }
    let mut map: HashMap<String, Value> = HashMap::new();
    map.insert("driver".into(), Value::from(driver.to_string()));
    map.insert("attributes".into(), Value::from(attributes));
    map.insert("capacity".into(), Value::from(capacity));
    Value::from(map)
}

/// `domain/name` split at its slash; an unqualified name is in the driver's domain.
fn split_qualified<'a>(driver: &'a str, name: &'a str) -> (&'a str, &'a str) {
    match name.split_once('/') {
        Some((domain, id)) => (domain, id),
        None => (driver, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantity::parse;

    fn gpu(model: &str, memory: &str) -> Device {
        Device {
            name: Arc::from("gpu-0"),
            attributes: vec![
                (Arc::from("model"), AttrValue::String(Arc::from(model))),
                (Arc::from("example.com/numa"), AttrValue::Int(1)),
            ],
            capacity: vec![(Arc::from("memory"), parse(memory).unwrap())],
        }
    }

    #[test]
    fn selectors_read_driver_attributes_and_capacities_as_kubernetes_does() {
        let d = gpu("a100", "40Gi");
        let cases = [
            ("device.driver == 'gpu.example.com'", true),
            ("device.attributes['gpu.example.com'].model == 'a100'", true),
            (
                "device.attributes['gpu.example.com'].model == 'h100'",
                false,
            ),
            ("device.attributes['example.com'].numa == 1", true),
            (
                "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0",
                true,
            ),
            (
                "device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('80Gi'))",
                false,
            ),
            ("has(device.attributes['gpu.example.com'].missing)", false),
        ];
        for (expr, want) in cases {
            let s = CelSelector::compile(expr);
            assert_eq!(s.matches("gpu.example.com", &d), Ok(want), "{expr}");
        }
    }

    #[test]
    fn bad_expressions_are_errors_never_panics() {
        let d = gpu("a100", "40Gi");
        let broken = CelSelector::compile("device.driver ==");
        assert!(broken.compile_error().is_some());
        assert!(broken.matches("gpu.example.com", &d).is_err());
        let not_bool = CelSelector::compile("device.driver");
        assert!(
            not_bool
                .matches("gpu.example.com", &d)
                .unwrap_err()
                .contains("must return a boolean")
        );
        let missing = CelSelector::compile("device.attributes['gpu.example.com'].nope == 1");
        assert!(missing.matches("gpu.example.com", &d).is_err());
        let long = CelSelector::compile(&"true && ".repeat(2000));
        assert!(long.compile_error().unwrap().contains("limit"));
        let bad_quantity = CelSelector::compile("quantity('lots') == 1");
        assert!(bad_quantity.matches("gpu.example.com", &d).is_err());
    }
}
