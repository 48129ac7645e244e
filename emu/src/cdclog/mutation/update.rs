//! UPDATE: every assignment (`c = v`, `m[k] = v`, `s = s + {...}`, ...)
//! on every selected row.

use super::*;

impl Builder<'_, '_> {
    /// The mutations of an UPDATE: its assignments on every selected row of every selected partition.
    pub(super) fn update(
        &mut self,
        schema: &Arc<TableSchema>,
        u: &Update,
        ts: i64,
        ttl: i32,
    ) -> Result<Vec<PartitionMutation>> {
        let partitions = self.partition_keys(schema, &u.relations)?;
        let rows = self.clustering_keys(schema, &u.relations)?;
        let mut out = Vec::new();
        for pk in partitions {
            let mut m = PartitionMutation::new(schema.clone(), pk);
            for a in &u.assignments {
                self.assignment(&mut m, &rows, a, ts, ttl)?;
            }
            out.push(m);
        }
        Ok(out)
    }

    pub(super) fn assignment(
        &mut self,
        m: &mut PartitionMutation,
        rows: &Option<Vec<Vec<Bytes>>>,
        a: &Assignment,
        ts: i64,
        ttl: i32,
    ) -> Result<()> {
        let schema = m.schema.clone();
        let name = match a {
            Assignment::Set { column, .. }
            | Assignment::Append { column, .. }
            | Assignment::Prepend { column, .. }
            | Assignment::Remove { column, .. }
            | Assignment::SetElement { column, .. }
            | Assignment::SetField { column, .. } => column,
        };
        let idx = self.column(&schema, name)?;
        if schema.is_key(idx) {
            return Err(MutationError::Unsupported(format!("assignment to key column {name}")));
        }
        let col = schema.columns[idx].clone();
        let kind = col.collection();
        let change = match (a, kind) {
            (Assignment::Set { value, .. }, _) => {
                let v = self.value(value, &col.typ, name)?;
                self.overwrite(&schema, idx, v, ts, ttl)?
            }
            (Assignment::Append { value, .. } | Assignment::Prepend { value, .. }, Some(kind)) => {
                let prepend = matches!(a, Assignment::Prepend { .. });
                match self.value(value, &col.typ, name)? {
                    Val::Bytes(b) => {
                        let cells = self.elements(&schema, idx, kind, &b, ts, ttl, prepend)?;
                        Some(ColumnChange::Collection(CollectionChange { tombstone: None, cells }))
                    }
                    _ => None,
                }
            }
            (Assignment::Remove { value, .. }, Some(kind)) => {
                let typ = match (&col.typ, kind) {
                    (ColumnType::Map(k, _), CollectionKind::Map) => ColumnType::Set(k.clone()),
                    (t, _) => t.clone(),
                };
                match (self.value(value, &typ, name)?, kind) {
                    (Val::Bytes(b), CollectionKind::Map | CollectionKind::Set) => {
                        let bad = |e: values::ValueError| MutationError::BadValue {
                            column: name.clone(),
                            reason: e.to_string(),
                        };
                        let cells = values::collection_elements(&b)
                            .map_err(bad)?
                            .into_iter()
                            .flatten()
                            .map(|k| ElementCell { key: Bytes::copy_from_slice(k), ts, ttl: 0, value: None })
                            .collect();
                        Some(ColumnChange::Collection(CollectionChange { tombstone: None, cells }))
                    }
                    (Val::Bytes(_), _) => {
                        // `l = l - [v]`: the keys holding v are Scylla's secret.
                        self.out.inexact += 1;
                        Some(ColumnChange::Collection(CollectionChange::default()))
                    }
                    _ => None,
                }
            }
            (Assignment::SetElement { key, value, .. }, Some(CollectionKind::Map)) => {
                let ColumnType::Map(kt, vt) = &col.typ else { return Ok(()) };
                let Val::Bytes(k) = self.value(key, kt, name)? else {
                    return Err(MutationError::BadValue { column: name.clone(), reason: "null map key".into() });
                };
                self.element(k, self.value(value, vt, name)?, ts, ttl)
            }
            (Assignment::SetElement { key, value, .. }, Some(CollectionKind::List)) => {
                let ColumnType::List(vt) = &col.typ else { return Ok(()) };
                let Val::Bytes(i) = self.value(key, &ColumnType::Int, name)? else {
                    return Err(MutationError::BadValue { column: name.clone(), reason: "null list index".into() });
                };
                self.out.inexact += 1;
                let v = self.value(value, vt, name)?;
                self.element(positional_key(&i), v, ts, ttl)
            }
            (Assignment::SetField { field, value, .. }, Some(CollectionKind::Udt)) => {
                let ColumnType::Udt { fields, .. } = &col.typ else { return Ok(()) };
                let f = fields
                    .iter()
                    .position(|(n, _)| n == field)
                    .ok_or_else(|| MutationError::UnknownColumn(format!("{name}.{field}")))?;
                let v = self.value(value, &fields[f].1, name)?;
                self.element(Bytes::copy_from_slice(&(f as i16).to_be_bytes()), v, ts, ttl)
            }
            _ => return Err(MutationError::Unsupported(format!("this assignment to {name} ({:?})", col.typ))),
        };
        let Some(change) = change else { return Ok(()) };
        self.apply(m, rows, idx, change)
    }
}
