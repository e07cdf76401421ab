//! A TOML document read into a serde type, every error at file:line:column and naming its
//! key (`grace`, `env.PORT`, `retention.keep`). toml's parser gives the position; the key is
//! the path to that position in the parse tree. serde's own messages (an unknown field, an
//! invalid type) are reworded into the config's: `unknown key `x` in [notify]; expected one
//! of command, terminal, desktop`.

use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::ConfigError;

/// The text being parsed and the name it goes by in errors.
pub(super) struct Source<'a> {
    pub text: &'a str,
    pub file: &'a str,
}

/// One step of the path to a value: a key of a table or an index in an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
    Key(String),
    Index(usize),
}

/// What serde said was wrong, in the parts the config's messages are made of.
pub(super) enum Problem<'e> {
    /// The key the path ends with is not a field; the valid ones, listed `a, b, c`.
    UnknownKey { key: &'e str, valid: String },
    /// The value has another type than the table or list expected there.
    WrongType {
        expected: &'e str,
        found: &'static str,
    },
    /// A value's own reader refused it ([`super::values`]): the words after the key.
    Invalid(&'e str),
}

impl<'e> Problem<'e> {
    fn of(message: &'e str, found: &'static str) -> Problem<'e> {
        if let Some((key, expected)) = message
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split_once("`, expected "))
        {
            // serde lists them "`a`", "`a` or `b`" or "one of `a`, `b`, `c`".
            let valid = expected.trim_start_matches("one of ").replace(" or ", ", ");
            return Problem::UnknownKey {
                key,
                valid: valid.replace('`', ""),
            };
        }
        match message
            .strip_prefix("invalid type: ")
            .and_then(|rest| rest.rsplit_once(", expected "))
        {
            Some((_, expected)) => Problem::WrongType { expected, found },
            None => Problem::Invalid(message),
        }
    }
}

/// The path as a message names it: `retention.keep`, `argv[1]`.
pub(super) fn dotted(path: &[Segment]) -> String {
    let mut name = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) if name.is_empty() => name.push_str(key),
            Segment::Key(key) => name.extend([".", key]),
            Segment::Index(i) => name.push_str(&format!("[{i}]")),
        }
    }
    name
}

/// The key and message of an error in a table below the top level: `{key}: {problem}`, an
/// unknown key with the table it is in and the keys it takes.
pub(super) fn described(path: &[Segment], problem: Problem<'_>) -> (String, String) {
    let name = dotted(path);
    let why = match problem {
        Problem::UnknownKey { key, valid } => {
            let parent = &path[..path.len().saturating_sub(1)];
            let table = match parent.last() {
                Some(Segment::Key(last)) if last == "attention" => "the attention table".into(),
                _ => format!("[{}]", dotted(parent)),
            };
            format!("unknown key `{key}` in {table}; expected one of {valid}")
        }
        Problem::WrongType { expected, found } => format!("expected {expected}, found {found}"),
        Problem::Invalid(why) => why.to_string(),
    };
    let message = format!("{name}: {why}");
    (name, message)
}

impl Source<'_> {
    /// Reads the document into `T`. An unknown key at the top level is told with `top_level`
    /// (what the document holds); `describe` gives any other error's key and message from the
    /// path to where it is and what is wrong there (most use [`described`]).
    pub(super) fn read<T: DeserializeOwned>(
        &self,
        top_level: &str,
        describe: impl Fn(&[Segment], Problem<'_>) -> (String, String),
    ) -> Result<T, ConfigError> {
        let doc = DeTable::parse(self.text).map_err(|e| self.syntax_error(&e))?;
        let tree = DeValue::Table(doc.get_ref().clone());
        // Strings reach `execve` and friends as C strings, which cannot hold NUL.
        let refused = match nul_at(&tree) {
            Some(offset) => Err((offset, "must not contain a NUL character".to_string())),
            None => T::deserialize(toml::de::Deserializer::from(doc)).map_err(|e| {
                (
                    e.span().map_or(0, |span| span.start),
                    e.message().to_string(),
                )
            }),
        };
        refused.map_err(|(offset, message)| {
            let mut path = Vec::new();
            let found = locate(&tree, offset, &mut path).unwrap_or("nothing");
            let (key, message) = match (&path[..], Problem::of(&message, found)) {
                ([_], Problem::UnknownKey { key, .. }) => (
                    key.to_string(),
                    format!("unknown key `{key}` at the top level; {top_level}"),
                ),
                (path, problem) => describe(path, problem),
            };
            self.error(offset, &key, message)
        })
    }

    pub(super) fn error(&self, offset: usize, key: &str, message: String) -> ConfigError {
        let (line, column) = self.line_column(offset);
        ConfigError::Invalid {
            file: self.file.to_string(),
            line,
            column,
            key: key.to_string(),
            message,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub(super) fn line_column(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..self.floor(offset)];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.matches('\n').count() + 1;
        (line, before[line_start..].chars().count() + 1)
    }

    /// `offset`, moved back onto a character boundary within the text.
    fn floor(&self, offset: usize) -> usize {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }

    /// A TOML syntax error. toml does not say which key it was reading, so the key is the
    /// bare key before `=` when the error is in a value, else the token the error points at.
    fn syntax_error(&self, error: &toml::de::Error) -> ConfigError {
        let span = error.span().unwrap_or(0..0);
        let key = self.key_near(span.clone());
        let message = if key.is_empty() {
            format!("invalid TOML: {}", error.message())
        } else {
            format!("{key}: invalid TOML: {}", error.message())
        };
        self.error(span.start, &key, message)
    }

    fn key_near(&self, span: Range<usize>) -> String {
        let is_key = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        };
        let start = self.floor(span.start);
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        let line = &self.text[line_start..line_end];
        let key = match line.find('=') {
            // The error is in a value: the key is what precedes `=`.
            Some(equals) if start > line_start + equals => line[..equals].trim(),
            // The error is in a key or a header: the key is the token itself.
            _ => self.text.get(span).map_or("", str::trim),
        };
        if is_key(key) {
            key.to_string()
        } else {
            String::new()
        }
    }
}

/// Fills `path` with the way to the innermost key or value at `offset` and gives that value's
/// type (`"key"` for a key). A table's span may be its header alone, so children are looked
/// at before the value itself.
fn locate(value: &DeValue<'_>, offset: usize, path: &mut Vec<Segment>) -> Option<&'static str> {
    let children: Vec<_> = match value {
        DeValue::Table(table) => table
            .iter()
            .map(|(key, child)| {
                (
                    Segment::Key(key.get_ref().to_string()),
                    Some(key.span()),
                    child,
                )
            })
            .collect(),
        DeValue::Array(items) => (items.iter().enumerate())
            .map(|(i, child)| (Segment::Index(i), None, child))
            .collect(),
        _ => return None,
    };
    for (segment, key_span, child) in children {
        path.push(segment);
        if key_span.is_some_and(|span| span.contains(&offset)) {
            return Some("key");
        }
        if let Some(found) = locate(child.get_ref(), offset, path) {
            return Some(found);
        }
        if child.span().contains(&offset) {
            return Some(child.get_ref().type_str());
        }
        path.pop();
    }
    None
}

/// Where the first string (a key or a value) that holds a NUL is.
fn nul_at(value: &DeValue<'_>) -> Option<usize> {
    let in_item = |item: &Spanned<DeValue<'_>>| match item.get_ref() {
        DeValue::String(text) if text.contains('\0') => Some(item.span().start),
        other => nul_at(other),
    };
    match value {
        DeValue::Table(table) => table.iter().find_map(|(key, item)| {
            let in_key = key.get_ref().contains('\0');
            in_key.then(|| key.span().start).or_else(|| in_item(item))
        }),
        DeValue::Array(items) => items.iter().find_map(in_item),
        _ => None,
    }
}
