//! fastjson's value conversions for JSON bodies: a body whose values are not of the exact JSON type
//! its fields declare is read the way Java's broker (fastjson 1.2.x) reads it, not refused.
//!
//! [`Lenient`] is a serde `Deserializer` over a parsed [`Value`] that converts, field by field, as
//! fastjson's codecs do:
//! - integers from JSON numbers (a fraction is truncated, as `TypeUtils.castToInt` does), from
//!   strings holding a number (`"1733000000000"`, the C++ client's `subVersion`), from booleans
//!   (1/0); an empty string or `"null"` is Java's `null`, so the field keeps its default (0);
//! - booleans from JSON booleans, numbers (`== 1`), and the strings `TypeUtils.castToBoolean` takes
//!   (`true`/`false` in any case, `1`/`0`, `Y`/`N`/`T`/`F`);
//! - strings from numbers and booleans (their JSON text), as `StringCodec` does;
//! - enums by name, by the name in lower case, or by ordinal (`EnumDeserializer`; the C++ client
//!   writes `consumeType` etc. as ordinals); an ordinal out of range is refused, as fastjson refuses it;
//! - `null` for a collection, map or plain value is the type's default (the Java field's initial
//!   value).
//!
//! Still refused, as fastjson refuses them: a value that converts to none of these (an object for a
//! number, text that is not a number), an enum name that names no constant (fastjson reads it as
//! `null`, which a Rust enum field cannot hold), and a number out of the field's range.
//!
//! Only decoding uses this, and only after the strict reader failed: what we encode is unchanged and
//! a well-typed body takes the strict path.

use serde::Deserializer;
use serde::de;
use serde::de::DeserializeOwned;
use serde::de::DeserializeSeed;
use serde::de::IntoDeserializer;
use serde::de::MapAccess;
use serde::de::SeqAccess;
use serde::de::Visitor;
use serde_json::Value;

type Error = serde_json::Error;

/// Reads `T` from `value` with fastjson's conversions (see the module docs).
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, Error> {
    T::deserialize(Lenient(value))
}

/// A JSON value read with fastjson's conversions.
pub struct Lenient(pub Value);

/// The value's JSON text, cut for an error message.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 64 { text.chars().take(64).chain("…".chars()).collect() } else { text }
}

fn invalid(value: &Value, expected: &str) -> Error {
    de::Error::custom(format!("invalid value {}, expected {expected}", shown(value)))
}

/// An integral reading of `value` as fastjson's integer codecs take it; `None` is Java's `null`.
fn integer(value: &Value) -> Result<Option<i128>, Error> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(i128::from(*b))),
        Value::Number(n) => number_integer(n).map(Some).ok_or_else(|| invalid(value, "an integer")),
        Value::String(s) => {
            let s = s.trim();
            if s.is_empty() || s == "null" || s == "NULL" {
                return Ok(None);
            }
            if let Ok(n) = s.parse::<i128>() {
                return Ok(Some(n));
            }
            match s.parse::<f64>() {
                Ok(f) if f.is_finite() && f.abs() < 1e38 => Ok(Some(f.trunc() as i128)),
                _ => Err(invalid(value, "an integer")),
            }
        }
        Value::Array(_) | Value::Object(_) => Err(invalid(value, "an integer")),
    }
}

fn number_integer(n: &serde_json::Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        Some(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Some(i128::from(u))
    } else {
        n.as_f64().filter(|f| f.is_finite() && f.abs() < 1e38).map(|f| f.trunc() as i128)
    }
}

fn visit_integer<'de, V: Visitor<'de>>(value: &Value, visitor: V) -> Result<V::Value, Error> {
    let n = integer(value)?.unwrap_or(0);
    if let Ok(i) = i64::try_from(n) {
        visitor.visit_i64(i)
    } else if let Ok(u) = u64::try_from(n) {
        visitor.visit_u64(u)
    } else {
        Err(invalid(value, "an integer in range"))
    }
}

impl<'de> Deserializer<'de> for Lenient {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Seq(items.into_iter())),
            Value::Object(map) => visitor.visit_map(Map { entries: map.into_iter(), value: None }),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let b = match &self.0 {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => number_integer(n) == Some(1),
            Value::String(s) => match s.as_str() {
                "" | "null" | "NULL" => false,
                "1" | "T" => true,
                "0" | "N" => false,
                s if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("y") => true,
                s if s.eq_ignore_ascii_case("false") || s.eq_ignore_ascii_case("f") => false,
                _ => return Err(invalid(&self.0, "a boolean")),
            },
            Value::Array(_) | Value::Object(_) => return Err(invalid(&self.0, "a boolean")),
        };
        visitor.visit_bool(b)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_integer(&self.0, visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_integer(&self.0, visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_integer(&self.0, visitor)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_integer(&self.0, visitor)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_integer(&self.0, visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_integer(&self.0, visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_integer(&self.0, visitor)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_integer(&self.0, visitor)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let f = match &self.0 {
            Value::Null => 0.0,
            Value::Bool(b) => f64::from(u8::from(*b)),
            Value::Number(n) => n.as_f64().ok_or_else(|| invalid(&self.0, "a number"))?,
            Value::String(s) => match s.trim() {
                "" | "null" | "NULL" => 0.0,
                s => s.parse::<f64>().map_err(|_| invalid(&self.0, "a number"))?,
            },
            Value::Array(_) | Value::Object(_) => return Err(invalid(&self.0, "a number")),
        };
        visitor.visit_f64(f)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) => visitor.visit_string(s),
            Value::Null => visitor.visit_string(String::new()),
            // StringCodec: a number or boolean as its text, a container as its JSON text.
            other => visitor.visit_string(other.to_string()),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.0.deserialize_bytes(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.0.deserialize_byte_buf(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(Lenient(other)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.0.deserialize_unit(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Seq(items.into_iter())),
            Value::Null => visitor.visit_seq(Seq(Vec::new().into_iter())),
            other => Err(invalid(&other, "an array")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Map { entries: map.into_iter(), value: None }),
            Value::Null => visitor.visit_map(Map { entries: serde_json::Map::new().into_iter(), value: None }),
            other => Err(invalid(&other, "an object")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(_) => self.0.deserialize_struct(name, fields, visitor),
            other => Lenient(other).deserialize_map(visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let variant = match &self.0 {
            // EnumDeserializer: the constant's name, or that name with A-Z lowered.
            Value::String(s) => variants.iter().find(|v| **v == s || v.to_ascii_lowercase() == *s),
            // An ordinal; out of range is fastjson's "parse enum ... error".
            Value::Number(n) => n.as_u64().and_then(|i| usize::try_from(i).ok()).and_then(|i| variants.get(i)),
            // A variant carrying data (not a Java enum): serde_json's own reading.
            Value::Object(_) => return self.0.deserialize_enum(name, variants, visitor),
            Value::Null | Value::Bool(_) | Value::Array(_) => None,
        };
        match variant {
            Some(variant) => visitor.visit_enum((*variant).into_deserializer()),
            None => Err(de::Error::custom(format!(
                "invalid value {} for the enum {name}, expected one of {variants:?} or its ordinal",
                shown(&self.0)
            ))),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

/// An array's elements, each read leniently.
struct Seq(std::vec::IntoIter<Value>);

impl<'de> SeqAccess<'de> for Seq {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        self.0.next().map(|value| seed.deserialize(Lenient(value))).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// An object's entries, keys and values read leniently (an integer map key arrives as its string).
struct Map {
    entries: serde_json::map::IntoIter,
    value: Option<Value>,
}

impl<'de> MapAccess<'de> for Map {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        match self.entries.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(Lenient(Value::String(key))).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(Lenient(self.value.take().unwrap_or(Value::Null)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq, Default)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    enum Model {
        Broadcasting,
        #[default]
        Clustering,
    }

    #[derive(Debug, Deserialize, PartialEq, Default)]
    #[serde(rename_all = "camelCase", default)]
    struct Bean {
        version: i64,
        count: i32,
        flag: bool,
        name: String,
        model: Model,
        ids: Vec<i32>,
        table: BTreeMap<i32, String>,
        maybe: Option<i64>,
    }

    fn bean(value: Value) -> Result<Bean, Error> {
        from_value(value)
    }

    #[test]
    fn numbers_from_strings_booleans_and_fractions() {
        let b = bean(json!({"version":"1733000000000","count":"+7","flag":1,"ids":["1",2,2.9],"maybe":"5"})).unwrap();
        assert_eq!((b.version, b.count, b.flag, b.ids, b.maybe), (1_733_000_000_000, 7, true, vec![1, 2, 2], Some(5)));
        assert_eq!(bean(json!({"count":""})).unwrap().count, 0);
        assert_eq!(bean(json!({"count":true})).unwrap().count, 1);
        assert!(bean(json!({"count":"seven"})).is_err());
        assert!(bean(json!({"count":{}})).is_err());
        assert!(bean(json!({"count":"99999999999"})).is_err(), "out of i32 range");
    }

    #[test]
    fn booleans_as_cast_to_boolean_takes_them() {
        for (raw, want) in
            [(json!("TRUE"), true), (json!("1"), true), (json!("0"), false), (json!(0), false), (json!(2), false)]
        {
            assert_eq!(bean(json!({ "flag": raw })).unwrap().flag, want, "{raw}");
        }
        assert!(bean(json!({"flag":"maybe"})).is_err());
    }

    #[test]
    fn strings_from_numbers_and_enums_by_name_or_ordinal() {
        let b = bean(json!({"name":42,"model":0,"table":{"3":"x"}})).unwrap();
        assert_eq!(
            (b.name.as_str(), b.model, b.table.get(&3).map(String::as_str)),
            ("42", Model::Broadcasting, Some("x"))
        );
        assert_eq!(bean(json!({"model":"broadcasting"})).unwrap().model, Model::Broadcasting);
        assert_eq!(bean(json!({"model":1})).unwrap().model, Model::Clustering);
        assert!(bean(json!({"model":2})).is_err(), "ordinal out of range");
        assert!(bean(json!({"model":"Broadcasting"})).is_err(), "fastjson matches the name or its lower case only");
        assert!(bean(json!({"model":"SIDEWAYS"})).is_err());
    }

    #[test]
    fn nulls_are_defaults() {
        let b = bean(json!({"version":null,"name":null,"ids":null,"table":null,"maybe":null,"flag":null})).unwrap();
        assert_eq!(b, Bean::default());
    }
}
