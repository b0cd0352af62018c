//! The L1's physical store: on Volta and later the L1 data, texture and read-only caches
//! are one cache, and it shares one SRAM per SM with shared memory; the carveout splits
//! that store. This module finds that store in a result and draws what the carveout
//! splits, for the SVG diagram and the HTML report.

use std::fmt::Write as _;

use crate::model::{ElementKind, Topology};

use super::plot::{escape, size_label};

/// One measured configuration of the store: the shared memory in force and the L1 left.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Split {
    /// Shared memory of this configuration, bytes.
    pub shared: u64,
    /// The L1 measured beside it, bytes.
    pub l1: u64,
}

/// The store one SM's L1 and shared memory live in, as far as the result tells.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Store {
    /// The logical caches that are one cache with the L1 (the L1 first).
    pub caches: Vec<ElementKind>,
    /// Every measured configuration, shared memory ascending.
    pub splits: Vec<Split>,
}

impl Store {
    /// The largest L1 + shared memory of any configuration: the store as measured.
    pub fn total(&self) -> u64 {
        self.splits
            .iter()
            .map(|s| s.l1 + s.shared)
            .max()
            .unwrap_or(0)
    }

    /// The smallest L1 + shared memory of any configuration.
    pub fn least(&self) -> u64 {
        self.splits
            .iter()
            .map(|s| s.l1 + s.shared)
            .min()
            .unwrap_or(0)
    }

    /// One line saying what the store holds and how the carveout splits it.
    pub fn summary(&self) -> String {
        let (least, total) = (self.least(), self.total());
        let sum = if least == total {
            size_label(total as f64)
        } else {
            format!("{}–{}", size_label(least as f64), size_label(total as f64))
        };
        format!(
            "L1 + shared memory = {sum} in each of {} configurations: the carveout moves bytes between them",
            self.splits.len()
        )
    }
}

/// The L1's store, when the result measured the L1 beside more than one shared-memory
/// configuration (which shows the two share one store); `None` otherwise.
pub(crate) fn unified_store(topo: &Topology) -> Option<Store> {
    let l1 = topo.element(ElementKind::L1Data)?;
    let mut splits: Vec<Split> = l1
        .size_per_carveout
        .iter()
        .filter_map(|row| {
            Some(Split {
                shared: row.shared_memory_bytes?.0,
                l1: row.l1_size.bound.exact()?.0,
            })
        })
        .collect();
    splits.sort_by_key(|s| (s.shared, s.l1));
    splits.dedup_by_key(|s| s.shared);
    if splits.len() < 2 {
        return None;
    }
    let caches = std::iter::once(ElementKind::L1Data)
        .chain(topo.shared_with(ElementKind::L1Data))
        .collect();
    Some(Store { caches, splits })
}

/// Height of [`draw_splits`] for `store`.
pub(crate) fn splits_height(store: &Store) -> f64 {
    22.0 + store.splits.len() as f64 * 15.0
}

/// One bar per configuration, all on the scale of the store: shared memory (green) from
/// the left, the L1 (blue) after it, labelled.
pub(crate) fn draw_splits(out: &mut String, store: &Store, x: f64, y: f64, width: f64) {
    let total = store.total().max(1) as f64;
    let label_width = 150.0;
    let bar_width = (width - label_width).max(40.0);
    let _ = writeln!(
        out,
        r##"<text x="{x:.1}" y="{:.1}" font-size="12" fill="#334155">what the carveout splits (<tspan fill="#15803d">shared</tspan> | <tspan fill="#1d4ed8">L1</tspan>), one store of {}:</text>"##,
        y + 12.0,
        escape(&size_label(total))
    );
    for (i, split) in store.splits.iter().enumerate() {
        let row_y = y + 20.0 + i as f64 * 15.0;
        let shared_w = split.shared as f64 / total * bar_width;
        let l1_w = split.l1 as f64 / total * bar_width;
        let bar_x = x + label_width;
        let _ = writeln!(
            out,
            r##"<text x="{x:.1}" y="{:.1}" font-size="11" fill="#334155">{} + {}</text><rect x="{bar_x:.1}" y="{row_y:.1}" width="{shared_w:.1}" height="11" fill="#86efac"/><rect x="{:.1}" y="{row_y:.1}" width="{l1_w:.1}" height="11" fill="#93c5fd"/>"##,
            row_y + 9.5,
            escape(&size_label(split.shared as f64)),
            escape(&size_label(split.l1 as f64)),
            bar_x + shared_w
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bytes, CarveoutL1Size, ComputeCapability, DeviceInfo, Provenance, Size};

    fn row(shared_kib: u64, l1_bytes: u64) -> CarveoutL1Size {
        CarveoutL1Size {
            carveout_percent: Some(0),
            shared_memory_bytes: Some(Bytes::kib(shared_kib)),
            kernel_shared_bytes: None,
            role: None,
            l1_size: Size::exact(Bytes(l1_bytes), Provenance::Benchmark),
        }
    }

    #[test]
    fn the_store_is_the_sum_the_carveout_splits() {
        let mut topo = Topology::new(DeviceInfo::new("H100", ComputeCapability::new(9, 0), 132));
        let l1 = topo.element_mut(ElementKind::L1Data);
        l1.set_size_at_carveout(row(8, 246_784));
        assert_eq!(
            unified_store(&topo),
            None,
            "one configuration shows no split"
        );
        let l1 = topo.element_mut(ElementKind::L1Data);
        l1.set_size_at_carveout(row(228, 21_504));
        l1.set_size_at_carveout(row(64, 189_440));
        let store = unified_store(&topo).expect("three configurations");
        assert_eq!(store.splits.first().map(|s| s.shared), Some(8192));
        assert_eq!(store.total(), 254_976);
        assert_eq!(store.least(), 254_976);
        assert!(
            store.summary().contains("249 KiB in each of 3"),
            "{}",
            store.summary()
        );
        let mut svg = String::new();
        draw_splits(&mut svg, &store, 0.0, 0.0, 600.0);
        assert_eq!(svg.matches("<rect").count(), 6);
    }
}
