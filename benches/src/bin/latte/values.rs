//! Script values to CQL values, by the types of a prepared statement's bind
//! markers.
//!
//! Scripts are dynamically typed: `ctx.execute_prepared(KEY, [i, "x"])`
//! carries Rune integers and strings, and the marker's column type decides
//! what travels (an integer bound to `int` goes out as four bytes, to
//! `bigint` as eight). A value that does not fit its marker is an error that
//! names the marker, never a silent truncation. Conversion yields a neutral
//! [`Bound`], which each driver then maps to its own value type, so that
//! both drivers pay the same conversion cost per request.

use rune::runtime::{Bytes, Object, Value};

use crate::functions::Uuid;

/// A bind marker's type, as far as scripts can bind it.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `bigint`
    BigInt,
    /// `counter`
    Counter,
    /// `int`
    Int,
    /// `smallint`
    SmallInt,
    /// `tinyint`
    TinyInt,
    /// `boolean`
    Boolean,
    /// `double`
    Double,
    /// `float`
    Float,
    /// `text` / `varchar`
    Text,
    /// `ascii`
    Ascii,
    /// `blob`
    Blob,
    /// `uuid`
    Uuid,
    /// `timeuuid`
    Timeuuid,
    /// `timestamp` (milliseconds since the epoch)
    Timestamp,
    /// `list<T>`
    List(Box<Kind>),
    /// `set<T>`
    Set(Box<Kind>),
    /// `map<K, V>`
    Map(Box<Kind>, Box<Kind>),
    /// Any other type, by its CQL name: binding it is an error.
    Unsupported(String),
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Kind::BigInt => "bigint",
            Kind::Counter => "counter",
            Kind::Int => "int",
            Kind::SmallInt => "smallint",
            Kind::TinyInt => "tinyint",
            Kind::Boolean => "boolean",
            Kind::Double => "double",
            Kind::Float => "float",
            Kind::Text => "text",
            Kind::Ascii => "ascii",
            Kind::Blob => "blob",
            Kind::Uuid => "uuid",
            Kind::Timeuuid => "timeuuid",
            Kind::Timestamp => "timestamp",
            Kind::List(k) => return write!(f, "list<{k}>"),
            Kind::Set(k) => return write!(f, "set<{k}>"),
            Kind::Map(k, v) => return write!(f, "map<{k}, {v}>"),
            Kind::Unsupported(name) => name,
        };
        f.write_str(name)
    }
}

/// One bind marker of a prepared statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The marker's name (the column's, or `:name`'s).
    pub name: String,
    /// Its type.
    pub kind: Kind,
}

/// A value ready to bind, whichever the driver.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// `null` (a script's `()` or `None`).
    Null,
    /// `bigint`
    BigInt(i64),
    /// `counter`
    Counter(i64),
    /// `int`
    Int(i32),
    /// `smallint`
    SmallInt(i16),
    /// `tinyint`
    TinyInt(i8),
    /// `boolean`
    Boolean(bool),
    /// `double`
    Double(f64),
    /// `float`
    Float(f32),
    /// `text`
    Text(String),
    /// `ascii`
    Ascii(String),
    /// `blob`
    Blob(Vec<u8>),
    /// `uuid`
    Uuid(uuid::Uuid),
    /// `timeuuid`
    Timeuuid(uuid::Uuid),
    /// `timestamp`, milliseconds since the epoch.
    Timestamp(i64),
    /// `list<T>`
    List(Vec<Bound>),
    /// `set<T>`
    Set(Vec<Bound>),
    /// `map<K, V>`
    Map(Vec<(Bound, Bound)>),
}

/// Why a script's values cannot be bound.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConvertError {
    /// The values are not a list, a tuple or an object.
    #[error("the values must be a list, a tuple or an object (by marker name), not {actual}")]
    NotAList {
        /// The script value's type.
        actual: String,
    },
    /// As many values as markers are needed.
    #[error("{markers} bind marker(s) but {values} value(s)")]
    Count {
        /// Markers of the statement.
        markers: usize,
        /// Values given.
        values: usize,
    },
    /// An object lacks a marker's name.
    #[error("no value named `{name}` (bind marker {index})")]
    MissingField {
        /// Marker position, from 0.
        index: usize,
        /// Marker name.
        name: String,
    },
    /// A value of the wrong type.
    #[error("bind marker {index} (`{name}`, {cql}) cannot take a {actual}")]
    Mismatch {
        /// Marker position, from 0.
        index: usize,
        /// Marker name.
        name: String,
        /// The marker's CQL type.
        cql: String,
        /// The script value's type.
        actual: String,
    },
    /// A number that does not fit the marker's type.
    #[error("bind marker {index} (`{name}`, {cql}): {value} is out of range")]
    OutOfRange {
        /// Marker position, from 0.
        index: usize,
        /// Marker name.
        name: String,
        /// The marker's CQL type.
        cql: String,
        /// The value.
        value: String,
    },
    /// A type scripts cannot bind.
    #[error("bind marker {index} (`{name}`): binding {cql} from scripts is not supported")]
    Unsupported {
        /// Marker position, from 0.
        index: usize,
        /// Marker name.
        name: String,
        /// The marker's CQL type.
        cql: String,
    },
}

/// Where a value goes: for error messages.
struct At<'a> {
    index: usize,
    name: &'a str,
    kind: &'a Kind,
}

impl At<'_> {
    fn mismatch(&self, v: &Value) -> ConvertError {
        ConvertError::Mismatch {
            index: self.index,
            name: self.name.to_string(),
            cql: self.kind.to_string(),
            actual: v.type_info().to_string(),
        }
    }
    fn out_of_range(&self, value: impl std::fmt::Display) -> ConvertError {
        ConvertError::OutOfRange {
            index: self.index,
            name: self.name.to_string(),
            cql: self.kind.to_string(),
            value: value.to_string(),
        }
    }
}

/// Binds `params` (a list or tuple in marker order, or an object by marker
/// name) to the markers `columns`.
pub fn bind(columns: &[Column], params: &Value) -> Result<Vec<Bound>, ConvertError> {
    if let Ok(list) = params.borrow_ref::<rune::runtime::Vec>() {
        return bind_list(columns, &list);
    }
    if let Ok(tuple) = params.borrow_tuple_ref() {
        return bind_list(columns, &tuple);
    }
    if let Ok(object) = params.borrow_ref::<Object>() {
        return columns
            .iter()
            .enumerate()
            .map(|(index, c)| {
                let v = object
                    .get(c.name.as_str())
                    .ok_or_else(|| ConvertError::MissingField { index, name: c.name.clone() })?;
                convert(v, &At { index, name: &c.name, kind: &c.kind })
            })
            .collect();
    }
    Err(ConvertError::NotAList { actual: params.type_info().to_string() })
}

fn bind_list(columns: &[Column], values: &[Value]) -> Result<Vec<Bound>, ConvertError> {
    if values.len() != columns.len() {
        return Err(ConvertError::Count { markers: columns.len(), values: values.len() });
    }
    columns
        .iter()
        .zip(values)
        .enumerate()
        .map(|(index, (c, v))| convert(v, &At { index, name: &c.name, kind: &c.kind }))
        .collect()
}

/// A script's null: `()` or `None`; `Some(x)` is `x`.
enum Nullable {
    Null,
    Some(Value),
    Neither,
}

fn nullable(v: &Value) -> Nullable {
    if v.into_unit().is_ok() {
        return Nullable::Null;
    }
    match rune::from_value::<Option<Value>>(v.clone()) {
        Ok(None) => Nullable::Null,
        Ok(Some(inner)) => Nullable::Some(inner),
        Err(_) => Nullable::Neither,
    }
}

fn convert(v: &Value, at: &At<'_>) -> Result<Bound, ConvertError> {
    match convert_present(v, at) {
        Ok(b) => Ok(b),
        // Only when the value is not what the marker takes: an option or a
        // unit costs nothing on the common path.
        Err(e @ ConvertError::Mismatch { .. }) => match nullable(v) {
            Nullable::Null => Ok(Bound::Null),
            Nullable::Some(inner) => convert(&inner, at),
            Nullable::Neither => Err(e),
        },
        Err(e) => Err(e),
    }
}

fn integer(v: &Value, at: &At<'_>) -> Result<i64, ConvertError> {
    match v.as_integer::<i64>() {
        Ok(i) => Ok(i),
        // An unsigned integer above i64::MAX.
        Err(_) => match v.as_integer::<u64>() {
            Ok(u) => Err(at.out_of_range(u)),
            Err(_) => Err(at.mismatch(v)),
        },
    }
}

fn narrow<T: TryFrom<i64>>(v: &Value, at: &At<'_>) -> Result<T, ConvertError> {
    let i = integer(v, at)?;
    T::try_from(i).map_err(|_| at.out_of_range(i))
}

fn float(v: &Value, at: &At<'_>) -> Result<f64, ConvertError> {
    if let Ok(x) = rune::from_value::<f64>(v.clone()) {
        return Ok(x);
    }
    // Integers are taken where a float is due (exactly, up to 2^53).
    match v.as_integer::<i64>() {
        Ok(i) if i.unsigned_abs() <= 1 << 53 => Ok(i as f64),
        Ok(i) => Err(at.out_of_range(i)),
        Err(_) => Err(at.mismatch(v)),
    }
}

fn string(v: &Value, at: &At<'_>) -> Result<String, ConvertError> {
    match v.borrow_string_ref() {
        Ok(s) => Ok(s.to_string()),
        Err(_) => Err(at.mismatch(v)),
    }
}

fn elements(v: &Value, at: &At<'_>, kind: &Kind) -> Result<Vec<Bound>, ConvertError> {
    let inner = At { index: at.index, name: at.name, kind };
    if let Ok(list) = v.borrow_ref::<rune::runtime::Vec>() {
        return list.iter().map(|e| convert(e, &inner)).collect();
    }
    if let Ok(tuple) = v.borrow_tuple_ref() {
        return tuple.iter().map(|e| convert(e, &inner)).collect();
    }
    Err(at.mismatch(v))
}

fn uuid(v: &Value, at: &At<'_>) -> Result<uuid::Uuid, ConvertError> {
    if let Ok(u) = v.borrow_ref::<Uuid>() {
        return Ok(u.0);
    }
    if let Ok(s) = v.borrow_string_ref() {
        return uuid::Uuid::parse_str(&s).map_err(|_| at.out_of_range(format!("{:?}", &*s)));
    }
    Err(at.mismatch(v))
}

fn convert_present(v: &Value, at: &At<'_>) -> Result<Bound, ConvertError> {
    Ok(match at.kind {
        Kind::BigInt => Bound::BigInt(integer(v, at)?),
        Kind::Counter => Bound::Counter(integer(v, at)?),
        Kind::Timestamp => Bound::Timestamp(integer(v, at)?),
        Kind::Int => Bound::Int(narrow(v, at)?),
        Kind::SmallInt => Bound::SmallInt(narrow(v, at)?),
        Kind::TinyInt => Bound::TinyInt(narrow(v, at)?),
        Kind::Boolean => Bound::Boolean(rune::from_value::<bool>(v.clone()).map_err(|_| at.mismatch(v))?),
        Kind::Double => Bound::Double(float(v, at)?),
        Kind::Float => {
            let x = float(v, at)?;
            if x.is_finite() && x.abs() > f64::from(f32::MAX) {
                return Err(at.out_of_range(x));
            }
            Bound::Float(x as f32)
        }
        Kind::Text => Bound::Text(string(v, at)?),
        Kind::Ascii => {
            let s = string(v, at)?;
            if !s.is_ascii() {
                return Err(at.out_of_range(format!("{s:?} (not ASCII)")));
            }
            Bound::Ascii(s)
        }
        Kind::Blob => {
            if let Ok(b) = v.borrow_ref::<Bytes>() {
                Bound::Blob(b.as_slice().to_vec())
            } else if let Ok(s) = v.borrow_string_ref() {
                Bound::Blob(s.as_bytes().to_vec())
            } else {
                // A list of byte values.
                let list = v.borrow_ref::<rune::runtime::Vec>().map_err(|_| at.mismatch(v))?;
                let bytes: Result<Vec<u8>, _> = list.iter().map(|e| narrow::<u8>(e, at)).collect();
                Bound::Blob(bytes?)
            }
        }
        Kind::Uuid => Bound::Uuid(uuid(v, at)?),
        Kind::Timeuuid => Bound::Timeuuid(uuid(v, at)?),
        Kind::List(k) => Bound::List(elements(v, at, k)?),
        Kind::Set(k) => Bound::Set(elements(v, at, k)?),
        Kind::Map(k, val) => {
            let (key_at, value_at) =
                (At { index: at.index, name: at.name, kind: k }, At { index: at.index, name: at.name, kind: val });
            if let Ok(object) = v.borrow_ref::<Object>() {
                let mut out = Vec::new();
                for (key, value) in object.iter() {
                    let key = match **k {
                        Kind::Text | Kind::Ascii => Bound::Text(key.to_string()),
                        _ => return Err(at.mismatch(v)),
                    };
                    out.push((key, convert(value, &value_at)?));
                }
                Bound::Map(out)
            } else {
                // A list of (key, value) pairs.
                let list = v.borrow_ref::<rune::runtime::Vec>().map_err(|_| at.mismatch(v))?;
                let mut out = Vec::new();
                for pair in list.iter() {
                    let pair = pair.borrow_tuple_ref().map_err(|_| at.mismatch(pair))?;
                    let [key, value] = &pair[..] else { return Err(at.mismatch(v)) };
                    out.push((convert(key, &key_at)?, convert(value, &value_at)?));
                }
                Bound::Map(out)
            }
        }
        Kind::Unsupported(cql) => {
            return Err(ConvertError::Unsupported { index: at.index, name: at.name.to_string(), cql: cql.clone() })
        }
    })
}

// ---------------------------------------------------------------------------
// Each driver's types.

/// The kind of a shardwise bind marker type.
pub fn kind_of_shardwise(t: &shardwise::protocol::types::ColumnType) -> Kind {
    use shardwise::protocol::types::ColumnType as T;
    match t {
        T::BigInt => Kind::BigInt,
        T::Counter => Kind::Counter,
        T::Int => Kind::Int,
        T::SmallInt => Kind::SmallInt,
        T::TinyInt => Kind::TinyInt,
        T::Boolean => Kind::Boolean,
        T::Double => Kind::Double,
        T::Float => Kind::Float,
        T::Text => Kind::Text,
        T::Ascii => Kind::Ascii,
        T::Blob => Kind::Blob,
        T::Uuid => Kind::Uuid,
        T::Timeuuid => Kind::Timeuuid,
        T::Timestamp => Kind::Timestamp,
        T::List(e) => Kind::List(Box::new(kind_of_shardwise(e))),
        T::Set(e) => Kind::Set(Box::new(kind_of_shardwise(e))),
        T::Map(k, v) => Kind::Map(Box::new(kind_of_shardwise(k)), Box::new(kind_of_shardwise(v))),
        other => Kind::Unsupported(other.to_string()),
    }
}

/// A bound value as shardwise's value type.
pub fn to_shardwise(b: Bound) -> Option<shardwise::protocol::types::CqlValue> {
    use shardwise::protocol::types::{CqlTimestamp, CqlValue as V};
    Some(match b {
        Bound::Null => return None,
        Bound::BigInt(x) => V::BigInt(x),
        Bound::Counter(x) => V::Counter(x),
        Bound::Int(x) => V::Int(x),
        Bound::SmallInt(x) => V::SmallInt(x),
        Bound::TinyInt(x) => V::TinyInt(x),
        Bound::Boolean(x) => V::Boolean(x),
        Bound::Double(x) => V::Double(x),
        Bound::Float(x) => V::Float(x),
        Bound::Text(x) => V::Text(x),
        Bound::Ascii(x) => V::Ascii(x),
        Bound::Blob(x) => V::Blob(x),
        Bound::Uuid(x) => V::Uuid(x),
        Bound::Timeuuid(x) => V::Timeuuid(x),
        Bound::Timestamp(x) => V::Timestamp(CqlTimestamp(x)),
        // Collections hold no nulls.
        Bound::List(x) => V::List(x.into_iter().filter_map(to_shardwise).collect()),
        Bound::Set(x) => V::Set(x.into_iter().filter_map(to_shardwise).collect()),
        Bound::Map(x) => {
            V::Map(x.into_iter().filter_map(|(k, v)| Some((to_shardwise(k)?, to_shardwise(v)?))).collect())
        }
    })
}

/// The kind of an official-driver bind marker type.
pub fn kind_of_scylla(t: &scylla::frame::response::result::ColumnType<'_>) -> Kind {
    use scylla::frame::response::result::{CollectionType as C, ColumnType as T, NativeType as N};
    match t {
        T::Native(n) => match n {
            N::BigInt => Kind::BigInt,
            N::Counter => Kind::Counter,
            N::Int => Kind::Int,
            N::SmallInt => Kind::SmallInt,
            N::TinyInt => Kind::TinyInt,
            N::Boolean => Kind::Boolean,
            N::Double => Kind::Double,
            N::Float => Kind::Float,
            N::Text => Kind::Text,
            N::Ascii => Kind::Ascii,
            N::Blob => Kind::Blob,
            N::Uuid => Kind::Uuid,
            N::Timeuuid => Kind::Timeuuid,
            N::Timestamp => Kind::Timestamp,
            other => Kind::Unsupported(format!("{other:?}").to_ascii_lowercase()),
        },
        T::Collection { typ: C::List(e), .. } => Kind::List(Box::new(kind_of_scylla(e))),
        T::Collection { typ: C::Set(e), .. } => Kind::Set(Box::new(kind_of_scylla(e))),
        T::Collection { typ: C::Map(k, v), .. } => Kind::Map(Box::new(kind_of_scylla(k)), Box::new(kind_of_scylla(v))),
        other => Kind::Unsupported(format!("{other:?}")),
    }
}

/// A bound value as the official driver's value type.
pub fn to_scylla(b: Bound) -> Option<scylla::value::CqlValue> {
    use scylla::value::{Counter, CqlTimestamp, CqlTimeuuid, CqlValue as V};
    Some(match b {
        Bound::Null => return None,
        Bound::BigInt(x) => V::BigInt(x),
        Bound::Counter(x) => V::Counter(Counter(x)),
        Bound::Int(x) => V::Int(x),
        Bound::SmallInt(x) => V::SmallInt(x),
        Bound::TinyInt(x) => V::TinyInt(x),
        Bound::Boolean(x) => V::Boolean(x),
        Bound::Double(x) => V::Double(x),
        Bound::Float(x) => V::Float(x),
        Bound::Text(x) => V::Text(x),
        Bound::Ascii(x) => V::Ascii(x),
        Bound::Blob(x) => V::Blob(x),
        Bound::Uuid(x) => V::Uuid(x),
        Bound::Timeuuid(x) => V::Timeuuid(CqlTimeuuid::from(x)),
        Bound::Timestamp(x) => V::Timestamp(CqlTimestamp(x)),
        Bound::List(x) => V::List(x.into_iter().filter_map(to_scylla).collect()),
        Bound::Set(x) => V::Set(x.into_iter().filter_map(to_scylla).collect()),
        Bound::Map(x) => V::Map(x.into_iter().filter_map(|(k, v)| Some((to_scylla(k)?, to_scylla(v)?))).collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, kind: Kind) -> Column {
        Column { name: name.into(), kind }
    }

    fn v<T: rune::ToValue>(x: T) -> Value {
        rune::to_value(x).expect("to_value")
    }

    fn list(items: Vec<Value>) -> Value {
        let mut vec = rune::runtime::Vec::new();
        for i in items {
            vec.push(i).expect("push");
        }
        v(vec)
    }

    #[test]
    fn integers_take_the_marker_width() {
        let cols = [col("a", Kind::BigInt), col("b", Kind::Int), col("c", Kind::SmallInt), col("d", Kind::TinyInt)];
        let got = bind(&cols, &list(vec![v(1_i64 << 40), v(-5_i64), v(300_i64), v(-128_i64)])).expect("bind");
        assert_eq!(got, vec![Bound::BigInt(1 << 40), Bound::Int(-5), Bound::SmallInt(300), Bound::TinyInt(-128)]);
    }

    #[test]
    fn too_wide_integers_are_out_of_range() {
        let err = bind(&[col("n", Kind::Int)], &list(vec![v(1_i64 << 40)])).expect_err("range");
        assert!(matches!(&err, ConvertError::OutOfRange { index: 0, name, .. } if name == "n"), "{err}");
        let err = bind(&[col("n", Kind::TinyInt)], &list(vec![v(128_i64)])).expect_err("range");
        assert!(err.to_string().contains("out of range"), "{err}");
    }

    #[test]
    fn wrong_types_name_the_marker() {
        let err = bind(&[col("id", Kind::BigInt)], &list(vec![v(String::from("seven"))])).expect_err("type");
        let msg = err.to_string();
        assert!(msg.contains("`id`") && msg.contains("bigint") && msg.contains("String"), "{msg}");
        let err = bind(&[col("t", Kind::Text)], &list(vec![v(7_i64)])).expect_err("type");
        assert!(matches!(err, ConvertError::Mismatch { .. }), "{err}");
    }

    #[test]
    fn counts_must_match() {
        let err = bind(&[col("a", Kind::BigInt), col("b", Kind::Text)], &list(vec![v(1_i64)])).expect_err("count");
        assert_eq!(err, ConvertError::Count { markers: 2, values: 1 });
        let err = bind(&[col("a", Kind::BigInt)], &v(5_i64)).expect_err("not a list");
        assert!(matches!(err, ConvertError::NotAList { .. }), "{err}");
    }

    #[test]
    fn texts_floats_blobs_uuids_and_nulls() {
        let cols = [
            col("t", Kind::Text),
            col("d", Kind::Double),
            col("f", Kind::Float),
            col("b", Kind::Blob),
            col("u", Kind::Uuid),
            col("n", Kind::Int),
            col("o", Kind::BigInt),
            col("a", Kind::Ascii),
        ];
        let bytes = Bytes::from_slice([1_u8, 2, 3]).expect("bytes");
        let u = uuid::Uuid::from_u128(0x1234);
        let got = bind(
            &cols,
            &list(vec![
                v(String::from("héllo")),
                v(2.5_f64),
                v(3_i64),
                v(bytes),
                v(Uuid(u)),
                v(()),
                v(Some(9_i64)),
                v(String::from("plain")),
            ]),
        )
        .expect("bind");
        assert_eq!(
            got,
            vec![
                Bound::Text("héllo".into()),
                Bound::Double(2.5),
                Bound::Float(3.0),
                Bound::Blob(vec![1, 2, 3]),
                Bound::Uuid(u),
                Bound::Null,
                Bound::BigInt(9),
                Bound::Ascii("plain".into()),
            ]
        );
        let err = bind(&[col("a", Kind::Ascii)], &list(vec![v(String::from("ü"))])).expect_err("ascii");
        assert!(err.to_string().contains("not ASCII"), "{err}");
        let err = bind(&[col("x", Kind::Unsupported("duration".into()))], &list(vec![v(1_i64)])).expect_err("x");
        assert!(err.to_string().contains("duration"), "{err}");
    }

    #[test]
    fn collections_and_tuples() {
        let cols = [col("l", Kind::List(Box::new(Kind::Int))), col("s", Kind::Set(Box::new(Kind::Text)))];
        let params = v((list(vec![v(1_i64), v(2_i64)]), list(vec![v(String::from("x"))])));
        let got = bind(&cols, &params).expect("bind");
        assert_eq!(
            got,
            vec![Bound::List(vec![Bound::Int(1), Bound::Int(2)]), Bound::Set(vec![Bound::Text("x".into())])]
        );
        let err = bind(&cols[..1], &list(vec![list(vec![v(1_i64 << 40)])])).expect_err("element range");
        assert!(matches!(err, ConvertError::OutOfRange { .. }), "{err}");
    }

    #[test]
    fn both_drivers_get_the_same_values() {
        let row = [Bound::BigInt(7), Bound::Text("t".into()), Bound::Null, Bound::Timestamp(1_000)];
        let s: Vec<_> = row.iter().cloned().map(to_shardwise).collect();
        let o: Vec<_> = row.iter().cloned().map(to_scylla).collect();
        assert_eq!(format!("{s:?}"), format!("{o:?}").replace("CqlTimestamp", "CqlTimestamp"));
        assert!(s[2].is_none() && o[2].is_none());
    }

    #[test]
    fn column_types_map_alike() {
        use scylla::frame::response::result::{CollectionType, ColumnType as O, NativeType};
        use shardwise::protocol::types::ColumnType as S;
        assert_eq!(kind_of_shardwise(&S::BigInt), kind_of_scylla(&O::Native(NativeType::BigInt)));
        assert_eq!(
            kind_of_shardwise(&S::List(Box::new(S::Int))),
            kind_of_scylla(&O::Collection {
                frozen: false,
                typ: CollectionType::List(Box::new(O::Native(NativeType::Int)))
            })
        );
        assert!(matches!(kind_of_shardwise(&S::Duration), Kind::Unsupported(_)));
    }
}
