//! The four tables and their columns (docs/parquet.md is the reference).
//!
//! Every table is long: one row per event, with `event` and its value,
//! so that profiles with different events (Callgrind's `Ir`, a cache
//! simulation's thirteen, perf's `cycles`) share one schema and a fleet
//! of them is one dataset an engine reads with a glob. The profile's
//! columns (`profile_id`, `command`, `creator`, `labels`) end every table,
//! so that grouping by a label needs no join.

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use std::collections::HashMap;
use std::sync::Arc;

/// The schema version, written as the `tally.schema` key of every file's
/// metadata; raised whenever a column changes meaning or is removed.
pub const SCHEMA_VERSION: u32 = 1;

/// The tables, one Parquet file each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// Self cost per part, object, source file, function, line and
    /// instruction address.
    Costs,
    /// Self and inclusive cost per function of each profile.
    Functions,
    /// Call arcs with counts and inclusive costs.
    Arcs,
    /// One row per profile and event: metadata and totals.
    Profiles,
}

impl Table {
    /// Every table, in the order they are written.
    pub const ALL: [Table; 4] = [Table::Costs, Table::Functions, Table::Arcs, Table::Profiles];

    /// The table's name and the stem of its file (`costs.parquet`).
    pub fn name(self) -> &'static str {
        match self {
            Table::Costs => "costs",
            Table::Functions => "functions",
            Table::Arcs => "arcs",
            Table::Profiles => "profiles",
        }
    }

    /// The file name in the output directory.
    pub fn file_name(self) -> String {
        format!("{}.parquet", self.name())
    }

    /// The table's Arrow schema.
    pub fn schema(self) -> SchemaRef {
        let s = |n: &str| Field::new(n, DataType::Utf8, false);
        let opt_s = |n: &str| Field::new(n, DataType::Utf8, true);
        let i64f = |n: &str| Field::new(n, DataType::Int64, false);
        let opt_i64 = |n: &str| Field::new(n, DataType::Int64, true);
        let i32f = |n: &str| Field::new(n, DataType::Int32, false);
        let mut fields = vec![s("profile_id")];
        match self {
            Table::Costs => fields.extend([
                i32f("part"),
                s("object"),
                s("file"),
                s("function"),
                opt_i64("line"),
                opt_i64("address"),
                s("event"),
                i64f("value"),
            ]),
            Table::Functions => fields.extend([
                s("object"),
                s("file"),
                s("function"),
                s("event"),
                i64f("self"),
                i64f("inclusive"),
                Field::new("cycle", DataType::Int32, true),
                Field::new("inclusive_derived", DataType::Boolean, false),
            ]),
            Table::Arcs => fields.extend([
                i32f("part"),
                s("caller_object"),
                s("caller_file"),
                s("caller_function"),
                s("callee_object"),
                s("callee_file"),
                s("callee_function"),
                opt_i64("line"),
                i64f("calls"),
                s("event"),
                i64f("inclusive"),
            ]),
            Table::Profiles => fields.extend([
                s("source"),
                s("format"),
                i32f("parts"),
                s("event"),
                opt_s("event_long_name"),
                i64f("total"),
            ]),
        }
        fields.extend([opt_s("command"), opt_s("creator"), labels_field()]);
        let meta = HashMap::from([
            ("tally.schema".to_string(), SCHEMA_VERSION.to_string()),
            ("tally.table".to_string(), self.name().to_string()),
        ]);
        Arc::new(Schema::new(fields).with_metadata(meta))
    }
}

/// `labels`: a map from label key to value (`--label KEY=VALUE`), as
/// Parquet's MAP type, which Spark reads as `map<string,string>`
/// (`labels['version']`) and DataFusion as a map too.
fn labels_field() -> Field {
    let entries = Fields::from(vec![
        Field::new("keys", DataType::Utf8, false),
        Field::new("values", DataType::Utf8, true),
    ]);
    Field::new(
        "labels",
        DataType::Map(
            Arc::new(Field::new("entries", DataType::Struct(entries), false)),
            false,
        ),
        false,
    )
}
