//! The L2's address map tested: the `l2` benchmark fits the home partition of an address
//! as an XOR of address bits and one bit per page from its partition map
//! ([`crate::measure::l2::home`]); this one runs the map again with an SM of the other
//! partition as the reference and predicts, with that function, the home of every line the
//! SMs of the first reference's partition read there — lines the fit never saw.

use pchase_kernels::catalogue;

use super::{Benchmark, Info};
use crate::{
    measure::{l2::map, Measurements, Session},
    sim::SimProfile,
};

/// The address-map benchmark.
pub(crate) struct L2Address {
    info: Info,
}

/// The L2's address map tested on lines it never saw.
pub(crate) static L2_ADDRESS: L2Address = L2Address {
    info: Info {
        name: "l2-address",
        summary: "the L2's address map tested: a second partition map, its reference in the other partition, and the home the fitted function predicts for each of its lines (none of them fitted)",
        element: None,
        needs: &["l2"],
        automatic: false,
        deep: true,
        kernels: || vec![catalogue::l2_partition_map()],
    },
};

impl Benchmark for L2Address {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let name = self.info.name;
        let ready = match s.results.l2.as_ref() {
            None => Err("the L2 benchmark gave no result".to_string()),
            Some(l2) => match (&l2.map, &l2.address) {
                (Err(why), _) => Err(format!("no partition map: {why}")),
                (_, None) => Err("one partition: no home to predict".into()),
                (_, Some(Err(why))) => Err(format!("no address map: {why}")),
                (Ok(first), Some(Ok(found))) => Ok((first.clone(), found.clone())),
            },
        };
        let (first, found) = match ready {
            Ok(ready) => ready,
            Err(why) => {
                s.results.sections.insert(name, Err(why));
                return;
            }
        };
        let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
        let result = s.timed(name, |s, gpu| {
            map::predict_address_map(s.backend, &first, &found, overhead, gpu)
        });
        match result {
            Ok(Ok(prediction)) => {
                if let Some(Some(Ok(found))) = s.results.l2.as_mut().map(|l| l.address.as_mut()) {
                    found.prediction = Some(prediction);
                }
            }
            Ok(Err(why)) => {
                s.results.sections.insert(name, Err(why));
            }
            Err(e) => {
                s.results
                    .sections
                    .insert(name, Err(format!("the second map: {e}")));
            }
        }
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let l2 = m.l2.as_ref().ok_or("L2 not measured")?;
        match (&l2.address, profile.l2.partitions) {
            (None, 2) => Err("two partitions and no address map attempted".into()),
            (None, _) => Ok(()),
            // The hash and balanced interleaves are no XOR of address bits: refused, rightly.
            (Some(Err(_)), _) if profile.l2.home_bits().is_none() => Ok(()),
            (Some(Err(why)), _) => Err(format!("no address map: {why}")),
            (Some(Ok(found)), _) => {
                let (_, prediction) = found
                    .prediction
                    .ok_or("the address map was fitted but never tested")?;
                super::l2::check_address_map(profile, &found.map)?;
                // As on the GPUs: 99 % of the lines never seen, or better.
                if prediction.accuracy().is_none_or(|a| a < 0.99) {
                    return Err(format!(
                        "the address map predicted {} of {} fresh lines",
                        prediction.correct, prediction.lines
                    ));
                }
                Ok(())
            }
        }
    }
}
