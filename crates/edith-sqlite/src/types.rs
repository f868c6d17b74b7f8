//! The Rust types bound to statements and read from rows, and the storage classes they take.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Decode, Encode, Type};

use crate::database::{Sqlite, TypeInfo, Value, ValueRef};

sqlx_core::impl_encode_for_option!(Sqlite);

/// Implements `Type`, `Encode` and `Decode` for `$ty`, stored as `$class`, read from the
/// classes `$read` by `$decode`.
macro_rules! stored_as {
    ($ty:ty, $class:ident, [$($read:ident),+], |$this:ident| $encode:expr, |$value:ident| $decode:expr) => {
        impl Type<Sqlite> for $ty {
            fn type_info() -> TypeInfo {
                TypeInfo::$class
            }

            fn compatible(ty: &TypeInfo) -> bool {
                matches!(ty, $(TypeInfo::$read)|+)
            }
        }

        impl Encode<'_, Sqlite> for $ty {
            fn encode_by_ref(&self, buf: &mut Vec<Value>) -> Result<IsNull, BoxDynError> {
                let $this = self;
                buf.push($encode);
                Ok(IsNull::No)
            }
        }

        impl<'r> Decode<'r, Sqlite> for $ty {
            fn decode(value: ValueRef<'r>) -> Result<Self, BoxDynError> {
                let $value = value.0;
                $decode
            }
        }
    };
}

stored_as!(
    i64,
    Integer,
    [Integer],
    |v| Value::Integer(*v),
    |v| match v {
        Value::Integer(i) => Ok(*i),
        other => Err(mismatch("an integer", other)),
    }
);

stored_as!(
    i32,
    Integer,
    [Integer],
    |v| Value::Integer((*v).into()),
    |v| match v {
        Value::Integer(i) => Ok(i32::try_from(*i)?),
        other => Err(mismatch("an integer", other)),
    }
);

stored_as!(
    u32,
    Integer,
    [Integer],
    |v| Value::Integer((*v).into()),
    |v| match v {
        Value::Integer(i) => Ok(u32::try_from(*i)?),
        other => Err(mismatch("an integer", other)),
    }
);

stored_as!(
    bool,
    Integer,
    [Integer],
    |v| Value::Integer((*v).into()),
    |v| match v {
        Value::Integer(i) => Ok(*i != 0),
        other => Err(mismatch("an integer", other)),
    }
);

// SQLite hands back a REAL column's whole numbers as they were written, integers included.
stored_as!(
    f64,
    Real,
    [Real, Integer],
    |v| Value::Real(*v),
    |v| match v {
        Value::Real(r) => Ok(*r),
        Value::Integer(i) => Ok(*i as f64),
        other => Err(mismatch("a number", other)),
    }
);

stored_as!(
    String,
    Text,
    [Text],
    |v| Value::Text(v.as_bytes().into()),
    |v| <&str as Decode<Sqlite>>::decode(ValueRef(v)).map(str::to_owned)
);

stored_as!(
    Vec<u8>,
    Blob,
    [Blob, Text],
    |v| Value::Blob(v.as_slice().into()),
    |v| <&[u8] as Decode<Sqlite>>::decode(ValueRef(v)).map(<[u8]>::to_vec)
);

impl Type<Sqlite> for str {
    fn type_info() -> TypeInfo {
        TypeInfo::Text
    }
}

// For `&str` itself, not through sqlx's `&T`: as sqlx's drivers do, so a bound `&str` leaves
// the database to be told by the executor.
impl Encode<'_, Sqlite> for &'_ str {
    fn encode_by_ref(&self, buf: &mut Vec<Value>) -> Result<IsNull, BoxDynError> {
        buf.push(Value::Text(self.as_bytes().into()));
        Ok(IsNull::No)
    }
}

impl<'r> Decode<'r, Sqlite> for &'r str {
    fn decode(value: ValueRef<'r>) -> Result<Self, BoxDynError> {
        match value.0 {
            Value::Text(bytes) => Ok(std::str::from_utf8(bytes)?),
            other => Err(mismatch("text", other)),
        }
    }
}

impl Type<Sqlite> for [u8] {
    fn type_info() -> TypeInfo {
        TypeInfo::Blob
    }

    fn compatible(ty: &TypeInfo) -> bool {
        matches!(ty, TypeInfo::Blob | TypeInfo::Text)
    }
}

impl Encode<'_, Sqlite> for &'_ [u8] {
    fn encode_by_ref(&self, buf: &mut Vec<Value>) -> Result<IsNull, BoxDynError> {
        buf.push(Value::Blob((*self).into()));
        Ok(IsNull::No)
    }
}

impl<'r> Decode<'r, Sqlite> for &'r [u8] {
    fn decode(value: ValueRef<'r>) -> Result<Self, BoxDynError> {
        match value.0 {
            Value::Blob(bytes) | Value::Text(bytes) => Ok(bytes),
            other => Err(mismatch("bytes", other)),
        }
    }
}

fn mismatch(wanted: &str, found: &Value) -> BoxDynError {
    format!(
        "expected {wanted}, found a value of type {}",
        TypeInfo::of(found)
    )
    .into()
}
