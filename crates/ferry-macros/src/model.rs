//! The interface as the macro understands it, read from the trait, and every
//! check that refuses a trait the generated code could not carry.
//!
//! Owns [`Interface`], [`Method`] and [`parse`]. It must not generate code;
//! it only decides what the trait means (or why it cannot be an interface),
//! and every refusal is a `syn::Error` spanned at the offending tokens.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{
    Attribute, FnArg, Ident, ItemTrait, Pat, ReturnType, Signature, TraitItem, TraitItemFn, Type,
};

/// A trait read as an interface.
pub(crate) struct Interface {
    /// The trait as written; it is emitted unchanged.
    pub trait_item: ItemTrait,
    /// Its methods in declaration order: a method's index is its op number.
    pub methods: Vec<Method>,
    /// `#[interface(grpc)]`: also reachable over gRPC (`ferry-grpc`).
    pub grpc: bool,
}

/// One method of an interface: one op.
pub(crate) struct Method {
    /// The method's name.
    pub ident: Ident,
    /// The method's `#[doc]` attributes, copied onto the client's method.
    pub docs: Vec<Attribute>,
    /// The arguments after `&self`, by name and type.
    pub args: Vec<(Ident, Type)>,
    /// The return type; `None` for a method that returns `()` implicitly.
    pub ret: Option<Type>,
}

/// A type the generated code carries as a byte string
/// (`::ferry::rpc::__private::{Bytes, ByteBuf}`), one copy where serde
/// would make one call per byte; the bytes on the wire are the same.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ByteString {
    /// `Vec<u8>`.
    Owned,
    /// `&[u8]`.
    Borrowed,
}

/// Whether `ty`, as written, is a byte string.
pub(crate) fn byte_string(ty: &Type) -> Option<ByteString> {
    match quote::quote!(#ty).to_string().as_str() {
        "Vec < u8 >" => Some(ByteString::Owned),
        "& [u8]" => Some(ByteString::Borrowed),
        _ => None,
    }
}

/// Names the generated client type has of its own, which a method may not
/// take.
pub(crate) const RESERVED: &[&str] = &[
    "connect",
    "connect_in",
    "from_client",
    "client",
    "with",
    "VERSION",
];

/// The prefix of the generated code's local names, which an argument may not
/// start with.
pub(crate) const LOCAL_PREFIX: &str = "__ferry";

/// Reads `item` (the trait) with the attribute's own tokens `attr`; every
/// reason it cannot be an interface is reported, combined into one error.
pub(crate) fn parse(attr: TokenStream, item: TokenStream) -> syn::Result<Interface> {
    let trait_item: ItemTrait = syn::parse2(item)?;
    let mut errors = Errors::default();
    let grpc = if attr.is_empty() {
        false
    } else if syn::parse2::<Ident>(attr.clone()).is_ok_and(|i| i == "grpc") {
        if !cfg!(feature = "grpc") {
            errors.push(
                attr.span(),
                "#[interface(grpc)] needs ferry's `grpc` feature (depend on ferry-grpc, \
                 which turns it on)",
            );
        }
        true
    } else {
        errors.push(
            attr.span(),
            "#[interface] takes no arguments but `grpc` (#[interface(grpc)])",
        );
        false
    };
    if let Some(t) = &trait_item.unsafety {
        errors.push(t.span(), "an interface cannot be an `unsafe trait`");
    }
    if let Some(t) = &trait_item.auto_token {
        errors.push(t.span(), "an interface cannot be an `auto trait`");
    }
    if let Some(span) = generics_span(&trait_item.generics) {
        errors.push(
            span,
            "an interface cannot be generic: both processes must agree on every type",
        );
    }
    let mut methods = Vec::new();
    for item in &trait_item.items {
        match item {
            TraitItem::Fn(f) => {
                if let Some(m) = method(f, &mut errors) {
                    methods.push(m);
                }
            }
            other => errors.push(
                other.span(),
                "an interface holds only methods (no associated types, consts or macros)",
            ),
        }
    }
    errors.finish()?;
    Ok(Interface {
        trait_item,
        methods,
        grpc,
    })
}

/// Reads one method; `None` (with the reasons in `errors`) if it cannot be
/// an op.
fn method(f: &TraitItemFn, errors: &mut Errors) -> Option<Method> {
    let before = errors.count();
    let sig = &f.sig;
    signature_kind(sig, errors);
    let name = sig.ident.to_string();
    if RESERVED.contains(&name.as_str()) {
        errors.push(
            sig.ident.span(),
            format!("`{name}` is a name of the generated client's own; rename the method"),
        );
    }
    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        Some(FnArg::Receiver(r))
            if r.colon_token.is_none()
                && r.mutability.is_none()
                && matches!(&r.reference, Some((_, None))) => {}
        Some(FnArg::Receiver(r)) => errors.push(
            r.span(),
            "an interface method takes `&self` (the server calls it from many threads at once)",
        ),
        _ => errors.push(
            sig.span(),
            "an interface method takes `&self` as its first argument",
        ),
    }
    let mut args = Vec::new();
    for input in inputs {
        let FnArg::Typed(pt) = input else { continue };
        match &*pt.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                if p.ident.to_string().starts_with(LOCAL_PREFIX) {
                    errors.push(
                        p.ident.span(),
                        format!("argument names starting with `{LOCAL_PREFIX}` are reserved"),
                    );
                }
                args.push((p.ident.clone(), (*pt.ty).clone()));
            }
            other => errors.push(
                other.span(),
                "an interface method's arguments must be plain names (they are part of the version hash)",
            ),
        }
        check_type(&pt.ty, Position::Argument, errors);
    }
    let ret = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => {
            check_type(ty, Position::Return, errors);
            Some((**ty).clone())
        }
    };
    if errors.count() != before {
        return None;
    }
    let docs = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .cloned()
        .collect();
    Some(Method {
        ident: sig.ident.clone(),
        docs,
        args,
        ret,
    })
}

/// Refuses the kinds of function an op cannot be.
fn signature_kind(sig: &Signature, errors: &mut Errors) {
    if let Some(t) = &sig.asyncness {
        errors.push(
            t.span(),
            "an interface method cannot be `async`: a call parks the calling ferry thread instead",
        );
    }
    if let Some(t) = &sig.constness {
        errors.push(t.span(), "an interface method cannot be `const`");
    }
    if let Some(t) = &sig.unsafety {
        errors.push(t.span(), "an interface method cannot be `unsafe`");
    }
    if let Some(a) = &sig.abi {
        errors.push(a.span(), "an interface method cannot have an `extern` ABI");
    }
    if let Some(v) = &sig.variadic {
        errors.push(v.span(), "an interface method cannot be variadic");
    }
    if let Some(span) = generics_span(&sig.generics) {
        errors.push(
            span,
            "an interface method cannot be generic: both processes must agree on every type",
        );
    }
}

/// Where `generics` are, if there are any (parameters or a where clause).
fn generics_span(generics: &syn::Generics) -> Option<proc_macro2::Span> {
    if !generics.params.is_empty() {
        Some(generics.span())
    } else {
        generics.where_clause.as_ref().map(|w| w.span())
    }
}

/// Where a type stands in a method.
#[derive(Clone, Copy, PartialEq)]
enum Position {
    /// An argument: elided references are allowed (the server decodes them
    /// borrowing from the call's bytes).
    Argument,
    /// The return type: it must be owned (the client decodes it out of a
    /// reply it then drops).
    Return,
}

/// Refuses types that cannot cross: `impl Trait`, `Self`, named lifetimes,
/// and any reference in a return type.
fn check_type(ty: &Type, pos: Position, errors: &mut Errors) {
    struct Check<'a> {
        pos: Position,
        errors: &'a mut Errors,
    }
    impl<'ast> Visit<'ast> for Check<'_> {
        fn visit_type_impl_trait(&mut self, t: &'ast syn::TypeImplTrait) {
            self.errors.push(
                t.span(),
                "`impl Trait` cannot cross between processes; name a concrete type",
            );
        }
        fn visit_type_reference(&mut self, t: &'ast syn::TypeReference) {
            if self.pos == Position::Return {
                self.errors.push(
                    t.span(),
                    "an interface method returns an owned type (the reply is decoded into it)",
                );
            } else if let Some(m) = &t.mutability {
                self.errors
                    .push(m.span(), "an argument cannot be a `&mut` reference");
            }
            syn::visit::visit_type_reference(self, t);
        }
        fn visit_lifetime(&mut self, l: &'ast syn::Lifetime) {
            if l.ident != "_" || self.pos == Position::Return {
                self.errors.push(
                    l.span(),
                    "an interface method's types cannot name lifetimes",
                );
            }
        }
        fn visit_ident(&mut self, i: &'ast Ident) {
            if i == "Self" {
                self.errors.push(
                    i.span(),
                    "`Self` means nothing to the other process; name the type",
                );
            }
        }
    }
    Check { pos, errors }.visit_type(ty);
}

/// Refusals gathered while reading, so one expansion reports them all.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, span: proc_macro2::Span, message: impl std::fmt::Display) {
        let e = syn::Error::new(span, message);
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    fn count(&self) -> usize {
        self.0.as_ref().map_or(0, |e| e.clone().into_iter().count())
    }

    fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}
