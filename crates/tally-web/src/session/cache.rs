//! A cache bounded by weight (bytes, or rows of an order), least recently
//! used first out: the server keeps the replies and table orders it has
//! made, and no sequence of requests, however varied, makes it grow past
//! its budget.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Values by key, their weights summed at most `budget`.
pub struct Lru<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Keys by last use, oldest first.
    by_use: BTreeMap<u64, K>,
    clock: u64,
    weight: usize,
    budget: usize,
}

struct Entry<V> {
    value: V,
    weight: usize,
    used: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> Lru<K, V> {
    /// An empty cache holding at most `budget` in weight.
    pub fn new(budget: usize) -> Self {
        Lru {
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
            clock: 0,
            weight: 0,
            budget,
        }
    }

    /// The value of `key`, now the most recently used.
    pub fn get(&mut self, key: &K) -> Option<V> {
        let e = self.entries.get_mut(key)?;
        self.clock += 1;
        self.by_use.remove(&e.used);
        e.used = self.clock;
        self.by_use.insert(self.clock, key.clone());
        Some(e.value.clone())
    }

    /// Keeps `value` under `key`, dropping the least recently used values
    /// until the weights fit. A value heavier than an eighth of the budget
    /// is not kept: one large reply must not empty the cache.
    pub fn insert(&mut self, key: K, value: V, weight: usize) {
        if weight > self.budget / 8 {
            return;
        }
        self.remove(&key);
        while self.weight + weight > self.budget {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            if let Some(e) = self.entries.remove(&oldest) {
                self.weight -= e.weight;
            }
        }
        self.clock += 1;
        self.by_use.insert(self.clock, key.clone());
        self.weight += weight;
        self.entries.insert(
            key,
            Entry {
                value,
                weight,
                used: self.clock,
            },
        );
    }

    fn remove(&mut self, key: &K) {
        if let Some(e) = self.entries.remove(key) {
            self.by_use.remove(&e.used);
            self.weight -= e.weight;
        }
    }

    /// The weight held.
    #[cfg(test)]
    pub fn weight(&self) -> usize {
        self.weight
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn keeps_the_most_recently_used_within_the_budget() {
        let mut c: Lru<u32, u32> = Lru::new(80);
        for k in 0..8 {
            c.insert(k, k * 10, 10);
        }
        assert_eq!(c.weight(), 80);
        // 0 is used again, so 1 is the oldest when 8 comes.
        assert_eq!(c.get(&0), Some(0));
        c.insert(8, 80, 10);
        assert_eq!(c.get(&1), None);
        assert_eq!(c.get(&0), Some(0));
        assert_eq!(c.get(&8), Some(80));
        assert_eq!(c.weight(), 80);
        // Replacing a value does not count it twice.
        c.insert(8, 81, 10);
        assert_eq!(c.get(&8), Some(81));
        assert_eq!(c.weight(), 80);
        // Too heavy for one entry: not kept, nothing dropped.
        c.insert(9, 90, 11);
        assert_eq!(c.get(&9), None);
        assert_eq!(c.weight(), 80);
    }
}
