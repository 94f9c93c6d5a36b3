//! Typed request and response headers, carried flattened in a command's `extFields`.
//!
//! RocketMQ's `CommandCustomHeader` classes become Rust structs implementing [`CommandHeader`].
//! Wire rules (docs/wire-format.md#extfields): every value is a string (numbers in decimal,
//! booleans `"true"`/`"false"`); a required (`@CFNotNull`) field that is missing or unparsable is a
//! [`HeaderError`]; unknown keys are ignored, because newer clients add fields.
//!
//! Reading follows Java's `RemotingCommand.decodeCommandCustomHeader`: numbers as `Integer.parseInt`
//! / `Long.parseLong` read them (a leading `+` or `-`, decimal digits; surrounding whitespace is
//! tolerated here), booleans as `Boolean.parseBoolean` (true only for "true" in any case, so the C++
//! client's `1` reads as false exactly as on a Java broker). Writing is unchanged: `true`/`false`.

pub mod acl;
pub mod admin;
pub mod client;
pub(crate) mod ext_header;
pub mod namesrv;
pub mod offset;
pub mod pop;
pub mod pull;
pub mod query;
pub mod reply;
pub mod send;
pub mod transaction;

use thiserror::Error;

use super::ext_fields::ExtFields;
use super::ext_fields::FieldStr;

/// A header that travels as `extFields`.
pub trait CommandHeader: Sized {
    /// Writes every present field into `fields` (absent optional fields are left out).
    fn write_ext_fields(&self, fields: &mut ExtFields);

    /// Reads the header; missing required fields and unparsable values are errors.
    fn read_ext_fields(fields: &ExtFields) -> Result<Self, HeaderError>;

    /// The header as a fresh `extFields` map.
    fn to_ext_fields(&self) -> ExtFields {
        let mut fields = ExtFields::default();
        self.write_ext_fields(&mut fields);
        fields
    }
}

/// Why a header could not be read from `extFields`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// A required field is absent.
    #[error("the field {field} is missing")]
    Missing {
        /// The `extFields` key.
        field: &'static str,
    },
    /// A field is present but does not parse as its type.
    #[error("the field {field} has the invalid value {value:?}: expected {expected}")]
    Invalid {
        /// The `extFields` key.
        field: &'static str,
        /// What the peer sent (cut to 64 characters).
        value: String,
        /// The expected type, e.g. `i32`.
        expected: &'static str,
    },
}

/// A type that can be an `extFields` value.
pub trait FieldValue: Sized {
    /// The type's name, for error messages.
    const EXPECTED: &'static str;
    /// Parses the wire string.
    fn parse_field(raw: &str) -> Option<Self>;
    /// Formats for the wire.
    fn format_field(&self) -> FieldStr;
}

macro_rules! int_field_value {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            const EXPECTED: &'static str = stringify!($t);
            fn parse_field(raw: &str) -> Option<Self> {
                raw.trim().parse().ok()
            }
            fn format_field(&self) -> FieldStr {
                compact_str::ToCompactString::to_compact_string(self)
            }
        }
    )*};
}
int_field_value!(i8, i16, i32, i64, u8, u16, u32, u64);

impl FieldValue for bool {
    const EXPECTED: &'static str = "bool";
    fn parse_field(raw: &str) -> Option<Self> {
        // Java's `Boolean.parseBoolean`, which `RemotingCommand.decodeCommandCustomHeader` applies to
        // every boolean field: "true" in any case is true, anything else (the C++ client's `0`/`1`,
        // an empty value) is false. Never refused, as Java never refuses one.
        Some(raw.eq_ignore_ascii_case("true"))
    }
    fn format_field(&self) -> FieldStr {
        FieldStr::const_new(if *self { "true" } else { "false" })
    }
}

impl FieldValue for String {
    const EXPECTED: &'static str = "string";
    fn parse_field(raw: &str) -> Option<Self> {
        Some(raw.to_owned())
    }
    fn format_field(&self) -> FieldStr {
        FieldStr::from(self.as_str())
    }
}

/// Names and other short values: held inline up to 24 bytes, so reading one allocates nothing.
impl FieldValue for FieldStr {
    const EXPECTED: &'static str = "string";
    fn parse_field(raw: &str) -> Option<Self> {
        Some(FieldStr::from(raw))
    }
    fn format_field(&self) -> FieldStr {
        self.clone()
    }
}

/// Reads a required field.
pub fn required<T: FieldValue>(fields: &ExtFields, field: &'static str) -> Result<T, HeaderError> {
    match fields.get(field) {
        None => Err(HeaderError::Missing { field }),
        Some(raw) => parse(raw, field),
    }
}

/// Reads an optional field; an empty-but-present numeric value counts as absent, as in Java (its
/// `parseInt` fails and the field stays null). An empty boolean is `false`, as `parseBoolean` says.
pub fn optional<T: FieldValue>(fields: &ExtFields, field: &'static str) -> Result<Option<T>, HeaderError> {
    match fields.get(field) {
        None => Ok(None),
        Some(raw) if raw.is_empty() && T::EXPECTED != "string" && T::EXPECTED != "bool" => Ok(None),
        Some(raw) => parse(raw, field).map(Some),
    }
}

fn parse<T: FieldValue>(raw: &str, field: &'static str) -> Result<T, HeaderError> {
    T::parse_field(raw).ok_or_else(|| HeaderError::Invalid {
        field,
        value: raw.chars().take(64).collect(),
        expected: T::EXPECTED,
    })
}

/// Writes a field.
pub fn put<T: FieldValue>(fields: &mut ExtFields, field: &'static str, value: &T) {
    fields.insert(FieldStr::const_new(field), value.format_field());
}

/// Writes a field when present.
pub fn put_opt<T: FieldValue>(fields: &mut ExtFields, field: &'static str, value: &Option<T>) {
    if let Some(v) = value {
        put(fields, field, v);
    }
}
