//! A structural scanner over the top level of a trace: it finds the byte span
//! of every `traceEvents` element and of the few other top-level values we
//! read, without parsing them. Events are then parsed independently (and in
//! parallel), and a file cut off mid-array is told apart from one that only
//! lost its closing `]}`.

use memchr::memchr2;

/// Where the scanner stopped and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanError {
    pub(crate) offset: usize,
    pub(crate) message: String,
}

fn err(offset: usize, message: impl Into<String>) -> ScanError {
    ScanError { offset, message: message.into() }
}

/// Byte spans of the parts of a trace we read.
#[derive(Debug, Default)]
pub(crate) struct TopLevel {
    /// `[start, end)` of each element of `traceEvents`.
    pub(crate) events: Vec<(usize, usize)>,
    /// Whether a `traceEvents` key was found.
    pub(crate) has_trace_events: bool,
    /// The file ends inside `traceEvents` after a complete element (a killed writer).
    pub(crate) missing_close: bool,
    /// `(key, value span)` of the other top-level keys we care about.
    pub(crate) values: Vec<(&'static str, (usize, usize))>,
}

const WANTED: [&str; 4] = ["deviceProperties", "computeProperties", "distributedInfo", "baseTimeNanoseconds"];

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(c) = b.get(i) {
        if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
            break;
        }
        i += 1;
    }
    i
}

/// `i` points at the opening quote; returns the offset just past the closing one.
fn skip_string(b: &[u8], i: usize) -> Result<usize, ScanError> {
    let mut j = i + 1;
    loop {
        let rest = b.get(j..).unwrap_or_default();
        match memchr2(b'"', b'\\', rest) {
            None => return Err(err(b.len(), "unexpected end of file inside a string")),
            Some(k) => {
                let at = j + k;
                if b.get(at) == Some(&b'\\') {
                    j = at + 2;
                } else {
                    return Ok(at + 1);
                }
            }
        }
    }
}

/// Table of the bytes that matter inside a container.
const SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'{' as usize] = true;
    t[b'}' as usize] = true;
    t[b'[' as usize] = true;
    t[b']' as usize] = true;
    t
};

/// `i` points at `{` or `[`; returns the offset just past its matching close.
/// Mismatched bracket kinds are left for the JSON parser to report.
fn skip_container(b: &[u8], mut i: usize) -> Result<usize, ScanError> {
    let mut depth = 0usize;
    while let Some(&c) = b.get(i) {
        if !SPECIAL[c as usize] {
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                i = skip_string(b, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            _ => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
        }
        i += 1;
    }
    Err(err(b.len(), "unexpected end of file inside a value"))
}

/// Returns the end of the JSON value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Result<usize, ScanError> {
    match b.get(i) {
        None => Err(err(i, "unexpected end of file: expected a value")),
        Some(b'{' | b'[') => skip_container(b, i),
        Some(b'"') => skip_string(b, i),
        Some(_) => {
            let mut j = i;
            while let Some(c) = b.get(j) {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                    break;
                }
                j += 1;
            }
            if j == i { Err(err(i, "expected a value")) } else { Ok(j) }
        }
    }
}

/// Scans the top-level object of a trace.
pub(crate) fn scan(b: &[u8]) -> Result<TopLevel, ScanError> {
    let mut top = TopLevel::default();
    let mut i = skip_ws(b, 0);
    if b.get(i..i + 3) == Some(&[0xEF, 0xBB, 0xBF]) {
        i = skip_ws(b, i + 3);
    }
    match b.get(i) {
        Some(b'{') => i += 1,
        Some(_) => return Err(err(i, "the top level is not a JSON object (expected '{')")),
        None => return Err(err(i, "no JSON content")),
    }
    loop {
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b'}') => return Ok(top),
            Some(b'"') => {}
            Some(_) => return Err(err(i, "expected a key or '}' in the top-level object")),
            None => {
                return Err(err(i, "unexpected end of file in the top-level object"));
            }
        }
        let key_end = skip_string(b, i)?;
        let key = b.get(i + 1..key_end - 1).unwrap_or_default();
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return Err(err(i, "expected ':' after a key"));
        }
        i = skip_ws(b, i + 1);
        if key == b"traceEvents" {
            top.has_trace_events = true;
            match scan_events(b, i, &mut top)? {
                Some(end) => i = end,
                None => {
                    top.missing_close = true;
                    return Ok(top);
                }
            }
        } else {
            let end = skip_value(b, i)?;
            if let Some(name) = WANTED.iter().find(|w| w.as_bytes() == key) {
                top.values.push((name, (i, end)));
            }
            i = end;
        }
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b'}') => return Ok(top),
            Some(_) => return Err(err(i, "expected ',' or '}' after a top-level value")),
            None => return Err(err(i, "unexpected end of file: the top-level object is not closed")),
        }
    }
}

/// Scans the `traceEvents` array starting at `i`. Returns the offset after its
/// `]`, or `None` when the file ends cleanly after a complete element.
fn scan_events(b: &[u8], mut i: usize, top: &mut TopLevel) -> Result<Option<usize>, ScanError> {
    match b.get(i) {
        Some(b'[') => i += 1,
        Some(_) => return Err(err(i, "`traceEvents` is not an array")),
        None => return Err(err(i, "unexpected end of file: expected the `traceEvents` array")),
    }
    loop {
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b']') => return Ok(Some(i + 1)),
            None => return Ok(None),
            Some(_) => {}
        }
        let start = i;
        let end = match skip_value(b, i) {
            Ok(end) => end,
            Err(e) => {
                return Err(err(e.offset, format!("truncated JSON: event {} starting at byte {start} is incomplete", top.events.len())));
            }
        };
        top.events.push((start, end));
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b']') => return Ok(Some(i + 1)),
            None => return Ok(None),
            Some(_) => return Err(err(i, "expected ',' or ']' between events")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scan;

    #[test]
    fn finds_event_spans_in_any_key_order() {
        let text = br#"{"metadata": {"x": "]}"}, "traceEvents": [{"a": "}{"}, {"b": [1, {"c": 2}]}], "baseTimeNanoseconds": 5}"#;
        let top = scan(text).unwrap();
        assert!(top.has_trace_events && !top.missing_close);
        let events: Vec<&str> = top.events.iter().map(|&(s, e)| std::str::from_utf8(&text[s..e]).unwrap()).collect();
        assert_eq!(events, [r#"{"a": "}{"}"#, r#"{"b": [1, {"c": 2}]}"#]);
        assert_eq!(top.values.len(), 1);
        let (s, e) = top.values[0].1;
        assert_eq!(&text[s..e], b"5");
    }

    #[test]
    fn tells_missing_close_from_truncation() {
        let top = scan(br#"{"traceEvents": [{"a": 1}, {"b": 2},"#).unwrap();
        assert!(top.missing_close);
        assert_eq!(top.events.len(), 2);
        let e = scan(br#"{"traceEvents": [{"a": 1}, {"b": "#).unwrap_err();
        assert!(e.message.contains("truncated"), "{e:?}");
        assert!(scan(b"[1, 2]").is_err());
        assert!(scan(b"").is_err());
    }

    #[test]
    fn escaped_quotes_do_not_end_strings() {
        let text = br#"{"traceEvents": [{"name": "a\"}\\"}]}"#;
        let top = scan(text).unwrap();
        assert_eq!(top.events.len(), 1);
    }
}
