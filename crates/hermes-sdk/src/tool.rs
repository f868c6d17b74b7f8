//! Callback tools: typed Rust functions the agent can call. Their argument schema is derived
//! from the argument type, and a [`ToolHost`](crate::ToolHost) serves them over MCP.

use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

type Handler = dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync;

/// A callback tool: a name, a description, the JSON Schema of its arguments, and the function.
#[derive(Clone)]
pub struct Tool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) input_schema: Value,
    pub(crate) handler: Arc<Handler>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// A tool's failure, shown to the model as the tool's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    /// A failure the model is told about.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl Tool {
    /// A tool that takes `A` (deserialized from the model's arguments, its JSON Schema derived
    /// with schemars) and returns `R` (serialized to JSON for the model).
    ///
    /// Arguments that do not match `A` are not passed to `f`: the model gets the reason.
    pub fn new<A, R, F, Fut>(name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        R: Serialize + Send + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    {
        let mut schema = schemars::SchemaGenerator::default()
            .into_root_schema_for::<A>()
            .to_value();
        if let Some(object) = schema.as_object_mut() {
            // Models and MCP clients want the bare object schema.
            object.remove("$schema");
            object.remove("title");
        }
        let f = Arc::new(f);
        Self::from_json(name, description, schema, move |args: Value| {
            let f = f.clone();
            async move {
                let args: A = serde_json::from_value(args)
                    .map_err(|e| ToolError(format!("invalid arguments: {e}")))?;
                let result = f(args).await?;
                serde_json::to_value(result)
                    .map_err(|e| ToolError(format!("unserializable result: {e}")))
            }
        })
    }

    /// A tool whose arguments are described by `input_schema` (a JSON Schema object) and whose
    /// function takes and returns JSON: for tools defined outside Rust's types, such as the
    /// Python binding's. The function checks its own arguments.
    pub fn from_json<F, Fut>(name: &str, description: &str, input_schema: Value, f: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        let handler = move |args: Value| f(args).map(|result| result.map_err(|e| e.0)).boxed();
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema,
            handler: Arc::new(handler),
        }
    }

    /// The tool's name, as the model sees it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The JSON Schema of the arguments.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// Calls the tool directly, as a tool host would.
    pub async fn invoke(&self, args: Value) -> Result<Value, ToolError> {
        (self.handler)(args).await.map_err(ToolError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// The text.
        text: String,
    }

    fn word_count() -> Tool {
        Tool::new("word_count", "Count words", |args: Args| async move {
            Ok(args.text.split_whitespace().count())
        })
    }

    #[tokio::test]
    async fn the_schema_comes_from_the_argument_type() {
        let tool = word_count();
        assert_eq!(tool.input_schema()["type"], "object");
        assert_eq!(tool.input_schema()["required"], json!(["text"]));
        assert_eq!(
            tool.input_schema()["properties"]["text"]["type"],
            json!("string")
        );
        assert_eq!(tool.invoke(json!({"text": "a b c"})).await, Ok(json!(3)));
    }

    #[tokio::test]
    async fn bad_arguments_never_reach_the_function() {
        let err = word_count().invoke(json!({"txt": 1})).await.unwrap_err();
        assert!(
            err.0.starts_with("invalid arguments: missing field `text`"),
            "{err}"
        );
    }
}
