//! Microsecond number literals to integer nanoseconds.
//!
//! Kineto writes `ts` and `dur` in µs, since 2024 with three decimals
//! (`1712195495519689.047`). An f64 has a 0.25 µs step at that magnitude, so the
//! literal text is converted exactly, in integers.

/// Converts the text of a JSON number in µs into ns, rounding half away from
/// zero below 1 ns. Accepts `68`, `68.0`, `-1.5`, `1.2e3`, `1E-3`.
/// Returns `None` for text that is not a JSON number or does not fit in i64 ns.
pub fn us_text_to_ns(text: &[u8]) -> Option<i64> {
    let (negative, rest) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let mut mantissa: i128 = 0;
    let mut digits = 0usize;
    let mut dropped = 0i32; // integer digits beyond the i128 budget
    let mut scale = 0i32; // fractional digits kept in the mantissa
    let mut i = 0;
    let mut seen_digit = false;
    while let Some(&c) = rest.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        seen_digit = true;
        if digits < 36 {
            mantissa = mantissa * 10 + i128::from(c - b'0');
            if mantissa != 0 {
                digits += 1;
            }
        } else {
            dropped += 1;
        }
        i += 1;
    }
    if !seen_digit {
        return None;
    }
    if rest.get(i) == Some(&b'.') {
        i += 1;
        let mut frac_digit = false;
        while let Some(&c) = rest.get(i) {
            if !c.is_ascii_digit() {
                break;
            }
            frac_digit = true;
            if digits < 36 {
                mantissa = mantissa * 10 + i128::from(c - b'0');
                if mantissa != 0 {
                    digits += 1;
                }
                scale += 1;
            }
            i += 1;
        }
        if !frac_digit {
            return None;
        }
    }
    let mut exponent: i32 = 0;
    if matches!(rest.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_negative = match rest.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while let Some(&c) = rest.get(i) {
            if !c.is_ascii_digit() {
                break;
            }
            exponent = exponent.saturating_mul(10).saturating_add(i32::from(c - b'0'));
            i += 1;
        }
        if i == start {
            return None;
        }
        if exp_negative {
            exponent = -exponent;
        }
    }
    if i != rest.len() {
        return None;
    }
    // value_ns = mantissa * 10^(power)
    let power = exponent.saturating_add(dropped).saturating_add(3).saturating_sub(scale);
    let ns: i128 = if mantissa == 0 {
        0
    } else if power >= 0 {
        if power > 30 {
            return None;
        }
        mantissa.checked_mul(10i128.pow(power as u32))?
    } else {
        let shift = -power;
        if shift > 38 {
            0
        } else {
            let div = 10i128.pow(shift as u32);
            (mantissa + div / 2) / div
        }
    };
    let ns = if negative { -ns } else { ns };
    i64::try_from(ns).ok()
}

#[cfg(test)]
mod tests {
    use super::us_text_to_ns;

    #[test]
    fn parses_kineto_literals_exactly() {
        assert_eq!(us_text_to_ns(b"1712195495519689.047"), Some(1_712_195_495_519_689_047));
        assert_eq!(us_text_to_ns(b"68.0"), Some(68_000));
        assert_eq!(us_text_to_ns(b"68"), Some(68_000));
        assert_eq!(us_text_to_ns(b"2636.669"), Some(2_636_669));
        assert_eq!(us_text_to_ns(b"0.12"), Some(120));
        assert_eq!(us_text_to_ns(b"-1.5"), Some(-1_500));
        assert_eq!(us_text_to_ns(b"1.2e3"), Some(1_200_000));
        assert_eq!(us_text_to_ns(b"1E-3"), Some(1));
        assert_eq!(us_text_to_ns(b"0.0004"), Some(0));
        assert_eq!(us_text_to_ns(b"0.0005"), Some(1));
        assert_eq!(us_text_to_ns(b"0"), Some(0));
    }

    #[test]
    fn rejects_non_numbers() {
        for bad in [&b""[..], b"-", b"1.", b".5", b"\"12\"", b"1e", b"12a", b"null", b"1e400"] {
            assert_eq!(us_text_to_ns(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
