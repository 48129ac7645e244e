//! Serialized collections and UDTs taken apart and built, sets and maps
//! kept sorted and without duplicates as Cassandra stores them.

use super::*;

/// The elements of a serialized list, set (or IN list): `[int]` count, then
/// `[bytes]` each; `None` for a null (only lists of old protocols have them).
pub fn collection_elements(bytes: &[u8]) -> Result<Vec<Option<&[u8]>>, ValueError> {
    const WHAT: &str = "collection";
    let mut r = Reader::new(bytes);
    let n = r.len_i32(WHAT).map_err(malformed(WHAT))?;
    let mut out = Vec::with_capacity(n.min(r.remaining() / 4));
    for _ in 0..n {
        out.push(r.bytes(WHAT).map_err(malformed(WHAT))?);
    }
    r.finish(WHAT).map_err(malformed(WHAT))?;
    Ok(out)
}

/// The entries of a serialized map; keys are never null.
pub fn collection_entries(bytes: &[u8]) -> Result<MapEntries<'_>, ValueError> {
    const WHAT: &str = "map";
    let mut r = Reader::new(bytes);
    let n = r.len_i32(WHAT).map_err(malformed(WHAT))?;
    let mut out = Vec::with_capacity(n.min(r.remaining() / 8));
    for _ in 0..n {
        let key = r
            .bytes(WHAT)
            .map_err(malformed(WHAT))?
            .ok_or_else(|| ValueError::Malformed { what: WHAT, reason: "null key".into() })?;
        out.push((key, r.bytes(WHAT).map_err(malformed(WHAT))?));
    }
    r.finish(WHAT).map_err(malformed(WHAT))?;
    Ok(out)
}

/// Serializes a list or set from its elements, in the order given.
pub fn build_collection<'a>(elements: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![0; 4];
    let mut n: i32 = 0;
    for e in elements {
        codec::put_bytes(&mut out, Some(e));
        n += 1;
    }
    out[..4].copy_from_slice(&n.to_be_bytes());
    out
}

/// Serializes a map from its entries, in the order given.
pub fn build_map<'a>(entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = vec![0; 4];
    let mut n: i32 = 0;
    for (k, v) in entries {
        codec::put_bytes(&mut out, Some(k));
        codec::put_bytes(&mut out, Some(v));
        n += 1;
    }
    out[..4].copy_from_slice(&n.to_be_bytes());
    out
}

/// Serializes a set as Cassandra stores it: elements sorted by `elem`'s
/// comparator, duplicates (equal by it) dropped, the first kept.
pub fn build_set<'a>(elem: &ColumnType, elements: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut v: Vec<&[u8]> = elements.into_iter().collect();
    v.sort_by(|a, b| compare(elem, a, b));
    v.dedup_by(|b, a| compare(elem, a, b) == Ordering::Equal);
    build_collection(v)
}

/// Serializes a map as Cassandra stores it: entries sorted by `key`'s
/// comparator; of entries with equal keys the last one given wins.
pub fn build_sorted_map<'a>(key: &ColumnType, entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut v: Vec<(&[u8], &[u8])> = entries.into_iter().collect();
    v.sort_by(|a, b| compare(key, a.0, b.0));
    let mut out: Vec<(&[u8], &[u8])> = Vec::with_capacity(v.len());
    for e in v {
        match out.last_mut() {
            Some(last) if compare(key, last.0, e.0) == Ordering::Equal => *last = e,
            _ => out.push(e),
        }
    }
    build_map(out)
}

/// The fields of a serialized UDT (or tuple) of `n` fields: missing
/// trailing fields are `None`, like null ones.
pub fn udt_fields(bytes: &[u8], n: usize) -> Result<Vec<Option<&[u8]>>, ValueError> {
    const WHAT: &str = "user type value";
    let mut r = Reader::new(bytes);
    let mut out = Vec::with_capacity(n);
    while !r.is_empty() {
        if out.len() == n {
            return Err(ValueError::Malformed { what: WHAT, reason: format!("more than {n} fields") });
        }
        out.push(r.bytes(WHAT).map_err(malformed(WHAT))?);
    }
    out.resize(n, None);
    Ok(out)
}

/// Serializes a UDT (or tuple) value: every field, nulls as length −1.
pub fn build_udt(fields: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        codec::put_bytes(&mut out, *f);
    }
    out
}

/// Puts a serialized value in the form Cassandra stores: sets sorted and
/// de-duplicated, maps sorted by key (last duplicate wins), recursively
/// inside lists, maps, tuples and UDTs. Other values are returned as they
/// are.
pub fn normalize(typ: &ColumnType, bytes: &[u8]) -> Result<Vec<u8>, ValueError> {
    fn non_null<'b>(typ: &ColumnType, e: Option<&'b [u8]>) -> Result<&'b [u8], ValueError> {
        e.ok_or_else(|| invalid(typ, "null is not supported inside collections"))
    }
    match typ {
        ColumnType::List(e) | ColumnType::Set(e) => {
            let mut v = Vec::new();
            for x in collection_elements(bytes)? {
                v.push(normalize(e, non_null(typ, x)?)?);
            }
            let items = v.iter().map(|x| &x[..]);
            Ok(if matches!(typ, ColumnType::Set(_)) { build_set(e, items) } else { build_collection(items) })
        }
        ColumnType::Map(kt, vt) => {
            let mut v = Vec::new();
            for (k, x) in collection_entries(bytes)? {
                v.push((normalize(kt, k)?, normalize(vt, non_null(typ, x)?)?));
            }
            Ok(build_sorted_map(kt, v.iter().map(|(k, x)| (&k[..], &x[..]))))
        }
        ColumnType::Tuple(_) | ColumnType::Udt { .. } => {
            let types: Vec<&ColumnType> = match typ {
                ColumnType::Tuple(ts) => ts.iter().collect(),
                ColumnType::Udt { fields, .. } => fields.iter().map(|(_, t)| t).collect(),
                _ => Vec::new(),
            };
            let given = udt_fields(bytes, types.len())?;
            let given = &given[..read_field_count(bytes)];
            let mut v = Vec::with_capacity(given.len());
            for (f, t) in given.iter().zip(types) {
                v.push(f.map(|f| normalize(t, f)).transpose()?);
            }
            Ok(build_udt(&v.iter().map(Option::as_deref).collect::<Vec<_>>()))
        }
        _ => Ok(bytes.to_vec()),
    }
}

/// How many `[bytes]` fields a tuple or UDT value holds (no more fields are
/// invented by [`normalize`]).
fn read_field_count(bytes: &[u8]) -> usize {
    let mut r = Reader::new(bytes);
    let mut n = 0;
    while !r.is_empty() && r.bytes("field").is_ok() {
        n += 1;
    }
    n
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn normalize_sorts_nested_sets_and_maps() {
        let inner = T::Set(Box::new(T::Int));
        let typ = T::Map(Box::new(T::Int), Box::new(inner.clone()));
        let s21 = build_collection([&[0, 0, 0, 2][..], &[0, 0, 0, 1]]);
        let s12 = build_collection([&[0, 0, 0, 1][..], &[0, 0, 0, 2]]);
        let raw =
            build_map([(&[0, 0, 0, 5][..], &s21[..]), (&[0, 0, 0, 3][..], &s21[..]), (&[0, 0, 0, 5][..], &s12[..])]);
        assert_eq!(
            normalize(&typ, &raw),
            Ok(build_map([(&[0, 0, 0, 3][..], &s12[..]), (&[0, 0, 0, 5][..], &s12[..])]))
        );
        let tuple = T::Tuple(vec![inner.clone(), T::Int]);
        assert_eq!(normalize(&tuple, &build_udt(&[Some(&s21), None])), Ok(build_udt(&[Some(&s12), None])));
        assert_eq!(normalize(&tuple, &build_udt(&[Some(&s21)])), Ok(build_udt(&[Some(&s12)])));
        assert_eq!(normalize(&T::Int, &[1, 2]), Ok(vec![1, 2]));
        assert!(normalize(&inner, &[0, 0, 0, 1]).is_err());
        assert!(normalize(&inner, &build_collection([])[..3]).is_err());
    }

    #[test]
    fn serialized_collections_apart_and_back() {
        let e = [&b"a"[..], b"", b"bc"];
        let list = build_collection(e);
        assert_eq!(list, [0, 0, 0, 3, 0, 0, 0, 1, b'a', 0, 0, 0, 0, 0, 0, 0, 2, b'b', b'c']);
        assert_eq!(collection_elements(&list), Ok(e.iter().map(|x| Some(*x)).collect()));
        let with_null = [&[0u8, 0, 0, 1][..], &[0xff; 4]].concat();
        assert_eq!(collection_elements(&with_null), Ok(vec![None]));
        let map = build_map([(&b"k"[..], &b"v"[..]), (b"", b"")]);
        assert_eq!(collection_entries(&map), Ok(vec![(&b"k"[..], Some(&b"v"[..])), (&b""[..], Some(&b""[..]))]));
        assert!(collection_entries(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]).is_err());
        for bad in [
            &[][..],
            &[0, 0, 0],
            &[0, 0, 0, 1],
            &[0, 0, 0, 1, 0, 0, 0, 2, 1],
            &[0xff, 0xff, 0xff, 0xfe],
            &[0, 0, 0, 0, 7],
        ] {
            assert!(matches!(collection_elements(bad), Err(ValueError::Malformed { .. })), "{bad:?}");
            assert!(collection_entries(bad).is_err(), "{bad:?}");
        }
        assert!(collection_elements(&[0x7f, 0xff, 0xff, 0xff]).is_err());
        let udt = build_udt(&[Some(b"x"), None]);
        assert_eq!(udt, [0, 0, 0, 1, b'x', 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(udt_fields(&udt, 3), Ok(vec![Some(&b"x"[..]), None, None]));
        assert_eq!(udt_fields(&[], 2), Ok(vec![None, None]));
        assert!(udt_fields(&udt, 1).is_err());
        assert!(udt_fields(&udt[..7], 2).is_err());
    }
}
