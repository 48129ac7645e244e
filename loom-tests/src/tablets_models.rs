//! Models of the learned-tablets map (`cluster/tablets.rs`): two requests
//! learn tablets of one table at once (each answer of a misrouted request
//! carries one) while a third looks the table up. Both tablets are kept,
//! and a lookup sees the table as some learn left it.
//!
//! To see it fail: in `TabletMap::learn` copy the table's list under the
//! read lock and store the copy under the write lock, taken after (the
//! lock not held from the read to the store): loom finds one learn's copy
//! overwriting the other's ("a learned tablet was lost").

use loom::sync::Arc;
use loom::thread;
use uuid::Uuid;

use crate::support::model;
use crate::tablets::{Tablet, TabletMap};

fn tablet(first: i64, last: i64, host: u128) -> Tablet {
    Tablet { first_token: first, last_token: last, replicas: vec![(Uuid::from_u128(host), 0)], version: None }
}

#[test]
fn tablets_learned_at_once_are_all_kept() {
    model(|| {
        let map = Arc::new(TabletMap::default());
        let other = {
            let map = map.clone();
            thread::spawn(move || map.learn("ks", "t", tablet(0, 100, 1)))
        };
        let lookup = {
            let map = map.clone();
            thread::spawn(move || map.table("ks", "t"))
        };
        map.learn("ks", "t", tablet(100, 200, 2));
        other.join().expect("learn");
        if let Some(seen) = lookup.join().expect("lookup") {
            let firsts: Vec<i64> = seen.tablets().iter().map(|t| t.first_token).collect();
            assert!([vec![0], vec![100], vec![0, 100]].contains(&firsts), "seen: {firsts:?}");
        }
        let table = map.table("ks", "t").expect("learned");
        assert_eq!(table.tablets(), &[tablet(0, 100, 1), tablet(100, 200, 2)], "a learned tablet was lost");
        assert_eq!(table.find(150).map(|t| t.replicas[0].0), Some(Uuid::from_u128(2)));
    });
}
