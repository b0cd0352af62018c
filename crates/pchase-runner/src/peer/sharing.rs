//! How the simulated node shares its links between copies that run at once: max-min fair
//! shares (progressive filling). Every copy asks for its rate alone; every port (a GPU's
//! sending or receiving side of one kind of link) has a capacity; all copies' rates grow
//! together until a copy has what it asked for or a port it uses is full, and those stop
//! while the others grow on.

/// A copy of the model: what it asks for and the ports it uses (indices into the caller's
/// capacities).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Flow {
    /// Its rate alone, GB/s.
    pub demand: f64,
    /// The ports it passes.
    pub ports: Vec<usize>,
}

/// Each flow's rate, GB/s, given each port's capacity.
pub(super) fn fair_shares(flows: &[Flow], capacity: &[f64]) -> Vec<f64> {
    let mut rate = vec![0.0; flows.len()];
    let mut active: Vec<bool> = flows.iter().map(|f| f.demand > 0.0).collect();
    let eps = 1e-9;
    while active.iter().any(|&a| a) {
        // The most every active flow can still grow by together.
        let mut step = f64::INFINITY;
        for (i, flow) in flows.iter().enumerate().filter(|(i, _)| active[*i]) {
            step = step.min(flow.demand - rate[i]);
        }
        for (port, &cap) in capacity.iter().enumerate() {
            let users = flows
                .iter()
                .enumerate()
                .filter(|(i, f)| active[*i] && f.ports.contains(&port))
                .count();
            if users == 0 {
                continue;
            }
            let used: f64 = flows
                .iter()
                .enumerate()
                .filter(|(_, f)| f.ports.contains(&port))
                .map(|(i, _)| rate[i])
                .sum();
            step = step.min((cap - used).max(0.0) / users as f64);
        }
        for (i, r) in rate.iter_mut().enumerate() {
            if active[i] {
                *r += step;
            }
        }
        // Stop the flows that have what they asked for or pass a full port.
        let full: Vec<bool> = capacity
            .iter()
            .enumerate()
            .map(|(port, &cap)| {
                let used: f64 = flows
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.ports.contains(&port))
                    .map(|(i, _)| rate[i])
                    .sum();
                used >= cap - eps
            })
            .collect();
        for (i, flow) in flows.iter().enumerate() {
            if active[i] && (rate[i] >= flow.demand - eps || flow.ports.iter().any(|&p| full[p])) {
                active[i] = false;
            }
        }
    }
    rate
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(demand: f64, ports: &[usize]) -> Flow {
        Flow {
            demand,
            ports: ports.to_vec(),
        }
    }

    #[test]
    fn a_full_port_is_shared_evenly_and_the_rest_goes_to_who_asks() {
        // Two flows into port 0 (100): 50 each, though one asked for 80.
        let rates = fair_shares(&[flow(80.0, &[0]), flow(60.0, &[0])], &[100.0]);
        assert_eq!(rates, [50.0, 50.0]);
        // A small flow keeps its demand and the other takes what is left.
        let rates = fair_shares(&[flow(20.0, &[0]), flow(90.0, &[0])], &[100.0]);
        assert_eq!(rates, [20.0, 80.0]);
        // Alone, a flow gets its demand; through two ports, the smaller limits it.
        assert_eq!(fair_shares(&[flow(70.0, &[0, 1])], &[100.0, 40.0]), [40.0]);
        assert_eq!(fair_shares(&[flow(70.0, &[0])], &[100.0]), [70.0]);
        assert_eq!(fair_shares(&[flow(0.0, &[0])], &[100.0]), [0.0]);
    }

    #[test]
    fn no_port_carries_more_than_its_capacity() {
        // Every ordered pair of four GPUs: ports 0-3 sending, 4-7 receiving, 100 each.
        let mut flows = Vec::new();
        for a in 0..4 {
            for b in (0..4).filter(|&b| b != a) {
                flows.push(flow(90.0, &[a, 4 + b]));
            }
        }
        let rates = fair_shares(&flows, &[100.0; 8]);
        for (port, _) in [100.0; 8].iter().enumerate() {
            let used: f64 = flows
                .iter()
                .zip(&rates)
                .filter(|(f, _)| f.ports.contains(&port))
                .map(|(_, r)| r)
                .sum();
            assert!(used <= 100.0 + 1e-6, "port {port}: {used}");
        }
        assert!(
            rates.iter().all(|&r| (r - 100.0 / 3.0).abs() < 1e-6),
            "{rates:?}"
        );
    }
}
