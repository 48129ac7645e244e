//! CQL column types as the protocol describes them (`[option]` of the spec,
//! §4.2.5.2), including Cassandra 5's `vector`, which travels as a custom
//! type whose class name carries the element type and the dimension.

use std::fmt;

use bytes::BufMut;

use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};

/// The class name prefix Cassandra uses for vectors sent as custom types.
const VECTOR_CLASS: &str = "org.apache.cassandra.db.marshal.VectorType";
/// The class name of `duration` announced as a custom type on protocol v4.
pub const DURATION_CLASS: &str = "org.apache.cassandra.db.marshal.DurationType";

/// Nesting limit for types read from the wire, so hostile input cannot
/// exhaust the stack.
const MAX_DEPTH: usize = 32;

/// A CQL type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColumnType {
    /// A custom type, by its Java class name.
    Custom(String),
    /// `ascii`
    Ascii,
    /// `bigint`
    BigInt,
    /// `blob`
    Blob,
    /// `boolean`
    Boolean,
    /// `counter`
    Counter,
    /// `decimal`
    Decimal,
    /// `double`
    Double,
    /// `float`
    Float,
    /// `int`
    Int,
    /// `timestamp`
    Timestamp,
    /// `uuid`
    Uuid,
    /// `text` / `varchar`
    Text,
    /// `varint`
    Varint,
    /// `timeuuid`
    Timeuuid,
    /// `inet`
    Inet,
    /// `date`
    Date,
    /// `time`
    Time,
    /// `smallint`
    SmallInt,
    /// `tinyint`
    TinyInt,
    /// `duration`
    Duration,
    /// `list<T>`
    List(Box<ColumnType>),
    /// `map<K, V>`
    Map(Box<ColumnType>, Box<ColumnType>),
    /// `set<T>`
    Set(Box<ColumnType>),
    /// A user-defined type.
    Udt {
        /// Keyspace of the type.
        keyspace: String,
        /// Name of the type.
        name: String,
        /// Field names and types, in declaration order.
        fields: Vec<(String, ColumnType)>,
    },
    /// `tuple<...>`
    Tuple(Vec<ColumnType>),
    /// `vector<T, n>` (Cassandra 5).
    Vector(Box<ColumnType>, u32),
}

impl ColumnType {
    /// Reads an `[option]` describing a type.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Self::decode_depth(r, 0)
    }

    fn decode_depth(r: &mut Reader<'_>, depth: usize) -> Result<Self, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::Invalid { what: "column type", reason: "nested too deeply" });
        }
        let id = r.u16("column type id")?;
        let inner = |r: &mut Reader<'_>| Self::decode_depth(r, depth + 1).map(Box::new);
        Ok(match id {
            0x0000 => {
                let class = r.string("custom type class")?;
                Self::from_custom_class(class)?
            }
            0x0001 => ColumnType::Ascii,
            0x0002 => ColumnType::BigInt,
            0x0003 => ColumnType::Blob,
            0x0004 => ColumnType::Boolean,
            0x0005 => ColumnType::Counter,
            0x0006 => ColumnType::Decimal,
            0x0007 => ColumnType::Double,
            0x0008 => ColumnType::Float,
            0x0009 => ColumnType::Int,
            0x000B => ColumnType::Timestamp,
            0x000C => ColumnType::Uuid,
            0x000D => ColumnType::Text,
            0x000E => ColumnType::Varint,
            0x000F => ColumnType::Timeuuid,
            0x0010 => ColumnType::Inet,
            0x0011 => ColumnType::Date,
            0x0012 => ColumnType::Time,
            0x0013 => ColumnType::SmallInt,
            0x0014 => ColumnType::TinyInt,
            0x0015 => ColumnType::Duration,
            0x0020 => ColumnType::List(inner(r)?),
            0x0021 => ColumnType::Map(inner(r)?, inner(r)?),
            0x0022 => ColumnType::Set(inner(r)?),
            0x0030 => {
                let keyspace = r.string("udt keyspace")?.to_owned();
                let name = r.string("udt name")?.to_owned();
                let n = r.u16("udt field count")? as usize;
                let mut fields = Vec::with_capacity(n.min(r.remaining() / 4));
                for _ in 0..n {
                    let field = r.string("udt field name")?.to_owned();
                    fields.push((field, Self::decode_depth(r, depth + 1)?));
                }
                ColumnType::Udt { keyspace, name, fields }
            }
            0x0031 => {
                let n = r.u16("tuple arity")? as usize;
                let mut types = Vec::with_capacity(n.min(r.remaining() / 2));
                for _ in 0..n {
                    types.push(Self::decode_depth(r, depth + 1)?);
                }
                ColumnType::Tuple(types)
            }
            _ => return Err(DecodeError::UnknownCode { what: "column type id", value: id.into() }),
        })
    }

    /// Whether the `[option]` at `r` describes this type, read in place and
    /// without allocating (custom classes excepted); `r` is left anywhere
    /// within the option when it does not.
    pub fn is_encoded_at(&self, r: &mut Reader<'_>) -> Result<bool, DecodeError> {
        self.is_encoded_at_depth(r, 0)
    }

    fn is_encoded_at_depth(&self, r: &mut Reader<'_>, depth: usize) -> Result<bool, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::Invalid { what: "column type", reason: "nested too deeply" });
        }
        let id = r.u16("column type id")?;
        let deeper = depth + 1;
        Ok(match (id, self) {
            (0x0000, _) => Self::from_custom_class(r.string("custom type class")?)? == *self,
            (0x0020, ColumnType::List(t)) | (0x0022, ColumnType::Set(t)) => t.is_encoded_at_depth(r, deeper)?,
            (0x0021, ColumnType::Map(k, v)) => k.is_encoded_at_depth(r, deeper)? && v.is_encoded_at_depth(r, deeper)?,
            (0x0030, ColumnType::Udt { keyspace, name, fields }) => {
                if r.string("udt keyspace")? != keyspace
                    || r.string("udt name")? != name
                    || usize::from(r.u16("udt field count")?) != fields.len()
                {
                    return Ok(false);
                }
                for (field, typ) in fields {
                    if r.string("udt field name")? != field || !typ.is_encoded_at_depth(r, deeper)? {
                        return Ok(false);
                    }
                }
                true
            }
            (0x0031, ColumnType::Tuple(types)) => {
                if usize::from(r.u16("tuple arity")?) != types.len() {
                    return Ok(false);
                }
                for typ in types {
                    if !typ.is_encoded_at_depth(r, deeper)? {
                        return Ok(false);
                    }
                }
                true
            }
            (0x0020..=0x0022 | 0x0030 | 0x0031, _) => false,
            // The simple types: the id alone.
            (id, typ) => Self::decode(&mut Reader::new(&id.to_be_bytes()))? == *typ,
        })
    }

    /// Interprets a custom type's class name: `DurationType` (v4) and
    /// `VectorType(...)` (Cassandra 5) become their own variants.
    pub fn from_custom_class(class: &str) -> Result<Self, DecodeError> {
        if class == DURATION_CLASS {
            return Ok(ColumnType::Duration);
        }
        if let Some(args) = class.strip_prefix(VECTOR_CLASS) {
            return parse_vector_args(args, 0);
        }
        Ok(ColumnType::Custom(class.to_owned()))
    }

    /// Size of the `[option]` encoding of this type.
    pub fn encoded_len(&self) -> Result<usize, EncodeError> {
        Ok(2 + match self {
            ColumnType::Custom(class) => codec::string_len("custom type class", class)?,
            ColumnType::Vector(..) => codec::string_len("vector class", &self.java_class())?,
            ColumnType::List(t) | ColumnType::Set(t) => t.encoded_len()?,
            ColumnType::Map(k, v) => k.encoded_len()? + v.encoded_len()?,
            ColumnType::Udt { keyspace, name, fields } => {
                codec::check_short_len("udt fields", fields.len())?;
                let mut n = codec::string_len("udt keyspace", keyspace)? + codec::string_len("udt name", name)? + 2;
                for (f, t) in fields {
                    n += codec::string_len("udt field", f)? + t.encoded_len()?;
                }
                n
            }
            ColumnType::Tuple(types) => {
                codec::check_short_len("tuple arity", types.len())?;
                types.iter().try_fold(2, |acc, t| Ok::<_, EncodeError>(acc + t.encoded_len()?))?
            }
            _ => 0,
        })
    }

    /// Writes the `[option]` encoding; lengths were checked by [`Self::encoded_len`].
    pub fn encode(&self, buf: &mut impl BufMut) {
        match self {
            ColumnType::Custom(class) => {
                buf.put_u16(0);
                codec::put_string(buf, class);
            }
            ColumnType::Vector(..) => {
                buf.put_u16(0);
                codec::put_string(buf, &self.java_class());
            }
            ColumnType::List(t) => {
                buf.put_u16(0x20);
                t.encode(buf);
            }
            ColumnType::Map(k, v) => {
                buf.put_u16(0x21);
                k.encode(buf);
                v.encode(buf);
            }
            ColumnType::Set(t) => {
                buf.put_u16(0x22);
                t.encode(buf);
            }
            ColumnType::Udt { keyspace, name, fields } => {
                buf.put_u16(0x30);
                codec::put_string(buf, keyspace);
                codec::put_string(buf, name);
                buf.put_u16(fields.len() as u16);
                for (f, t) in fields {
                    codec::put_string(buf, f);
                    t.encode(buf);
                }
            }
            ColumnType::Tuple(types) => {
                buf.put_u16(0x31);
                buf.put_u16(types.len() as u16);
                for t in types {
                    t.encode(buf);
                }
            }
            simple => buf.put_u16(simple.simple_id()),
        }
    }

    fn simple_id(&self) -> u16 {
        match self {
            ColumnType::Ascii => 0x01,
            ColumnType::BigInt => 0x02,
            ColumnType::Blob => 0x03,
            ColumnType::Boolean => 0x04,
            ColumnType::Counter => 0x05,
            ColumnType::Decimal => 0x06,
            ColumnType::Double => 0x07,
            ColumnType::Float => 0x08,
            ColumnType::Int => 0x09,
            ColumnType::Timestamp => 0x0B,
            ColumnType::Uuid => 0x0C,
            ColumnType::Text => 0x0D,
            ColumnType::Varint => 0x0E,
            ColumnType::Timeuuid => 0x0F,
            ColumnType::Inet => 0x10,
            ColumnType::Date => 0x11,
            ColumnType::Time => 0x12,
            ColumnType::SmallInt => 0x13,
            ColumnType::TinyInt => 0x14,
            ColumnType::Duration => 0x15,
            _ => 0,
        }
    }

    /// The serialized size of values of this type if Cassandra declares it
    /// fixed (`AbstractType.valueLengthIfFixed`). This decides how `vector`
    /// elements are laid out: elements of these types are written without a
    /// length. `tinyint`, `smallint`, `date`, `time` and `counter` values
    /// also always have the same size, but Cassandra does not declare them
    /// fixed, so inside a vector they carry a length like variable-size
    /// types do.
    pub fn fixed_size(&self) -> Option<usize> {
        match self {
            ColumnType::Boolean => Some(1),
            ColumnType::Int | ColumnType::Float => Some(4),
            ColumnType::BigInt | ColumnType::Double | ColumnType::Timestamp => Some(8),
            ColumnType::Uuid | ColumnType::Timeuuid => Some(16),
            // Saturates: a size past `usize::MAX` is never met by a value
            // (decoding checks the bytes are there), and the wire never
            // yields such a type (`parse_vector_args` refuses it).
            ColumnType::Vector(t, n) => t.fixed_size().map(|s| s.saturating_mul(*n as usize)),
            _ => None,
        }
    }

    /// The Java class name of the type's Cassandra marshaller (used for
    /// vectors, which travel as custom types).
    pub fn java_class(&self) -> String {
        const P: &str = "org.apache.cassandra.db.marshal.";
        match self {
            ColumnType::Custom(c) => c.clone(),
            ColumnType::Ascii => format!("{P}AsciiType"),
            ColumnType::BigInt => format!("{P}LongType"),
            ColumnType::Blob => format!("{P}BytesType"),
            ColumnType::Boolean => format!("{P}BooleanType"),
            ColumnType::Counter => format!("{P}CounterColumnType"),
            ColumnType::Decimal => format!("{P}DecimalType"),
            ColumnType::Double => format!("{P}DoubleType"),
            ColumnType::Float => format!("{P}FloatType"),
            ColumnType::Int => format!("{P}Int32Type"),
            ColumnType::Timestamp => format!("{P}TimestampType"),
            ColumnType::Uuid => format!("{P}UUIDType"),
            ColumnType::Text => format!("{P}UTF8Type"),
            ColumnType::Varint => format!("{P}IntegerType"),
            ColumnType::Timeuuid => format!("{P}TimeUUIDType"),
            ColumnType::Inet => format!("{P}InetAddressType"),
            ColumnType::Date => format!("{P}SimpleDateType"),
            ColumnType::Time => format!("{P}TimeType"),
            ColumnType::SmallInt => format!("{P}ShortType"),
            ColumnType::TinyInt => format!("{P}ByteType"),
            ColumnType::Duration => format!("{P}DurationType"),
            ColumnType::List(t) => format!("{P}ListType({})", t.java_class()),
            ColumnType::Set(t) => format!("{P}SetType({})", t.java_class()),
            ColumnType::Map(k, v) => format!("{P}MapType({},{})", k.java_class(), v.java_class()),
            ColumnType::Tuple(ts) => {
                let inner: Vec<String> = ts.iter().map(ColumnType::java_class).collect();
                format!("{P}TupleType({})", inner.join(","))
            }
            ColumnType::Udt { keyspace, name, fields } => {
                let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
                let inner: Vec<String> = fields
                    .iter()
                    .map(|(f, t)| {
                        let fh: String = f.bytes().map(|b| format!("{b:02x}")).collect();
                        format!("{fh}:{}", t.java_class())
                    })
                    .collect();
                format!("{P}UserType({keyspace},{hex},{})", inner.join(","))
            }
            ColumnType::Vector(t, n) => format!("{VECTOR_CLASS}({}, {n})", t.java_class()),
        }
    }
}

/// Parses `(ElementClass, N)` after `VectorType`. Only element classes that
/// map to native types (possibly nested vectors / collections of them) are
/// understood; anything else keeps the element as `Custom`.
fn parse_vector_args(args: &str, depth: usize) -> Result<ColumnType, DecodeError> {
    const WHAT: &str = "vector type";
    if depth > MAX_DEPTH {
        return Err(DecodeError::Invalid { what: WHAT, reason: "nested too deeply" });
    }
    let inner = args
        .strip_prefix('(')
        .and_then(|a| a.strip_suffix(')'))
        .ok_or(DecodeError::Invalid { what: WHAT, reason: "expected (element, dimension)" })?;
    let comma = inner.rfind(',').ok_or(DecodeError::Invalid { what: WHAT, reason: "missing dimension" })?;
    let (elem, dim) = (inner[..comma].trim(), inner[comma + 1..].trim());
    let dim: u32 = dim.parse().map_err(|_| DecodeError::Invalid { what: WHAT, reason: "dimension is not a number" })?;
    if dim == 0 {
        return Err(DecodeError::Invalid { what: WHAT, reason: "dimension must be positive" });
    }
    let elem = parse_java_class(elem, depth + 1)?;
    // The size of nested fixed-size vectors multiplies: check it fits.
    if let Some(size) = elem.fixed_size() {
        size.checked_mul(dim as usize).ok_or(DecodeError::Invalid { what: WHAT, reason: "size overflows" })?;
    }
    Ok(ColumnType::Vector(Box::new(elem), dim))
}

fn parse_java_class(class: &str, depth: usize) -> Result<ColumnType, DecodeError> {
    let short = class.strip_prefix("org.apache.cassandra.db.marshal.").unwrap_or(class);
    Ok(match short {
        "AsciiType" => ColumnType::Ascii,
        "LongType" => ColumnType::BigInt,
        "BytesType" => ColumnType::Blob,
        "BooleanType" => ColumnType::Boolean,
        "CounterColumnType" => ColumnType::Counter,
        "DecimalType" => ColumnType::Decimal,
        "DoubleType" => ColumnType::Double,
        "FloatType" => ColumnType::Float,
        "Int32Type" => ColumnType::Int,
        "TimestampType" => ColumnType::Timestamp,
        "UUIDType" => ColumnType::Uuid,
        "UTF8Type" => ColumnType::Text,
        "IntegerType" => ColumnType::Varint,
        "TimeUUIDType" => ColumnType::Timeuuid,
        "InetAddressType" => ColumnType::Inet,
        "SimpleDateType" => ColumnType::Date,
        "TimeType" => ColumnType::Time,
        "ShortType" => ColumnType::SmallInt,
        "ByteType" => ColumnType::TinyInt,
        "DurationType" => ColumnType::Duration,
        s if s.starts_with("VectorType(") => parse_vector_args(&s["VectorType".len()..], depth)?,
        _ => ColumnType::Custom(class.to_owned()),
    })
}

impl fmt::Display for ColumnType {
    /// Formats the type as CQL writes it (`map<text, frozen<list<int>>>` is
    /// written without `frozen`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Custom(c) => write!(f, "'{c}'"),
            ColumnType::Ascii => f.write_str("ascii"),
            ColumnType::BigInt => f.write_str("bigint"),
            ColumnType::Blob => f.write_str("blob"),
            ColumnType::Boolean => f.write_str("boolean"),
            ColumnType::Counter => f.write_str("counter"),
            ColumnType::Decimal => f.write_str("decimal"),
            ColumnType::Double => f.write_str("double"),
            ColumnType::Float => f.write_str("float"),
            ColumnType::Int => f.write_str("int"),
            ColumnType::Timestamp => f.write_str("timestamp"),
            ColumnType::Uuid => f.write_str("uuid"),
            ColumnType::Text => f.write_str("text"),
            ColumnType::Varint => f.write_str("varint"),
            ColumnType::Timeuuid => f.write_str("timeuuid"),
            ColumnType::Inet => f.write_str("inet"),
            ColumnType::Date => f.write_str("date"),
            ColumnType::Time => f.write_str("time"),
            ColumnType::SmallInt => f.write_str("smallint"),
            ColumnType::TinyInt => f.write_str("tinyint"),
            ColumnType::Duration => f.write_str("duration"),
            ColumnType::List(t) => write!(f, "list<{t}>"),
            ColumnType::Set(t) => write!(f, "set<{t}>"),
            ColumnType::Map(k, v) => write!(f, "map<{k}, {v}>"),
            ColumnType::Udt { keyspace, name, .. } => write!(f, "{keyspace}.{name}"),
            ColumnType::Tuple(ts) => {
                f.write_str("tuple<")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(">")
            }
            ColumnType::Vector(t, n) => write!(f, "vector<{t}, {n}>"),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn vector_custom_class_is_understood() {
        let t = ColumnType::from_custom_class(
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 3)",
        );
        assert_eq!(t, Ok(ColumnType::Vector(Box::new(ColumnType::Float), 3)));
        assert_eq!(ColumnType::from_custom_class(DURATION_CLASS), Ok(ColumnType::Duration));
        assert!(ColumnType::from_custom_class(&format!("{VECTOR_CLASS}(x)")).is_err());
    }

    /// The size of nested vectors multiplied without a check: this one
    /// overflowed `usize` (a panic in debug builds, a wrong size otherwise).
    #[test]
    fn nested_vector_size_overflow_is_a_typed_error() {
        let class =
            format!("{VECTOR_CLASS}({VECTOR_CLASS}(org.apache.cassandra.db.marshal.UUIDType, 4294967295), 4294967295)");
        assert_eq!(
            ColumnType::from_custom_class(&class),
            Err(DecodeError::Invalid { what: "vector type", reason: "size overflows" })
        );
        // Built by hand, the type's size saturates instead of wrapping.
        let inner = ColumnType::Vector(Box::new(ColumnType::Uuid), u32::MAX);
        let outer = ColumnType::Vector(Box::new(inner), u32::MAX);
        assert_eq!(outer.fixed_size(), Some(usize::MAX));
    }

    #[test]
    fn every_type_round_trips() {
        for t in sample_types() {
            let mut out = Vec::new();
            t.encode(&mut out);
            assert_eq!(out.len(), t.encoded_len().unwrap_or(0), "{t}");
            let mut r = Reader::new(&out);
            assert_eq!(ColumnType::decode(&mut r).as_ref(), Ok(&t));
            assert!(r.is_empty());
            for p in 0..out.len() {
                assert!(ColumnType::decode(&mut Reader::new(&out[..p])).is_err(), "{t} prefix {p}");
            }
        }
    }

    /// Every type is recognised where it is encoded, read to its end, and
    /// no other type is (the in-place comparison of result metadata).
    #[test]
    fn every_type_is_recognised_in_place_and_no_other() {
        let types = sample_types();
        for t in &types {
            let mut out = Vec::new();
            t.encode(&mut out);
            for other in &types {
                let mut r = Reader::new(&out);
                let same = other.is_encoded_at(&mut r);
                assert_eq!(same, Ok(other == t), "{other} at {t}");
                if other == t {
                    assert!(r.is_empty(), "{t} read to its end");
                }
            }
            for p in 0..out.len() {
                assert!(t.is_encoded_at(&mut Reader::new(&out[..p])) != Ok(true), "{t} prefix {p}");
            }
        }
    }

    /// One of every type, nested where the type nests.
    pub(crate) fn sample_types() -> Vec<ColumnType> {
        use ColumnType::*;
        vec![
            Custom("com.example.MyType".into()),
            Ascii,
            BigInt,
            Blob,
            Boolean,
            Counter,
            Decimal,
            Double,
            Float,
            Int,
            Timestamp,
            Uuid,
            Text,
            Varint,
            Timeuuid,
            Inet,
            Date,
            Time,
            SmallInt,
            TinyInt,
            Duration,
            List(Box::new(Int)),
            Set(Box::new(Text)),
            Map(Box::new(Text), Box::new(List(Box::new(BigInt)))),
            Udt {
                keyspace: "ks".into(),
                name: "address".into(),
                fields: vec![("street".into(), Text), ("zip".into(), Int)],
            },
            Tuple(vec![Int, Text, Boolean]),
            Vector(Box::new(Float), 3),
            Vector(Box::new(Text), 2),
        ]
    }
}
