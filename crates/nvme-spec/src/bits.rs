//! Private helpers: bit fields in register newtypes and little-endian byte access.

/// Generates a getter and a `with_*` builder setter per bit field of a register newtype.
///
/// `name, with_name: bool = BIT;` is a one-bit flag; `name, with_name: T = HI:LO;` is an
/// unsigned field read as `T`. Setters mask the value to the field width.
macro_rules! bitfields {
    ($raw:ty;) => {};
    ($raw:ty; $(#[$m:meta])* $get:ident, $set:ident : bool = $bit:literal; $($rest:tt)*) => {
        $(#[$m])*
        pub const fn $get(self) -> bool {
            (self.0 >> $bit) & 1 == 1
        }
        #[doc = concat!("Returns a copy with `", stringify!($get), "` set to `v`.")]
        pub const fn $set(self, v: bool) -> Self {
            Self((self.0 & !((1 as $raw) << $bit)) | ((v as $raw) << $bit))
        }
        $crate::bits::bitfields!($raw; $($rest)*);
    };
    ($raw:ty; $(#[$m:meta])* $get:ident, $set:ident : $ty:ty = $hi:literal : $lo:literal; $($rest:tt)*) => {
        $(#[$m])*
        pub const fn $get(self) -> $ty {
            ((self.0 >> $lo) & (<$raw>::MAX >> (<$raw>::BITS - ($hi - $lo + 1)))) as $ty
        }
        #[doc = concat!("Returns a copy with `", stringify!($get), "` set to `v` (masked to bits ",
            stringify!($hi), ":", stringify!($lo), ").")]
        pub const fn $set(self, v: $ty) -> Self {
            let mask: $raw = <$raw>::MAX >> (<$raw>::BITS - ($hi - $lo + 1));
            Self((self.0 & !(mask << $lo)) | (((v as $raw) & mask) << $lo))
        }
        $crate::bits::bitfields!($raw; $($rest)*);
    };
}
pub(crate) use bitfields;

/// Bits `hi:lo` of a 32-bit word.
pub(crate) const fn get32(v: u32, hi: u32, lo: u32) -> u32 {
    (v >> lo) & (u32::MAX >> (31 - (hi - lo)))
}

/// `v` with bits `hi:lo` replaced by `field` (masked to the width).
pub(crate) const fn set32(v: u32, hi: u32, lo: u32, field: u32) -> u32 {
    let mask = u32::MAX >> (31 - (hi - lo));
    (v & !(mask << lo)) | ((field & mask) << lo)
}

/// Bit `bit` of a 32-bit word.
pub(crate) const fn bit32(v: u32, bit: u32) -> bool {
    (v >> bit) & 1 == 1
}

/// `v` with bit `bit` set to `on`.
pub(crate) const fn setbit32(v: u32, bit: u32, on: bool) -> u32 {
    (v & !(1 << bit)) | ((on as u32) << bit)
}

/// `N` bytes of `b` starting at `off` (panics if out of range; callers check lengths).
pub(crate) fn arr<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[off..off + N]);
    a
}

/// Little-endian u16 at `off`.
pub(crate) fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(arr(b, off))
}

/// Little-endian u32 at `off`.
pub(crate) fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(arr(b, off))
}

/// Little-endian u64 at `off`.
pub(crate) fn le64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(arr(b, off))
}

/// Little-endian u128 at `off`.
pub(crate) fn le128(b: &[u8], off: usize) -> u128 {
    u128::from_le_bytes(arr(b, off))
}

/// Copies `src` into `b` at `off`.
pub(crate) fn put(b: &mut [u8], off: usize, src: &[u8]) {
    b[off..off + src.len()].copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_helpers() {
        assert_eq!(get32(0xABCD_1234, 15, 0), 0x1234);
        assert_eq!(get32(0xABCD_1234, 31, 16), 0xABCD);
        assert_eq!(get32(0xFFFF_FFFF, 31, 0), 0xFFFF_FFFF);
        assert_eq!(set32(0, 19, 16, 0x1F), 0xF_0000);
        assert!(bit32(0x4000_0000, 30));
        assert_eq!(setbit32(u32::MAX, 0, false), u32::MAX - 1);
        let mut b = [0u8; 8];
        put(&mut b, 2, &0xBEEFu16.to_le_bytes());
        assert_eq!(b[2..4], [0xEF, 0xBE]);
        assert_eq!(le16(&b, 2), 0xBEEF);
    }
}
