//! The digests bloscpack can store after each chunk (and after the metadata section).

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest as _, Sha224, Sha256, Sha384, Sha512};
use std::fmt;

/// A checksum algorithm, by its bloscpack id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Checksum {
    /// 0: no digest.
    None,
    /// 1: Adler-32, stored as 4 bytes little-endian.
    Adler32,
    /// 2: CRC-32 (zlib's polynomial), stored as 4 bytes little-endian.
    Crc32,
    /// 3: MD5, 16 raw bytes.
    Md5,
    /// 4: SHA-1, 20 raw bytes.
    Sha1,
    /// 5: SHA-224, 28 raw bytes.
    Sha224,
    /// 6: SHA-256, 32 raw bytes.
    Sha256,
    /// 7: SHA-384, 48 raw bytes.
    Sha384,
    /// 8: SHA-512, 64 raw bytes.
    Sha512,
}

/// The largest digest any algorithm produces.
pub const MAX_DIGEST_LEN: usize = 64;

impl Checksum {
    /// Every algorithm, in id order.
    pub const ALL: [Checksum; 9] = [
        Checksum::None,
        Checksum::Adler32,
        Checksum::Crc32,
        Checksum::Md5,
        Checksum::Sha1,
        Checksum::Sha224,
        Checksum::Sha256,
        Checksum::Sha384,
        Checksum::Sha512,
    ];

    /// The id stored in the file header.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The algorithm with bloscpack id `id`.
    pub(crate) fn from_id(id: u8) -> Option<Checksum> {
        Checksum::ALL.get(usize::from(id)).copied()
    }

    /// The name bloscpack uses (`None`, `adler32`, `crc32`, `md5`, `sha1`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Checksum::None => "None",
            Checksum::Adler32 => "adler32",
            Checksum::Crc32 => "crc32",
            Checksum::Md5 => "md5",
            Checksum::Sha1 => "sha1",
            Checksum::Sha224 => "sha224",
            Checksum::Sha256 => "sha256",
            Checksum::Sha384 => "sha384",
            Checksum::Sha512 => "sha512",
        }
    }

    /// The algorithm named `name` (case-insensitive; `none` for no digest).
    pub fn from_name(name: &str) -> Option<Checksum> {
        Checksum::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }

    /// Length of the stored digest in bytes.
    pub fn len(self) -> usize {
        match self {
            Checksum::None => 0,
            Checksum::Adler32 | Checksum::Crc32 => 4,
            Checksum::Md5 => 16,
            Checksum::Sha1 => 20,
            Checksum::Sha224 => 28,
            Checksum::Sha256 => 32,
            Checksum::Sha384 => 48,
            Checksum::Sha512 => 64,
        }
    }

    /// True for [`Checksum::None`].
    pub fn is_empty(self) -> bool {
        self == Checksum::None
    }

    /// Computes the digest of `data` as it is stored on disk.
    pub fn digest(self, data: &[u8]) -> DigestBytes {
        let mut out = DigestBytes {
            len: self.len() as u8,
            bytes: [0; MAX_DIGEST_LEN],
        };
        let dst = &mut out.bytes[..self.len()];
        match self {
            Checksum::None => {}
            Checksum::Adler32 => {
                let mut a = adler2::Adler32::new();
                a.write_slice(data);
                dst.copy_from_slice(&a.checksum().to_le_bytes());
            }
            Checksum::Crc32 => dst.copy_from_slice(&crc32fast::hash(data).to_le_bytes()),
            Checksum::Md5 => dst.copy_from_slice(&Md5::digest(data)),
            Checksum::Sha1 => dst.copy_from_slice(&Sha1::digest(data)),
            Checksum::Sha224 => dst.copy_from_slice(&Sha224::digest(data)),
            Checksum::Sha256 => dst.copy_from_slice(&Sha256::digest(data)),
            Checksum::Sha384 => dst.copy_from_slice(&Sha384::digest(data)),
            Checksum::Sha512 => dst.copy_from_slice(&Sha512::digest(data)),
        }
        out
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A digest as stored on disk (up to 64 bytes, no allocation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DigestBytes {
    len: u8,
    bytes: [u8; MAX_DIGEST_LEN],
}

impl DigestBytes {
    /// The stored bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Debug for DigestBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(self.as_slice()))
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        // Reference values for b"abc" (RFC 1321, FIPS 180, zlib).
        let d = |c: Checksum| hex(c.digest(b"abc").as_slice());
        assert_eq!(d(Checksum::Adler32), hex(&0x024d0127u32.to_le_bytes()));
        assert_eq!(d(Checksum::Crc32), hex(&0x352441c2u32.to_le_bytes()));
        assert_eq!(d(Checksum::Md5), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            d(Checksum::Sha1),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            d(Checksum::Sha256),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        for c in Checksum::ALL {
            assert_eq!(c.digest(b"x").as_slice().len(), c.len());
            assert_eq!(Checksum::from_id(c.id()), Some(c));
            assert_eq!(Checksum::from_name(c.name()), Some(c));
        }
        assert_eq!(Checksum::from_id(9), None);
    }

    #[test]
    fn adler32_matches_the_definition_at_every_length() {
        // The SIMD paths work in blocks; check lengths around every block boundary and long
        // runs of 0xff (the worst case for the modular sums).
        let reference = |data: &[u8]| {
            let (mut a, mut b) = (1u32, 0u32);
            for &x in data {
                a = (a + u32::from(x)) % 65521;
                b = (b + a) % 65521;
            }
            (b << 16) | a
        };
        let mut data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        data[20_000..40_000].fill(0xff);
        for len in (0..300).chain([5551, 5552, 5553, 11_104, 65_536, 70_000]) {
            let got = Checksum::Adler32.digest(&data[..len]);
            assert_eq!(
                got.as_slice(),
                reference(&data[..len]).to_le_bytes(),
                "length {len}"
            );
        }
        let ones = vec![0xffu8; 100_000];
        assert_eq!(
            Checksum::Adler32.digest(&ones).as_slice(),
            reference(&ones).to_le_bytes()
        );
    }
}
