//! The simulation run inside QEMU (feature `inprocess`, argument
//! `inprocess=on`), to measure it against tally's two-process pipeline: the
//! stream the plugin would write is fed to a `tally_sim` engine in the
//! thread that produced it, and the totals are printed at exit. No
//! profile is written: attribution needs symbols, which tally loads.

use tally_sim::engine::{Engine, EngineOptions, Feeder};
use tally_sim::trace::{Decoded, Record, decode};
use tally_sim::{Hierarchy, HierarchyConfig, Policy, machine};

/// Cachegrind's default machine for this host, branch simulation on.
pub struct Sim {
    feeder: Feeder,
    engine: Option<Engine>,
    /// The start of a record cut off at the end of the last bytes fed.
    carry: Vec<u8>,
}

impl Sim {
    pub fn new() -> Result<Sim, String> {
        let (i1, d1, ll) = machine::host_caches();
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
            feeder: Feeder::new(),
            engine: Some(Engine::new(vec![h], opts)),
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
        let Some(e) = self.engine.as_mut() else {
            return Ok(());
        };
        let mut p = 0;
        while p < data.len() {
            p += self
                .feeder
                .feed_bytes(e, &data[p..])
                .map_err(|(_, id)| format!("instruction {id} not declared"))?;
            match decode(&data[p..]).map_err(|t| format!("unknown record tag {t}"))? {
                Decoded::Need(_) => {
                    self.carry = data[p..].to_vec();
                    break;
                }
                Decoded::Record(r, n) => {
                    match r {
                        Record::End => return self.end(),
                        Record::Map { .. } | Record::Slot { .. } => {}
                        r => self
                            .feeder
                            .feed(e, &r, true)
                            .map_err(|id| format!("instruction {id} not declared"))?,
                    }
                    p += n;
                }
            }
        }
        Ok(())
    }

    /// Ends the run: Cachegrind's totals, in its `summary:` order.
    fn end(&mut self) -> Result<(), String> {
        let Some(mut e) = self.engine.take() else {
            return Ok(());
        };
        self.feeder
            .finish(&mut e)
            .map_err(|id| format!("instruction {id} not declared"))?;
        let t = e.finish().totals(0);
        let v: Vec<String> = t.values().iter().map(u64::to_string).collect();
        super::say(&format!("in-process summary: {}", v.join(" ")));
        Ok(())
    }
}
