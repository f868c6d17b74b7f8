//! Extractors whose rejections speak the API's error format.

use std::collections::HashMap;
use std::str::FromStr;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use edith_types::{ErrorCode, IdError};
use serde::de::DeserializeOwned;

use crate::error::AppError;

/// A JSON body: an object, read as `T`; malformed input is a 400 `invalid_body` that names
/// the problem. A number with no fraction (`279.0`) is an integer, as JSON Schema has it.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        let axum::Json(mut value) = axum::Json::<serde_json::Value>::from_request(req, state)
            .await
            .map_err(body_error)?;
        if !value.is_object() {
            // serde would read a struct from an array too.
            return Err(AppError::new(
                ErrorCode::InvalidBody,
                "the body must be a JSON object",
            ));
        }
        integral_numbers(&mut value);
        serde_path_to_error::deserialize(value)
            .map(Self)
            .map_err(|e| data_error(e.to_string()))
    }
}

/// Numbers written with a zero fraction become integers, so `u64` fields take them.
fn integral_numbers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                // Exactly representable: below 2^53.
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(fields) => fields.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

fn data_error(text: String) -> AppError {
    // An id of the wrong kind inside a body is an id error, not a shape error.
    if text.contains(" id (`") && (text.contains("expected ") || text.contains("got ")) {
        return AppError::new(ErrorCode::InvalidId, text);
    }
    AppError::new(
        ErrorCode::InvalidBody,
        format!("the body does not match the operation: {text}"),
    )
}

fn body_error(rejection: JsonRejection) -> AppError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return AppError::new(
            ErrorCode::PayloadTooLarge,
            "the body is larger than this server takes",
        );
    }
    let detail = match &rejection {
        JsonRejection::MissingJsonContentType(_) => {
            "the body must be JSON, sent with `Content-Type: application/json`".to_owned()
        }
        JsonRejection::JsonSyntaxError(e) => format!("malformed JSON: {}", source_text(e)),
        JsonRejection::JsonDataError(e) => return data_error(source_text(e)),
        other => other.body_text(),
    };
    AppError::new(ErrorCode::InvalidBody, detail)
}

/// The innermost message of an error chain (serde's, without axum's prefix).
fn source_text(e: &dyn std::error::Error) -> String {
    let mut current: &dyn std::error::Error = e;
    let mut text = current.to_string();
    while let Some(next) = current.source() {
        text = next.to_string();
        current = next;
    }
    text
}

/// The path's parameters, parsed into typed ids on demand.
pub struct Ids(HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Ids {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map(|Path(map)| Self(map))
            .map_err(|e| AppError::new(ErrorCode::InvalidId, e.body_text()))
    }
}

impl Ids {
    /// Parses the parameter `name` as the id type `T`; a wrong kind is a 400 `invalid_id`.
    pub fn get<T: FromStr<Err = IdError>>(&self, name: &str) -> Result<T, AppError> {
        let raw = self
            .0
            .get(name)
            .ok_or_else(|| AppError::internal(format!("route has no `{name}` parameter")))?;
        raw.parse::<T>()
            .map_err(|e| AppError::new(ErrorCode::InvalidId, format!("`{name}`: {e}")))
    }

    /// The route `pattern` with this request's ids in place of its parameters, and `extra`'s
    /// (parameter, value) pairs for those the request has not.
    pub fn fill(&self, pattern: &str, extra: &[(&str, &str)]) -> String {
        let given = self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        given
            .chain(extra.iter().copied())
            .fold(pattern.to_owned(), |path, (name, value)| {
                path.replace(&format!("{{{name}}}"), value)
            })
    }
}

/// Query parameters; malformed ones are a 400 `invalid_request` that names the problem.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Self(value))
            .map_err(|e| AppError::invalid(e.body_text()))
    }
}

/// `?cursor=&limit=` of list operations.
#[derive(Debug, serde::Deserialize)]
pub struct PageParams {
    pub cursor: Option<String>,
    pub limit: Option<usize>,
}

impl PageParams {
    pub fn limit(&self) -> Result<usize, AppError> {
        match self.limit {
            None => Ok(50),
            Some(n @ 1..=200) => Ok(n),
            Some(n) => Err(AppError::invalid(format!(
                "`limit` must be between 1 and 200, got {n}"
            ))),
        }
    }

    /// The cursor as an id of the listed kind.
    pub fn cursor<T: FromStr<Err = IdError>>(&self) -> Result<Option<T>, AppError> {
        self.cursor
            .as_deref()
            .map(|c| {
                c.parse()
                    .map_err(|_| AppError::invalid(format!("`cursor` `{c}` is not from this list")))
            })
            .transpose()
    }
}

/// `?after=` of event streams.
#[derive(Debug, serde::Deserialize)]
pub struct AfterParams {
    pub after: Option<u64>,
}
