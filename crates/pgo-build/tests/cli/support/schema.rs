//! A checker for the subset of JSON Schema that `docs/report.schema.json` uses (no validator
//! dependency: see ARCHITECTURE.md).

use std::path::Path;

pub fn report_schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub fn provenance_schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/provenance.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Checks `value` against the subset of JSON Schema that docs/report.schema.json uses: type,
/// enum, const, required, properties, additionalProperties, items.
pub fn check_schema(value: &serde_json::Value, schema: &serde_json::Value, path: &str) {
    use serde_json::Value;
    if let Some(kinds) = schema.get("type") {
        let kinds: Vec<&str> = match kinds {
            Value::String(kind) => vec![kind.as_str()],
            Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let matches = |kind: &str| match kind {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => false,
        };
        assert!(
            kinds.iter().any(|k| matches(k)),
            "{path}: {value} is not {kinds:?}"
        );
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        assert!(
            allowed.contains(value),
            "{path}: {value} not in {allowed:?}"
        );
    }
    if let Some(constant) = schema.get("const") {
        assert_eq!(value, constant, "{path}");
    }
    if let Value::Object(object) = value {
        for key in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            assert!(
                object.contains_key(key.as_str().unwrap()),
                "{path}: missing {key}"
            );
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (key, item) in object {
            match (
                properties.and_then(|p| p.get(key)),
                schema.get("additionalProperties"),
            ) {
                (Some(sub), _) => check_schema(item, sub, &format!("{path}.{key}")),
                (None, Some(Value::Bool(false))) => panic!("{path}: unexpected key {key}"),
                (None, Some(sub @ Value::Object(_))) => {
                    check_schema(item, sub, &format!("{path}.{key}"))
                }
                _ => {}
            }
        }
    }
    if let (Value::Array(items), Some(sub)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check_schema(item, sub, &format!("{path}[{i}]"));
        }
    }
}
