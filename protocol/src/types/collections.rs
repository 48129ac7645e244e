//! Deserialization of `list`, `set`, `map` and `vector` values: the lazy
//! borrowed iterators [`ListIter`] and [`MapIter`], and the std collections
//! and [`CqlVector`] built on them.
//!
//! Wire layouts (spec §6): a list or set is an `[int]` count and that many
//! `[bytes]` elements; a map is an `[int]` count and that many key/value
//! `[bytes]` pairs. A `vector<T, n>` has no count: if `T` has a fixed size
//! the `n` elements are concatenated, otherwise each is an `[unsigned vint]`
//! length and its bytes.
//!
//! A null (or zero-length) list, set or map reads as an empty collection,
//! because CQL does not distinguish an empty collection from null (writing
//! an empty collection stores null); use `Option<Vec<T>>` to tell them
//! apart. A null vector is an error unless read into an `Option`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;

use bytes::Bytes;

use crate::codec::Reader;
use crate::error::DecodeError;
use crate::types::de::{DeserializeError, DeserializeValue, FrameSlice, TypeCheckError};
use crate::types::{ColumnType, CqlVector};

/// How the elements of a [`ListIter`] are laid out.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// List or set: `[bytes]` elements.
    Collection,
    /// Vector of a fixed-size type: elements of this many bytes.
    Fixed(usize),
    /// Vector of a variable-size type: `[unsigned vint]` length and bytes.
    Variable,
}

/// A lazy iterator over the elements of a `list`, `set` or `vector` value,
/// borrowing from the frame: each element is decoded on `next()`, nothing is
/// allocated.
///
/// The count is checked against the value's size up front; bytes left after
/// the last element are reported as a final `Err` item, so iterate to the end
/// to validate the whole value. After an `Err` the iterator is exhausted.
pub struct ListIter<'a, T> {
    typ: &'a ColumnType,
    elem: &'a ColumnType,
    frame: &'a Bytes,
    reader: Reader<'a>,
    remaining: usize,
    layout: Layout,
    _elem: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for ListIter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListIter").field("typ", self.typ).field("remaining", &self.remaining).finish_non_exhaustive()
    }
}

impl<T> Clone for ListIter<'_, T> {
    fn clone(&self) -> Self {
        ListIter { _elem: PhantomData, ..*self }
    }
}

impl<'a, T> ListIter<'a, T> {
    /// Elements not read yet.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// The element type.
    pub fn element_type(&self) -> &'a ColumnType {
        self.elem
    }

    /// Reads the header of `v`, a value of `typ` (a list, set or vector).
    fn new(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let malformed = |e| DeserializeError::malformed(typ, e);
        let (elem, layout) = match typ {
            ColumnType::List(elem) | ColumnType::Set(elem) => (&**elem, Layout::Collection),
            ColumnType::Vector(elem, _) => match elem.fixed_size() {
                Some(size) => (&**elem, Layout::Fixed(size)),
                None => (&**elem, Layout::Variable),
            },
            _ => return Err(TypeCheckError::new::<Self>(typ).into()),
        };
        let v = match (v, layout) {
            (Some(v), _) => v,
            (None, Layout::Collection) => return Ok(Self::empty(typ, elem, layout)),
            (None, _) => return Err(DeserializeError::UnexpectedNull { rust_type: std::any::type_name::<Self>() }),
        };
        let bytes = v.as_slice();
        let mut reader = Reader::new(bytes);
        let remaining = match layout {
            Layout::Collection if bytes.is_empty() => 0,
            Layout::Collection => {
                let n = reader.len_i32("collection size").map_err(malformed)?;
                // Every element takes at least its 4-byte length.
                if n > reader.remaining() / 4 {
                    return Err(malformed(DecodeError::UnexpectedEnd {
                        what: "collection elements",
                        needed: n.saturating_mul(4),
                        remaining: reader.remaining(),
                    }));
                }
                n
            }
            Layout::Fixed(0) => {
                // Only a hand-made `vector<vector<T, 0>, n>` has this; refuse
                // it rather than yield up to 2^32 empty elements.
                return Err(malformed(DecodeError::Invalid { what: "vector", reason: "elements of size zero" }));
            }
            Layout::Fixed(size) => {
                let n = vector_dimension(typ);
                let total = size.saturating_mul(n);
                if bytes.len() < total {
                    return Err(malformed(DecodeError::UnexpectedEnd {
                        what: "vector",
                        needed: total,
                        remaining: bytes.len(),
                    }));
                }
                if bytes.len() > total {
                    return Err(malformed(DecodeError::TrailingData {
                        what: "vector",
                        remaining: bytes.len() - total,
                    }));
                }
                n
            }
            Layout::Variable => {
                let n = vector_dimension(typ);
                // Every element takes at least its 1-byte length.
                if n > bytes.len() {
                    return Err(malformed(DecodeError::UnexpectedEnd {
                        what: "vector",
                        needed: n,
                        remaining: bytes.len(),
                    }));
                }
                n
            }
        };
        Ok(ListIter { typ, elem, frame: v.frame(), reader, remaining, layout, _elem: PhantomData })
    }

    fn empty(typ: &'a ColumnType, elem: &'a ColumnType, layout: Layout) -> Self {
        static EMPTY: Bytes = Bytes::new();
        ListIter { typ, elem, frame: &EMPTY, reader: Reader::new(&[]), remaining: 0, layout, _elem: PhantomData }
    }

    fn read_element(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.layout {
            Layout::Collection => self.reader.bytes("collection element"),
            Layout::Fixed(size) => self.reader.take(size, "vector element").map(Some),
            Layout::Variable => {
                let len = self.reader.unsigned_vint("vector element length")?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                self.reader.take(len, "vector element").map(Some)
            }
        }
    }
}

fn vector_dimension(typ: &ColumnType) -> usize {
    match typ {
        ColumnType::Vector(_, n) => *n as usize,
        _ => 0,
    }
}

impl<'a, T: DeserializeValue<'a>> Iterator for ListIter<'a, T> {
    type Item = Result<T, DeserializeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            let trailing = self.reader.finish("collection").err()?;
            self.reader = Reader::new(&[]);
            return Some(Err(DeserializeError::malformed(self.typ, trailing)));
        }
        self.remaining -= 1;
        let item = self
            .read_element()
            .map_err(|e| DeserializeError::malformed(self.typ, e))
            .and_then(|b| T::deserialize(self.elem, b.map(|b| FrameSlice::new(self.frame, b))));
        if item.is_err() {
            self.remaining = 0;
            self.reader = Reader::new(&[]);
        }
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // An error ends the iteration early; trailing bytes add one item.
        (0, Some(self.remaining + 1))
    }
}

impl<'a, T: DeserializeValue<'a>> DeserializeValue<'a> for ListIter<'a, T> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        match typ {
            ColumnType::List(elem) | ColumnType::Set(elem) | ColumnType::Vector(elem, _) => {
                T::type_check(elem).map_err(|_| TypeCheckError::new::<Self>(typ))
            }
            _ => Err(TypeCheckError::new::<Self>(typ)),
        }
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        ListIter::new(typ, v)
    }
}

/// A lazy iterator over the entries of a `map` value, borrowing from the
/// frame. Like [`ListIter`]: trailing bytes are reported as a final `Err`,
/// and the iterator is exhausted after an `Err`.
pub struct MapIter<'a, K, V> {
    typ: &'a ColumnType,
    key: &'a ColumnType,
    value: &'a ColumnType,
    frame: &'a Bytes,
    reader: Reader<'a>,
    remaining: usize,
    _entry: PhantomData<fn() -> (K, V)>,
}

impl<K, V> fmt::Debug for MapIter<'_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapIter").field("typ", self.typ).field("remaining", &self.remaining).finish_non_exhaustive()
    }
}

impl<K, V> Clone for MapIter<'_, K, V> {
    fn clone(&self) -> Self {
        MapIter { _entry: PhantomData, ..*self }
    }
}

impl<K, V> MapIter<'_, K, V> {
    /// Entries not read yet.
    pub fn remaining(&self) -> usize {
        self.remaining
    }
}

impl<'a, K: DeserializeValue<'a>, V: DeserializeValue<'a>> Iterator for MapIter<'a, K, V> {
    type Item = Result<(K, V), DeserializeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            let trailing = self.reader.finish("map").err()?;
            self.reader = Reader::new(&[]);
            return Some(Err(DeserializeError::malformed(self.typ, trailing)));
        }
        self.remaining -= 1;
        let malformed = |e| DeserializeError::malformed(self.typ, e);
        let frame = self.frame;
        let item = self.reader.bytes("map key").map_err(malformed).and_then(|k| {
            let v = self.reader.bytes("map value").map_err(malformed)?;
            let k = K::deserialize(self.key, k.map(|b| FrameSlice::new(frame, b)))?;
            let v = V::deserialize(self.value, v.map(|b| FrameSlice::new(frame, b)))?;
            Ok((k, v))
        });
        if item.is_err() {
            self.remaining = 0;
            self.reader = Reader::new(&[]);
        }
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining + 1))
    }
}

impl<'a, K: DeserializeValue<'a>, V: DeserializeValue<'a>> DeserializeValue<'a> for MapIter<'a, K, V> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        match typ {
            ColumnType::Map(k, v) => {
                K::type_check(k).and_then(|()| V::type_check(v)).map_err(|_| TypeCheckError::new::<Self>(typ))
            }
            _ => Err(TypeCheckError::new::<Self>(typ)),
        }
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        static EMPTY: Bytes = Bytes::new();
        let ColumnType::Map(key, value) = typ else {
            return Err(TypeCheckError::new::<Self>(typ).into());
        };
        let mut it =
            MapIter { typ, key, value, frame: &EMPTY, reader: Reader::new(&[]), remaining: 0, _entry: PhantomData };
        let Some(v) = v else { return Ok(it) };
        it.frame = v.frame();
        it.reader = Reader::new(v.as_slice());
        if it.reader.is_empty() {
            return Ok(it);
        }
        let n = it.reader.len_i32("map size").map_err(|e| DeserializeError::malformed(typ, e))?;
        // Every entry takes at least its two 4-byte lengths.
        if n > it.reader.remaining() / 8 {
            return Err(DeserializeError::malformed(
                typ,
                DecodeError::UnexpectedEnd {
                    what: "map entries",
                    needed: n.saturating_mul(8),
                    remaining: it.reader.remaining(),
                },
            ));
        }
        it.remaining = n;
        Ok(it)
    }
}

// ---------------------------------------------------------------- owned collections

fn is_list_or_set(typ: &ColumnType) -> Option<&ColumnType> {
    match typ {
        ColumnType::List(elem) | ColumnType::Set(elem) => Some(elem),
        _ => None,
    }
}

/// `list`, `set` or `vector`.
impl<'a, T: DeserializeValue<'a>> DeserializeValue<'a> for Vec<T> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        ListIter::<T>::type_check(typ).map_err(|_| TypeCheckError::new::<Self>(typ))
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let it = ListIter::<T>::new(typ, v)?;
        let mut out = Vec::with_capacity(it.remaining());
        for item in it {
            out.push(item?);
        }
        Ok(out)
    }
}

/// `vector` only.
impl<'a, T: DeserializeValue<'a>> DeserializeValue<'a> for CqlVector<T> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        match typ {
            ColumnType::Vector(elem, _) => T::type_check(elem).map_err(|_| TypeCheckError::new::<Self>(typ)),
            _ => Err(TypeCheckError::new::<Self>(typ)),
        }
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        Vec::deserialize(typ, v).map(CqlVector)
    }
}

/// `set` or `list`.
impl<'a, T, S> DeserializeValue<'a> for HashSet<T, S>
where
    T: DeserializeValue<'a> + Eq + Hash,
    S: BuildHasher + Default,
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        let elem = is_list_or_set(typ).ok_or_else(|| TypeCheckError::new::<Self>(typ))?;
        T::type_check(elem).map_err(|_| TypeCheckError::new::<Self>(typ))
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let it = ListIter::<T>::new(typ, v)?;
        let mut out = HashSet::with_capacity_and_hasher(it.remaining(), S::default());
        for item in it {
            out.insert(item?);
        }
        Ok(out)
    }
}

/// `set` or `list`.
impl<'a, T: DeserializeValue<'a> + Ord> DeserializeValue<'a> for BTreeSet<T> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        let elem = is_list_or_set(typ).ok_or_else(|| TypeCheckError::new::<Self>(typ))?;
        T::type_check(elem).map_err(|_| TypeCheckError::new::<Self>(typ))
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        ListIter::<T>::new(typ, v)?.collect()
    }
}

/// `map`.
impl<'a, K, V, S> DeserializeValue<'a> for HashMap<K, V, S>
where
    K: DeserializeValue<'a> + Eq + Hash,
    V: DeserializeValue<'a>,
    S: BuildHasher + Default,
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        MapIter::<K, V>::type_check(typ).map_err(|_| TypeCheckError::new::<Self>(typ))
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let it = MapIter::<K, V>::deserialize(typ, v)?;
        let mut out = HashMap::with_capacity_and_hasher(it.remaining(), S::default());
        for entry in it {
            let (k, v) = entry?;
            out.insert(k, v);
        }
        Ok(out)
    }
}

/// `map`.
impl<'a, K: DeserializeValue<'a> + Ord, V: DeserializeValue<'a>> DeserializeValue<'a> for BTreeMap<K, V> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        MapIter::<K, V>::type_check(typ).map_err(|_| TypeCheckError::new::<Self>(typ))
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        MapIter::<K, V>::deserialize(typ, v)?.collect()
    }
}
