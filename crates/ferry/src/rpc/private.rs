//! What the code `#[ferry::interface]` generates calls into: postcard
//! encoding and decoding, so that a user crate needs neither postcard nor a
//! serde of its own beyond deriving its types' traits. Not a public API.
//!
//! Owns [`encode`], [`decode`] and the byte-string wrappers [`Bytes`] and
//! [`ByteBuf`]: serde writes a `Vec<u8>` or `&[u8]` as a sequence of
//! single bytes, one serializer call per byte, where postcard's byte string
//! (the same length prefix and the same bytes on the wire) is one copy; the
//! generated code wraps byte-string arguments and results in them. It
//! must not decide what a failure means to a call (the generated code maps
//! `None` to the right `Fault` or `Error`), and decoding must never trust
//! the bytes: a short, overlong or malformed input is `None`, never a
//! panic.

pub use postcard;
pub use serde;

/// `value` encoded with postcard; `None` if it cannot be encoded (a
/// sequence of unknown length, a serializer error of the type's own).
pub fn encode<T: serde::Serialize + ?Sized>(value: &T) -> Option<Vec<u8>> {
    postcard::to_stdvec(value).ok()
}

/// The value postcard encoded as `bytes`, which must be all of them: `None`
/// if they do not decode or bytes are left over.
pub fn decode<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Option<T> {
    match postcard::take_from_bytes(bytes) {
        Ok((value, [])) => Some(value),
        _ => None,
    }
}

/// A byte slice written as a byte string: on postcard's wire the same
/// bytes as the `[u8]` sequence serde writes, made in one copy.
pub struct Bytes<'a>(pub &'a [u8]);

impl serde::Serialize for Bytes<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// An owned byte vector read as a byte string (see [`Bytes`]): decodes
/// what a `Vec<u8>` encodes to, in one copy.
pub struct ByteBuf(pub Vec<u8>);

impl<'de> serde::Deserialize<'de> for ByteBuf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = ByteBuf;
            fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v))
            }
        }
        d.deserialize_byte_buf(Visit)
    }
}

impl serde::Serialize for ByteBuf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_strings_are_the_bytes_a_vec_of_u8_encodes_to() {
        let v: Vec<u8> = (0..=255).chain(0..44).collect();
        let plain = encode(&(&v, &3i64)).unwrap();
        assert_eq!(encode(&(&Bytes(&v), &3i64)).unwrap(), plain);
        let (back, n): (ByteBuf, i64) = decode(&plain).unwrap();
        assert_eq!((back.0, n), (v.clone(), 3));
        assert_eq!(encode(&ByteBuf(v.clone())).unwrap(), encode(&v).unwrap());
        // A length past the input, and a short input, are refused.
        assert!(decode::<ByteBuf>(&[0xff, 0xff, 0xff, 0xff, 0x0f, 1]).is_none());
        assert!(decode::<ByteBuf>(&plain[..10]).is_none());
        assert_eq!(decode::<ByteBuf>(&[0]).map(|b| b.0), Some(Vec::new()));
    }

    #[test]
    fn round_trips_and_refuses_short_long_and_garbled_input() {
        let bytes = encode(&(&7i64, &"seven")).unwrap();
        assert_eq!(decode::<(i64, String)>(&bytes), Some((7, "seven".into())));
        assert_eq!(decode::<(i64, &str)>(&bytes), Some((7, "seven")));
        assert_eq!(decode::<(i64, String)>(&bytes[..bytes.len() - 1]), None);
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(decode::<(i64, String)>(&long), None);
        // A string length far past the input.
        assert_eq!(decode::<String>(&[0xff, 0xff, 0xff, 0xff, 0x0f]), None);
        assert_eq!(decode::<()>(&[]), Some(()));
        assert_eq!(encode(&()).unwrap(), Vec::<u8>::new());
    }
}
