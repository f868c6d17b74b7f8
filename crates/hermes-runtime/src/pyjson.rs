//! JSON text the way Python's `json.dumps(value, ensure_ascii=False)` writes it (`", "` and
//! `": "` separators). Hermes gives tool results to the model in that form; writing the same
//! bytes keeps what a model sees identical on both runtimes.

use std::io;

use serde::Serialize;
use serde_json::ser::{Formatter, Serializer};

struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

pub fn to_string<T: Serialize>(value: &T) -> String {
    let mut out = Vec::new();
    let mut serializer = Serializer::with_formatter(&mut out, PythonFormatter);
    value
        .serialize(&mut serializer)
        .expect("JSON values serialize");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn separators_match_python() {
        let value = json!({"result": "3", "list": [1, 2, {"a": null}], "é": "ü"});
        assert_eq!(
            super::to_string(&value),
            r#"{"result": "3", "list": [1, 2, {"a": null}], "é": "ü"}"#
        );
    }
}
