//! Perl-style `s/regex/replacement/flags` expressions, as cg_diff's
//! `--mod-filename` and `--mod-funcname` take them.
//!
//! cg_diff hands the expression to Perl's `eval`; here the common subset is
//! parsed: any punctuation delimiter (`s/a/b/`, `s#a#b#`, `s{a}{b}`), the
//! flags `g` (all matches), `i` (ignore case), `x`, `s` and `m`, and in the
//! replacement `$1`, `${1}`, `\1`, `$&`, `\n`, `\t`. The pattern is the
//! `regex` crate's syntax, which matches Perl's except for look-around and
//! back-references; those are reported as errors rather than misapplied.

use crate::Error;
use regex::bytes::{Regex, RegexBuilder};
use std::borrow::Cow;

/// A parsed substitution.
#[derive(Clone, Debug)]
pub struct Subst {
    re: Regex,
    /// The replacement in the `regex` crate's syntax (`${1}`, `$$`).
    replacement: Vec<u8>,
    global: bool,
    text: String,
}

impl Subst {
    /// Parses `s/regex/replacement/flags`.
    pub fn parse(expr: &str) -> Result<Subst, Error> {
        let err = |m: &str| Error::Subst {
            expr: expr.to_string(),
            message: m.to_string(),
        };
        let body = expr.trim();
        let rest = body
            .strip_prefix('s')
            .ok_or_else(|| err("expected `s/regex/replacement/` (only `s` is supported)"))?;
        let mut chars = rest.chars();
        let open = chars
            .next()
            .ok_or_else(|| err("missing delimiter after `s`"))?;
        if open.is_alphanumeric() || open.is_whitespace() || open == '\\' {
            return Err(err("the delimiter after `s` must be punctuation"));
        }
        let close = match open {
            '{' => '}',
            '(' => ')',
            '[' => ']',
            '<' => '>',
            c => c,
        };
        let rest = chars.as_str();
        let (pattern, after) = split_delimited(rest, open, close)
            .ok_or_else(|| err("the regex is not terminated by its delimiter"))?;
        let after = if open != close {
            // `s{a}{b}`: the replacement has its own pair, maybe after spaces.
            let a = after.trim_start();
            a.strip_prefix(open)
                .ok_or_else(|| err("expected the replacement in its own brackets"))?
        } else {
            after
        };
        let (replacement, flags) = split_delimited(after, open, close)
            .ok_or_else(|| err("the replacement is not terminated by its delimiter"))?;
        let mut builder = RegexBuilder::new(&unescape_delimiter(&pattern, open, close));
        let mut global = false;
        for f in flags.chars() {
            match f {
                'g' => global = true,
                'i' => {
                    builder.case_insensitive(true);
                }
                'x' => {
                    builder.ignore_whitespace(true);
                }
                's' => {
                    builder.dot_matches_new_line(true);
                }
                'm' => {
                    builder.multi_line(true);
                }
                c => return Err(err(&format!("unsupported flag `{c}`"))),
            }
        }
        let re = builder.build().map_err(|e| {
            err(&format!(
                "not a regex this tool supports (no look-around or back-references): {}",
                e.to_string().lines().last().unwrap_or("")
            ))
        })?;
        let replacement = convert_replacement(&unescape_delimiter(&replacement, open, close))
            .map_err(|m| err(&m))?;
        Ok(Subst {
            re,
            replacement,
            global,
            text: expr.to_string(),
        })
    }

    /// Applies the substitution: the first match, or all with `g`.
    pub fn apply<'a>(&self, s: &'a [u8]) -> Cow<'a, [u8]> {
        if self.global {
            self.re.replace_all(s, self.replacement.as_slice())
        } else {
            self.re.replace(s, self.replacement.as_slice())
        }
    }

    /// The expression as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Splits `text` at the first unescaped `close` (nested pairs counted for
/// bracket delimiters); returns (inside, after).
fn split_delimited(text: &str, open: char, close: char) -> Option<(String, &str)> {
    let mut depth = 0usize;
    let mut out = String::new();
    let mut it = text.char_indices();
    while let Some((i, c)) = it.next() {
        if c == '\\' {
            out.push(c);
            if let Some((_, n)) = it.next() {
                out.push(n);
            }
            continue;
        }
        if open != close && c == open {
            depth += 1;
        } else if c == close {
            if depth == 0 {
                return Some((out, &text[i + c.len_utf8()..]));
            }
            depth -= 1;
        }
        out.push(c);
    }
    None
}

/// `\/` inside `s/…/…/` means a plain `/`; other escapes stay.
fn unescape_delimiter(text: &str, open: char, close: char) -> String {
    let mut out = String::with_capacity(text.len());
    let mut it = text.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some(n) if (n == open || n == close) && !is_regex_meta(n) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn is_regex_meta(c: char) -> bool {
    r"\.+*?()|[]{}^$#&-~".contains(c)
}

/// Appends the group whose number starts at `chars[i]` as `${n}`; returns
/// the index after the digits.
fn push_group(chars: &[char], mut i: usize, out: &mut String) -> usize {
    let start = i;
    while i < chars.len() && chars[i].is_ascii_digit() {
        i += 1;
    }
    let n: String = chars[start..i].iter().collect();
    out.push_str(&format!("${{{n}}}"));
    i
}

/// Perl replacement text to the `regex` crate's: groups as `${n}`,
/// literal `$` as `$$`.
fn convert_replacement(text: &str) -> Result<Vec<u8>, String> {
    let mut out = String::with_capacity(text.len() + 8);
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                i += 1;
                match chars.get(i) {
                    Some(d) if d.is_ascii_digit() => {
                        i = push_group(&chars, i, &mut out);
                        continue;
                    }
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('$') => out.push_str("$$"),
                    Some(&o) => out.push(o),
                    None => out.push('\\'),
                }
                i += 1;
            }
            '$' => {
                i += 1;
                match chars.get(i) {
                    Some(d) if d.is_ascii_digit() => i = push_group(&chars, i, &mut out),
                    Some('&') => {
                        out.push_str("${0}");
                        i += 1;
                    }
                    Some('{') => {
                        let end = chars[i..]
                            .iter()
                            .position(|&c| c == '}')
                            .ok_or("unterminated `${` in the replacement")?;
                        let name: String = chars[i + 1..i + end].iter().collect();
                        if name.is_empty()
                            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        {
                            return Err(format!("`${{{name}}}` in the replacement is not a group"));
                        }
                        out.push_str(&format!("${{{name}}}"));
                        i += end + 1;
                    }
                    Some(c) if c.is_ascii_alphabetic() || *c == '_' => {
                        return Err(
                            "Perl variables other than `$1`, `${1}`, `$&` are not supported in the replacement"
                                .into(),
                        );
                    }
                    _ => out.push_str("$$"),
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(expr: &str, s: &str) -> String {
        let x = Subst::parse(expr).unwrap();
        String::from_utf8(x.apply(s.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn perl_forms() {
        assert_eq!(
            apply("s/prog[0-9]/progN/", "prog1/prog2.c"),
            "progN/prog2.c"
        );
        assert_eq!(
            apply("s/prog[0-9]/progN/g", "prog1/prog2.c"),
            "progN/progN.c"
        );
        assert_eq!(apply("s/PROG/x/i", "prog.c"), "x.c");
        assert_eq!(apply(r"s/(\w+)\.c/$1.h/", "a/foo.c"), "a/foo.h");
        assert_eq!(apply(r"s/(\w+)\.c/\1_x/", "foo.c"), "foo_x");
        assert_eq!(apply(r"s/(\w+)\.c/${1}0/", "foo.c"), "foo0");
        assert_eq!(apply(r"s#^/tmp/[^/]*/#/src/#", "/tmp/a1/x.c"), "/src/x.c");
        assert_eq!(apply(r"s/\/old\//\/new\//", "/old/x"), "/new/x");
        assert_eq!(apply(r"s{a+}{<$&>}g", "baab"), "b<aa>b");
        assert_eq!(apply(r"s/x/\$/", "x"), "$");
        assert_eq!(apply(r"s/x/a$/", "x"), "a$");
        assert_eq!(apply(r"s/'\d+$//", "fib'2"), "fib");
    }

    #[test]
    fn rejects_what_it_cannot_do() {
        for bad in [
            "tr/a/b/",
            "s/a/b",
            "s/(?<=a)b/c/",
            "s/a/b/e",
            "s/a/$foo/",
            "s",
            "sab",
        ] {
            assert!(Subst::parse(bad).is_err(), "{bad}");
        }
    }
}
