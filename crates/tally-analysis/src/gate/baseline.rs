//! Baseline files: increases accepted for named functions.
//!
//! One entry a line, `BUDGET [file=PATH] [object=NAME] FUNCTION`:
//!
//! ```text
//! # accepted after the parser rewrite
//! 15%        parse_line
//! +250000    file=src/lex.c next_token
//! any        object=libc.so.6 memcpy
//! ```
//!
//! `BUDGET` is a percentage of the function's base cost (`15%`), a count
//! of the event (`250000`, `+250000`), or `any` (not judged). The function
//! name is the rest of the line, so it may hold spaces (C++ signatures);
//! `file=` (exact, after `--mod-filename`) and `object=` (the object's file
//! name) narrow it to one definition. `#` starts a comment line; blank
//! lines are skipped. The first entry that matches a function applies.

use super::{FunctionName, Limit};
use crate::Error;
use std::fmt;

/// A function's accepted increase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// At most this much.
    Limit(Limit),
    /// Any change is accepted.
    Any,
}

impl Budget {
    /// The limit, or `None` for [`Budget::Any`].
    pub fn limit(self) -> Option<Limit> {
        match self {
            Budget::Limit(l) => Some(l),
            Budget::Any => None,
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Budget::Limit(l) => write!(f, "{l}"),
            Budget::Any => f.write_str("any"),
        }
    }
}

/// One line of a baseline file.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineEntry {
    /// The accepted increase.
    pub budget: Budget,
    /// The function's name.
    pub function: Vec<u8>,
    /// Its source file, when given.
    pub file: Option<Vec<u8>>,
    /// Its object's file name, when given.
    pub object: Option<Vec<u8>>,
    /// The 1-based line.
    pub line: usize,
}

impl BaselineEntry {
    fn matches(&self, f: &FunctionName) -> bool {
        self.function == f.name
            && self.file.as_ref().is_none_or(|x| *x == f.file)
            && self.object.as_ref().is_none_or(|x| *x == f.object)
    }
}

/// The entries of a baseline file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Baseline {
    /// The file's name, for messages.
    pub path: String,
    /// The entries in the file's order.
    pub entries: Vec<BaselineEntry>,
}

impl Baseline {
    /// Reads a baseline file's text; `path` names it in errors.
    pub fn parse(path: &str, text: &[u8]) -> Result<Self, Error> {
        let mut entries = Vec::new();
        for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = i + 1;
            let err = |message: String| Error::Baseline {
                path: path.to_string(),
                line,
                message,
            };
            let l = raw.strip_suffix(b"\r").unwrap_or(raw).trim_ascii();
            if l.is_empty() || l.starts_with(b"#") {
                continue;
            }
            let (word, mut rest) = split_word(l);
            let word =
                std::str::from_utf8(word).map_err(|_| err("the budget is not text".to_string()))?;
            let budget = if word == "any" {
                Budget::Any
            } else {
                Budget::Limit(word.parse().map_err(|_| {
                    err(format!(
                        "`{word}` is not a budget: expected `N%`, a count `N`, or `any`, then the function's name"
                    ))
                })?)
            };
            let (mut file, mut object) = (None, None);
            loop {
                let (w, after) = split_word(rest);
                let (slot, value, key) = if let Some(v) = w.strip_prefix(b"file=") {
                    (&mut file, v, "file")
                } else if let Some(v) = w.strip_prefix(b"object=") {
                    (&mut object, v, "object")
                } else {
                    break;
                };
                if value.is_empty() || slot.is_some() {
                    return Err(err(format!("`{key}=` is empty or given twice")));
                }
                *slot = Some(value.to_vec());
                rest = after;
            }
            if rest.is_empty() {
                return Err(err(format!("`{word}` names no function")));
            }
            entries.push(BaselineEntry {
                budget,
                function: rest.to_vec(),
                file,
                object,
                line,
            });
        }
        Ok(Baseline {
            path: path.to_string(),
            entries,
        })
    }

    /// The index of the first entry that applies to `f`.
    pub fn find(&self, f: &FunctionName) -> Option<usize> {
        self.entries.iter().position(|e| e.matches(f))
    }
}

/// The first word of `s` and the rest, trimmed.
fn split_word(s: &[u8]) -> (&[u8], &[u8]) {
    match s.iter().position(|b| b.is_ascii_whitespace()) {
        Some(i) => (&s[..i], s[i..].trim_ascii()),
        None => (s, &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_budget_filters_and_the_rest_as_name() {
        let text = b"# comment\n\n15% parse line(int, char)\r\n+250000 file=src/lex.c next_token\nany object=libc.so.6 file=x.c memcpy\n";
        let b = Baseline::parse("b.txt", text).unwrap();
        assert_eq!(b.entries.len(), 3);
        assert_eq!(b.entries[0].budget, Budget::Limit(Limit::Percent(15.0)));
        assert_eq!(b.entries[0].function, b"parse line(int, char)");
        assert_eq!(b.entries[0].line, 3);
        assert_eq!(b.entries[1].file.as_deref(), Some(&b"src/lex.c"[..]));
        assert_eq!(b.entries[2].budget, Budget::Any);
        assert_eq!(b.entries[2].object.as_deref(), Some(&b"libc.so.6"[..]));
        let f = FunctionName {
            name: b"next_token".to_vec(),
            file: b"src/lex.c".to_vec(),
            object: b"prog".to_vec(),
        };
        assert_eq!(b.find(&f), Some(1));
        let other = FunctionName {
            file: b"lex.c".to_vec(),
            ..f
        };
        assert_eq!(b.find(&other), None);
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        for (text, line) in [
            (&b"5% ok\nfast compute\n"[..], 2),
            (b"\n\n12%\n", 3),
            (b"1% file= f\n", 1),
            (b"1% file=a file=b f\n", 1),
            (b"-3% f\n", 1),
        ] {
            let e = Baseline::parse("base.txt", text).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("base.txt:{line}: ")),
                "{e}"
            );
        }
    }
}
