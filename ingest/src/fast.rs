//! A fast path for reading one event: picks the fields we use straight out of
//! the event's bytes and skips the rest structurally, without building serde
//! state for every key. Anything unusual — an escape in a string we keep, a
//! value of an unexpected type, a malformed token in a field we keep — returns
//! `None`, and the event goes through serde, which reads it or reports the
//! error with its offset. Values we skip are checked for structure (balanced
//! brackets, closed strings), not token by token.

use std::borrow::Cow;

use crate::lenient::{Id, Num, OptText};
use crate::scan::{skip_container, skip_string, skip_ws};

/// The fields of an event we use, from either reader.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Fields<'a> {
    pub(crate) ph: Option<Cow<'a, str>>,
    pub(crate) cat: Option<Cow<'a, str>>,
    pub(crate) name: Option<Cow<'a, str>>,
    pub(crate) ts: Option<&'a str>,
    pub(crate) dur: Option<&'a str>,
    pub(crate) pid: Option<Id<'a>>,
    pub(crate) tid: Option<Id<'a>>,
    pub(crate) id: Option<Id<'a>>,
    pub(crate) args: ArgFields<'a>,
}

/// The `args` we use.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ArgFields<'a> {
    pub(crate) correlation: Num,
    pub(crate) external_id: Num,
    pub(crate) collective_name: OptText<'a>,
    pub(crate) in_nelems: Num,
    pub(crate) out_nelems: Num,
    pub(crate) dtype: OptText<'a>,
    pub(crate) group_size: Num,
    pub(crate) pg_name: OptText<'a>,
    pub(crate) pg_desc: OptText<'a>,
    pub(crate) pg_ranks: OptText<'a>,
    pub(crate) input_dims: Option<&'a str>,
    pub(crate) input_type: Option<&'a str>,
    pub(crate) concrete_inputs: Option<&'a str>,
    pub(crate) bytes: Num,
    pub(crate) wait_on_stream: Num,
    pub(crate) wait_on_record: Num,
}

/// A string without escapes at `i` (the opening quote): its text and the end.
fn plain_string(b: &[u8], i: usize) -> Option<(&str, usize)> {
    let end = skip_string(b, i)?;
    let inner = b.get(i + 1..end - 1)?;
    if memchr::memchr(b'\\', inner).is_some() {
        return None;
    }
    Some((std::str::from_utf8(inner).ok()?, end))
}

/// A number token at `i`: its text and the end.
fn number(b: &[u8], i: usize) -> Option<(&str, usize)> {
    let mut j = i;
    while let Some(c) = b.get(j) {
        if !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
            break;
        }
        j += 1;
    }
    if j == i || !matches!(b.get(i), Some(b'0'..=b'9' | b'-')) {
        return None;
    }
    Some((std::str::from_utf8(b.get(i..j)?).ok()?, j))
}

/// Any value at `i`: its end. Literals must be `true`, `false` or `null`.
fn skip_any(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'{' | b'[' => skip_container(b, i),
        b'"' => skip_string(b, i),
        b't' => b.get(i..i + 4).filter(|w| *w == b"true").map(|_| i + 4),
        b'f' => b.get(i..i + 5).filter(|w| *w == b"false").map(|_| i + 5),
        b'n' => b.get(i..i + 4).filter(|w| *w == b"null").map(|_| i + 4),
        _ => number(b, i).map(|(_, e)| e),
    }
}

fn text_value(b: &[u8], i: usize) -> Option<(Option<Cow<'_, str>>, usize)> {
    match b.get(i)? {
        b'"' => plain_string(b, i).map(|(s, e)| (Some(Cow::Borrowed(s)), e)),
        b'n' => skip_any(b, i).map(|e| (None, e)),
        _ => None,
    }
}

fn id_value(b: &[u8], i: usize) -> Option<(Option<Id<'_>>, usize)> {
    match b.get(i)? {
        b'"' => plain_string(b, i).map(|(s, e)| (Some(Id::Text(Cow::Borrowed(s))), e)),
        b'n' => skip_any(b, i).map(|e| (None, e)),
        _ => {
            let (t, e) = number(b, i)?;
            Some((Some(Id::Int(t.parse().ok()?)), e))
        }
    }
}

/// A lenient number (strings holding numbers count; other types are absent).
fn num_value(b: &[u8], i: usize) -> Option<(Num, usize)> {
    match b.get(i)? {
        b'"' => plain_string(b, i).map(|(s, e)| (Num::from_text(s), e)),
        b'-' | b'0'..=b'9' => {
            let (t, e) = number(b, i)?;
            Some((Num::from_text(t), e))
        }
        _ => skip_any(b, i).map(|e| (Num::Absent, e)),
    }
}

/// Lenient text (other types are absent).
fn opt_text_value(b: &[u8], i: usize) -> Option<(OptText<'_>, usize)> {
    match b.get(i)? {
        b'"' => plain_string(b, i).map(|(s, e)| (OptText(Some(Cow::Borrowed(s))), e)),
        _ => skip_any(b, i).map(|e| (OptText(None), e)),
    }
}

/// Walks the members of the object at `i`, calling `member(key, value_start)`
/// which returns the value's end. Returns the object's end.
fn members<'a>(b: &'a [u8], i: usize, mut member: impl FnMut(&'a [u8], usize) -> Option<usize>) -> Option<usize> {
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut j = skip_ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return Some(j + 1);
    }
    loop {
        if b.get(j) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(b, j)?;
        let key = b.get(j + 1..key_end - 1)?;
        j = skip_ws(b, key_end);
        if b.get(j) != Some(&b':') {
            return None;
        }
        j = skip_ws(b, j + 1);
        j = skip_ws(b, member(key, j)?);
        match b.get(j)? {
            b',' => j = skip_ws(b, j + 1),
            b'}' => return Some(j + 1),
            _ => return None,
        }
    }
}

/// Stores a parsed value in `slot` and returns where the value ends.
fn store<T>(slot: &mut T, parsed: Option<(T, usize)>) -> Option<usize> {
    let (value, end) = parsed?;
    *slot = value;
    Some(end)
}

/// A `ts`/`dur` number token (or `null`).
fn time_value(b: &[u8], i: usize) -> Option<(Option<&str>, usize)> {
    match b.get(i)? {
        b'n' => skip_any(b, i).map(|e| (None, e)),
        _ => number(b, i).map(|(t, e)| (Some(t), e)),
    }
}

/// Raw JSON text of any value (`Input Dims` and the like, parsed later).
fn raw_value(b: &[u8], i: usize) -> Option<(Option<&str>, usize)> {
    let e = skip_any(b, i)?;
    Some((Some(std::str::from_utf8(b.get(i..e)?).ok()?), e))
}

/// The fields of the event object `b`, or `None` to leave it to serde.
pub(crate) fn event(b: &[u8]) -> Option<Fields<'_>> {
    let mut f = Fields::default();
    let end = members(b, 0, |key, i| match key {
        b"ph" => store(&mut f.ph, text_value(b, i)),
        b"cat" => store(&mut f.cat, text_value(b, i)),
        b"name" => store(&mut f.name, text_value(b, i)),
        b"ts" => store(&mut f.ts, time_value(b, i)),
        b"dur" => store(&mut f.dur, time_value(b, i)),
        b"pid" => store(&mut f.pid, id_value(b, i)),
        b"tid" => store(&mut f.tid, id_value(b, i)),
        b"id" => store(&mut f.id, id_value(b, i)),
        b"args" => match b.get(i)? {
            b'{' => args(b, i, &mut f.args),
            b'n' => skip_any(b, i),
            _ => None,
        },
        _ => skip_any(b, i),
    })?;
    // Nothing but whitespace may follow the object.
    (skip_ws(b, end) == b.len()).then_some(f)
}

fn args<'a>(b: &'a [u8], i: usize, a: &mut ArgFields<'a>) -> Option<usize> {
    members(b, i, |key, j| match key {
        b"correlation" => store(&mut a.correlation, num_value(b, j)),
        b"External id" | b"external id" => store(&mut a.external_id, num_value(b, j)),
        b"Collective name" => store(&mut a.collective_name, opt_text_value(b, j)),
        b"In msg nelems" => store(&mut a.in_nelems, num_value(b, j)),
        b"Out msg nelems" => store(&mut a.out_nelems, num_value(b, j)),
        b"dtype" => store(&mut a.dtype, opt_text_value(b, j)),
        b"Group size" => store(&mut a.group_size, num_value(b, j)),
        b"Process Group Name" => store(&mut a.pg_name, opt_text_value(b, j)),
        b"Process Group Description" => store(&mut a.pg_desc, opt_text_value(b, j)),
        b"Process Group Ranks" => store(&mut a.pg_ranks, opt_text_value(b, j)),
        b"Input Dims" => store(&mut a.input_dims, raw_value(b, j)),
        b"Input type" => store(&mut a.input_type, raw_value(b, j)),
        b"Concrete Inputs" => store(&mut a.concrete_inputs, raw_value(b, j)),
        b"bytes" => store(&mut a.bytes, num_value(b, j)),
        b"wait_on_stream" => store(&mut a.wait_on_stream, num_value(b, j)),
        b"wait_on_cuda_event_record_corr_id" => store(&mut a.wait_on_record, num_value(b, j)),
        _ => skip_any(b, j),
    })
}

#[cfg(test)]
mod tests {
    use super::event;
    use crate::kineto::serde_fields;

    /// Every event the fast path reads in these real traces reads the same through serde.
    #[test]
    fn fast_path_agrees_with_serde_on_real_traces() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces");
        for rel in [
            "hta/nccl_parser_config/nccl_data.json.gz",
            "tracelens/b200/eager_trace.json.gz",
            "kineto/tb_plugin_test/gpu_metrics_input.json.gz",
            "hta/trace_filter/sampled_rank-0.json.gz",
            "tracelens/mi300_micro/sdpa_01_long_seq_low_eff.json.gz",
            "hta/large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
        ] {
            let text = crate::kineto::read_text(&root.join(rel)).unwrap();
            let mut scanner = crate::scan::Scanner::new();
            let mut items = Vec::new();
            scanner.scan(&text, true, &mut items).unwrap();
            let (mut fast, mut total) = (0, 0);
            for item in items {
                let crate::scan::Item::Event(s, e) = item else { continue };
                let slice = &text[s..e];
                total += 1;
                if let Some(f) = event(slice) {
                    fast += 1;
                    assert_eq!(f, serde_fields(slice).unwrap(), "{rel}: {}", String::from_utf8_lossy(slice));
                }
            }
            assert!(fast * 10 >= total * 9, "{rel}: fast path read only {fast} of {total}");
        }
    }

    #[test]
    fn unusual_events_are_left_to_serde() {
        assert!(event(br#"{"ph": "X", "name": "a\"b", "ts": 1}"#).is_none());
        assert!(event(br#"{"ph": "X", "ts": "soon"}"#).is_none());
        assert!(event(br#"{"ph": "X", "name": 17}"#).is_none());
        assert!(event(br#"{"ph": "X", "x": tru}"#).is_none());
        assert!(event(br#"{"ph": "X" "ts": 1}"#).is_none());
        let f = event(br#"{"ph": "X", "ts": 1.5, "args": {"bytes": "4096", "grid": [1, 1, 1]}}"#).unwrap();
        assert_eq!(f.ts, Some("1.5"));
        assert_eq!(f.args.bytes.as_i64(), Some(4096));
    }
}
