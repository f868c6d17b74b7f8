//! Query strings and JSON bodies read as Hermes (FastAPI + pydantic) reads them: what does not
//! fit is a 422 whose `detail` lists each problem with its `type`, `loc`, `msg` and `input`.

use axum::Json;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// A route's query parameters.
pub struct Params<T>(pub T);

/// A route's JSON body.
pub struct Body<T>(pub T);

/// Why a request did not fit: pydantic's 422.
pub struct Invalid {
    kind: &'static str,
    loc: Vec<Value>,
    msg: String,
    input: Value,
}

impl IntoResponse for Invalid {
    fn into_response(self) -> Response {
        let problem =
            json!({"type": self.kind, "loc": self.loc, "msg": self.msg, "input": self.input});
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"detail": [problem]})),
        )
            .into_response()
    }
}

/// Pydantic's error type and message for what serde said of a value.
fn kind_of(message: &str) -> (&'static str, String) {
    let expected = |what: &str| message.contains(&format!("expected {what}"));
    if message.contains("invalid digit") || message.contains("integer") && expected("i64") {
        (
            "int_parsing",
            "Input should be a valid integer, unable to parse string as an integer".to_owned(),
        )
    } else if expected("i64") || expected("an integer") {
        ("int_type", "Input should be a valid integer".to_owned())
    } else if message.contains(hermes_native::desktop::NOT_A_BOOLEAN)
        || message.contains("`true` or `false`")
    {
        (
            "bool_parsing",
            "Input should be a valid boolean, unable to interpret input".to_owned(),
        )
    } else if expected("a boolean") {
        ("bool_type", "Input should be a valid boolean".to_owned())
    } else if expected("a string") {
        ("string_type", "Input should be a valid string".to_owned())
    } else if expected("a sequence") {
        ("list_type", "Input should be a valid list".to_owned())
    } else {
        ("value_error", message.to_owned())
    }
}

/// The 422 for a value that did not deserialize, found at `path` within `part`; `input` is
/// what was sent there (the whole object for a missing field, as pydantic shows it).
fn invalid(
    part: &str,
    error: serde_path_to_error::Error<impl std::fmt::Display>,
    input: impl Fn(&str) -> Value,
    whole: Value,
) -> Invalid {
    let mut loc = vec![Value::from(part)];
    loc.extend(
        error
            .path()
            .iter()
            .map(|segment| Value::from(segment.to_string())),
    );
    let message = error.inner().to_string();
    // serde names a missing field in its message, not in the path.
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
    {
        loc.push(Value::from(field));
        return Invalid {
            kind: "missing",
            loc,
            msg: "Field required".to_owned(),
            input: whole,
        };
    }
    let field = error.path().to_string();
    let (kind, msg) = kind_of(&message);
    Invalid {
        kind,
        loc,
        msg,
        input: input(&field),
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = Invalid;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Invalid> {
        let query = parts.uri.query().unwrap_or("");
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        let sent = |field: &str| {
            form_urlencoded::parse(query.as_bytes())
                .find(|(name, _)| name == field)
                .map_or(Value::Null, |(_, value)| Value::from(value.into_owned()))
        };
        serde_path_to_error::deserialize(deserializer)
            .map(Params)
            .map_err(|e| invalid("query", e, sent, Value::Null))
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        if bytes.is_empty() {
            return Err(Invalid {
                kind: "missing",
                loc: vec![Value::from("body")],
                msg: "Field required".to_owned(),
                input: Value::Null,
            }
            .into_response());
        }
        if !json {
            return Err(Invalid {
                kind: "model_attributes_type",
                loc: vec![Value::from("body")],
                msg: "Input should be a valid dictionary or object to extract fields from"
                    .to_owned(),
                input: Value::from(String::from_utf8_lossy(&bytes).into_owned()),
            }
            .into_response());
        }
        let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
            return Err(Invalid {
                kind: "json_invalid",
                loc: vec![Value::from("body"), Value::from(0)],
                msg: "JSON decode error".to_owned(),
                input: json!({}),
            }
            .into_response());
        };
        let sent = |field: &str| value.get(field).cloned().unwrap_or(Value::Null);
        serde_path_to_error::deserialize(&value)
            .map(Body)
            .map_err(|e| invalid("body", e, sent, value.clone()).into_response())
    }
}
