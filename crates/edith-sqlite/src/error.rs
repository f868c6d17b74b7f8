//! SQLite's errors as sqlx reports a database's: with their code and the rule they broke.

use std::borrow::Cow;
use std::fmt;

use rusqlite::ffi;
use sqlx::error::{DatabaseError, ErrorKind};

/// An error SQLite returned, with its extended result code.
#[derive(Debug, Clone)]
pub struct SqliteError {
    code: i32,
    message: String,
}

impl fmt::Display for SqliteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for SqliteError {}

impl DatabaseError for SqliteError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(self.code.to_string().into())
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> ErrorKind {
        match self.code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                ErrorKind::UniqueViolation
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

/// Whether `error` is SQLite saying that another connection holds the lock it needs.
pub(crate) fn is_busy(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e)
        if e.try_downcast_ref::<SqliteError>()
            .is_some_and(|e| e.code & 0xff == ffi::SQLITE_BUSY))
}

/// `error` as sqlx's: SQLite's own as a database error, the rest (a value that does not fit,
/// text that is not UTF-8) as what it is.
pub(crate) fn from_rusqlite(error: rusqlite::Error) -> sqlx::Error {
    match error {
        rusqlite::Error::SqliteFailure(failure, message) => {
            sqlx::Error::Database(Box::new(SqliteError {
                code: failure.extended_code,
                message: message.unwrap_or_else(|| failure.to_string()),
            }))
        }
        other => sqlx::Error::Protocol(other.to_string()),
    }
}
