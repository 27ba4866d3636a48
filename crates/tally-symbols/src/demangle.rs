//! Demangling, done the way Valgrind shows names.
//!
//! Valgrind demangles C++ (Itanium ABI) and Rust names with libiberty before
//! it writes a profile, so the names in `fn=` lines are demangled; to find
//! them in the symbol table we must demangle the same way. For Rust, libiberty
//! leaves out the `::h0123…` hash of legacy names and the crate
//! disambiguators of v0 names (unless asked to be verbose, which Valgrind
//! does not), which is rustc-demangle's alternate form.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Demangles `raw` as Valgrind prints it; `None` for a plain (C) name or
/// one that does not demangle.
pub(crate) fn demangle(raw: &str) -> Option<String> {
    if is_rust(raw)
        && let Ok(d) = rustc_demangle::try_demangle(raw)
    {
        return Some(format!("{d:#}"));
    }
    if raw.starts_with("_Z") {
        return demangle_cpp(raw);
    }
    None
}

/// Legacy Rust names are Itanium-like (`_ZN…E`) but end in a 16-digit
/// `h` hash; v0 names start with `_R`. Requiring the hash keeps plain C++
/// names with C++'s demangler.
fn is_rust(raw: &str) -> bool {
    if raw.starts_with("_R") {
        return true;
    }
    let Some(body) = raw.strip_prefix("_ZN") else {
        return false;
    };
    // Accept the `.llvm.123` style suffixes rustc-demangle also accepts.
    let body = body.split('.').next().unwrap_or(body);
    let Some(body) = body.strip_suffix('E') else {
        return false;
    };
    body.len() >= 19
        && body.is_char_boundary(body.len() - 19)
        && body[body.len() - 19..].starts_with("17h")
        && body[body.len() - 16..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

/// C++ names come from the file being read, so a damaged table can hand the
/// demangler anything; its recursion limits bound the work, and a panic in
/// it (there have been some on fuzzed input) only loses the demangled form.
fn demangle_cpp(raw: &str) -> Option<String> {
    catch_unwind(AssertUnwindSafe(|| {
        let symbol = cpp_demangle::Symbol::new(raw.as_bytes()).ok()?;
        symbol.demangle().ok()
    }))
    .ok()
    .flatten()
    .filter(|d| !d.is_empty() && d != raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_names_stay_as_they_are() {
        assert_eq!(demangle("main"), None);
        assert_eq!(demangle("_start"), None);
    }

    #[test]
    fn cpp_names_demangle_with_parameters() {
        assert_eq!(
            demangle("_ZN5space3fooEibc").as_deref(),
            Some("space::foo(int, bool, char)")
        );
    }

    #[test]
    fn rust_legacy_names_drop_the_hash() {
        assert_eq!(
            demangle("_ZN3std2rt10lang_start17h0123456789abcdefE").as_deref(),
            Some("std::rt::lang_start")
        );
    }

    #[test]
    fn rust_v0_names_drop_the_disambiguators() {
        assert_eq!(
            demangle("_RNvCs1234_7mycrate3foo").as_deref(),
            Some("mycrate::foo")
        );
    }

    #[test]
    fn garbage_does_not_demangle() {
        assert_eq!(demangle("_Z"), None);
        assert_eq!(demangle("_ZN17h"), None);
        assert_eq!(demangle("_Zzzzzzz"), None);
    }
}
