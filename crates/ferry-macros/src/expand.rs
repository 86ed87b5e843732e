//! The code `#[interface]` generates for a checked [`Interface`].
//!
//! Owns [`expand`]. The generated code names only `::ferry::rpc` items
//! (`Client`, `Server`, `RuntimeDir`, `CallOptions`, `Handler`, `Fault`,
//! `Error`, `Result`) and the hidden `::ferry::rpc::__private` helpers, so a
//! user crate needs no dependency of its own on serde or postcard beyond
//! deriving its types' `Serialize`/`Deserialize`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{Ident, LitInt};

use crate::model::{self, ByteString, Interface, Method, byte_string};
use crate::version;

/// Reads `item` as an interface and returns the trait followed by its
/// generated items, or the reasons it is refused.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let iface = model::parse(attr, item)?;
    Ok(generate(&iface))
}

fn generate(iface: &Interface) -> TokenStream {
    let t = &iface.trait_item;
    let vis = &t.vis;
    let name = &t.ident;
    let client = format_ident!("{}Client", name);
    let with = format_ident!("{}ClientWith", name);
    let server = format_ident!("{}Server", name);
    let version_const = format_ident!("{}_VERSION", screaming_snake(&name.to_string()));
    let text = version::signature_text(iface);
    let hash = version::fnv1a64(text.as_bytes());
    let hash_lit = LitInt::new(&format!("{hash:#018x}u64"), Span::call_site());
    let rpc = quote!(::ferry::rpc);
    let version_doc = format!(
        "The version hash of the [`{name}`] interface: FNV-1a 64 of its signature text \
         (see `ferry::interface`), which is:\n\n```text\n{text}```"
    );

    let client_methods = iface
        .methods
        .iter()
        .enumerate()
        .map(|(op, m)| client_method(vis, name, op_lit(op), m, false));
    let with_methods = iface
        .methods
        .iter()
        .enumerate()
        .map(|(op, m)| client_method(vis, name, op_lit(op), m, true));
    let arms = iface
        .methods
        .iter()
        .enumerate()
        .map(|(op, m)| server_arm(name, op_lit(op), m));

    let connect = if iface.grpc {
        let desc = format_ident!("{}Grpc", name);
        quote! {
            /// Binds to the server of `name`: in the user's runtime
            /// directory, or for a URL `grpc://host:port/name` (or
            /// `grpcs://`, with TLS) over gRPC (`ferry-grpc`), as the same
            /// client type. Must be called on a ferry thread.
            #vis fn connect(name: &str) -> #rpc::Result<Self> {
                let client = if ::ferry_grpc::is_url(name) {
                    ::ferry_grpc::connect::<#desc>(name)?
                } else {
                    #rpc::Client::connect(name, Self::VERSION)?
                };
                ::core::result::Result::Ok(Self { client })
            }
        }
    } else {
        quote! {
            /// Binds to the server of `name` in the user's runtime directory.
            /// Must be called on a ferry thread.
            #vis fn connect(name: &str) -> #rpc::Result<Self> {
                ::core::result::Result::Ok(Self {
                    client: #rpc::Client::connect(name, Self::VERSION)?,
                })
            }
        }
    };
    let grpc = if iface.grpc {
        crate::grpc::generate(iface, &version_const)
    } else {
        TokenStream::new()
    };

    quote! {
        #t

        #grpc

        #[doc = #version_doc]
        #vis const #version_const: u64 = #hash_lit;

        #[doc = concat!("The client side of the [`", stringify!(#name), "`] interface: one method per")]
        #[doc = "trait method, each a call to the server that parks the calling ferry thread."]
        #[derive(Clone)]
        #vis struct #client {
            client: #rpc::Client,
        }

        impl #client {
            /// The interface version hash this client binds with.
            #vis const VERSION: u64 = #version_const;

            #connect

            /// Binds to the server of `name` in runtime directory `dir`.
            /// Must be called on a ferry thread.
            #vis fn connect_in(dir: &#rpc::RuntimeDir, name: &str) -> #rpc::Result<Self> {
                ::core::result::Result::Ok(Self {
                    client: #rpc::Client::connect_in(dir, name, Self::VERSION)?,
                })
            }

            /// A typed client over `client`, which must have been bound at
            /// [`Self::VERSION`].
            #vis fn from_client(client: #rpc::Client) -> Self {
                Self { client }
            }

            /// The raw client underneath.
            #vis fn client(&self) -> &#rpc::Client {
                &self.client
            }

            /// The same calls made with `opts` (a deadline, urgency).
            #vis fn with(&self, opts: &#rpc::CallOptions) -> #with<'_> {
                #with { client: &self.client, opts: *opts }
            }

            #(#client_methods)*
        }

        #[doc = concat!("The calls of a [`", stringify!(#client), "`] made with options: see [`", stringify!(#client), "::with`].")]
        #vis struct #with<'a> {
            client: &'a #rpc::Client,
            opts: #rpc::CallOptions,
        }

        impl #with<'_> {
            #(#with_methods)*
        }

        #[doc = concat!("The server side of the [`", stringify!(#name), "`] interface: decodes each call's")]
        #[doc = "arguments, calls the implementation and encodes its result."]
        #vis struct #server<T> {
            imp: T,
        }

        impl<T> #server<T>
        where
            T: #name + ::core::marker::Send + ::core::marker::Sync + 'static,
        {
            /// The interface version hash this server serves at.
            #vis const VERSION: u64 = #version_const;

            /// A handler over `imp` (for `ferry::rpc::Server::serve`).
            #vis fn new(imp: T) -> Self {
                Self { imp }
            }

            /// Serves `imp` as `name` in the user's runtime directory.
            /// Must be called on a ferry thread; serving stops when the
            /// returned server is dropped.
            #vis fn serve(name: &str, imp: T) -> #rpc::Result<#rpc::Server> {
                #rpc::Server::serve(name, Self::VERSION, Self::new(imp))
            }

            /// Serves `imp` as `name` in runtime directory `dir`.
            #vis fn serve_in(dir: &#rpc::RuntimeDir, name: &str, imp: T) -> #rpc::Result<#rpc::Server> {
                #rpc::Server::serve_in(dir, name, Self::VERSION, Self::new(imp))
            }

            /// The implementation.
            #vis fn get_ref(&self) -> &T {
                &self.imp
            }

            /// Answers one call: op `op` with encoded arguments `args`.
            /// Arguments that do not decode (or leave bytes over) are
            /// `Fault::BadArgs`, an op past the last method is
            /// `Fault::UnknownOp`, and a result that cannot be encoded is
            /// answered as `Fault::Panicked`.
            #vis fn dispatch(&self, op: u32, args: &[u8]) -> ::core::result::Result<::std::vec::Vec<u8>, #rpc::Fault> {
                match op {
                    #(#arms)*
                    _ => ::core::result::Result::Err(#rpc::Fault::UnknownOp),
                }
            }
        }

        impl<T> #rpc::Handler for #server<T>
        where
            T: #name + ::core::marker::Send + ::core::marker::Sync + 'static,
        {
            fn call(&self, op: u32, args: &[u8]) -> ::core::result::Result<::std::vec::Vec<u8>, #rpc::Fault> {
                self.dispatch(op, args)
            }
        }
    }
}

fn op_lit(op: usize) -> LitInt {
    LitInt::new(&format!("{op}u32"), Span::call_site())
}

/// One client method: encode the arguments as a tuple, make the call (with
/// the options in `self.opts` if `with_opts`), decode the result.
fn client_method(
    vis: &syn::Visibility,
    trait_name: &Ident,
    op_lit: LitInt,
    m: &Method,
    with_opts: bool,
) -> TokenStream {
    let rpc = quote!(::ferry::rpc);
    let ident = &m.ident;
    let docs = &m.docs;
    let names: Vec<&Ident> = m.args.iter().map(|(n, _)| n).collect();
    let tys = m.args.iter().map(|(_, t)| t);
    let ret = match &m.ret {
        Some(t) => quote!(#t),
        None => quote!(()),
    };
    let args = m.args.iter().map(|(n, t)| match byte_string(t) {
        Some(_) => quote!(&#rpc::__private::Bytes(&#n[..])),
        None => quote!(&#n),
    });
    let decode = if returns_bytes(m) {
        quote!(#rpc::__private::decode::<#rpc::__private::ByteBuf>(&__ferry_reply).map(|b| b.0))
    } else {
        quote!(#rpc::__private::decode::<#ret>(&__ferry_reply))
    };
    let summary = format!(
        "Calls [`{trait_name}::{ident}`] on the server (op {}). Arguments that cannot be \
         encoded are `Error::BadArgs`; a result that does not decode is `Error::BadReply`.",
        op_lit.base10_digits()
    );
    let call = if with_opts {
        quote!(self.client.call_with(#op_lit, &__ferry_args, &self.opts))
    } else {
        quote!(self.client.call(#op_lit, &__ferry_args))
    };
    quote! {
        #(#docs)*
        #[doc = ""]
        #[doc = #summary]
        #vis fn #ident(&self #(, #names: #tys)*) -> #rpc::Result<#ret> {
            let __ferry_args = #rpc::__private::encode(&(#(#args,)*))
                .ok_or(#rpc::Error::BadArgs)?;
            let __ferry_reply = #call?;
            #decode.ok_or(#rpc::Error::BadReply)
        }
    }
}

/// One arm of the server's dispatch.
fn server_arm(trait_name: &Ident, op_lit: LitInt, m: &Method) -> TokenStream {
    let rpc = quote!(::ferry::rpc);
    let ident = &m.ident;
    let names: Vec<&Ident> = m.args.iter().map(|(n, _)| n).collect();
    let tys = m.args.iter().map(|(_, t)| match byte_string(t) {
        Some(ByteString::Owned) => quote!(#rpc::__private::ByteBuf),
        _ => quote!(#t),
    });
    let pass = m.args.iter().map(|(n, t)| match byte_string(t) {
        Some(ByteString::Owned) => quote!(#n.0),
        _ => quote!(#n),
    });
    let ret = if returns_bytes(m) {
        quote!(&#rpc::__private::Bytes(&__ferry_ret[..]))
    } else {
        quote!(&__ferry_ret)
    };
    quote! {
        #op_lit => {
            let (#(#names,)*): (#(#tys,)*) = #rpc::__private::decode(args)
                .ok_or(#rpc::Fault::BadArgs)?;
            let __ferry_ret = <T as #trait_name>::#ident(&self.imp, #(#pass),*);
            #rpc::__private::encode(#ret).ok_or(#rpc::Fault::Panicked)
        }
    }
}

/// Whether `m` returns a byte vector (carried as a byte string).
fn returns_bytes(m: &Method) -> bool {
    m.ret.as_ref().and_then(byte_string) == Some(ByteString::Owned)
}

/// `CamelCase` as `SCREAMING_SNAKE` (`HttpCache` → `HTTP_CACHE`, `HTTPCache`
/// → `HTTP_CACHE`).
pub(crate) fn screaming_snake(name: &str) -> String {
    let chars: Vec<char> = name.trim_start_matches("r#").chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push('_');
            }
        }
        out.extend(c.to_uppercase());
    }
    out
}
