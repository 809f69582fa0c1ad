//! Simulated time: picosecond instants and durations, CPU cycles and clock rates.
//!
//! Every clock in the machine counts picoseconds from power-on (`SimTime(0)`).
//! Instants and durations are distinct types so that adding two instants does
//! not compile; cycles only become time through a [`Frequency`].

use std::fmt;
use std::ops::{Add, AddAssign, Mul, Sub};

/// A point in simulated time, in picoseconds since the simulation started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

/// A span of simulated time, in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(pub u64);

impl SimTime {
    /// The instant the simulation starts.
    pub const ZERO: SimTime = SimTime(0);

    /// Picoseconds since the start.
    pub const fn as_ps(self) -> u64 {
        self.0
    }

    /// Time elapsed since `earlier`, or zero when `earlier` is later.
    pub fn since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }

    /// Microseconds since the start, as a float (for reports only).
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: SimDuration = SimDuration(0);

    /// A duration of `ps` picoseconds.
    pub const fn from_ps(ps: u64) -> Self {
        SimDuration(ps)
    }
    /// A duration of `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Self {
        SimDuration(ns * 1_000)
    }
    /// A duration of `us` microseconds.
    pub const fn from_us(us: u64) -> Self {
        SimDuration(us * 1_000_000)
    }
    /// A duration of `ms` milliseconds.
    pub const fn from_ms(ms: u64) -> Self {
        SimDuration(ms * 1_000_000_000)
    }
    /// Picoseconds.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// Nanoseconds, as a float (for reports only).
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    /// Microseconds, as a float (for reports only).
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Seconds, as a float (for reports only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e12
    }
    /// Time to move `bytes` at `rate`, rounded up to the next picosecond.
    pub fn for_bytes(bytes: u64, rate: Bandwidth) -> SimDuration {
        // ps = bytes * 1e12 / bytes_per_sec, rounded up: in u64 where the
        // product fits (every TLP and block), else in u128.
        SimDuration(mul_div_ceil(bytes, 1_000_000_000_000, rate.bytes_per_sec))
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimDuration) -> SimTime {
        SimTime(self.0 + rhs.0)
    }
}
impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, rhs: SimDuration) {
        self.0 += rhs.0;
    }
}
impl Sub<SimTime> for SimTime {
    type Output = SimDuration;
    fn sub(self, rhs: SimTime) -> SimDuration {
        SimDuration(self.0 - rhs.0)
    }
}
impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, rhs: SimDuration) -> SimDuration {
        SimDuration(self.0 + rhs.0)
    }
}
impl AddAssign for SimDuration {
    fn add_assign(&mut self, rhs: SimDuration) {
        self.0 += rhs.0;
    }
}
impl Sub for SimDuration {
    type Output = SimDuration;
    fn sub(self, rhs: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_sub(rhs.0))
    }
}
impl Mul<u64> for SimDuration {
    type Output = SimDuration;
    fn mul(self, rhs: u64) -> SimDuration {
        SimDuration(self.0 * rhs)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}us", self.as_us_f64())
    }
}
impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 1_000_000 {
            write!(f, "{:.1}ns", self.as_ns_f64())
        } else {
            write!(f, "{:.3}us", self.as_us_f64())
        }
    }
}

/// A count of CPU clock cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cycles(pub u64);

impl Add for Cycles {
    type Output = Cycles;
    fn add(self, rhs: Cycles) -> Cycles {
        Cycles(self.0 + rhs.0)
    }
}
impl Mul<u64> for Cycles {
    type Output = Cycles;
    fn mul(self, rhs: u64) -> Cycles {
        Cycles(self.0 * rhs)
    }
}

/// A clock rate, in kilohertz (so that 2.5 GHz is exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frequency {
    /// Clock rate in kHz.
    pub khz: u64,
}

impl Frequency {
    /// A clock of `mhz` megahertz.
    pub const fn from_mhz(mhz: u64) -> Self {
        Frequency { khz: mhz * 1_000 }
    }
    /// Simulated time taken by `cycles` at this clock rate (rounded up).
    pub fn time_of(self, cycles: Cycles) -> SimDuration {
        // ps = cycles * 1e9 / khz
        SimDuration(mul_div_ceil(cycles.0, 1_000_000_000, self.khz))
    }
}

/// `a * b / d` rounded up (`d` of 0 taken as 1), in u64 arithmetic when
/// the product fits, in u128 otherwise (a u128 division is a library call
/// several times as slow, and these run for every simulated event).
fn mul_div_ceil(a: u64, b: u64, d: u64) -> u64 {
    let d = d.max(1);
    match a.checked_mul(b) {
        Some(n) => n.div_ceil(d),
        None => (a as u128 * b as u128).div_ceil(d as u128) as u64,
    }
}

/// A transfer rate in bytes per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bandwidth {
    /// Bytes per second.
    pub bytes_per_sec: u64,
}

impl Bandwidth {
    /// A rate of `mb` megabytes (10^6 bytes) per second.
    pub const fn from_mb_per_sec(mb: u64) -> Self {
        Bandwidth {
            bytes_per_sec: mb * 1_000_000,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn mul_div_ceil_agrees_with_u128_on_both_sides_of_the_u64_product() {
        for (a, b, d) in [
            (4096u64, 1_000_000_000_000u64, 3_938_000_000u64),
            (u64::MAX / 3, 1_000_000_000, 2_500_000),
            (7, 1_000_000_000, 0),
            (18_446_744, 1_000_000_000_000, 7),
            (18_446_745, 1_000_000_000_000, 7),
        ] {
            let wide = (a as u128 * b as u128).div_ceil(d.max(1) as u128) as u64;
            assert_eq!(super::mul_div_ceil(a, b, d), wide, "{a} * {b} / {d}");
        }
    }

    use super::*;

    #[test]
    fn cycles_to_time_is_exact_at_2_5_ghz() {
        let f = Frequency::from_mhz(2_500);
        assert_eq!(f.time_of(Cycles(5)), SimDuration::from_ns(2));
        assert_eq!(f.time_of(Cycles(1)), SimDuration::from_ps(400));
    }

    #[test]
    fn bytes_to_time_rounds_up() {
        let bw = Bandwidth {
            bytes_per_sec: 3_000_000_000,
        };
        // 1 byte at 3 GB/s = 333.33 ps -> 334 ps
        assert_eq!(SimDuration::for_bytes(1, bw), SimDuration::from_ps(334));
        assert_eq!(SimDuration::for_bytes(3, bw), SimDuration::from_ps(1_000));
    }

    #[test]
    fn instants_and_durations_compose() {
        let t = SimTime::ZERO + SimDuration::from_us(3);
        assert_eq!(t - SimTime(1_000_000), SimDuration::from_us(2));
        assert_eq!(SimTime(5).since(SimTime(9)), SimDuration::ZERO);
    }
}
