//! Bodies and their initial conditions.
//!
//! This room owns what a body is ([`Body`]), the small seeded generator
//! ([`SplitMix64`]) and the Plummer sphere the simulation starts from
//! ([`plummer`]). It must not know about trees, threads or time steps: its
//! output depends only on the body count and the seed.
//!
//! Units are N-body units: G = 1, total mass 1, and the Plummer sphere is
//! scaled to virial radius 1, so that its total energy is -1/4 (Heggie and
//! Mathieu's standard units).

/// One point mass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Body {
    /// Position.
    pub pos: [f64; 3],
    /// Velocity.
    pub vel: [f64; 3],
    /// Mass.
    pub mass: f64,
    /// The body's index in the initial conditions; bodies move in memory
    /// (the tree sorts them every step), their ids stay.
    pub id: u32,
}

/// `y += a x`, component by component.
pub(crate) fn axpy(y: &mut [f64; 3], a: f64, x: &[f64; 3]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// Steele, Lea and Flood's SplitMix64: a 64-bit state, one add and a mix
/// per number; plenty for initial conditions.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number uniform in [0, 1) (53 random bits).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A point uniform on the unit sphere's surface, scaled to `r`.
    fn on_sphere(&mut self, r: f64) -> [f64; 3] {
        let z = 2.0 * self.next_f64() - 1.0;
        let phi = 2.0 * std::f64::consts::PI * self.next_f64();
        let s = (1.0 - z * z).sqrt();
        [r * s * phi.cos(), r * s * phi.sin(), r * z]
    }
}

/// Radius beyond which a sampled body is drawn again (in Plummer's scale
/// length, before scaling): it keeps the rare far outliers from stretching
/// the tree's bounding box.
const MAX_RADIUS: f64 = 10.0;

/// `n` equal-mass bodies of a Plummer sphere (Aarseth, Hénon and Wielen
/// 1974) in N-body units, drawn from `seed`, with the centre of mass at
/// rest at the origin.
pub fn plummer(n: usize, seed: u64) -> Vec<Body> {
    let mut rng = SplitMix64::new(seed);
    let mass = 1.0 / n as f64;
    // Positions in Plummer's scale length, velocities in its unit, scaled to
    // virial radius 1 below.
    let scale = 3.0 * std::f64::consts::PI / 16.0;
    let mut bodies: Vec<Body> = (0..n)
        .map(|i| {
            let r = loop {
                let x = rng.next_f64();
                if x == 0.0 {
                    continue;
                }
                let r = 1.0 / (x.powf(-2.0 / 3.0) - 1.0).sqrt();
                if r < MAX_RADIUS {
                    break r;
                }
            };
            // Speed as a fraction q of the escape speed, drawn from
            // q^2 (1 - q^2)^(7/2) by rejection (its maximum is below 0.1).
            let q = loop {
                let q = rng.next_f64();
                let g = 0.1 * rng.next_f64();
                if g < q * q * (1.0 - q * q).powf(3.5) {
                    break q;
                }
            };
            let v = q * std::f64::consts::SQRT_2 * (1.0 + r * r).powf(-0.25);
            let pos = rng.on_sphere(r * scale);
            let vel = rng.on_sphere(v / scale.sqrt());
            Body {
                pos,
                vel,
                mass,
                id: i as u32,
            }
        })
        .collect();
    // The centre of mass at rest at the origin (equal masses: plain means).
    let mut mean_pos = [0.0; 3];
    let mut mean_vel = [0.0; 3];
    for b in &bodies {
        for d in 0..3 {
            mean_pos[d] += b.pos[d];
            mean_vel[d] += b.vel[d];
        }
    }
    for d in 0..3 {
        mean_pos[d] /= n as f64;
        mean_vel[d] /= n as f64;
    }
    for b in &mut bodies {
        for d in 0..3 {
            b.pos[d] -= mean_pos[d];
            b.vel[d] -= mean_vel[d];
        }
    }
    bodies
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bodies_other_seed_others() {
        assert_eq!(plummer(100, 7), plummer(100, 7));
        assert_ne!(plummer(100, 7), plummer(100, 8));
    }

    #[test]
    fn centre_of_mass_at_rest_at_origin() {
        let bodies = plummer(500, 1);
        for d in 0..3 {
            let p: f64 = bodies.iter().map(|b| b.pos[d]).sum();
            let v: f64 = bodies.iter().map(|b| b.vel[d]).sum();
            assert!(p.abs() < 1e-12 && v.abs() < 1e-12, "{p} {v}");
        }
        let m: f64 = bodies.iter().map(|b| b.mass).sum();
        assert!((m - 1.0).abs() < 1e-12);
    }

    #[test]
    fn uniform_numbers_in_unit_interval() {
        let mut rng = SplitMix64::new(3);
        let xs: Vec<f64> = (0..10_000).map(|_| rng.next_f64()).collect();
        assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }
}
