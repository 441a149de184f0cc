//! The schemas of the files pgo-build writes for other programs, and a check of real output
//! against them with a full JSON Schema validator (`$ref`, `anyOf` and `const` included, as
//! the generated report schema uses them).

use std::path::Path;

pub fn report_schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub fn provenance_schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/provenance.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Checks `value` (the file `what`) against `schema`, naming every place it breaks it.
pub fn check_schema(value: &serde_json::Value, schema: &serde_json::Value, what: &str) {
    let validator = jsonschema::validator_for(schema).expect("the schema is a valid JSON Schema");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|error| format!("{what}{}: {error}", error.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The check fails on what the schema forbids: a report with an unknown step, a verdict
/// outside the closed set, a misspelt key.
#[test]
fn the_check_refuses_what_the_report_schema_forbids() {
    let schema = report_schema();
    let valid = serde_json::json!({
        "schema_version": 13, "pgo_build_version": "0", "workspace": "/w", "steps": [
            {"name": "train", "result": "ok", "duration_secs": 1.0}
        ], "binaries": {}, "training": [], "profiles": {}, "rejected_profiles": []
    });
    check_schema(&valid, &schema, "report");
    for (pointer, wrong) in [
        ("/steps/0/name", serde_json::json!("training")),
        ("/steps/0/result", serde_json::json!("fine")),
        ("/schema_version", serde_json::json!(12)),
    ] {
        let mut broken = valid.clone();
        *broken.pointer_mut(pointer).unwrap() = wrong;
        let refused = std::panic::catch_unwind(|| check_schema(&broken, &schema, "report"));
        assert!(
            refused.is_err(),
            "{pointer} = {:?} passed",
            broken.pointer(pointer)
        );
    }
    let mut misspelt = valid.clone();
    misspelt["stepz"] = serde_json::json!([]);
    assert!(std::panic::catch_unwind(|| check_schema(&misspelt, &schema, "report")).is_err());
}
