//! The JSON Schemas (draft 2020-12) of the documents memtopo writes, published with the
//! crate: [`TOPOLOGY`] for a result (`memtopo -o x.json`), [`FLEET`] for a node summary or
//! fleet report (`memtopo merge`).
//!
//! Both are generated from the types ([`crate::json_schema`], [`crate::fleet::json_schema`])
//! and committed as `crates/topology/schema/*.schema.json` (a copy in `docs/schema/`); a
//! test fails when a committed file differs from the generated one. Each names the versions
//! it describes: `schema_version` is one of `1.0` … the version this crate writes
//! ([`crate::SchemaVersion::CURRENT`]), as the loader accepts; `docs/schema/CHANGES.md`
//! says what each version added.
//!
//! The schemas check structure, types and units; the contradictions that
//! [`crate::Topology::validate`] finds (a line larger than its cache) are beyond them.
//!
//! ```
//! let schema: serde_json::Value = serde_json::from_str(topology::schema::TOPOLOGY).unwrap();
//! assert_eq!(schema, topology::json_schema());
//! let versions = &schema["properties"]["schema_version"]["enum"];
//! assert_eq!(versions.as_array().unwrap().last().unwrap(), &topology::SchemaVersion::CURRENT.to_string());
//! ```

/// The JSON Schema of a result document (`topology.schema.json`).
pub const TOPOLOGY: &str = include_str!("../schema/topology.schema.json");

/// The JSON Schema of a node summary or fleet report (`fleet.schema.json`).
pub const FLEET: &str = include_str!("../schema/fleet.schema.json");

/// The versions `major.0` … `current`, as a schema's `enum` of a version field.
pub(crate) fn versions_up_to(current: crate::SchemaVersion) -> serde_json::Value {
    (0..=current.minor)
        .map(|minor| format!("{}.{minor}", current.major))
        .collect::<Vec<_>>()
        .into()
}

/// Restricts the version field `key` of a generated root schema to `versions_up_to(current)`.
pub(crate) fn pin_version(schema: &mut schemars::Schema, key: &str, current: crate::SchemaVersion) {
    if let Some(property) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut(key))
        .and_then(serde_json::Value::as_object_mut)
    {
        property.clear();
        property.insert("type".into(), "string".into());
        property.insert("enum".into(), versions_up_to(current));
        property.insert(
            "description".into(),
            format!(
                "major.minor: every version this reader accepts, 1.0 to {current} (a newer \
                 minor is refused: it may hold fields this version would drop)"
            )
            .into(),
        );
    }
}
