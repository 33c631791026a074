//! A resumable structural scanner over the top level of a trace. It finds the
//! byte span of every `traceEvents` element and of the few other top-level
//! values we read, without parsing them, block by block as the text is
//! inflated: events are then parsed independently and in parallel, and a
//! file cut off mid-array is told apart from one that only lost its `]}`.

use memchr::memchr2;

/// Why scanning stopped; `offset` is relative to the block scanned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanError {
    pub(crate) offset: usize,
    pub(crate) message: String,
}

fn err(offset: usize, message: impl Into<String>) -> ScanError {
    ScanError { offset, message: message.into() }
}

/// A complete unit found in a block (offsets relative to the block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// One element of `traceEvents`.
    Event(usize, usize),
    /// The value of a top-level key we read.
    Value(&'static str, usize, usize),
}

/// Where in the top-level grammar the scanner stands between blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    TopKey,
    TopNext,
    Events,
    EventsNext,
    Done,
}

/// Scanner state carried from one block to the next. Blocks are cut only at
/// safe points (between top-level values or between events), so an event
/// never spans two blocks.
#[derive(Debug)]
pub(crate) struct Scanner {
    state: State,
    /// A `traceEvents` key was found.
    pub(crate) has_trace_events: bool,
    /// The text ended inside `traceEvents` after a complete element.
    pub(crate) missing_close: bool,
    /// Events found so far.
    pub(crate) events: usize,
    /// Where the text stopped being a trace after complete events, and why
    /// (a NUL tail, a cut inside the trailing metadata): the events before it
    /// are kept and the rest of the file is not read.
    pub(crate) damaged: Option<(usize, String)>,
}

const WANTED: [&str; 4] = ["deviceProperties", "computeProperties", "distributedInfo", "baseTimeNanoseconds"];

pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(c) = b.get(i) {
        if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
            break;
        }
        i += 1;
    }
    i
}

/// `i` points at the opening quote; the offset just past the closing one,
/// `None` when the block ends first.
pub(crate) fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        let at = j + memchr2(b'"', b'\\', b.get(j..)?)?;
        if b.get(at) == Some(&b'\\') {
            j = at + 2;
        } else {
            return Some(at + 1);
        }
    }
}

/// 0x80 in every byte of `x` equal to `b`, 0 elsewhere (exact: no carries between bytes).
#[inline(always)]
fn eq_mask(x: u64, b: u8) -> u64 {
    let v = x ^ (0x0101_0101_0101_0101u64 * u64::from(b));
    let t = ((v & 0x7F7F_7F7F_7F7F_7F7F).wrapping_add(0x7F7F_7F7F_7F7F_7F7F)) | v;
    !t & 0x8080_8080_8080_8080
}

/// One bit per byte of an [`eq_mask`]: byte k → bit k.
#[inline(always)]
fn movemask(m: u64) -> u32 {
    ((m >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

/// `i` points at `{` or `[`; the offset just past its matching close, `None`
/// when the block ends first. Only the bracket kind that opened is counted:
/// in valid JSON the other kind is balanced inside, and invalid nesting is
/// left for the JSON parser to report.
///
/// Eight bytes at a time: the quote bits' running parity gives which bytes
/// lie inside strings, so brackets outside strings are found without looking
/// at bytes one by one. A word holding a backslash (an escape) is walked byte
/// by byte.
pub(crate) fn skip_container(b: &[u8], i: usize) -> Option<usize> {
    let open = *b.get(i)?;
    let close = if open == b'{' { b'}' } else { b']' };
    let mut depth = 0usize;
    let mut in_string = false;
    let mut j = i;
    loop {
        if let Some(word) = b.get(j..j + 8) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            let x = u64::from_le_bytes(bytes);
            if eq_mask(x, b'\\') == 0 {
                let mut parity = movemask(eq_mask(x, b'"'));
                parity ^= parity << 1;
                parity ^= parity << 2;
                parity ^= parity << 4;
                let inside = if in_string { !parity } else { parity } & 0xFF;
                let opens = movemask(eq_mask(x, open)) & !inside;
                let closes = movemask(eq_mask(x, close)) & !inside;
                let mut brackets = opens | closes;
                while brackets != 0 {
                    let k = brackets.trailing_zeros();
                    if opens >> k & 1 == 1 {
                        depth += 1;
                    } else {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return Some(j + k as usize + 1);
                        }
                    }
                    brackets &= brackets - 1;
                }
                in_string = inside >> 7 & 1 == 1;
                j += 8;
                continue;
            }
        }
        // An escape in this word, or the last bytes of the block.
        let c = *b.get(j)?;
        if in_string {
            match c {
                b'\\' => j += 2,
                b'"' => {
                    in_string = false;
                    j += 1;
                }
                _ => j += 1,
            }
        } else {
            if c == b'"' {
                in_string = true;
            } else if c == open {
                depth += 1;
            } else if c == close {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            j += 1;
        }
    }
}

/// The end of the value starting at `i`; `None` when the block ends first.
/// A scalar that reaches the end of the block is complete only at end of file.
pub(crate) fn skip_value(b: &[u8], i: usize, eof: bool) -> Option<usize> {
    match b.get(i)? {
        b'{' | b'[' => skip_container(b, i),
        b'"' => skip_string(b, i),
        _ => {
            let mut j = i;
            while let Some(c) = b.get(j) {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                    return Some(j.max(i + 1));
                }
                j += 1;
            }
            eof.then_some(j)
        }
    }
}

impl Scanner {
    pub(crate) fn new() -> Scanner {
        Scanner { state: State::Start, has_trace_events: false, missing_close: false, events: 0, damaged: None }
    }

    /// Scans `b` (the carried-over tail of the previous block followed by new
    /// text), appending complete units to `items`. Returns the offset of the
    /// last safe point: the bytes after it must be scanned again with more
    /// text. With `eof`, anything incomplete is an error.
    pub(crate) fn scan(&mut self, b: &[u8], eof: bool, items: &mut Vec<Item>) -> Result<usize, ScanError> {
        let mut i = 0;
        let mut safe = 0;
        let mut state = self.state;
        // On running out of text: wait for more, or report what is missing.
        macro_rules! more {
            ($msg:expr) => {{
                if eof {
                    return Err(err(b.len(), $msg));
                }
                return Ok(safe);
            }};
        }
        // Outside `traceEvents`, after its events: a cut there (in the trailing
        // metadata) keeps the events and reports the damage.
        macro_rules! more_after_events {
            ($msg:expr) => {{
                if eof && self.events > 0 {
                    self.damaged = Some((safe, String::from($msg)));
                    self.state = State::Done;
                    return Ok(b.len());
                }
                more!($msg)
            }};
        }
        loop {
            i = skip_ws(b, i);
            match state {
                State::Start => {
                    if b.get(i..i + 3) == Some(&[0xEF, 0xBB, 0xBF]) {
                        i += 3;
                        continue;
                    }
                    match b.get(i) {
                        None => more!("no JSON content"),
                        Some(b'{') => state = State::TopKey,
                        Some(_) => return Err(err(i, "the top level is not a JSON object (expected '{')")),
                    }
                    i += 1;
                }
                State::TopKey => match b.get(i) {
                    None => more_after_events!("unexpected end of file in the top-level object"),
                    Some(b'}') => {
                        state = State::Done;
                        i += 1;
                    }
                    Some(b'"') => {
                        let Some(key_end) = skip_string(b, i) else { more_after_events!("unexpected end of file inside a top-level key") };
                        let key = b.get(i + 1..key_end - 1).unwrap_or_default();
                        let mut j = skip_ws(b, key_end);
                        match b.get(j) {
                            None => more_after_events!("unexpected end of file after a top-level key"),
                            Some(b':') => j = skip_ws(b, j + 1),
                            Some(_) => return Err(err(j, "expected ':' after a key")),
                        }
                        if key == b"traceEvents" {
                            match b.get(j) {
                                None => more_after_events!("unexpected end of file: expected the `traceEvents` array"),
                                // Two arrays (a trace appended to another) would count every event twice.
                                Some(b'[') if self.has_trace_events => {
                                    return Err(err(i, "a second `traceEvents` array in one trace (two traces joined?)"));
                                }
                                Some(b'[') => {
                                    self.has_trace_events = true;
                                    state = State::Events;
                                    i = j + 1;
                                }
                                Some(_) => return Err(err(j, "`traceEvents` is not an array")),
                            }
                        } else {
                            if b.get(j).is_none() {
                                more_after_events!("unexpected end of file: expected a value");
                            }
                            let Some(end) = skip_value(b, j, eof) else {
                                more_after_events!("unexpected end of file inside a top-level value")
                            };
                            if let Some(name) = WANTED.iter().find(|w| w.as_bytes() == key) {
                                items.push(Item::Value(name, j, end));
                            }
                            state = State::TopNext;
                            i = end;
                        }
                    }
                    Some(_) => return Err(err(i, "expected a key or '}' in the top-level object")),
                },
                State::TopNext => {
                    match b.get(i) {
                        None => more_after_events!("unexpected end of file: the top-level object is not closed"),
                        Some(b',') => state = State::TopKey,
                        Some(b'}') => state = State::Done,
                        Some(_) => return Err(err(i, "expected ',' or '}' after a top-level value")),
                    }
                    i += 1;
                }
                State::Events | State::EventsNext => match b.get(i) {
                    None => {
                        if eof {
                            self.missing_close = true;
                            self.state = state;
                            return Ok(b.len());
                        }
                        return Ok(safe);
                    }
                    Some(b']') => {
                        state = State::TopNext;
                        i += 1;
                    }
                    Some(b',') if state == State::EventsNext => {
                        state = State::Events;
                        i += 1;
                    }
                    // Not JSON any more after complete events: a NUL-filled tail (a writer killed with
                    // the file preallocated) keeps them. Other bytes where an event should be are an
                    // error: a damaged event mid-file had dropped the 99.6 % after it, exit 0.
                    Some(c) if self.events > 0 && *c == 0 => {
                        self.damaged = Some((i, format!("byte {c:#04x} where an event should be")));
                        self.state = State::Done;
                        return Ok(b.len());
                    }
                    Some(_) if state == State::EventsNext => return Err(err(i, "expected ',' or ']' between events")),
                    // Events are objects: fail fast on anything else instead of scanning on.
                    Some(c) if *c != b'{' => return Err(err(i, format!("expected an event object ('{{'), found byte {c:#04x}"))),
                    Some(_) => {
                        let Some(end) = skip_value(b, i, eof) else {
                            // `i` is an offset into this block, not the file: say where the event starts from the end.
                            more!(format!(
                                "truncated JSON: event {} is incomplete (it starts {} bytes before the end)",
                                self.events,
                                b.len() - i
                            ))
                        };
                        items.push(Item::Event(i, end));
                        self.events += 1;
                        state = State::EventsNext;
                        i = end;
                    }
                },
                State::Done => match b.get(i) {
                    None => {
                        self.state = state;
                        return Ok(b.len());
                    }
                    Some(_) => return Err(err(i, "unexpected data after the top-level object")),
                },
            }
            safe = i;
            self.state = state;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Item, Scanner};

    fn scan_all(text: &[u8], block: usize) -> Result<(Vec<String>, Scanner), String> {
        // Feed the text in blocks of `block` bytes, carrying the unsafe tail like the reader does.
        let mut s = Scanner::new();
        let mut out = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut pos = 0;
        loop {
            let end = (pos + block).min(text.len());
            buf.extend_from_slice(&text[pos..end]);
            pos = end;
            let eof = pos == text.len();
            let mut items = Vec::new();
            let safe = s.scan(&buf, eof, &mut items).map_err(|e| e.message)?;
            for it in items {
                let (a, b) = match it {
                    Item::Event(a, b) | Item::Value(_, a, b) => (a, b),
                };
                out.push(String::from_utf8(buf[a..b].to_vec()).unwrap());
            }
            buf.drain(..safe);
            if eof {
                return Ok((out, s));
            }
        }
    }

    #[test]
    fn finds_event_spans_in_any_key_order_and_block_size() {
        let text = br#"{"metadata": {"x": "]}"}, "traceEvents": [{"a": "}{"}, {"b": [1, {"c": 2}]}], "baseTimeNanoseconds": 5}"#;
        for block in [1, 2, 3, 7, 1000] {
            let (items, s) = scan_all(text, block).unwrap();
            assert!(s.has_trace_events && !s.missing_close);
            assert_eq!(items, [r#"{"a": "}{"}"#, r#"{"b": [1, {"c": 2}]}"#, "5"], "block {block}");
        }
    }

    #[test]
    fn tells_missing_close_from_truncation() {
        let (items, s) = scan_all(br#"{"traceEvents": [{"a": 1}, {"b": 2},"#, 4).unwrap();
        assert!(s.missing_close);
        assert_eq!(items.len(), 2);
        let e = scan_all(br#"{"traceEvents": [{"a": 1}, {"b": "#, 4).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        assert!(scan_all(b"[1, 2]", 100).is_err());
        assert!(scan_all(br#"{"traceEvents": []} x"#, 100).is_err());
        // A second array (two traces joined) had counted every event twice.
        let e = scan_all(br#"{"traceEvents": [{"a": 1}], "traceEvents": [{"a": 1}]}"#, 100).unwrap_err();
        assert!(format!("{e:?}").contains("a second `traceEvents` array"), "{e:?}");
    }

    #[test]
    fn word_scanner_matches_a_byte_scanner() {
        // Random JSON-ish objects with strings, escapes and nesting, against a plain byte loop.
        fn reference(b: &[u8]) -> Option<usize> {
            let (mut depth, mut in_string, mut j) = (0usize, false, 0usize);
            while let Some(&c) = b.get(j) {
                if in_string {
                    match c {
                        b'\\' => j += 1,
                        b'"' => in_string = false,
                        _ => {}
                    }
                } else if c == b'"' {
                    in_string = true;
                } else if c == b'{' {
                    depth += 1;
                } else if c == b'}' {
                    depth -= 1;
                    if depth == 0 {
                        return Some(j + 1);
                    }
                }
                j += 1;
            }
            None
        }
        let alphabet = [&b"{"[..], b"}", b"\"", b"\\\"", b"a", b"[", b"]", b", ", b"\\"];
        let mut x: u64 = 7;
        for _ in 0..20000 {
            let mut text = b"{".to_vec();
            let n = (x % 40) as usize;
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                text.extend_from_slice(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            text.extend_from_slice(b"}}}}}}}}}}");
            assert_eq!(super::skip_container(&text, 0), reference(&text), "{}", String::from_utf8_lossy(&text));
        }
    }

    #[test]
    fn escaped_quotes_do_not_end_strings() {
        let (items, _) = scan_all(br#"{"traceEvents": [{"name": "a\"}\\"}]}"#, 3).unwrap();
        assert_eq!(items.len(), 1);
    }
}
