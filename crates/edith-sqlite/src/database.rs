//! [`Sqlite`], a sqlx database whose statements run on the caller's thread, and the types sqlx
//! asks of it: values, arguments, rows and columns. The rest of sqlx (`sqlx::query` and its
//! `bind`, `fetch_*`, `Row::get`) works on it as on sqlx's own SQLite driver, so a query written
//! once compiles for it and for PostgreSQL.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Encode, SqlStr, Type};

use crate::connection::{Connection, Transactions};

/// SQLite, run on the thread that asks.
#[derive(Debug)]
pub struct Sqlite;

impl sqlx::Database for Sqlite {
    type Connection = Connection;
    type TransactionManager = Transactions;
    type Row = SqliteRow;
    type QueryResult = QueryResult;
    type Column = Column;
    type TypeInfo = TypeInfo;
    type Value = Value;
    type ValueRef<'r> = ValueRef<'r>;
    type Arguments = Arguments;
    type ArgumentBuffer = Vec<Value>;
    type Statement = Statement;

    const NAME: &'static str = "SQLite";
    const URL_SCHEMES: &'static [&'static str] = &["sqlite"];
}

/// A value as SQLite stores it: one of its five storage classes. Text is kept as bytes and
/// checked to be UTF-8 when read as a string, as SQLite does not check it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(Box<[u8]>),
    Blob(Box<[u8]>),
}

/// The storage class of a value (SQLite's types are those of values, not of columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeInfo {
    Null,
    Integer,
    Real,
    Text,
    Blob,
}

impl TypeInfo {
    pub(crate) fn of(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Integer(_) => Self::Integer,
            Value::Real(_) => Self::Real,
            Value::Text(_) => Self::Text,
            Value::Blob(_) => Self::Blob,
        }
    }
}

impl fmt::Display for TypeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(sqlx::TypeInfo::name(self))
    }
}

impl sqlx::TypeInfo for TypeInfo {
    fn is_null(&self) -> bool {
        *self == Self::Null
    }

    fn name(&self) -> &str {
        match self {
            Self::Null => "NULL",
            Self::Integer => "INTEGER",
            Self::Real => "REAL",
            Self::Text => "TEXT",
            Self::Blob => "BLOB",
        }
    }
}

impl sqlx::Value for Value {
    type Database = Sqlite;

    fn as_ref(&self) -> ValueRef<'_> {
        ValueRef(self)
    }

    fn type_info(&self) -> Cow<'_, TypeInfo> {
        Cow::Owned(TypeInfo::of(self))
    }

    fn is_null(&self) -> bool {
        *self == Value::Null
    }
}

/// A value of a row, as decoding borrows it.
#[derive(Debug, Clone, Copy)]
pub struct ValueRef<'r>(pub(crate) &'r Value);

impl<'r> sqlx::ValueRef<'r> for ValueRef<'r> {
    type Database = Sqlite;

    fn to_owned(&self) -> Value {
        self.0.clone()
    }

    fn type_info(&self) -> Cow<'_, TypeInfo> {
        Cow::Owned(TypeInfo::of(self.0))
    }

    fn is_null(&self) -> bool {
        *self.0 == Value::Null
    }
}

/// The values bound to a query, in order.
#[derive(Debug, Default)]
pub struct Arguments(pub(crate) Vec<Value>);

impl sqlx::Arguments for Arguments {
    type Database = Sqlite;

    fn reserve(&mut self, additional: usize, _size: usize) {
        self.0.reserve(additional);
    }

    fn add<'t, T>(&mut self, value: T) -> Result<(), BoxDynError>
    where
        T: Encode<'t, Sqlite> + Type<Sqlite>,
    {
        let before = self.0.len();
        match value.encode(&mut self.0) {
            Ok(IsNull::Yes) => {
                self.0.truncate(before);
                self.0.push(Value::Null);
            }
            Ok(IsNull::No) => {}
            Err(e) => {
                self.0.truncate(before);
                return Err(e);
            }
        }
        Ok(())
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

sqlx_core::impl_into_arguments_for_arguments!(Arguments);

/// A column of a result: its name and place. Its type is that of each value.
#[derive(Debug, Clone)]
pub struct Column {
    pub(crate) name: Box<str>,
    pub(crate) ordinal: usize,
}

impl sqlx::Column for Column {
    type Database = Sqlite;

    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn type_info(&self) -> &TypeInfo {
        &TypeInfo::Null
    }
}

/// A row of a result, read whole when its statement stepped to it.
#[derive(Debug)]
pub struct SqliteRow {
    pub(crate) columns: Arc<[Column]>,
    pub(crate) values: Box<[Value]>,
}

impl sqlx::Row for SqliteRow {
    type Database = Sqlite;

    fn columns(&self) -> &[Column] {
        &self.columns
    }

    fn try_get_raw<I>(&self, index: I) -> Result<ValueRef<'_>, sqlx::Error>
    where
        I: sqlx::ColumnIndex<Self>,
    {
        Ok(ValueRef(&self.values[index.index(self)?]))
    }
}

sqlx_core::impl_column_index_for_row!(SqliteRow);

impl sqlx::ColumnIndex<SqliteRow> for &'_ str {
    fn index(&self, row: &SqliteRow) -> Result<usize, sqlx::Error> {
        row.columns
            .iter()
            .position(|column| &*column.name == *self)
            .ok_or_else(|| sqlx::Error::ColumnNotFound(self.to_string()))
    }
}

/// What a statement changed: the rows its `INSERT`, `UPDATE` or `DELETE` touched, and the rowid
/// of the last row it inserted.
#[derive(Debug, Default, Clone, Copy)]
pub struct QueryResult {
    pub(crate) changes: u64,
    pub(crate) last_insert_rowid: i64,
}

impl QueryResult {
    pub fn rows_affected(&self) -> u64 {
        self.changes
    }

    pub fn last_insert_rowid(&self) -> i64 {
        self.last_insert_rowid
    }
}

impl Extend<QueryResult> for QueryResult {
    fn extend<T: IntoIterator<Item = QueryResult>>(&mut self, results: T) {
        for result in results {
            self.changes += result.changes;
            self.last_insert_rowid = result.last_insert_rowid;
        }
    }
}

/// A statement as sqlx's `prepare` returns it. This driver keeps its prepared statements in
/// each connection's cache instead, so it returns none (see `Executor::prepare_with`); the type
/// is there because sqlx's traits name one.
#[derive(Debug, Clone)]
pub struct Statement {
    sql: SqlStr,
}

impl sqlx::Statement for Statement {
    type Database = Sqlite;

    fn into_sql(self) -> SqlStr {
        self.sql
    }

    fn sql(&self) -> &SqlStr {
        &self.sql
    }

    fn parameters(&self) -> Option<sqlx::Either<&[TypeInfo], usize>> {
        None
    }

    fn columns(&self) -> &[Column] {
        &[]
    }

    sqlx_core::impl_statement_query!(Arguments);
}

sqlx_core::impl_column_index_for_statement!(Statement);

impl sqlx::ColumnIndex<Statement> for &'_ str {
    fn index(&self, _statement: &Statement) -> Result<usize, sqlx::Error> {
        Err(sqlx::Error::ColumnNotFound(self.to_string()))
    }
}
