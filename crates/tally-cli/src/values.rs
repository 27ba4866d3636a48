//! Value parsers of options (`--threshold`, `--cache-sim=yes`): what a
//! value may be, and the message when it is not.

use tally_report::annotate::Threshold;

/// `yes` or `no` (`tally sim`, as Valgrind's options).
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
pub fn yes_no(s: &str) -> Result<bool, String> {
    match s {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("`{s}`: expected yes or no")),
    }
}

/// `yes`/`no`, or `true`/`false`, `1`/`0` (`tally annotate`, as
/// callgrind_annotate's options).
pub fn yes_no_or_bool(s: &str) -> Result<bool, String> {
    match s {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(format!("expected yes or no, got `{s}`")),
    }
}

/// A percentage from 0 to 100 (`50`, `50%`), or `all`.
pub fn threshold(s: &str) -> Result<Threshold, String> {
    if s == "all" {
        Ok(Threshold::All)
    } else {
        percent_0_100(s).map(Threshold::Percent)
    }
}

/// A percentage from 0 to 100 (`50`, `50%`).
pub fn percent_0_100(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("expected a percentage, got `{s}`"))?;
    if (0.0..=100.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("the threshold must be between 0 and 100, got {v}"))
    }
}

/// A positive number of seconds, fractions allowed, that a duration holds.
pub fn seconds(s: &str) -> Result<std::time::Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}`: not a number of seconds"))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(format!("`{s}`: not a positive number of seconds"));
    }
    std::time::Duration::try_from_secs_f64(v).map_err(|_| format!("`{s}`: too many seconds"))
}

/// A percentage from 0 to 100 (`0.5`, `2%`) as a fraction of 1.
pub fn fraction(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(format!("`{s}` is not a percentage from 0 to 100")),
    }
}
