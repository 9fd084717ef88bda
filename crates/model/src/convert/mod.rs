//! API objects (JSON values) into validated model objects, one module per API group.

pub(crate) mod admin;
pub(crate) mod core;
pub(crate) mod netpol;
pub(crate) mod service;
pub(crate) mod stand_in;
pub(crate) mod workload;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::diag::{Ctx, Severity, index, join};

/// Decodes `value` into a k8s-openapi type, reporting a type error at its field path, and
/// every field the type does not have (as kubectl's strict field validation does) with
/// `unknown` severity: an error where a typo would change policy, a notice elsewhere.
pub(crate) fn decode<T: DeserializeOwned>(
    ctx: &mut Ctx<'_>,
    value: &Value,
    unknown: Severity,
) -> Option<T> {
    match decode_strict(value, "") {
        Ok((v, fields)) => {
            for field in fields {
                ctx.push(unknown, &field, format!("unknown field {field:?}"));
            }
            Some(v)
        }
        Err((path, message)) => {
            ctx.error(&path, message);
            None
        }
    }
}

/// Decodes `value` (found at `path`) into `T`, with the path of every field of `value`
/// that `T` does not have and that is not null; or the path and message of the error.
pub(crate) fn decode_strict<T: DeserializeOwned>(
    value: &Value,
    path: &str,
) -> Result<(T, Vec<String>), (String, String)> {
    let mut ignored = Vec::new();
    let decoded = serde_ignored::deserialize(value, |at| ignored.push(field_path(&at, path)));
    match decoded {
        Ok(v) => {
            let unknown = ignored
                .into_iter()
                .filter(|(_, pointer)| value.pointer(pointer).is_some_and(|v| !v.is_null()))
                .map(|(field, _)| field)
                .collect();
            Ok((v, unknown))
        }
        // Decoding without tracking the path is much cheaper; the path is only needed to
        // report an error, so a failure is decoded again, tracked (the same decoder fails
        // again; should it not, the first error still stands, at `path`).
        Err(first) => match serde_path_to_error::deserialize::<_, T>(value) {
            Ok(_) => Err((path.to_string(), first.to_string())),
            Err(e) => {
                let inner = e.path().to_string();
                let at = match (inner.as_str(), path) {
                    (".", _) => path.to_string(),
                    (inner, "") => inner.to_string(),
                    (inner, path) => join(path, inner),
                };
                Err((at, e.into_inner().to_string()))
            }
        },
    }
}

/// A field's path under `base` as diagnostics spell it (`spec.ports[0].name`), and its
/// JSON pointer in the decoded value (`/spec/ports/0/name`).
fn field_path(at: &serde_ignored::Path<'_>, base: &str) -> (String, String) {
    use serde_ignored::Path;
    match at {
        Path::Root => (base.to_string(), String::new()),
        Path::Seq { parent, index: i } => {
            let (path, pointer) = field_path(parent, base);
            (index(&path, *i), format!("{pointer}/{i}"))
        }
        Path::Map { parent, key } => {
            let (path, pointer) = field_path(parent, base);
            let escaped = key.replace('~', "~0").replace('/', "~1");
            (join(&path, key), format!("{pointer}/{escaped}"))
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => field_path(parent, base),
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1 as core;
    use serde_json::json;

    use super::decode_strict;

    #[test]
    fn unknown_fields_are_named_by_path_unless_null() {
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "colour": "red", "a/b~c": 1, "creationTimestamp": null, "gone": null},
            "spec": {"containers": [{"name": "c"}, {"name": "d", "ports": [{"containerPort": 80, "nmae": "x"}]}]},
        });
        let (decoded, unknown) =
            decode_strict::<core::Pod>(&pod, "").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(decoded.metadata.name.as_deref(), Some("p"));
        assert_eq!(
            unknown,
            [
                "metadata.a/b~c",
                "metadata.colour",
                "spec.containers[1].ports[0].nmae"
            ]
        );
        let (_, under) =
            decode_strict::<core::Pod>(&pod, "spec.template").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(under[1], "spec.template.metadata.colour");
    }

    #[test]
    fn a_type_error_names_its_field() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": 3}]}});
        let error = decode_strict::<core::Pod>(&pod, "").map(|_| ()).err();
        let (path, message) = error.unwrap_or_default();
        assert_eq!(path, "spec.containers[0].name");
        assert!(message.contains("invalid type"), "{message}");
        let error = decode_strict::<core::Pod>(&pod, "x").map(|_| ()).err();
        assert_eq!(error.unwrap_or_default().0, "x.spec.containers[0].name");
    }
}
