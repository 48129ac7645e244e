//! INSERT: the row marker and a cell for every listed column (collections
//! as overwrites).

use super::*;

impl Builder<'_, '_> {
    pub(super) fn insert(
        &mut self,
        schema: &Arc<TableSchema>,
        i: &Insert,
        ts: i64,
        ttl: i32,
    ) -> Result<Vec<PartitionMutation>> {
        if i.columns.len() != i.values.len() {
            return Err(MutationError::Unsupported("INSERT with unequal column and value counts".into()));
        }
        let mut pk: Vec<Option<Bytes>> = vec![None; schema.partition_key.len()];
        let mut ck: Vec<Option<Bytes>> = vec![None; schema.clustering.len()];
        let mut cells = Vec::new();
        for (name, term) in i.columns.iter().zip(&i.values) {
            let idx = self.column(schema, name)?;
            let col = &schema.columns[idx];
            let v = self.value(term, &col.typ, name)?;
            let key_value = |v: Val| match v {
                Val::Bytes(b) => Ok(b),
                _ => Err(MutationError::BadValue { column: name.clone(), reason: "null or unset key".into() }),
            };
            if let Some(p) = schema.partition_key.iter().position(|&k| k == idx) {
                pk[p] = Some(key_value(v)?);
            } else if let Some(p) = schema.clustering.iter().position(|&k| k == idx) {
                ck[p] = Some(key_value(v)?);
            } else {
                cells.push((idx, v));
            }
        }
        let pk: Vec<Bytes> = pk
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(|| MutationError::Where("INSERT without the full partition key".into()))?;
        let mut m = PartitionMutation::new(schema.clone(), pk);
        let ck: Option<Vec<Bytes>> = ck.into_iter().collect();
        let has_row = ck.is_some();
        if let Some(ck) = &ck {
            m.row_mut(ck.clone()).marker = Some((ts, ttl));
        }
        for (idx, v) in cells {
            let is_static = schema.columns[idx].kind == ColumnKind::Static;
            if !is_static && !has_row {
                return Err(MutationError::Where("INSERT without the full clustering key".into()));
            }
            let change = self.overwrite(schema, idx, v, ts, ttl)?;
            let Some(change) = change else { continue };
            let row = if is_static { &mut m.static_row } else { m.row_mut(ck.clone().unwrap_or_default()) };
            row.merge(RowChange { columns: BTreeMap::from([(idx, change)]), ..RowChange::default() });
        }
        Ok(vec![m])
    }
}
