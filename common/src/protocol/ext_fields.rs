//! [`ExtFields`]: a command's `extFields`, the flat string map every typed header is read from and
//! written to.
//!
//! A vector of pairs searched linearly, not a hash map: a header has a handful to a few dozen short
//! keys (a send has 14, one byte each in SEND_MESSAGE_V2), and every request on both sides builds
//! one. A hash map cost a table allocation, hashing on every insert and lookup, and a presize guess;
//! a linear scan over so few keys compares a few bytes instead.
//!
//! Invariants:
//! - Keys are unique; inserting an existing key replaces its value in place (as Java's `HashMap`
//!   keeps one value per key), so insertion order is the order of first insertion.
//! - At most [`EXT_FIELDS_MAX_COUNT`] entries arrive from the wire (the decoders refuse more), which
//!   bounds the quadratic cost of unique inserts for any input.
//! - Equality ignores order, as a map's does.

pub use crate::limits::EXT_FIELDS_MAX_COUNT;

/// A key or value of [`ExtFields`]: up to 24 bytes inline, static keys without a copy.
pub type FieldStr = compact_str::CompactString;

/// `k == key`, deciding most mismatches on the first byte: a send header's keys are all one byte
/// long (`a`..`n`), so a plain comparison would call `memcmp` for every key scanned, on every
/// insert and lookup of every request.
#[inline]
fn same_key(k: &FieldStr, key: &str) -> bool {
    let (a, b) = (k.as_bytes(), key.as_bytes());
    a.len() == b.len() && a.first() == b.first() && a == b
}

/// A command's `extFields`, in insertion order. See the module header.
#[derive(Clone, Default)]
pub struct ExtFields {
    entries: Vec<(FieldStr, FieldStr)>,
}

impl ExtFields {
    /// An empty map with room for `capacity` fields.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { entries: Vec::with_capacity(capacity) }
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(k, _)| same_key(k, key))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&FieldStr> {
        self.entries.iter().find(|(k, _)| same_key(k, key)).map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`, returning the value it replaces (the key keeps its position).
    pub fn insert(&mut self, key: FieldStr, value: FieldStr) -> Option<FieldStr> {
        match self.position(&key) {
            Some(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the others.
    pub fn shift_remove(&mut self, key: &str) -> Option<FieldStr> {
        self.position(key).map(|i| self.entries.remove(i).1)
    }

    /// Room for `additional` more fields.
    pub fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }

    /// The number of fields.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `index`-th field in insertion order.
    pub fn get_index(&self, index: usize) -> Option<(&FieldStr, &FieldStr)> {
        self.entries.get(index).map(|(k, v)| (k, v))
    }

    /// The keys in insertion order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &FieldStr> + '_ {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The fields in insertion order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&FieldStr, &FieldStr)> + '_ {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl<'a> IntoIterator for &'a ExtFields {
    type Item = (&'a FieldStr, &'a FieldStr);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (FieldStr, FieldStr)>, fn(&'a (FieldStr, FieldStr)) -> Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl FromIterator<(FieldStr, FieldStr)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (FieldStr, FieldStr)>>(iter: I) -> Self {
        let mut fields = ExtFields::default();
        for (k, v) in iter {
            fields.insert(k, v);
        }
        fields
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        // Keys are unique on both sides, so equal sizes and every pair found means equal maps.
        self.len() == other.len() && self.entries.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Eq for ExtFields {}

impl std::fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> FieldStr {
        FieldStr::from(s)
    }

    #[test]
    fn inserts_replace_in_place_and_removal_keeps_order() {
        let mut fields = ExtFields::default();
        assert_eq!(fields.insert(f("b"), f("1")), None);
        assert_eq!(fields.insert(f("a"), f("2")), None);
        assert_eq!(fields.insert(f("c"), f("3")), None);
        assert_eq!(fields.insert(f("b"), f("4")), Some(f("1")));
        assert_eq!(fields.keys().map(FieldStr::as_str).collect::<Vec<_>>(), ["b", "a", "c"]);
        assert_eq!(fields.get("b"), Some(&f("4")));
        assert_eq!(fields.shift_remove("b"), Some(f("4")));
        assert_eq!(fields.shift_remove("b"), None);
        assert_eq!(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>(), [("a", "2"), ("c", "3")]);
        assert!(fields.contains_key("c") && !fields.contains_key("x"));
        assert_eq!(fields.get_index(1), Some((&f("c"), &f("3"))));
        assert_eq!(fields.len(), 2);
    }

    #[test]
    fn equality_ignores_order_but_not_values() {
        let ab: ExtFields = [(f("a"), f("1")), (f("b"), f("2"))].into_iter().collect();
        let ba: ExtFields = [(f("b"), f("2")), (f("a"), f("1"))].into_iter().collect();
        let changed: ExtFields = [(f("b"), f("2")), (f("a"), f("9"))].into_iter().collect();
        let fewer: ExtFields = [(f("a"), f("1"))].into_iter().collect();
        assert_eq!(ab, ba);
        assert_ne!(ab, changed);
        assert_ne!(ab, fewer);
        assert_ne!(fewer, ab);
        assert_eq!(format!("{ab:?}"), r#"{"a": "1", "b": "2"}"#);
    }
}
