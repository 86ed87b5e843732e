//! The protobuf side of an interface's calls: a field of each kind the
//! macro maps a type to ([`Native`] scalars, strings and bytes;
//! [`Postcard`] for everything else), and the walk over a message's fields.
//!
//! This module owns encoding one field and decoding a message field by
//! field, with prost's encoding functions (no protoc, no generated message
//! types). It must not trust a message: a wrong wire type, a truncated
//! field or bytes that do not decode are a [`Bad`], never a panic; unknown
//! fields are skipped, as protobuf requires.

use std::marker::PhantomData;

use prost::encoding::{self, DecodeContext, WireType};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A message or a call's bytes that cannot be what they should.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// The local wire (postcard) bytes do not decode as the method's types.
    Local,
    /// The protobuf message does not decode; the text says why.
    Proto(String),
    /// A field that carries postcard bytes was absent (it has no default).
    Missing(u32),
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bad::Local => f.write_str("the call's bytes do not decode as the method's types"),
            Bad::Proto(why) => write!(f, "the protobuf message does not decode: {why}"),
            Bad::Missing(tag) => write!(f, "field {tag} is missing and has no default"),
        }
    }
}

impl std::error::Error for Bad {}

impl From<prost::DecodeError> for Bad {
    fn from(e: prost::DecodeError) -> Bad {
        Bad::Proto(e.to_string())
    }
}

/// How a value of one Rust type travels as one protobuf field.
pub trait Field {
    /// The value's Rust type.
    type Value;
    /// The protobuf type's name.
    const PROTO: &'static str;
    /// Appends field `tag` holding `v` (proto3: a scalar at its default
    /// is still written, which every reader accepts).
    ///
    /// # Errors
    /// [`Bad::Local`] if the value cannot be encoded.
    fn encode(v: &Self::Value, tag: u32, buf: &mut Vec<u8>) -> Result<(), Bad>;
    /// Reads one occurrence of the field into `slot` (a later occurrence
    /// wins, as protobuf says).
    ///
    /// # Errors
    /// [`Bad::Proto`] for a wrong wire type or bytes that do not decode.
    fn merge(slot: &mut Option<Self::Value>, wire: WireType, buf: &mut &[u8]) -> Result<(), Bad>;
    /// The value of an absent field: proto3's default for scalars, strings
    /// and bytes; none for postcard.
    fn absent() -> Option<Self::Value>;
}

/// A type protobuf has natively (scalars, `string`, `bytes`).
#[derive(Debug)]
pub struct Native<T>(PhantomData<T>);

/// Any serde type, as `bytes` holding its postcard encoding.
#[derive(Debug)]
pub struct Postcard<T>(PhantomData<T>);

macro_rules! native {
    ($ty:ty, $module:ident, $proto:literal) => {
        impl Field for Native<$ty> {
            type Value = $ty;
            const PROTO: &'static str = $proto;

            fn encode(v: &$ty, tag: u32, buf: &mut Vec<u8>) -> Result<(), Bad> {
                encoding::$module::encode(tag, v, buf);
                Ok(())
            }

            fn merge(slot: &mut Option<$ty>, wire: WireType, buf: &mut &[u8]) -> Result<(), Bad> {
                let mut v = <$ty>::default();
                encoding::$module::merge(wire, &mut v, buf, DecodeContext::default())?;
                *slot = Some(v);
                Ok(())
            }

            fn absent() -> Option<$ty> {
                Some(<$ty>::default())
            }
        }
    };
}

native!(i32, int32, "int32");
native!(i64, int64, "int64");
native!(u32, uint32, "uint32");
native!(u64, uint64, "uint64");
native!(bool, bool, "bool");
native!(f32, float, "float");
native!(f64, double, "double");
native!(String, string, "string");
native!(Vec<u8>, bytes, "bytes");

impl<T: Serialize + DeserializeOwned> Field for Postcard<T> {
    type Value = T;
    const PROTO: &'static str = "bytes";

    fn encode(v: &T, tag: u32, buf: &mut Vec<u8>) -> Result<(), Bad> {
        let bytes = postcard::to_stdvec(v).map_err(|_| Bad::Local)?;
        encoding::bytes::encode(tag, &bytes, buf);
        Ok(())
    }

    fn merge(slot: &mut Option<T>, wire: WireType, buf: &mut &[u8]) -> Result<(), Bad> {
        let mut bytes = Vec::new();
        encoding::bytes::merge(wire, &mut bytes, buf, DecodeContext::default())?;
        match postcard::take_from_bytes(&bytes) {
            Ok((v, [])) => {
                *slot = Some(v);
                Ok(())
            }
            _ => Err(Bad::Proto("a postcard field does not decode".into())),
        }
    }

    fn absent() -> Option<T> {
        None
    }
}

/// Calls `f(tag, wire type, rest)` for each field of `msg`, in order; `f`
/// reads the field's value from `rest` (or [`skip`]s it).
///
/// # Errors
/// A key that does not decode, or what `f` returns.
pub fn for_each_field(
    msg: &[u8],
    mut f: impl FnMut(u32, WireType, &mut &[u8]) -> Result<(), Bad>,
) -> Result<(), Bad> {
    let mut buf = msg;
    while !buf.is_empty() {
        let (tag, wire) = encoding::decode_key(&mut buf)?;
        f(tag, wire, &mut buf)?;
    }
    Ok(())
}

/// Skips a field this side does not know.
///
/// # Errors
/// [`Bad::Proto`] for a field that runs past the message.
pub fn skip(wire: WireType, buf: &mut &[u8]) -> Result<(), Bad> {
    // The tag only matters for groups (deprecated; refused below anyway).
    encoding::skip_field(wire, 1, buf, DecodeContext::default())?;
    Ok(())
}

/// The value read for field `tag`, or the kind's value for an absent one.
///
/// # Errors
/// [`Bad::Missing`] for an absent field without a default.
pub fn present<F: Field>(slot: Option<F::Value>, tag: u32) -> Result<F::Value, Bad> {
    slot.or_else(F::absent).ok_or(Bad::Missing(tag))
}

/// `value` encoded on the local wire (postcard).
///
/// # Errors
/// [`Bad::Local`] if it cannot be encoded.
pub fn to_postcard<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Bad> {
    postcard::to_stdvec(value).map_err(|_| Bad::Local)
}

/// The local wire's bytes decoded as `T`, all of them.
///
/// # Errors
/// [`Bad::Local`] if they do not decode or bytes are left over.
pub fn from_postcard<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Bad> {
    match postcard::take_from_bytes(bytes) {
        Ok((v, [])) => Ok(v),
        _ => Err(Bad::Local),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round<F: Field>(v: F::Value) -> F::Value {
        let mut buf = Vec::new();
        F::encode(&v, 3, &mut buf).unwrap();
        let mut slot = None;
        for_each_field(&buf, |tag, wire, rest| {
            assert_eq!(tag, 3);
            F::merge(&mut slot, wire, rest)
        })
        .unwrap();
        present::<F>(slot, 3).unwrap()
    }

    #[test]
    fn every_kind_round_trips() {
        assert_eq!(round::<Native<i64>>(-5), -5);
        assert_eq!(round::<Native<u32>>(7), 7);
        assert!(round::<Native<bool>>(true));
        assert_eq!(round::<Native<f64>>(1.5), 1.5);
        assert_eq!(round::<Native<String>>("héllo".into()), "héllo");
        assert_eq!(round::<Native<Vec<u8>>>(vec![0, 255]), vec![0, 255]);
        assert_eq!(
            round::<Postcard<(u8, Option<String>)>>((9, Some("x".into()))),
            (9, Some("x".into()))
        );
    }

    #[test]
    fn an_absent_scalar_is_its_default_and_an_absent_postcard_field_is_missing() {
        assert_eq!(present::<Native<i64>>(None, 1), Ok(0));
        assert_eq!(present::<Postcard<String>>(None, 2), Err(Bad::Missing(2)));
    }

    #[test]
    fn hostile_messages_are_errors_not_panics() {
        // A string field whose length runs past the end.
        let mut slot = None;
        let r = for_each_field(&[0x0a, 0x7f, b'a'], |_, wire, rest| {
            <Native<String>>::merge(&mut slot, wire, rest)
        });
        assert!(matches!(r, Err(Bad::Proto(_))), "{r:?}");
        // A varint where a string belongs.
        let r = for_each_field(&[0x08, 0x01], |_, wire, rest| {
            <Native<String>>::merge(&mut slot, wire, rest)
        });
        assert!(matches!(r, Err(Bad::Proto(_))), "{r:?}");
        // Invalid UTF-8.
        let r = for_each_field(&[0x0a, 0x01, 0xff], |_, wire, rest| {
            <Native<String>>::merge(&mut slot, wire, rest)
        });
        assert!(matches!(r, Err(Bad::Proto(_))), "{r:?}");
        // Unknown fields are skipped; a truncated one is an error.
        assert_eq!(for_each_field(&[0x10, 0x05], |_, w, r| skip(w, r)), Ok(()));
        assert!(for_each_field(&[0x12, 0x05, 1], |_, w, r| skip(w, r)).is_err());
        // Garbage postcard in a bytes field.
        let mut p: Option<String> = None;
        let r = for_each_field(&[0x0a, 0x02, 0xff, 0xff], |_, w, r| {
            <Postcard<String>>::merge(&mut p, w, r)
        });
        assert!(matches!(r, Err(Bad::Proto(_))), "{r:?}");
        assert_eq!(from_postcard::<(i64, i64)>(&[1]), Err(Bad::Local));
    }
}
