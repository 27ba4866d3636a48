//! One table being written: rows gathered in Arrow builders, handed to
//! Parquet's writer every [`BATCH_ROWS`] rows; the writer closes a row
//! group every [`ROW_GROUP_ROWS`] rows, so memory stays bounded whatever
//! the number of profiles.

use crate::Error;
use crate::schema::Table;
use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Int32Builder, Int64Builder, MapBuilder, MapFieldNames,
    StringBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::io::Write;
use std::path::PathBuf;

/// Rows handed to the Parquet writer at a time.
pub const BATCH_ROWS: usize = 1 << 16;

/// Rows per row group: large enough for good compression and few groups
/// per file, small enough that a group's pages in memory stay in the tens
/// of megabytes.
pub const ROW_GROUP_ROWS: usize = 1 << 20;

/// One value of a row, in column order.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// A string column.
    Str(&'a str),
    /// A nullable string column.
    OptStr(Option<&'a str>),
    /// A 64-bit column.
    I64(i64),
    /// A nullable 64-bit column.
    OptI64(Option<i64>),
    /// A 32-bit column.
    I32(i32),
    /// A nullable 32-bit column.
    OptI32(Option<i32>),
    /// A boolean column.
    Bool(bool),
}

enum Column {
    Str(StringBuilder),
    I64(Int64Builder),
    I32(Int32Builder),
    Bool(BooleanBuilder),
}

/// The columns every table ends with, constant for one profile.
#[derive(Clone, Debug, Default)]
pub struct ProfileColumns {
    /// `profile_id`.
    pub id: String,
    /// `command`.
    pub command: Option<String>,
    /// `creator`.
    pub creator: Option<String>,
    /// `labels`, in the order given.
    pub labels: Vec<(String, String)>,
}

/// A table's writer and its rows not yet handed over.
pub struct TableWriter<W: Write + Send> {
    table: Table,
    path: PathBuf,
    schema: SchemaRef,
    id: StringBuilder,
    columns: Vec<Column>,
    command: StringBuilder,
    creator: StringBuilder,
    labels: MapBuilder<StringBuilder, StringBuilder>,
    rows: usize,
    written: u64,
    writer: ArrowWriter<W>,
}

impl<W: Write + Send> TableWriter<W> {
    /// A writer of `table` into `out` (`path`: for messages).
    pub fn new(table: Table, out: W, path: PathBuf) -> Result<Self, Error> {
        let schema = table.schema();
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .build();
        let writer = ArrowWriter::try_new(out, schema.clone(), Some(props))
            .map_err(|e| Error::parquet(&path, e))?;
        let fields = schema.fields();
        // The first column is the id, the last three the profile's.
        let columns = fields[1..fields.len() - 3]
            .iter()
            .map(|f| match f.data_type() {
                DataType::Int64 => Column::I64(Int64Builder::new()),
                DataType::Int32 => Column::I32(Int32Builder::new()),
                DataType::Boolean => Column::Bool(BooleanBuilder::new()),
                _ => Column::Str(StringBuilder::new()),
            })
            .collect();
        Ok(TableWriter {
            table,
            path,
            schema,
            id: StringBuilder::new(),
            columns,
            command: StringBuilder::new(),
            creator: StringBuilder::new(),
            labels: labels_builder(),
            rows: 0,
            written: 0,
            writer,
        })
    }

    /// Adds a row: `values` for the table's own columns, `p` for the
    /// profile's.
    pub fn push(&mut self, p: &ProfileColumns, values: &[Value<'_>]) -> Result<(), Error> {
        debug_assert_eq!(values.len(), self.columns.len(), "{}", self.table.name());
        self.id.append_value(&p.id);
        for (c, v) in self.columns.iter_mut().zip(values) {
            match (c, *v) {
                (Column::Str(b), Value::Str(s)) => b.append_value(s),
                (Column::Str(b), Value::OptStr(s)) => b.append_option(s),
                (Column::I64(b), Value::I64(x)) => b.append_value(x),
                (Column::I64(b), Value::OptI64(x)) => b.append_option(x),
                (Column::I32(b), Value::I32(x)) => b.append_value(x),
                (Column::I32(b), Value::OptI32(x)) => b.append_option(x),
                (Column::Bool(b), Value::Bool(x)) => b.append_value(x),
                _ => unreachable!("a row of {} does not fit its schema", self.table.name()),
            }
        }
        self.command.append_option(p.command.as_deref());
        self.creator.append_option(p.creator.as_deref());
        for (k, v) in &p.labels {
            self.labels.keys().append_value(k);
            self.labels.values().append_value(v);
        }
        self.labels
            .append(true)
            .map_err(|e| Error::parquet(&self.path, e.into()))?;
        self.rows += 1;
        if self.rows >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Hands the gathered rows to the Parquet writer.
    fn flush(&mut self) -> Result<(), Error> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut arrays: Vec<ArrayRef> = vec![std::sync::Arc::new(self.id.finish())];
        for c in &mut self.columns {
            arrays.push(match c {
                Column::Str(b) => ArrayBuilder::finish(b),
                Column::I64(b) => ArrayBuilder::finish(b),
                Column::I32(b) => ArrayBuilder::finish(b),
                Column::Bool(b) => ArrayBuilder::finish(b),
            });
        }
        arrays.push(ArrayBuilder::finish(&mut self.command));
        arrays.push(ArrayBuilder::finish(&mut self.creator));
        arrays.push(ArrayBuilder::finish(&mut self.labels));
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| Error::parquet(&self.path, e.into()))?;
        self.writer
            .write(&batch)
            .map_err(|e| Error::parquet(&self.path, e))?;
        self.written += self.rows as u64;
        self.rows = 0;
        Ok(())
    }

    /// Writes the remaining rows and the file's footer; returns the
    /// number of rows.
    pub fn finish(mut self) -> Result<u64, Error> {
        self.flush()?;
        self.writer
            .close()
            .map_err(|e| Error::parquet(&self.path, e))?;
        Ok(self.written)
    }
}

fn labels_builder() -> MapBuilder<StringBuilder, StringBuilder> {
    let names = MapFieldNames {
        entry: "entries".into(),
        key: "keys".into(),
        value: "values".into(),
    };
    MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new())
}
