//! What the code `#[ferry::interface]` generates calls into: postcard
//! encoding and decoding, so that a user crate needs neither postcard nor a
//! serde of its own beyond deriving its types' traits. Not a public API.
//!
//! Owns [`encode`] and [`decode`]. It must not decide what a failure means
//! to a call (the generated code maps `None` to the right `Fault` or
//! `Error`), and decoding must never trust the bytes: a short, overlong or
//! malformed input is `None`, never a panic.

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

#[cfg(test)]
mod tests {
    use super::*;

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
