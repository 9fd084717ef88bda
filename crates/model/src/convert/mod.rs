//! API objects (JSON values) into validated model objects, one module per API group.

pub(crate) mod admin;
pub(crate) mod core;
pub(crate) mod netpol;
pub(crate) mod stand_in;
pub(crate) mod workload;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::diag::{Ctx, Severity, index, join};

/// Decodes `value` into a k8s-openapi type, reporting a type error at its field path, and
/// every field the type does not have (as kubectl's strict field validation does) with
/// `unknown` severity: an error where a typo would change policy, a notice elsewhere.
pub(crate) fn decode<T: DeserializeOwned + Serialize>(
    ctx: &mut Ctx<'_>,
    value: &Value,
    unknown: Severity,
) -> Option<T> {
    // Decoding without tracking the path is much cheaper; the path is only needed to
    // report an error, so a failure is decoded again, tracked.
    match T::deserialize(value).or_else(|_| serde_path_to_error::deserialize::<_, T>(value)) {
        Ok(v) => {
            if let Ok(back) = serde_json::to_value(&v) {
                for field in unknown_fields(value, &back, "") {
                    ctx.push(unknown, &field, format!("unknown field {field:?}"));
                }
            }
            Some(v)
        }
        Err(e) => {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            ctx.error(&path, e.into_inner().to_string());
            None
        }
    }
}

/// `metadata.name`, required and non-empty.
pub(crate) fn required_name(ctx: &mut Ctx<'_>, name: Option<&String>) -> Option<String> {
    match name {
        Some(n) if !n.is_empty() => Some(n.clone()),
        _ => {
            ctx.error(
                "metadata.name",
                "Required value: name or generateName is required",
            );
            None
        }
    }
}

/// Paths present (and not null) in `input` but absent from `decoded`.
pub(crate) fn unknown_fields(input: &Value, decoded: &Value, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    match (input, decoded) {
        (Value::Object(i), Value::Object(d)) => {
            for (k, v) in i {
                let p = join(path, k);
                match d.get(k) {
                    _ if v.is_null() => {}
                    None => out.push(p),
                    Some(dv) => out.extend(unknown_fields(v, dv, &p)),
                }
            }
        }
        (Value::Array(i), Value::Array(d)) => {
            for (n, (iv, dv)) in i.iter().zip(d).enumerate() {
                out.extend(unknown_fields(iv, dv, &index(path, n)));
            }
        }
        _ => {}
    }
    out
}
