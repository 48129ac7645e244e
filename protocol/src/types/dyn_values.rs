//! Bind values whose Rust type is known only at run time: [`DynValues`],
//! the object-safe face of [`SerializeValues`].
//!
//! A batch built at run time holds statements of different shapes, so its
//! value lists differ in type too (`(i64, &str)` for one insert, `(Uuid,)`
//! for a delete). `SerializeValues` writes through a generic buffer and so
//! cannot be a trait object; every `SerializeValues` is also a `DynValues`,
//! and `&dyn DynValues` (or `Box<dyn DynValues>`, with `+ Send + Sync` for
//! spawned tasks) is a `SerializeValues` again, so a `Vec<&dyn DynValues>`
//! is one value list per statement without boxing each value.

use bytes::BufMut;

use super::ser::SerializeValues;
use super::ColumnSpec;
use crate::error::EncodeError;

/// A [`SerializeValues`] as a trait object. Implemented for every
/// `SerializeValues`; use `&dyn DynValues` where value lists of different
/// types share one collection.
///
/// ```
/// use shardwise_protocol::types::ser::{DynValues, SerializeValues};
/// let lists: Vec<&dyn DynValues> = vec![&(1i64, "one"), &(2i32,)];
/// assert_eq!(lists[0].count(), 2);
/// assert_eq!(lists[1].encoded_len(), Ok(8));
/// ```
pub trait DynValues {
    /// [`SerializeValues::count`].
    fn dyn_count(&self) -> usize;
    /// [`SerializeValues::with_names`].
    fn dyn_with_names(&self) -> bool;
    /// [`SerializeValues::check_types`].
    fn dyn_check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError>;
    /// [`SerializeValues::encoded_len`].
    fn dyn_encoded_len(&self) -> Result<usize, EncodeError>;
    /// [`SerializeValues::encode`].
    fn dyn_encode(&self, buf: &mut dyn BufMut);
    /// [`SerializeValues::encode_for`].
    fn dyn_encode_for(&self, specs: &[ColumnSpec], buf: &mut dyn BufMut);
    /// [`SerializeValues::by_name`].
    fn dyn_by_name(&self) -> bool;
}

impl<V: SerializeValues> DynValues for V {
    fn dyn_count(&self) -> usize {
        self.count()
    }
    fn dyn_with_names(&self) -> bool {
        self.with_names()
    }
    fn dyn_check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError> {
        self.check_types(specs)
    }
    fn dyn_encoded_len(&self) -> Result<usize, EncodeError> {
        self.encoded_len()
    }
    fn dyn_encode(&self, mut buf: &mut dyn BufMut) {
        self.encode(&mut buf)
    }
    fn dyn_encode_for(&self, specs: &[ColumnSpec], mut buf: &mut dyn BufMut) {
        self.encode_for(specs, &mut buf)
    }
    fn dyn_by_name(&self) -> bool {
        self.by_name()
    }
}

macro_rules! impl_dyn {
    ($($t:ty),*) => {$(
        impl SerializeValues for $t {
            fn count(&self) -> usize {
                self.dyn_count()
            }
            fn with_names(&self) -> bool {
                self.dyn_with_names()
            }
            fn check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError> {
                self.dyn_check_types(specs)
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                self.dyn_encoded_len()
            }
            fn encode(&self, buf: &mut impl BufMut) {
                self.dyn_encode(buf)
            }
            fn encode_for(&self, specs: &[ColumnSpec], buf: &mut impl BufMut) {
                self.dyn_encode_for(specs, buf)
            }
            fn by_name(&self) -> bool {
                self.dyn_by_name()
            }
        }
    )*};
}
impl_dyn!(dyn DynValues + '_, dyn DynValues + Send + '_, dyn DynValues + Sync + '_, dyn DynValues + Send + Sync + '_);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ColumnType;

    fn written(values: &impl SerializeValues) -> Vec<u8> {
        let mut buf = Vec::new();
        values.encode(&mut buf);
        assert_eq!(buf.len(), values.encoded_len().expect("len"));
        buf
    }

    #[test]
    fn a_trait_object_writes_what_its_value_list_writes() {
        let lists: [(&dyn DynValues, Vec<u8>); 3] =
            [(&(7i64, "ab"), written(&(7i64, "ab"))), (&(), Vec::new()), (&vec![1i32, 2], written(&vec![1i32, 2]))];
        for (list, expected) in &lists {
            assert_eq!(&written(list), expected);
        }
        let boxed: Box<dyn DynValues + Send + Sync> = Box::new((1i32,));
        assert_eq!(written(&boxed), written(&(1i32,)));
    }

    #[test]
    fn a_trait_object_checks_its_types() {
        let spec = |typ| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: "v".into(), typ };
        let list: &dyn DynValues = &(1i32,);
        assert_eq!(list.check_types(&[spec(ColumnType::Int)]), Ok(()));
        assert!(list.check_types(&[spec(ColumnType::Text)]).is_err());
    }
}
