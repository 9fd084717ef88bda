//! API objects (JSON values) into validated model objects, one module per API group.

pub(crate) mod admin;
pub(crate) mod core;
pub(crate) mod netpol;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::diag::Ctx;

/// Decodes `value` into a k8s-openapi type, reporting a type error at its field path.
pub(crate) fn decode<T: DeserializeOwned>(ctx: &mut Ctx<'_>, value: &Value) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(v) => Some(v),
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
