//! The interface version hash: what goes into it, written out as one
//! canonical text, and the hash of that text.
//!
//! Owns [`signature_text`], [`canonical_tokens`] and [`fnv1a64`]. The text
//! must depend only on the tokens of the trait, never on how a compiler
//! prints them, so that two processes built apart agree on it.
//!
//! The text is, line by line (each line ends in `\n`):
//!
//! ```text
//! ferry-interface 1
//! trait <trait name>
//! fn <method name>(<arg name>: <arg type>, <arg name>: <arg type>) -> <return type>
//! ...one `fn` line per method, in declaration order (the op numbers)
//! ```
//!
//! where a method without a return type has `()` as its return type, and a
//! type is written by [`canonical_tokens`]: every token separated from the
//! next by one space (identifiers as written, each punctuation character on
//! its own, literals as written), a delimited group as its opening
//! delimiter, its contents and its closing delimiter. So `Vec<Vec<u8>>` is
//! `Vec < Vec < u8 > >`: spacing and line breaks in the source change
//! nothing, while any change to a name or a type's tokens changes the hash.
//!
//! Types are compared as written, not as resolved: `String` and
//! `std::string::String` hash differently, and a change inside a named type
//! (a field added to an argument's struct) does not change the hash.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;

use crate::model::Interface;

/// The canonical text of `iface`'s signature (see the module docs).
pub(crate) fn signature_text(iface: &Interface) -> String {
    let mut text = format!("ferry-interface 1\ntrait {}\n", iface.trait_item.ident);
    for m in &iface.methods {
        text.push_str("fn ");
        text.push_str(&m.ident.to_string());
        text.push('(');
        for (i, (name, ty)) in m.args.iter().enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            text.push_str(&name.to_string());
            text.push_str(": ");
            text.push_str(&canonical_tokens(ty.to_token_stream()));
        }
        text.push_str(") -> ");
        match &m.ret {
            Some(ty) => text.push_str(&canonical_tokens(ty.to_token_stream())),
            None => text.push_str("()"),
        }
        text.push('\n');
    }
    text
}

/// `tokens` written as the module docs say: one space between tokens,
/// groups as their delimiters around their contents.
pub(crate) fn canonical_tokens(tokens: TokenStream) -> String {
    let mut out = Vec::new();
    push_tokens(tokens, &mut out);
    out.join(" ")
}

fn push_tokens(tokens: TokenStream, out: &mut Vec<String>) {
    for tt in tokens {
        match tt {
            TokenTree::Ident(i) => out.push(i.to_string()),
            TokenTree::Punct(p) => out.push(p.as_char().to_string()),
            TokenTree::Literal(l) => out.push(l.to_string()),
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    // An invisible group (from a macro_rules fragment) adds
                    // no text: the same type written out hashes the same.
                    Delimiter::None => ("", ""),
                };
                if !open.is_empty() {
                    out.push(open.to_string());
                }
                push_tokens(g.stream(), out);
                if !close.is_empty() {
                    out.push(close.to_string());
                }
            }
        }
    }
}

/// The 64-bit FNV-1a hash of `bytes` (offset basis 0xcbf29ce484222325,
/// prime 0x100000001b3).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
