//! The builder every statement kind shares: bound values, timestamps and
//! TTLs, the selected partition and clustering keys, and merging the
//! mutations of one partition.

use super::*;

pub(super) struct Builder<'a, 'c> {
    pub(super) cx: &'a Context<'c>,
    pub(super) out: Built,
    pub(super) list_seq: u32,
}

/// Microseconds of 2010-01-01T00:00:00Z, the mirror of list prepends.
pub(super) const PREPEND_EPOCH_MICROS: i64 = 1_262_304_000_000_000;

impl Builder<'_, '_> {
    pub(super) fn value(&self, term: &Term, typ: &ColumnType, column: &str) -> Result<Val> {
        match term {
            Term::Bind(m) => {
                let raw = match (self.cx.binds.names, &m.name) {
                    (Some(names), Some(name)) => names
                        .iter()
                        .position(|n| n.eq_ignore_ascii_case(name))
                        .and_then(|i| self.cx.binds.values.get(i)),
                    _ => self.cx.binds.values.get(m.index),
                };
                match raw.copied().ok_or(MutationError::MissingValue(m.index))? {
                    RawValue::Null => Ok(Val::Null),
                    RawValue::Unset => Ok(Val::Unset),
                    RawValue::Value(b) => Ok(Val::Bytes(Bytes::copy_from_slice(b))),
                }
            }
            Term::Literal(Literal::Null) => Ok(Val::Null),
            Term::Literal(lit) => match literal_bytes(lit, typ) {
                Ok(Some(b)) => Ok(Val::Bytes(Bytes::from(b))),
                Ok(None) => Ok(Val::Null),
                Err(e) => Err(MutationError::BadValue { column: column.into(), reason: e.to_string() }),
            },
        }
    }

    pub(super) fn bigint(&self, term: &Term) -> Result<Option<i64>> {
        match self.value(term, &ColumnType::BigInt, "USING TIMESTAMP")? {
            Val::Bytes(b) => {
                let arr: [u8; 8] = b[..].try_into().map_err(|_| MutationError::BadValue {
                    column: "USING TIMESTAMP".into(),
                    reason: format!("{} bytes", b.len()),
                })?;
                Ok(Some(i64::from_be_bytes(arr)))
            }
            _ => Ok(None),
        }
    }

    pub(super) fn ttl(&self, term: &Option<Term>, schema: &TableSchema) -> Result<i32> {
        let Some(term) = term else { return Ok(schema.default_ttl) };
        match self.value(term, &ColumnType::Int, "USING TTL")? {
            Val::Bytes(b) => {
                let arr: [u8; 4] = b[..].try_into().map_err(|_| MutationError::BadValue {
                    column: "USING TTL".into(),
                    reason: format!("{} bytes", b.len()),
                })?;
                Ok(i32::from_be_bytes(arr))
            }
            Val::Null | Val::Unset => Ok(schema.default_ttl),
        }
    }

    pub(super) fn statement(&mut self, s: &Statement, default_ts: i64) -> Result<()> {
        let (table, using) = match s {
            Statement::Insert(i) => (&i.table, &i.using),
            Statement::Update(u) => (&u.table, &u.using),
            Statement::Delete(d) => (&d.table, &d.using),
            Statement::Batch(_) => return Err(MutationError::Unsupported("nested batch".into())),
        };
        let Some(schema) = (self.cx.schema_of)(table) else { return Ok(()) };
        let ts = match &using.timestamp {
            Some(t) => self.bigint(t)?.unwrap_or(default_ts),
            None => default_ts,
        };
        let ttl = self.ttl(&using.ttl, &schema)?;
        self.list_seq = 0;
        let mutations = match s {
            Statement::Insert(i) => self.insert(&schema, i, ts, ttl)?,
            Statement::Update(u) => self.update(&schema, u, ts, ttl)?,
            Statement::Delete(d) => self.delete(&schema, d, ts)?,
            Statement::Batch(_) => Vec::new(),
        };
        for m in mutations {
            if m.is_empty() {
                continue;
            }
            let same =
                self.out.mutations.iter_mut().find(|o| {
                    o.schema.keyspace == m.schema.keyspace && o.schema.table == m.schema.table && o.key == m.key
                });
            match same {
                Some(o) => o.absorb(m),
                None => self.out.mutations.push(m),
            }
        }
        Ok(())
    }

    pub(super) fn column(&self, schema: &TableSchema, name: &str) -> Result<usize> {
        schema.index(name).ok_or_else(|| MutationError::UnknownColumn(name.into()))
    }

    /// Values of one column's `=` / `IN` relation.
    pub(super) fn equal_values(
        &self,
        schema: &TableSchema,
        idx: usize,
        relations: &[Relation],
    ) -> Result<Option<Vec<Bytes>>> {
        let col = &schema.columns[idx];
        let key = |v: Val| match v {
            Val::Bytes(b) => Ok(b),
            _ => Err(MutationError::Where(format!("null key value for {}", col.name))),
        };
        for r in relations {
            match r {
                Relation::Compare { column, op: CompareOp::Eq, value } if *column == col.name => {
                    return Ok(Some(vec![key(self.value(value, &col.typ, column)?)?]));
                }
                Relation::In { column, values } if *column == col.name => {
                    return Ok(Some(match values {
                        InValues::List(terms) => {
                            terms.iter().map(|t| key(self.value(t, &col.typ, column)?)).collect::<Result<_>>()?
                        }
                        InValues::Marker(t) => {
                            match self.value(t, &ColumnType::List(Box::new(col.typ.clone())), column)? {
                                Val::Bytes(b) => values::collection_elements(&b)
                                    .map_err(|e| MutationError::BadValue {
                                        column: column.clone(),
                                        reason: e.to_string(),
                                    })?
                                    .into_iter()
                                    .flatten()
                                    .map(Bytes::copy_from_slice)
                                    .collect(),
                                _ => return Err(MutationError::Where(format!("null IN list for {column}"))),
                            }
                        }
                    }));
                }
                _ => {}
            }
        }
        Ok(None)
    }

    pub(super) fn partition_keys(&self, schema: &TableSchema, relations: &[Relation]) -> Result<Vec<Vec<Bytes>>> {
        let mut keys: Vec<Vec<Bytes>> = vec![Vec::new()];
        for &idx in &schema.partition_key {
            let values = self.equal_values(schema, idx, relations)?.ok_or_else(|| {
                MutationError::Where(format!("no value for partition key column {}", schema.columns[idx].name))
            })?;
            keys = product(keys, &values);
        }
        Ok(keys)
    }

    /// Full clustering keys selected by `=`/`IN`, `None` when the WHERE
    /// clause names no clustering column (a static-only write).
    pub(super) fn clustering_keys(
        &self,
        schema: &TableSchema,
        relations: &[Relation],
    ) -> Result<Option<Vec<Vec<Bytes>>>> {
        if schema.clustering.is_empty() {
            return Ok(Some(vec![Vec::new()]));
        }
        let mut keys: Vec<Vec<Bytes>> = vec![Vec::new()];
        for (n, &idx) in schema.clustering.iter().enumerate() {
            match self.equal_values(schema, idx, relations)? {
                Some(values) => keys = product(keys, &values),
                None if n == 0 => return Ok(None),
                None => {
                    return Err(MutationError::Where(format!(
                        "no value for clustering column {}",
                        schema.columns[idx].name
                    )))
                }
            }
        }
        Ok(Some(keys))
    }
}

pub(super) fn product(keys: Vec<Vec<Bytes>>, values: &[Bytes]) -> Vec<Vec<Bytes>> {
    let mut out = Vec::with_capacity(keys.len() * values.len());
    for k in keys {
        for v in values {
            let mut k = k.clone();
            k.push(v.clone());
            out.push(k);
        }
    }
    out
}
