//! [`CoreSet`]: a set of CPU numbers as the page carries it, one bit per
//! core in [`CORE_WORDS`] 64-bit words.
//!
//! Owns the set's bit arithmetic; it must not read shared memory (the page
//! copies words in and out).

/// The words of a core set.
pub const CORE_WORDS: usize = 16;

/// The most cores a set names (CPU numbers `0..MAX_CORES`).
pub const MAX_CORES: usize = CORE_WORDS * 64;

/// A set of cores (CPU numbers below [`MAX_CORES`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CoreSet {
    words: [u64; CORE_WORDS],
}

impl CoreSet {
    /// The empty set.
    pub const fn new() -> CoreSet {
        CoreSet {
            words: [0; CORE_WORDS],
        }
    }

    /// The set whose bits are `words` (bit `b` of word `w` is core
    /// `64 * w + b`).
    pub const fn from_words(words: [u64; CORE_WORDS]) -> CoreSet {
        CoreSet { words }
    }

    /// The bit words.
    pub fn words(&self) -> &[u64; CORE_WORDS] {
        &self.words
    }

    /// Adds `core`; false (and nothing added) if it is [`MAX_CORES`] or more.
    pub fn insert(&mut self, core: usize) -> bool {
        if core >= MAX_CORES {
            return false;
        }
        self.words[core / 64] |= 1 << (core % 64);
        true
    }

    /// Takes `core` out.
    pub fn remove(&mut self, core: usize) {
        if core < MAX_CORES {
            self.words[core / 64] &= !(1 << (core % 64));
        }
    }

    /// Whether `core` is in the set.
    pub fn contains(&self, core: usize) -> bool {
        core < MAX_CORES && self.words[core / 64] & (1 << (core % 64)) != 0
    }

    /// How many cores the set holds.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set holds no core.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The cores, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..MAX_CORES).filter(|&c| self.contains(c))
    }

    /// The cores in both sets.
    pub fn intersection(&self, other: &CoreSet) -> CoreSet {
        CoreSet {
            words: std::array::from_fn(|i| self.words[i] & other.words[i]),
        }
    }
}

impl FromIterator<usize> for CoreSet {
    /// The set of the cores below [`MAX_CORES`] among `iter`.
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> CoreSet {
        let mut s = CoreSet::new();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

impl std::fmt::Debug for CoreSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl std::fmt::Display for CoreSet {
    /// The cores as a list with ranges, as `taskset` writes them: `0-3,6`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cores: Vec<usize> = self.iter().collect();
        let mut first = true;
        let mut i = 0;
        while i < cores.len() {
            let mut j = i;
            while j + 1 < cores.len() && cores[j + 1] == cores[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j == i {
                write!(f, "{}", cores[i])?;
            } else {
                write!(f, "{}-{}", cores[i], cores[j])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

/// Why a core list did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadCoreList(pub String);

impl std::fmt::Display for BadCoreList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad core list: {}", self.0)
    }
}

impl std::error::Error for BadCoreList {}

impl std::str::FromStr for CoreSet {
    type Err = BadCoreList;

    /// Parses a list such as `0-3,6` (each number below [`MAX_CORES`],
    /// ranges low to high); an empty list is an error.
    fn from_str(s: &str) -> Result<CoreSet, BadCoreList> {
        let bad = |why: &str| BadCoreList(format!("{s:?}: {why}"));
        let mut set = CoreSet::new();
        for part in s.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            let lo: usize = lo.trim().parse().map_err(|_| bad("not a number"))?;
            let hi: usize = hi.trim().parse().map_err(|_| bad("not a number"))?;
            if lo > hi {
                return Err(bad("a range runs high to low"));
            }
            if hi >= MAX_CORES {
                return Err(bad("a core number is 1024 or more"));
            }
            (lo..=hi).for_each(|c| {
                set.insert(c);
            });
        }
        if set.is_empty() {
            return Err(bad("no core"));
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_insert_count_and_print_as_lists() {
        let s: CoreSet = [0, 1, 2, 3, 6, 64, 1023, 1024].into_iter().collect();
        assert_eq!(s.len(), 7);
        assert!(s.contains(1023) && !s.contains(1024) && !s.contains(5));
        assert_eq!(s.to_string(), "0-3,6,64,1023");
        assert_eq!("0-3, 6,64,1023".parse::<CoreSet>().unwrap(), s);
    }

    #[test]
    fn bad_lists_are_refused_with_a_reason() {
        for bad in ["", "a", "3-1", "1024", "0-2000", ",", "1,,2"] {
            assert!(bad.parse::<CoreSet>().is_err(), "{bad:?}");
        }
    }
}
