//! The [`ext_header!`] macro: declares a RocketMQ `CommandCustomHeader` as a Rust struct and derives
//! its [`CommandHeader`](super::CommandHeader) impl from one line per field.
//!
//! ```text
//! ext_header! {
//!     /// PULL_MESSAGE (11) request.
//!     pub struct PullMessageRequestHeader {
//!         /// The consumer group.
//!         required consumer_group: String => "consumerGroup",
//!         /// Subscription expression when sysFlag has the subscription bit.
//!         optional subscription: Option<String> => "subscription",
//!     }
//! }
//! ```
//!
//! Invariants of every generated header:
//! - `required` is Java's `@CFNotNull`: an absent key is `HeaderError::Missing { field: key }`.
//!   Everything else is `optional` and an `Option`, so a header read from `extFields` and written back
//!   yields the same keys: absent stays absent, present stays present.
//! - Unknown keys are ignored (newer clients add fields).
//! - `FIELDS` lists `(key, required)` in declaration order, for callers and tests that need the key set.
//!
//! In tests the macro also implements [`testing::TestHeader`], which drives the shared property checks.

/// Declares a header struct and its `CommandHeader` impl; see the module documentation.
macro_rules! ext_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $kind:ident $field:ident : $ty:ty => $key:literal
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl $name {
            /// Every `extFields` key with whether it is required (`@CFNotNull`), in declaration order.
            pub const FIELDS: &'static [(&'static str, bool)] = &[$(($key, $crate::protocol::header::ext_header::ext_header!(@required $kind))),*];
        }

        impl $crate::protocol::header::CommandHeader for $name {
            fn write_ext_fields(&self, fields: &mut $crate::protocol::ext_fields::ExtFields) {
                // One allocation for the map instead of a regrowth every few fields.
                fields.reserve($name::FIELDS.len());
                $( $crate::protocol::header::ext_header::ext_header!(@write $kind fields, $key, &self.$field); )*
            }

            fn read_ext_fields(
                fields: &$crate::protocol::ext_fields::ExtFields,
            ) -> ::std::result::Result<Self, $crate::protocol::header::HeaderError> {
                ::std::result::Result::Ok(Self {
                    $( $field: $crate::protocol::header::ext_header::ext_header!(@read $kind fields, $key)?, )*
                })
            }
        }

        #[cfg(test)]
        impl $crate::protocol::header::ext_header::testing::TestHeader for $name {
            const FIELDS: &'static [(&'static str, bool)] = $name::FIELDS;

            fn arbitrary() -> ::proptest::strategy::BoxedStrategy<Self> {
                use ::proptest::strategy::Strategy as _;
                let strategy = ::proptest::strategy::Just(Self::default()).boxed();
                $(
                    let strategy = (strategy, <$ty as $crate::protocol::header::ext_header::testing::ArbitraryField>::arbitrary_field())
                        .prop_map(|(mut header, value)| {
                            header.$field = value;
                            header
                        })
                        .boxed();
                )*
                strategy
            }

            fn spelled(&self, choices: &[usize]) -> ($crate::protocol::ext_fields::ExtFields, Self) {
                use $crate::protocol::header::ext_header::testing::Spell as _;
                let mut fields = $crate::protocol::ext_fields::ExtFields::default();
                let mut expected = self.clone();
                let mut choice = choices.iter().copied().chain(::std::iter::repeat(0));
                $( expected.$field = self.$field.spell(choice.next().unwrap_or(0), $key, &mut fields); )*
                (fields, expected)
            }
        }
    };
    (@required required) => { true };
    (@required optional) => { false };
    (@write required $fields:ident, $key:literal, $value:expr) => {
        $crate::protocol::header::put($fields, $key, $value)
    };
    (@write optional $fields:ident, $key:literal, $value:expr) => {
        $crate::protocol::header::put_opt($fields, $key, $value)
    };
    (@read required $fields:ident, $key:literal) => {
        $crate::protocol::header::required($fields, $key)
    };
    (@read optional $fields:ident, $key:literal) => {
        $crate::protocol::header::optional($fields, $key)
    };
}

pub(crate) use ext_header;

/// Property checks shared by every header's tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::fmt::Debug;

    use proptest::collection::btree_map;
    use proptest::prelude::*;
    use proptest::test_runner::Config;
    use proptest::test_runner::RngAlgorithm;
    use proptest::test_runner::TestRng;
    use proptest::test_runner::TestRunner;

    use crate::protocol::RemotingCommand;
    use crate::protocol::RequestCode;
    use crate::protocol::SerializeType;
    use crate::protocol::ext_fields::ExtFields;
    use crate::protocol::ext_fields::FieldStr;
    use crate::protocol::header::CommandHeader;
    use crate::protocol::header::HeaderError;

    /// Fixed so failures reproduce; printed by every runner.
    pub(crate) const SEED: [u8; 32] = *b"raftmq-protocol-header-seed-0001";

    /// Cases per property per header; the header count times this keeps the suite well under a second.
    const CASES_PER_PROPERTY: u32 = 256;

    /// Implemented by [`ext_header!`](super::ext_header) in tests.
    pub(crate) trait TestHeader: CommandHeader + Debug + Clone + PartialEq {
        /// `(key, required)` pairs.
        const FIELDS: &'static [(&'static str, bool)];
        /// Any value of the header.
        fn arbitrary() -> BoxedStrategy<Self>;
        /// The header's fields written the way `choices` picks among Java's and the C++ client's
        /// spellings (one choice per field), with the header Java's broker reads from them.
        fn spelled(&self, choices: &[usize]) -> (ExtFields, Self);
    }

    /// The ways Java (`String.valueOf`) and the C++ client 1.2.x (`ostringstream <<`, so booleans as
    /// `0`/`1`) write one field value, each paired with what Java's `decodeCommandCustomHeader` reads.
    pub(crate) trait Spell: Sized {
        /// Writes spelling number `choice` (modulo the count) under `key`; returns the value Java reads.
        fn spell(&self, choice: usize, key: &'static str, fields: &mut ExtFields) -> Self;
    }

    /// Any value of one field's type (proptest's `Arbitrary`, which `FieldStr` does not implement).
    pub(crate) trait ArbitraryField: Sized + std::fmt::Debug {
        fn arbitrary_field() -> BoxedStrategy<Self>;
    }

    macro_rules! arbitrary_field_by_any {
        ($($t:ty),*) => {$(
            impl ArbitraryField for $t {
                fn arbitrary_field() -> BoxedStrategy<Self> {
                    proptest::arbitrary::any::<$t>().boxed()
                }
            }
        )*};
    }
    arbitrary_field_by_any!(bool, i8, i16, i32, i64, u8, u16, u32, u64, String);

    impl ArbitraryField for FieldStr {
        fn arbitrary_field() -> BoxedStrategy<Self> {
            proptest::arbitrary::any::<String>().prop_map(FieldStr::from).boxed()
        }
    }

    impl<T: ArbitraryField + 'static> ArbitraryField for Option<T> {
        fn arbitrary_field() -> BoxedStrategy<Self> {
            proptest::option::of(T::arbitrary_field()).boxed()
        }
    }

    fn put_raw(fields: &mut ExtFields, key: &'static str, raw: &str) {
        fields.insert(key.into(), raw.into());
    }

    impl Spell for bool {
        fn spell(&self, choice: usize, key: &'static str, fields: &mut ExtFields) -> Self {
            // Boolean.parseBoolean: "true" in any case, everything else false; the C++ client's "1"
            // therefore reads as false on a Java broker, and so it must here.
            let forms: &[(&str, bool)] = if *self {
                &[("true", true), ("TRUE", true), ("True", true), ("tRuE", true), ("1", false)]
            } else {
                &[("false", false), ("FALSE", false), ("False", false), ("0", false), ("", false)]
            };
            let (raw, value) = forms[choice % forms.len()];
            put_raw(fields, key, raw);
            value
        }
    }

    macro_rules! spell_int {
        ($($t:ty),*) => {$(
            impl Spell for $t {
                fn spell(&self, choice: usize, key: &'static str, fields: &mut ExtFields) -> Self {
                    // Integer.parseInt / Long.parseLong take an explicit leading `+`.
                    let decimal = self.to_string();
                    let raw = if choice % 2 == 1 && !decimal.starts_with('-') { format!("+{decimal}") } else { decimal };
                    put_raw(fields, key, &raw);
                    *self
                }
            }
        )*};
    }
    spell_int!(i8, i16, i32, i64, u8, u16, u32, u64);

    impl Spell for String {
        fn spell(&self, _choice: usize, key: &'static str, fields: &mut ExtFields) -> Self {
            put_raw(fields, key, self);
            self.clone()
        }
    }

    impl Spell for FieldStr {
        fn spell(&self, _choice: usize, key: &'static str, fields: &mut ExtFields) -> Self {
            put_raw(fields, key, self);
            self.clone()
        }
    }

    impl<T: Spell> Spell for Option<T> {
        fn spell(&self, choice: usize, key: &'static str, fields: &mut ExtFields) -> Self {
            self.as_ref().map(|value| value.spell(choice, key, fields))
        }
    }

    /// A request frame with a JSON header as librocketmq 1.2.x writes it (`"language":"CPP"`,
    /// version 63): field `i` is a bare JSON number when `bare[i]` says so and its value is an
    /// integer in canonical form, a JSON string otherwise.
    pub(crate) fn cpp_json_frame(fields: &ExtFields, bare: &[bool]) -> Vec<u8> {
        let mut ext = serde_json::Map::new();
        for (i, (key, value)) in fields.iter().enumerate() {
            let as_number = bare.get(i % bare.len().max(1)).copied().unwrap_or(false);
            let number = value
                .parse::<i64>()
                .ok()
                .filter(|n| n.to_string() == value.as_str())
                .map(serde_json::Value::from)
                .or_else(|| {
                    value.parse::<u64>().ok().filter(|n| n.to_string() == value.as_str()).map(serde_json::Value::from)
                });
            let json = match number {
                Some(n) if as_number => n,
                _ => serde_json::Value::String(value.to_string()),
            };
            ext.insert(key.to_string(), json);
        }
        let header = serde_json::json!({
            "code": 10, "extFields": ext, "flag": 0, "language": "CPP", "opaque": 1, "remark": "", "version": 63
        });
        let header = serde_json::to_vec(&header).expect("a JSON value serializes");
        let header_len = u32::try_from(header.len()).expect("a small header");
        let mut frame = Vec::with_capacity(8 + header.len());
        frame.extend_from_slice(&(header_len + 4).to_be_bytes());
        frame.extend_from_slice(&header_len.to_be_bytes());
        frame.extend_from_slice(&header);
        frame
    }

    /// A deterministic runner; the seed is printed so a failure names it.
    pub(crate) fn runner(name: &str) -> TestRunner {
        println!("{name}: proptest seed {SEED:?} (ChaCha), {CASES_PER_PROPERTY} cases per property");
        let config = Config { cases: CASES_PER_PROPERTY, failure_persistence: None, ..Config::default() };
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &SEED))
    }

    /// Runs every shared property for `H`:
    /// - struct → extFields → struct is the identity, and so is extFields → struct → extFields;
    /// - the header survives a whole command frame in both JSON and ROCKETMQ header encodings;
    /// - removing any required key gives `Missing` naming that key;
    /// - unknown keys are ignored;
    /// - every field written as Java or the C++ client writes it reads as Java's broker reads it,
    ///   in `extFields` and inside a C++ client's JSON frame (integers as bare JSON numbers);
    /// - arbitrary values under the known keys never panic the reader.
    pub(crate) fn check_header<H: TestHeader>() {
        let name = std::any::type_name::<H>();
        let mut runner = runner(name);
        let result = runner.run(&H::arbitrary(), |header| {
            let fields = header.to_ext_fields();
            let back = H::read_ext_fields(&fields).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back, &header);
            prop_assert_eq!(back.to_ext_fields(), fields.clone());
            for (key, required) in H::FIELDS {
                if *required {
                    prop_assert!(fields.contains_key(key), "required key {} not written", key);
                    let mut without = fields.clone();
                    without.shift_remove(key);
                    prop_assert_eq!(H::read_ext_fields(&without), Err(HeaderError::Missing { field: key }));
                }
            }
            for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
                let mut command = RemotingCommand::request_with_header(RequestCode::Unknown(0), &header);
                command.serialize_type = serialize_type;
                let frame = command.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
                let decoded = RemotingCommand::decode(&frame).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(decoded.decode_header::<H>(), Ok(header.clone()));
            }
            let mut extended = fields.clone();
            extended.insert("someFutureField".into(), "x".into());
            extended.insert("lo".into(), "true".into());
            prop_assert_eq!(H::read_ext_fields(&extended).ok(), Some(header));
            Ok(())
        });
        if let Err(e) = result {
            panic!("{name}: {e}");
        }

        // Every field as Java or the C++ client spells it decodes to what Java's broker reads.
        let spelled = (H::arbitrary(), proptest::collection::vec(any::<usize>(), H::FIELDS.len().max(1)));
        let result = runner.run(&spelled, |(header, choices)| {
            let (fields, expected) = header.spelled(&choices);
            prop_assert_eq!(H::read_ext_fields(&fields), Ok(expected), "from {:?}", fields);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{name}: {e}");
        }

        // The same, inside a whole JSON frame as the C++ client writes one: its jsoncpp header puts
        // some integer fields as JSON numbers (`"queueId":0`), the rest as strings.
        let fields_len = H::FIELDS.len().max(1);
        let framed = (
            H::arbitrary(),
            proptest::collection::vec(any::<usize>(), fields_len),
            proptest::collection::vec(any::<bool>(), fields_len),
        );
        let result = runner.run(&framed, |(header, choices, bare)| {
            let (fields, expected) = header.spelled(&choices);
            let frame = cpp_json_frame(&fields, &bare);
            let command = RemotingCommand::decode(&frame).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(command.decode_header::<H>(), Ok(expected), "from {:?}", String::from_utf8_lossy(&frame));
            Ok(())
        });
        if let Err(e) = result {
            panic!("{name}: {e}");
        }

        let keys: Vec<&'static str> = H::FIELDS.iter().map(|(key, _)| *key).collect();
        let value = prop_oneof![".{0,12}", "-?[0-9]{1,20}", Just("true".to_owned()), Just(String::new())];
        let arbitrary_fields = btree_map(proptest::sample::select(keys), value, 0..=H::FIELDS.len())
            .prop_map(|m| m.into_iter().map(|(k, v)| (k.into(), v.into())).collect::<ExtFields>());
        let result = runner.run(&arbitrary_fields, |fields| {
            // Either outcome is fine; reaching the end without a panic is the property.
            let _ = H::read_ext_fields(&fields);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{name}: {e}");
        }
    }
}
