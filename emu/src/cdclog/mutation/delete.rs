//! DELETE: partitions, rows and clustering ranges (range tombstones), or
//! the listed columns and collection elements.

use super::*;

impl Builder<'_, '_> {
    /// The mutations of a DELETE: rows, ranges or the partition, or the listed columns and elements.
    pub(super) fn delete(&mut self, schema: &Arc<TableSchema>, d: &Delete, ts: i64) -> Result<Vec<PartitionMutation>> {
        let partitions = self.partition_keys(schema, &d.relations)?;
        let mut out = Vec::new();
        for pk in partitions {
            let mut m = PartitionMutation::new(schema.clone(), pk);
            if d.targets.is_empty() {
                self.delete_rows(&mut m, &d.relations, ts)?;
            } else {
                let rows = self.clustering_keys(schema, &d.relations)?;
                for t in &d.targets {
                    self.delete_target(&mut m, &rows, t, ts)?;
                }
            }
            out.push(m);
        }
        Ok(out)
    }

    pub(super) fn delete_target(
        &mut self,
        m: &mut PartitionMutation,
        rows: &Option<Vec<Vec<Bytes>>>,
        t: &DeleteTarget,
        ts: i64,
    ) -> Result<()> {
        let schema = m.schema.clone();
        let name = match t {
            DeleteTarget::Column(c)
            | DeleteTarget::Element { column: c, .. }
            | DeleteTarget::Field { column: c, .. } => c,
        };
        let idx = self.column(&schema, name)?;
        let col = schema.columns[idx].clone();
        let change = match (t, col.collection()) {
            (DeleteTarget::Column(_), None) => ColumnChange::Atomic(Cell { ts, ttl: 0, value: None }),
            (DeleteTarget::Column(_), Some(_)) => {
                ColumnChange::Collection(CollectionChange { tombstone: Some(ts), cells: Vec::new() })
            }
            (DeleteTarget::Element { key, .. }, Some(CollectionKind::Map | CollectionKind::Set)) => {
                let kt = col.key_type();
                let Val::Bytes(k) = self.value(key, &kt, name)? else { return Ok(()) };
                let cell = ElementCell { key: k, ts, ttl: 0, value: None };
                ColumnChange::Collection(CollectionChange { tombstone: None, cells: vec![cell] })
            }
            (DeleteTarget::Element { key, .. }, Some(CollectionKind::List)) => {
                let Val::Bytes(i) = self.value(key, &ColumnType::Int, name)? else { return Ok(()) };
                self.out.inexact += 1;
                let cell = ElementCell { key: positional_key(&i), ts, ttl: 0, value: None };
                ColumnChange::Collection(CollectionChange { tombstone: None, cells: vec![cell] })
            }
            (DeleteTarget::Field { field, .. }, Some(CollectionKind::Udt)) => {
                let ColumnType::Udt { fields, .. } = &col.typ else { return Ok(()) };
                let f = fields
                    .iter()
                    .position(|(n, _)| n == field)
                    .ok_or_else(|| MutationError::UnknownColumn(format!("{name}.{field}")))?;
                let cell =
                    ElementCell { key: Bytes::copy_from_slice(&(f as i16).to_be_bytes()), ts, ttl: 0, value: None };
                ColumnChange::Collection(CollectionChange { tombstone: None, cells: vec![cell] })
            }
            _ => return Err(MutationError::Unsupported(format!("this DELETE of {name}"))),
        };
        self.apply(m, rows, idx, change)
    }

    /// `DELETE FROM` without columns: a partition, rows, or a range.
    pub(super) fn delete_rows(&self, m: &mut PartitionMutation, relations: &[Relation], ts: i64) -> Result<()> {
        let schema = m.schema.clone();
        // Equality prefix.
        let mut prefixes: Vec<Vec<Bytes>> = vec![Vec::new()];
        let mut n = 0;
        while n < schema.clustering.len() {
            match self.equal_values(&schema, schema.clustering[n], relations)? {
                Some(values) => prefixes = product(prefixes, &values),
                None => break,
            }
            n += 1;
        }
        if n == 0 && !has_slice(&schema, relations) {
            m.partition_tombstone = Some(ts);
            return Ok(());
        }
        if n == schema.clustering.len() {
            for ck in prefixes {
                m.row_mut(ck).tombstone = Some(ts);
            }
            return Ok(());
        }
        // A slice on the next column(s).
        let (mut lower, mut upper): (Option<SliceBound>, Option<SliceBound>) = (None, None);
        for r in relations {
            let (columns, op, values): (Vec<&String>, CompareOp, Vec<&Term>) = match r {
                Relation::Compare { column, op, value } if *op != CompareOp::Eq => (vec![column], *op, vec![value]),
                Relation::MultiCompare { columns, op, values: MultiValues::List(terms) } => {
                    (columns.iter().collect(), *op, terms.iter().collect())
                }
                Relation::MultiCompare { .. } => {
                    return Err(MutationError::Where("a tuple relation with a single bind marker".into()))
                }
                _ => continue,
            };
            let mut bound = Vec::new();
            for (i, (c, t)) in columns.iter().zip(values).enumerate() {
                let Some(&idx) = schema.clustering.get(n + i) else {
                    return Err(MutationError::Where(format!("{c} is not the next clustering column")));
                };
                if schema.columns[idx].name != **c {
                    return Err(MutationError::Where(format!("{c} is not the next clustering column")));
                }
                match self.value(t, &schema.columns[idx].typ, c)? {
                    Val::Bytes(b) => bound.push(b),
                    _ => return Err(MutationError::Where(format!("null bound for {c}"))),
                }
            }
            match op {
                CompareOp::Gt => lower = Some((bound, false)),
                CompareOp::Ge => lower = Some((bound, true)),
                CompareOp::Lt => upper = Some((bound, false)),
                CompareOp::Le => upper = Some((bound, true)),
                CompareOp::Eq => {}
            }
        }
        for prefix in prefixes {
            let bound = |b: &Option<SliceBound>| match b {
                Some((values, inclusive)) => {
                    let mut p = prefix.clone();
                    p.extend(values.iter().cloned());
                    RangeBound { prefix: p, inclusive: *inclusive }
                }
                None => RangeBound { prefix: prefix.clone(), inclusive: true },
            };
            let (start, end) = (bound(&lower), bound(&upper));
            if !range_is_empty(&schema, &start, &end) {
                m.ranges.push(RangeTombstone { start, end, ts });
            }
        }
        Ok(())
    }
}

/// A slice bound before it is put after the equality prefix: values and inclusiveness.
type SliceBound = (Vec<Bytes>, bool);

fn has_slice(schema: &TableSchema, relations: &[Relation]) -> bool {
    relations.iter().any(|r| match r {
        Relation::Compare { column, .. } | Relation::In { column, .. } => {
            schema.clustering.iter().any(|&i| schema.columns[i].name == *column)
        }
        Relation::MultiCompare { .. } => true,
    })
}

/// A range that selects nothing (`ck < 1 AND ck > 2`) writes no tombstone.
fn range_is_empty(schema: &TableSchema, start: &RangeBound, end: &RangeBound) -> bool {
    let common = start.prefix.len().min(end.prefix.len());
    match compare_clustering(schema, &start.prefix[..common], &end.prefix[..common]) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => start.prefix.len() == end.prefix.len() && !(start.inclusive && end.inclusive),
    }
}
