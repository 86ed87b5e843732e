//! What `#[interface(grpc)]` adds: the interface's gRPC descriptor for
//! `ferry-grpc` (service and method names, the protobuf messages and the
//! conversions between a call's bytes and them) and its `.proto` text.
//!
//! Owns the mapping from argument and return types to protobuf fields and
//! the generated conversion functions. It must not decide how a call
//! travels: the generated code names only `::ferry_grpc::__private` items,
//! and the local wire (postcard tuples) stays `expand`'s.
//!
//! # The mapping
//!
//! Each method `m` becomes the rpc `M` (upper camel case) of service
//! `ferry.<Trait>`, taking message `<Trait><M>Request` (one field per
//! argument, numbered from 1 in order, named as the argument) and returning
//! `<Trait><M>Reply` (field 1 `value` holding the return value; no field
//! for `()`). Types whose written form is a protobuf scalar map to it:
//!
//! | Rust (as written) | protobuf |
//! |---|---|
//! | `i32`, `i64`, `u32`, `u64`, `bool`, `f32`, `f64` | `int32`, `int64`, `uint32`, `uint64`, `bool`, `float`, `double` |
//! | `String`, `&str` | `string` |
//! | `Vec<u8>`, `&[u8]` | `bytes` |
//! | anything else | `bytes`, holding the value encoded with postcard |
//!
//! so a client that is not ferry calls an interface of plain types with
//! ordinary protobuf messages, and richer serde types still cross (as
//! bytes a ferry peer decodes).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{Ident, LitInt, LitStr, Type};

use crate::model::{Interface, Method, byte_string};

/// How one type travels in a protobuf message.
struct Field {
    /// The protobuf type's name in the `.proto` text.
    proto: &'static str,
    /// The owned Rust type the conversions hold the value in.
    owned: TokenStream,
    /// The `::ferry_grpc::__private` field kind (`Native<T>` or
    /// `Postcard<T>`).
    kind: TokenStream,
    /// Whether the value sits in the local call's postcard tuple as a byte
    /// string (`ByteBuf`, see `model::ByteString`) rather than as `owned`.
    byte_string: bool,
}

impl Field {
    /// The type the value has in the local call's postcard tuple.
    fn local(&self) -> TokenStream {
        if self.byte_string {
            quote!(::ferry::rpc::__private::ByteBuf)
        } else {
            self.owned.clone()
        }
    }

    /// `var` (of type [`Self::local`]) as [`Self::owned`].
    fn owned_of(&self, var: &Ident) -> TokenStream {
        if self.byte_string {
            quote!(#var.0)
        } else {
            quote!(#var)
        }
    }

    /// `var` (of type [`Self::owned`]) as [`Self::local`].
    fn local_of(&self, var: &Ident) -> TokenStream {
        if self.byte_string {
            quote!(::ferry::rpc::__private::ByteBuf(#var))
        } else {
            quote!(#var)
        }
    }
}

/// The field a type written as `ty` maps to.
fn field(ty: &Type) -> Field {
    let private = quote!(::ferry_grpc::__private);
    let written: String = quote!(#ty).to_string();
    let native = |proto: &'static str, owned: TokenStream| Field {
        proto,
        kind: quote!(#private::Native<#owned>),
        owned,
        byte_string: false,
    };
    if byte_string(ty).is_some() {
        return Field {
            byte_string: true,
            ..native("bytes", quote!(::std::vec::Vec<u8>))
        };
    }
    match written.as_str() {
        "i32" => native("int32", quote!(i32)),
        "i64" => native("int64", quote!(i64)),
        "u32" => native("uint32", quote!(u32)),
        "u64" => native("uint64", quote!(u64)),
        "bool" => native("bool", quote!(bool)),
        "f32" => native("float", quote!(f32)),
        "f64" => native("double", quote!(f64)),
        "String" | "& str" => native("string", quote!(::std::string::String)),
        _ => {
            let owned = match ty {
                Type::Reference(r) => {
                    let inner = &r.elem;
                    quote!(#inner)
                }
                _ => quote!(#ty),
            };
            Field {
                proto: "bytes",
                kind: quote!(#private::Postcard<#owned>),
                owned,
                byte_string: false,
            }
        }
    }
}

/// `snake_case` as `UpperCamel`.
fn upper_camel(name: &str) -> String {
    name.trim_start_matches("r#")
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// The descriptor type, its impl and the conversion functions.
pub(crate) fn generate(iface: &Interface, version_const: &Ident) -> TokenStream {
    let private = quote!(::ferry_grpc::__private);
    let t = &iface.trait_item;
    let vis = &t.vis;
    let name = t.ident.to_string();
    let desc = format_ident!("{}Grpc", t.ident);
    let service = format!("ferry.{name}");
    let mut proto = format!(
        "// The gRPC face of ferry interface `{name}` (#[ferry::interface(grpc)]).\n\
         // Fields of type bytes that are not Vec<u8> carry postcard.\n\
         syntax = \"proto3\";\n\npackage ferry;\n\nservice {name} {{\n"
    );
    let mut messages = String::new();
    let mut fns = Vec::new();
    let mut methods = Vec::new();
    for (op, m) in iface.methods.iter().enumerate() {
        let rpc_name = upper_camel(&m.ident.to_string());
        let req = format!("{name}{rpc_name}Request");
        let rep = format!("{name}{rpc_name}Reply");
        proto.push_str(&format!("  rpc {rpc_name} ({req}) returns ({rep});\n"));
        messages.push_str(&format!("\nmessage {req} {{\n"));
        for (i, (arg, ty)) in m.args.iter().enumerate() {
            let f = field(ty);
            messages.push_str(&format!(
                "  {} {} = {};\n",
                f.proto,
                arg.to_string().trim_start_matches("r#"),
                i + 1
            ));
        }
        messages.push_str("}\n");
        messages.push_str(&format!("\nmessage {rep} {{\n"));
        if let Some(ret) = returned(m) {
            messages.push_str(&format!("  {} value = 1;\n", field(ret).proto));
        }
        messages.push_str("}\n");
        let (f, entry) = method_fns(&t.ident, op, m, &rpc_name);
        fns.push(f);
        methods.push(entry);
    }
    proto.push_str("}\n");
    proto.push_str(&messages);
    let proto_lit = LitStr::new(&proto, Span::call_site());
    let service_lit = LitStr::new(&service, Span::call_site());
    let doc = format!(
        "The gRPC descriptor of the [`{name}`] interface, for `ferry-grpc`: service \
         `{service}`, whose `.proto` is [`{desc}::PROTO`]."
    );
    quote! {
        #[doc = #doc]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #desc;

        impl #desc {
            /// The interface's `.proto` text (service and messages).
            #vis const PROTO: &'static str = #proto_lit;
        }

        impl #private::Interface for #desc {
            const SERVICE: &'static str = #service_lit;
            const VERSION: u64 = #version_const;
            const PROTO: &'static str = #proto_lit;
            const METHODS: &'static [#private::Method] = &[#(#methods),*];
        }

        #(#fns)*
    }
}

/// The return type, `None` for `()` (written or not).
fn returned(m: &Method) -> Option<&Type> {
    match &m.ret {
        Some(Type::Tuple(t)) if t.elems.is_empty() => None,
        other => other.as_ref(),
    }
}

/// The four conversion functions of method `m` and its descriptor entry.
fn method_fns(
    trait_ident: &Ident,
    op: usize,
    m: &Method,
    rpc_name: &str,
) -> (TokenStream, TokenStream) {
    let private = quote!(::ferry_grpc::__private);
    let base = format!(
        "__ferry_grpc_{}_{}",
        trait_ident.to_string().to_lowercase(),
        m.ident.to_string().trim_start_matches("r#")
    );
    let args_to = format_ident!("{base}_args_to_proto");
    let args_from = format_ident!("{base}_args_from_proto");
    let result_to = format_ident!("{base}_result_to_proto");
    let result_from = format_ident!("{base}_result_from_proto");
    let fields: Vec<Field> = m.args.iter().map(|(_, t)| field(t)).collect();
    let owned: Vec<&TokenStream> = fields.iter().map(|f| &f.owned).collect();
    let locals: Vec<TokenStream> = fields.iter().map(Field::local).collect();
    let kinds: Vec<&TokenStream> = fields.iter().map(|f| &f.kind).collect();
    let vars: Vec<Ident> = (0..fields.len())
        .map(|i| format_ident!("__ferry_a{i}"))
        .collect();
    let owned_vals = fields.iter().zip(&vars).map(|(f, v)| f.owned_of(v));
    let local_vals = fields.iter().zip(&vars).map(|(f, v)| f.local_of(v));
    let tags: Vec<LitInt> = (1..=fields.len())
        .map(|i| LitInt::new(&format!("{i}u32"), Span::call_site()))
        .collect();
    let ret = returned(m).map(field);
    let result_fns = match &ret {
        Some(f) => {
            let (owned, kind, local) = (&f.owned, &f.kind, f.local());
            let v = format_ident!("__ferry_v");
            let (from_local, to_local) = (f.owned_of(&v), f.local_of(&v));
            quote! {
            #[doc(hidden)]
            fn #result_to(result: &[u8]) -> ::core::result::Result<::std::vec::Vec<u8>, #private::Bad> {
                let __ferry_v: #local = #private::from_postcard(result)?;
                let __ferry_v: #owned = #from_local;
                let mut __ferry_buf = ::std::vec::Vec::new();
                <#kind as #private::Field>::encode(&__ferry_v, 1, &mut __ferry_buf)?;
                ::core::result::Result::Ok(__ferry_buf)
            }
            #[doc(hidden)]
            fn #result_from(msg: &[u8]) -> ::core::result::Result<::std::vec::Vec<u8>, #private::Bad> {
                let mut __ferry_v: ::core::option::Option<#owned> = ::core::option::Option::None;
                #private::for_each_field(msg, |__ferry_tag, __ferry_wire, __ferry_buf| match __ferry_tag {
                    1 => <#kind as #private::Field>::merge(&mut __ferry_v, __ferry_wire, __ferry_buf),
                    _ => #private::skip(__ferry_wire, __ferry_buf),
                })?;
                let __ferry_v = #private::present::<#kind>(__ferry_v, 1)?;
                #private::to_postcard(&#to_local)
            }
            }
        }
        _ => quote! {
            #[doc(hidden)]
            fn #result_to(result: &[u8]) -> ::core::result::Result<::std::vec::Vec<u8>, #private::Bad> {
                let () = #private::from_postcard(result)?;
                ::core::result::Result::Ok(::std::vec::Vec::new())
            }
            #[doc(hidden)]
            fn #result_from(msg: &[u8]) -> ::core::result::Result<::std::vec::Vec<u8>, #private::Bad> {
                #private::for_each_field(msg, |_, __ferry_wire, __ferry_buf| {
                    #private::skip(__ferry_wire, __ferry_buf)
                })?;
                #private::to_postcard(&())
            }
        },
    };
    let f = quote! {
        #[doc(hidden)]
        fn #args_to(args: &[u8]) -> ::core::result::Result<::std::vec::Vec<u8>, #private::Bad> {
            let (#(#vars,)*): (#(#locals,)*) = #private::from_postcard(args)?;
            #( let #vars: #owned = #owned_vals; )*
            let mut __ferry_buf = ::std::vec::Vec::new();
            #( <#kinds as #private::Field>::encode(&#vars, #tags, &mut __ferry_buf)?; )*
            ::core::result::Result::Ok(__ferry_buf)
        }
        #[doc(hidden)]
        fn #args_from(msg: &[u8]) -> ::core::result::Result<::std::vec::Vec<u8>, #private::Bad> {
            #( let mut #vars: ::core::option::Option<#owned> = ::core::option::Option::None; )*
            #private::for_each_field(msg, |__ferry_tag, __ferry_wire, __ferry_buf| match __ferry_tag {
                #( #tags => <#kinds as #private::Field>::merge(&mut #vars, __ferry_wire, __ferry_buf), )*
                _ => #private::skip(__ferry_wire, __ferry_buf),
            })?;
            #( let #vars = #private::present::<#kinds>(#vars, #tags)?; )*
            #private::to_postcard(&(#(#local_vals,)*))
        }
        #result_fns
    };
    let op_lit = LitInt::new(&format!("{op}u32"), Span::call_site());
    let rpc_lit = LitStr::new(rpc_name, Span::call_site());
    let entry = quote! {
        #private::Method {
            name: #rpc_lit,
            op: #op_lit,
            args_to_proto: #args_to,
            args_from_proto: #args_from,
            result_to_proto: #result_to,
            result_from_proto: #result_from,
        }
    };
    (f, entry)
}
