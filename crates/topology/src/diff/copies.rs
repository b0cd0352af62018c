//! The copies section in a diff (schema 1.6): per path and size, the latency by the same rule
//! as every latency, the bandwidth when it moved by more than the relative tolerance (at
//! least 5 %: launches of one shape spread by a few per cent), and paths that became
//! (not) applicable.

use crate::model::{CopiesToShared, CopyAtSize, CopyPathKind};

use super::{show, Differ};

/// The relative change of a copy bandwidth below which it is noise.
const BANDWIDTH_TOLERANCE: f64 = 0.05;

fn sizes(copies: Option<&CopiesToShared>, path: CopyPathKind) -> &[CopyAtSize] {
    copies
        .and_then(|c| c.path(path))
        .map_or(&[], |p| p.sizes.as_slice())
}

pub(super) fn diff(d: &mut Differ, a: Option<&CopiesToShared>, b: Option<&CopiesToShared>) {
    for path in CopyPathKind::ALL {
        let (sa, sb) = (sizes(a, path), sizes(b, path));
        let mut bytes: Vec<u64> = sa.iter().chain(sb).map(|s| s.bytes.0).collect();
        bytes.sort_unstable();
        bytes.dedup();
        for size in bytes {
            let at = |s: &[CopyAtSize]| s.iter().find(|x| x.bytes.0 == size).cloned();
            let (x, y) = (at(sa), at(sb));
            let base = format!("copies_to_shared.{}.{size}", path.key());
            d.latency(
                format!("{base}.latency"),
                x.as_ref().and_then(|s| s.latency.as_ref()),
                y.as_ref().and_then(|s| s.latency.as_ref()),
            );
            let rate = |s: &Option<CopyAtSize>| s.as_ref().and_then(|s| s.bytes_per_clock_per_sm);
            match (rate(&x), rate(&y)) {
                (Some(p), Some(q)) => {
                    let tolerance = d.options.relative_tolerance.max(BANDWIDTH_TOLERANCE);
                    if (p - q).abs() > tolerance * p.abs().max(q.abs()) {
                        d.change(
                            format!("{base}.bytes_per_clock_per_sm"),
                            format!("{p:.1}"),
                            format!("{q:.1}"),
                        );
                    } else if p != q {
                        d.result.within_uncertainty += 1;
                    }
                }
                (None, None) => {}
                (p, q) => d.change(
                    format!("{base}.bytes_per_clock_per_sm"),
                    show(p.map(|v| format!("{v:.1}"))),
                    show(q.map(|v| format!("{v:.1}"))),
                ),
            }
        }
        let na = |c: Option<&CopiesToShared>| {
            c.is_some_and(|c| c.not_applicable.iter().any(|n| n.path == path))
        };
        if na(a) != na(b) {
            let word = |n: bool| if n { "not applicable" } else { "-" };
            d.change(
                format!("copies_to_shared.{}.not_applicable", path.key()),
                word(na(a)).to_owned(),
                word(na(b)).to_owned(),
            );
        }
    }
}
