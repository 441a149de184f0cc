//! Generated tables: eight integer columns with different distributions, from a seed.

pub const COLUMNS: usize = 8;

pub struct Table {
    cells: Vec<i64>,
}

/// xorshift64*: deterministic, fast, no dependencies.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> i64 {
        (self.next_u64() % n) as i64
    }
}

impl Table {
    pub fn generate(seed: u64, rows: usize) -> Table {
        let mut rng = Rng::new(seed);
        let mut cells = Vec::with_capacity(rows * COLUMNS);
        for _ in 0..rows {
            cells.push(rng.below(1000)); // c0: id-like
            cells.push(rng.below(10)); // c1: small category
            cells.push(rng.below(1001) - 500); // c2: signed
            cells.push(rng.below(100_000)); // c3: wide
            let skewed = rng.below(64);
            cells.push(skewed * skewed); // c4: skewed
            cells.push(rng.below(4)); // c5: flag-like
            cells.push(rng.below(1 << 20)); // c6: large
            cells.push(rng.below(201) - 100); // c7: small signed
        }
        Table { cells }
    }

    pub fn rows(&self) -> impl Iterator<Item = &[i64]> {
        self.cells.chunks_exact(COLUMNS)
    }
}
