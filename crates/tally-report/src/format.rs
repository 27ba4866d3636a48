//! Number formatting and aligned columns.

pub use tally_model::thousands;

/// The widest a text column is padded to, in characters. Names from a
/// profile (events, functions, files) may be of any length: a longer one
/// is printed in full and pushes its line out of alignment rather than
/// widening the whole column (JSON output always has the full names).
/// Formatting widths must also stay below 2^16, or `format!` panics.
pub const MAX_COLUMN: usize = 64;

/// A column width for the longest of `lens`, capped at [`MAX_COLUMN`].
pub fn column_width(lens: impl IntoIterator<Item = usize>) -> usize {
    lens.into_iter().max().unwrap_or(0).min(MAX_COLUMN)
}

/// `s` padded with spaces on the left to `w` characters (no padding when
/// it is as long already).
pub fn pad_left(s: &str, w: usize) -> String {
    let n = w.saturating_sub(s.chars().count());
    let mut out = String::with_capacity(s.len() + n);
    out.extend(std::iter::repeat_n(' ', n));
    out.push_str(s);
    out
}

/// `s` padded with spaces on the right to `w` characters.
pub fn pad_right(s: &str, w: usize) -> String {
    let n = w.saturating_sub(s.chars().count());
    let mut out = String::with_capacity(s.len() + n);
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', n));
    out
}

/// A percentage in a fixed width of 9: ` (12.34%)`, ` (100.0%)`, or blanks
/// for zero. Wide values keep one decimal so that columns stay aligned as
/// long as possible.
pub fn percent(v: i128, total: i128) -> String {
    if v == 0 {
        return " ".repeat(9);
    }
    if total == 0 {
        return " (  n/a )".to_string();
    }
    let p = v as f64 * 100.0 / total as f64;
    if p > -9.995 && p < 99.995 {
        format!(" ({p:5.2}%)")
    } else {
        format!(" ({p:5.1}%)")
    }
}

/// A ratio with four decimals (`0.0312`), or in exponent form when that
/// would show no significant digit (`1.25e-7`).
pub fn decimal(r: f64) -> String {
    if r != 0.0 && r.abs() < 0.0001 {
        format!("{r:.2e}")
    } else {
        format!("{r:.4}")
    }
}

/// A value cell: the number (or `.` for zero when `dot_for_zero`), with its
/// percentage of `total` when asked.
pub fn cell(v: Option<i128>, total: i128, percs: bool, dot_for_zero: bool) -> String {
    match v {
        None => "-".to_string() + if percs { "         " } else { "" },
        Some(0) if dot_for_zero => ".".to_string() + if percs { "         " } else { "" },
        Some(v) => {
            let mut s = thousands(v);
            if percs {
                s.push_str(&percent(v, total));
            }
            s
        }
    }
}

/// ANSI styles, or nothing when colour is off.
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    /// Colour is on.
    pub on: bool,
}

impl Style {
    /// Bold text (section titles).
    pub fn bold(self, s: &str) -> String {
        if self.on {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    /// Dimmed text (objects, markers).
    pub fn dim(self, s: &str) -> String {
        if self.on {
            format!("\x1b[2m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    /// Highlighted text (cycles, warnings).
    pub fn hot(self, s: &str) -> String {
        if self.on {
            format!("\x1b[33m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(-1234567), "-1,234,567");
    }

    #[test]
    fn percents_keep_width() {
        assert_eq!(percent(1, 3), " (33.33%)");
        assert_eq!(percent(3, 3), " (100.0%)");
        assert_eq!(percent(0, 3), "         ");
        assert_eq!(percent(-1, 3), " (-33.3%)");
    }
}
