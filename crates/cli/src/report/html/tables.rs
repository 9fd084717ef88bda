//! The page's dedup tables: values numbered in order of first appearance (in maps with
//! the engine's fast hasher), and the run-length encoding of a row of table indices.

use std::hash::Hash;

use palisade_engine::FastMap;

/// Distinct values, each numbered in order of first appearance.
pub struct Interner<T> {
    /// The values, by number.
    pub items: Vec<T>,
    index: FastMap<T, u32>,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            items: Vec::new(),
            index: FastMap::default(),
        }
    }
}

impl<T: Hash + Eq + Clone> Interner<T> {
    /// The number of `value`, numbering it if it is new.
    pub fn id(&mut self, value: &T) -> u32 {
        if let Some(&i) = self.index.get(value) {
            return i;
        }
        self.insert(value.clone())
    }

    /// The number of `value`, or `None` when it has none yet.
    pub fn get(&self, value: &T) -> Option<u32> {
        self.index.get(value).copied()
    }

    /// Numbers a value known to be new.
    pub fn insert(&mut self, value: T) -> u32 {
        let i = self.items.len() as u32;
        self.items.push(value.clone());
        self.index.insert(value, i);
        i
    }
}

/// No entry: the cell or step does not exist (a probe on a port the destination does not
/// name, or no address of the family).
pub const NA: u32 = u32::MAX;

/// `IDX` or `IDX*COUNT` (base 36), comma-separated; `-` for [`NA`].
pub fn encode_row(cells: &[u32], out: &mut String) {
    let mut i = 0;
    while i < cells.len() {
        let k = cells[i];
        let run = cells[i..].iter().take_while(|&&c| c == k).count();
        if i > 0 {
            out.push(',');
        }
        if k == NA {
            out.push('-');
        } else {
            push_base36(k as usize, out);
        }
        if run > 1 {
            out.push('*');
            push_base36(run, out);
        }
        i += run;
    }
}

fn push_base36(mut n: usize, out: &mut String) {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut buf = [0u8; 16];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = DIGITS[n % 36];
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.extend(buf[at..].iter().map(|&b| char::from(b)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_run_length_encoded() {
        let cases: [(&[u32], &str); 4] = [
            (&[], ""),
            (&[0, 0, 0, 1], "0*3,1"),
            (&[35, 36, NA, NA], "z,10,-*2"),
            (&[7], "7"),
        ];
        for (cells, want) in cases {
            let mut s = String::new();
            encode_row(cells, &mut s);
            assert_eq!(s, want, "{cells:?}");
        }
    }

    #[test]
    fn interned_values_keep_their_first_number() {
        let mut t = Interner::default();
        assert_eq!(t.id(&"b".to_string()), 0);
        assert_eq!(t.id(&"a".to_string()), 1);
        assert_eq!(t.id(&"b".to_string()), 0);
        assert_eq!(t.get(&"c".to_string()), None);
        assert_eq!(t.items, ["b", "a"]);
    }
}
