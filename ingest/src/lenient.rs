//! Borrowed, lenient leaf types for serde: text that borrows from the input
//! when it can, ids that may be numbers or strings, and numbers that may be
//! written as strings. Argument values of unexpected types read as absent.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A JSON string, borrowed from the input unless it has escapes.
/// (A plain `Cow<str>` field always copies.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Text<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// Optional text that reads any non-string value as absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OptText<'a>(pub(crate) Option<Cow<'a, str>>);

impl OptText<'_> {
    pub(crate) fn into_string(self) -> Option<String> {
        self.0.map(Cow::into_owned)
    }
    pub(crate) fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for OptText<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = OptText<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(OptText(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(OptText(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(OptText(Some(Cow::Owned(v))))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(OptText(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(OptText(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(OptText(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(OptText(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OptText(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(OptText(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(OptText(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A number that may be written as a string (`"bytes": "4096"` on ROCm);
/// anything else reads as absent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) enum Num {
    #[default]
    Absent,
    Int(i64),
    Float(f64),
}

impl Num {
    pub(crate) fn as_i64(self) -> Option<i64> {
        match self {
            Num::Absent => None,
            Num::Int(v) => Some(v),
            Num::Float(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e18 => Some(v as i64),
            Num::Float(_) => None,
        }
    }
}

impl Num {
    pub(crate) fn from_text(v: &str) -> Num {
        num_from_text(v)
    }
}

fn num_from_text(v: &str) -> Num {
    let t = v.trim();
    if let Ok(i) = t.parse::<i64>() {
        Num::Int(i)
    } else if let Ok(f) = t.parse::<f64>() {
        Num::Float(f)
    } else {
        Num::Absent
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                // Values above i64::MAX ("Comms Id") are identifiers, not quantities.
                Ok(i64::try_from(v).map_or(Num::Absent, Num::Int))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                Ok(num_from_text(v))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Num, E> {
                Ok(Num::Absent)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Num, E> {
                Ok(Num::Absent)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Num, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Num::Absent)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Num, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Num::Absent)
            }
        }
        d.deserialize_any(V)
    }
}

/// A `pid` or `tid`: usually an integer, sometimes text (`"Spans"`, `"stream 7"`, `"25738"`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Id<'a> {
    Int(i64),
    Text(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Id<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Id<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a string id")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Id::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Id::Int(v as i64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                if v.is_finite() && v.fract() == 0.0 {
                    Ok(Id::Int(v as i64))
                } else {
                    Err(E::invalid_type(de::Unexpected::Float(v), &self))
                }
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Id::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Id::Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}
