//! The simulation run inside QEMU (feature `inprocess`, argument
//! `inprocess=on`), to measure it against tally's two-process pipeline: the
//! stream the plugin would write is fed to a `tally_sim` engine in the
//! thread that produced it, and the totals are printed at exit. No
//! profile is written: attribution needs symbols, which tally loads.

use tally_sim::{Engine, EngineOptions, Hierarchy, HierarchyConfig, Policy, Simulation};

/// Cachegrind's default machine for this host, branch simulation on.
pub struct Sim {
    /// `None` once the stream has ended.
    sim: Option<Simulation>,
    /// The start of a record cut off at the end of the last bytes fed.
    carry: Vec<u8>,
}

impl Sim {
    pub fn new() -> Result<Sim, String> {
        let (i1, d1, ll) = tally_sim::host_caches();
        let h = Hierarchy::new(&HierarchyConfig {
            i1,
            d1,
            middle: Vec::new(),
            ll,
            policy: Policy::Lru,
            iaddr_zero_bits: 0,
        })
        .map_err(|e| e.to_string())?;
        let opts = EngineOptions {
            branch_sim: true,
            calls: false,
            merge_modify: true,
            no_icache: false,
        };
        Ok(Sim {
            sim: Some(Simulation::new(Engine::new(vec![h], opts), true)),
            carry: Vec::new(),
        })
    }

    /// Simulates the records in `bytes`; an error ends the simulation.
    pub fn put(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut joined = std::mem::take(&mut self.carry);
        let data: &[u8] = if joined.is_empty() {
            bytes
        } else {
            joined.extend_from_slice(bytes);
            &joined
        };
        let Some(sim) = self.sim.as_mut() else {
            return Ok(());
        };
        let n = sim.feed(data, &mut ()).map_err(|e| e.to_string())?;
        if sim.ended() {
            return self.end();
        }
        self.carry = data[n..].to_vec();
        Ok(())
    }

    /// Ends the run: Cachegrind's totals, in its `summary:` order.
    fn end(&mut self) -> Result<(), String> {
        let Some(sim) = self.sim.take() else {
            return Ok(());
        };
        let t = sim.finish(&()).map_err(|e| e.to_string())?.totals(0);
        // Cachegrind's events only: the harness simulates no middle level.
        let v: Vec<String> = t.values()[..tally_sim::Counts::EVENTS.len()]
            .iter()
            .map(u64::to_string)
            .collect();
        super::say(&format!("in-process summary: {}", v.join(" ")));
        Ok(())
    }
}
