//! Units as people read them: byte counts in KiB, MiB and GiB, figures to the digits that
//! matter, shares as percentages, counts with their thousands grouped, long names shortened.

pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A measured figure to the digits that matter: four significant ones, no trailing zeros
/// (0.023, 55348.7, 12), so no float's binary residue reaches a user.
pub fn figure(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    let digits = (3 - value.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{value:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// A share (0..=1) as a percentage to one decimal, never rounded to a claim it is not: "0%"
/// and "100%" only when exact, "<0.1%" and ">99.9%" at the edges.
pub fn percent(share: f64) -> String {
    let value = share * 100.0;
    if !value.is_finite() {
        return format!("{value}%");
    }
    match value {
        v if v <= 0.0 => "0%".to_owned(),
        v if v < 0.05 => "<0.1%".to_owned(),
        v if v >= 100.0 => "100%".to_owned(),
        v if v >= 99.95 => ">99.9%".to_owned(),
        v => format!("{v:.1}%"),
    }
}

/// "1 binary", "3 binaries": a count with its noun in the number it takes.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A count with its thousands grouped: 181732 as "181,732" (instruction counts).
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut text = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

/// `text` in at most `max` characters: cut, with an ellipsis, where longer (a function's
/// demangled name in a table).
pub fn shortened(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_human_readable() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
    }

    #[test]
    fn figures_keep_the_digits_that_matter() {
        assert_eq!(figure(0.023), "0.023");
        assert_eq!(figure(55348.744999999995), "55349");
        assert_eq!(figure(12.0), "12");
        assert_eq!(figure(0.000123456), "0.0001235");
        assert_eq!(figure(1.5), "1.5");
    }

    #[test]
    fn percentages_do_not_round_to_a_claim() {
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(0.00001), "<0.1%");
        assert_eq!(percent(0.4175), "41.8%");
        assert_eq!(percent(0.99999), ">99.9%");
        assert_eq!(percent(1.0), "100%");
    }

    #[test]
    fn long_text_is_shortened_with_an_ellipsis() {
        assert_eq!(shortened("abcdef", 4), "abc…");
        assert_eq!(shortened("abc", 4), "abc");
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(181_785), "181,785");
        assert_eq!(grouped(12_345_678), "12,345,678");
    }
}
