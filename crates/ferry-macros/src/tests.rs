//! Expansion tests: the generated tokens parsed back with syn and checked,
//! the version hash's text and sensitivity, and every refusal with its span.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::visit::Visit;
use syn::{File, ImplItem, Item};

use crate::expand::{expand, screaming_snake};
use crate::model;
use crate::version::{fnv1a64, signature_text};

const CALC: &str = r#"
pub trait Calc {
    /// Adds.
    fn add(&self, a: i64, b: i64) -> i64;
    fn greet(&self, name: String) -> Result<String, MyErr>;
    fn ping(&self);
    fn log(&self, line: &str) -> ();
}
"#;

fn tokens(src: &str) -> TokenStream {
    syn::parse_str(src).unwrap()
}

fn expanded(src: &str) -> File {
    let out = expand(TokenStream::new(), tokens(src)).unwrap_or_else(|e| panic!("{e}"));
    syn::parse2(out).unwrap()
}

fn version_of(src: &str) -> u64 {
    let iface = model::parse(TokenStream::new(), tokens(src)).unwrap();
    fnv1a64(signature_text(&iface).as_bytes())
}

/// The impl block of `self_ty` (the one with a trait if `with_trait`).
fn impl_of<'a>(file: &'a File, self_ty: &str, with_trait: bool) -> &'a syn::ItemImpl {
    file.items
        .iter()
        .find_map(|i| match i {
            Item::Impl(im)
                if im.trait_.is_some() == with_trait
                    && im
                        .self_ty
                        .to_token_stream()
                        .to_string()
                        .starts_with(self_ty) =>
            {
                Some(im)
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no impl of {self_ty}"))
}

fn fn_of<'a>(im: &'a syn::ItemImpl, name: &str) -> &'a syn::ImplItemFn {
    im.items
        .iter()
        .find_map(|i| match i {
            ImplItem::Fn(f) if f.sig.ident == name => Some(f),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no fn {name}"))
}

fn vis_sig(f: &syn::ImplItemFn) -> String {
    squash(&f.vis) + &squash(&f.sig)
}

fn squash(t: impl ToTokens) -> String {
    t.to_token_stream().to_string().replace(' ', "")
}

#[test]
fn expansion_keeps_the_trait_and_adds_client_server_and_version() {
    let file = expanded(CALC);
    let names: Vec<String> = file
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Trait(t) => Some(format!("trait {}", t.ident)),
            Item::Const(c) => Some(format!("const {}", c.ident)),
            Item::Struct(s) => Some(format!("struct {}", s.ident)),
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        [
            "trait Calc",
            "const CALC_VERSION",
            "struct CalcClient",
            "struct CalcClientWith",
            "struct CalcServer"
        ]
    );
    let Item::Const(c) = &file.items[1] else {
        unreachable!()
    };
    let want = format!("{:#018x}u64", version_of(CALC));
    assert_eq!(c.expr.to_token_stream().to_string(), want);
    // The trait is emitted as written.
    let original: syn::ItemTrait = syn::parse_str(CALC).unwrap();
    assert_eq!(file.items[0], Item::Trait(original));
}

#[test]
fn client_methods_encode_a_tuple_call_their_op_and_decode_the_result() {
    let file = expanded(CALC);
    let client = impl_of(&file, "CalcClient", false);
    for f in ["connect", "connect_in", "from_client", "client", "with"] {
        fn_of(client, f);
    }
    let add = fn_of(client, "add");
    assert_eq!(
        vis_sig(add),
        "pubfnadd(&self,a:i64,b:i64)->::ferry::rpc::Result<i64>"
    );
    let body = squash(&add.block);
    assert!(
        body.contains("::ferry::rpc::__private::encode(&(&a,&b,))"),
        "{body}"
    );
    assert!(
        body.contains(".ok_or(::ferry::rpc::Error::BadArgs)"),
        "{body}"
    );
    assert!(
        body.contains("self.client.call(0u32,&__ferry_args)"),
        "{body}"
    );
    assert!(
        body.contains("decode::<i64>(&__ferry_reply).ok_or(::ferry::rpc::Error::BadReply)"),
        "{body}"
    );
    // The trait method's docs are carried over.
    assert!(add.attrs.iter().any(|a| squash(a).contains("Adds.")));

    let ping = fn_of(client, "ping");
    assert_eq!(vis_sig(ping), "pubfnping(&self)->::ferry::rpc::Result<()>");
    assert!(squash(&ping.block).contains("encode(&())"));
    assert!(squash(&ping.block).contains("call(2u32,"));
    let log = fn_of(client, "log");
    assert_eq!(
        vis_sig(log),
        "pubfnlog(&self,line:&str)->::ferry::rpc::Result<()>"
    );

    let with = impl_of(&file, "CalcClientWith", false);
    let greet = fn_of(with, "greet");
    assert_eq!(
        vis_sig(greet),
        "pubfngreet(&self,name:String)->::ferry::rpc::Result<Result<String,MyErr>>"
    );
    assert!(squash(&greet.block).contains("self.client.call_with(1u32,&__ferry_args,&self.opts)"));
}

#[test]
fn server_dispatch_decodes_per_op_and_answers_unknown_ops() {
    let file = expanded(CALC);
    let server = impl_of(&file, "CalcServer", false);
    for f in ["new", "serve", "serve_in", "get_ref", "dispatch"] {
        fn_of(server, f);
    }
    let dispatch = fn_of(server, "dispatch");
    let syn::Stmt::Expr(syn::Expr::Match(m), _) = &dispatch.block.stmts[0] else {
        panic!("dispatch is not a match");
    };
    let pats: Vec<String> = m.arms.iter().map(|a| squash(&a.pat)).collect();
    assert_eq!(pats, ["0u32", "1u32", "2u32", "3u32", "_"]);
    let add = squash(&m.arms[0].body);
    assert!(
        add.contains("let(a,b,):(i64,i64,)=::ferry::rpc::__private::decode(args).ok_or(::ferry::rpc::Fault::BadArgs)?;"),
        "{add}"
    );
    assert!(add.contains("<TasCalc>::add(&self.imp,a,b)"), "{add}");
    assert!(
        add.contains("encode(&__ferry_ret).ok_or(::ferry::rpc::Fault::Panicked)"),
        "{add}"
    );
    assert!(squash(&m.arms[3].body).contains("let(line,):(&str,)="));
    assert_eq!(
        squash(&m.arms[4].body),
        "::core::result::Result::Err(::ferry::rpc::Fault::UnknownOp)"
    );
    let handler = impl_of(&file, "CalcServer", true);
    assert_eq!(
        squash(&handler.trait_.as_ref().unwrap().1),
        "::ferry::rpc::Handler"
    );
    assert!(squash(&fn_of(handler, "call").block).contains("self.dispatch(op,args)"));
}

#[test]
fn byte_vectors_and_slices_travel_as_byte_strings() {
    let file = expanded(
        "pub trait Blob { fn put(&self, key: u32, data: Vec<u8>, tag: &[u8]) -> Vec<u8>; }",
    );
    let put = squash(&fn_of(impl_of(&file, "BlobClient", false), "put").block);
    assert!(
        put.contains(
            "encode(&(&key,&::ferry::rpc::__private::Bytes(&data[..]),\
             &::ferry::rpc::__private::Bytes(&tag[..]),))"
        ),
        "{put}"
    );
    assert!(
        put.contains("decode::<::ferry::rpc::__private::ByteBuf>(&__ferry_reply).map(|b|b.0)"),
        "{put}"
    );
    let dispatch = fn_of(impl_of(&file, "BlobServer", false), "dispatch");
    let arm = squash(&dispatch.block);
    assert!(
        arm.contains("let(key,data,tag,):(u32,::ferry::rpc::__private::ByteBuf,&[u8],)="),
        "{arm}"
    );
    assert!(
        arm.contains("<TasBlob>::put(&self.imp,key,data.0,tag)"),
        "{arm}"
    );
    assert!(
        arm.contains("encode(&::ferry::rpc::__private::Bytes(&__ferry_ret[..]))"),
        "{arm}"
    );
}

#[test]
fn expansion_names_only_ferry_rpc_and_core_std_paths() {
    struct Paths(Vec<String>);
    impl<'ast> Visit<'ast> for Paths {
        fn visit_path(&mut self, p: &'ast syn::Path) {
            if p.leading_colon.is_some() {
                self.0.push(squash(p));
            }
            syn::visit::visit_path(self, p);
        }
    }
    let mut paths = Paths(Vec::new());
    paths.visit_file(&expanded(CALC));
    assert!(!paths.0.is_empty());
    let allowed = [
        "Client",
        "Server",
        "RuntimeDir",
        "CallOptions",
        "Handler",
        "Fault",
        "Error",
        "Result",
        "__private",
    ];
    for p in &paths.0 {
        let ok = if let Some(rest) = p.strip_prefix("::ferry::rpc::") {
            allowed.iter().any(|a| rest.starts_with(a))
        } else {
            p.starts_with("::core::") || p.starts_with("::std::")
        };
        assert!(ok, "the expansion names {p}");
    }
    let text = expanded(CALC).to_token_stream().to_string();
    assert!(!text.contains("serde") && !text.contains("postcard"));
}

#[test]
fn visibility_follows_the_trait() {
    let file = expanded("pub(crate) trait Small { fn f(&self); }");
    let Item::Struct(s) = &file.items[2] else {
        panic!()
    };
    assert_eq!(squash(&s.vis), "pub(crate)");
    let f = fn_of(impl_of(&file, "SmallClient", false), "f");
    assert_eq!(squash(&f.vis), "pub(crate)");
    let file = expanded("trait Private { fn f(&self); }");
    let Item::Struct(s) = &file.items[2] else {
        panic!()
    };
    assert_eq!(squash(&s.vis), "");
}

#[test]
fn fnv1a64_matches_the_reference_vectors() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn signature_text_is_exactly_what_the_docs_say() {
    let iface = model::parse(TokenStream::new(), tokens(CALC)).unwrap();
    assert_eq!(
        signature_text(&iface),
        "ferry-interface 1\ntrait Calc\n\
         fn add(a: i64, b: i64) -> i64\n\
         fn greet(name: String) -> Result < String , MyErr >\n\
         fn ping() -> ()\n\
         fn log(line: & str) -> ( )\n"
    );
}

#[test]
fn version_ignores_spacing_and_docs_but_not_names_or_types() {
    let base = "trait Calc { fn add(&self, a: i64, b: Vec<Vec<u8>>) -> i64; fn z(&self); }";
    let v = version_of(base);
    let same = [
        "trait Calc{fn add(&self,a:i64,b:Vec<Vec<u8> >)->i64;fn z(&self);}",
        "trait Calc {\n  /// docs\n  fn add(&self, a: i64,\n b: Vec< Vec<u8>>) -> i64;\n fn z(&self) {}\n}",
    ];
    for s in same {
        assert_eq!(version_of(s), v, "{s}");
    }
    let different = [
        "trait Calc2 { fn add(&self, a: i64, b: Vec<Vec<u8>>) -> i64; fn z(&self); }",
        "trait Calc { fn plus(&self, a: i64, b: Vec<Vec<u8>>) -> i64; fn z(&self); }",
        "trait Calc { fn add(&self, x: i64, b: Vec<Vec<u8>>) -> i64; fn z(&self); }",
        "trait Calc { fn add(&self, a: i32, b: Vec<Vec<u8>>) -> i64; fn z(&self); }",
        "trait Calc { fn add(&self, a: i64, b: Vec<Vec<u16>>) -> i64; fn z(&self); }",
        "trait Calc { fn add(&self, a: i64, b: Vec<Vec<u8>>) -> u64; fn z(&self); }",
        "trait Calc { fn add(&self, a: i64, b: Vec<Vec<u8>>); fn z(&self); }",
        "trait Calc { fn add(&self, a: i64, b: Vec<Vec<u8>>) -> i64; fn z(&self) -> u8; }",
        "trait Calc { fn z(&self); fn add(&self, a: i64, b: Vec<Vec<u8>>) -> i64; }",
        "trait Calc { fn add(&self, a: i64, b: Vec<Vec<u8>>) -> i64; }",
        "trait Calc { fn add(&self, a: i64, b: Vec<Vec<u8>>) -> i64; fn z(&self); fn y(&self); }",
        "trait Calc { fn add(&self, b: Vec<Vec<u8>>, a: i64) -> i64; fn z(&self); }",
    ];
    for s in different {
        assert_ne!(version_of(s), v, "{s}");
    }
}

#[test]
fn screaming_snake_splits_words() {
    assert_eq!(screaming_snake("Calc"), "CALC");
    assert_eq!(screaming_snake("FileCache"), "FILE_CACHE");
    assert_eq!(screaming_snake("HTTPCache"), "HTTP_CACHE");
    assert_eq!(screaming_snake("Calc2Server"), "CALC2_SERVER");
}

/// The messages and the source text their spans cover.
fn refusals(attr: &str, src: &str) -> Vec<(String, String)> {
    let e = match expand(tokens(attr), tokens(src)) {
        Ok(_) => panic!("accepted: {src}"),
        Err(e) => e,
    };
    e.into_iter()
        .map(|e| {
            let span = e.span().source_text().unwrap_or_default();
            (e.to_string(), span)
        })
        .collect()
}

fn refused(src: &str, message_part: &str, span_text: &str) {
    let all = refusals("", src);
    assert!(
        all.iter()
            .any(|(m, s)| m.contains(message_part) && s == span_text),
        "{src}: wanted `{message_part}` at `{span_text}`, got {all:?}"
    );
}

#[test]
fn refusals_point_at_the_offending_tokens() {
    refused("trait T { fn f(self); }", "takes `&self`", "self");
    refused("trait T { fn f(&mut self); }", "takes `&self`", "&mut self");
    refused(
        "trait T { fn f(self: Box<Self>); }",
        "takes `&self`",
        "self: Box<Self>",
    );
    refused("trait T { fn f(&'a self); }", "takes `&self`", "&'a self");
    refused("trait T { fn f(x: u8); }", "first argument", "fn f(x: u8)");
    refused("trait T<A> { fn f(&self); }", "cannot be generic", "<A>");
    refused(
        "trait T where u8: Copy { fn f(&self); }",
        "cannot be generic",
        "where u8: Copy",
    );
    refused(
        "trait T { fn f(&self) where u8: Copy; }",
        "cannot be generic",
        "where u8: Copy",
    );
    refused(
        "trait T { fn f<A>(&self, a: A); }",
        "cannot be generic",
        "<A>",
    );
    refused(
        "trait T { async fn f(&self); }",
        "cannot be `async`",
        "async",
    );
    refused(
        "trait T { const fn f(&self); }",
        "cannot be `const`",
        "const",
    );
    refused(
        "trait T { unsafe fn f(&self); }",
        "cannot be `unsafe`",
        "unsafe",
    );
    refused(
        r#"trait T { extern "C" fn f(&self); }"#,
        "`extern`",
        r#"extern "C""#,
    );
    refused(
        "unsafe trait T { fn f(&self); }",
        "`unsafe trait`",
        "unsafe",
    );
    refused(
        "trait T { type A; fn f(&self); }",
        "only methods",
        "type A;",
    );
    refused("trait T { const N: u8; }", "only methods", "const N: u8;");
    refused(
        "trait T { fn f(&self, (a, b): (u8, u8)); }",
        "plain names",
        "(a, b)",
    );
    refused("trait T { fn f(&self, _: u8); }", "plain names", "_");
    refused(
        "trait T { fn f(&self, a: impl Copy); }",
        "`impl Trait`",
        "impl Copy",
    );
    refused("trait T { fn f(&self, a: &mut u8); }", "`&mut`", "mut");
    refused(
        "trait T { fn f(&self, a: &'static str); }",
        "lifetimes",
        "'static",
    );
    refused("trait T { fn f(&self) -> &str; }", "owned type", "&str");
    refused(
        "trait T { fn f(&self) -> Vec<&'_ str>; }",
        "owned type",
        "&'_ str",
    );
    refused("trait T { fn f(&self, a: Self); }", "`Self`", "Self");
    refused("trait T { fn f(&self, a: Vec<Self>); }", "`Self`", "Self");
    refused("trait T { fn connect(&self); }", "client's own", "connect");
    refused("trait T { fn with(&self); }", "client's own", "with");
    refused(
        "trait T { fn f(&self, __ferry_args: u8); }",
        "reserved",
        "__ferry_args",
    );
    let attr = refusals("crate = x", "trait T { fn f(&self); }");
    assert!(attr[0].0.contains("takes no arguments"), "{attr:?}");
}

#[test]
fn every_refusal_in_a_trait_is_reported_at_once() {
    let all = refusals(
        "",
        "trait T { async fn a(&self); fn b(self); type C; fn d(&self) -> &str; }",
    );
    assert_eq!(all.len(), 4, "{all:?}");
}

#[test]
fn an_argument_with_an_elided_reference_is_accepted() {
    let file = expanded("trait T { fn f(&self, a: &str, b: &[u8], c: Vec<&'_ str>); }");
    let f = fn_of(impl_of(&file, "TClient", false), "f");
    assert_eq!(
        vis_sig(f),
        "fnf(&self,a:&str,b:&[u8],c:Vec<&'_str>)->::ferry::rpc::Result<()>"
    );
}
