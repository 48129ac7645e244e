//! Compile errors of the derives, checked on the macro functions directly
//! (the doc tests of `compile_fail` show them end to end).

use syn::{parse_quote, DeriveInput};

use crate::{de, ser, udt_de, udt_ser};

/// The message of the compile error of each derive on `input`.
fn errors(input: DeriveInput) -> [String; 4] {
    let message = |r: syn::Result<proc_macro2::TokenStream>| match r {
        Ok(tokens) => panic!("expected an error, got {tokens}"),
        Err(e) => e.to_string(),
    };
    [
        message(ser::derive(&input)),
        message(de::derive(&input)),
        message(udt_ser::derive(&input)),
        message(udt_de::derive(&input)),
    ]
}

/// Whether each derive accepts `input`.
fn all_ok(input: &DeriveInput) -> bool {
    ser::derive(input).is_ok()
        && de::derive(input).is_ok()
        && udt_ser::derive(input).is_ok()
        && udt_de::derive(input).is_ok()
}

fn assert_both(input: DeriveInput, needle: &str) {
    for msg in errors(input) {
        assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
    }
}

#[test]
fn unsupported_shapes() {
    assert_both(
        parse_quote!(
            enum E {
                A,
                B,
            }
        ),
        "not enums",
    );
    assert_both(parse_quote!(union U { a: u32, b: f32 }), "not unions");
    assert_both(
        parse_quote!(
            struct T(i32, String);
        ),
        "named fields",
    );
    assert_both(
        parse_quote!(
            struct T;
        ),
        "not a unit struct",
    );
    let [ser, de, udt_ser, udt_de] = errors(parse_quote!(
        struct T(i32);
    ));
    assert!(ser.starts_with("#[derive(SerializeValues)]"), "{ser}");
    assert!(de.starts_with("#[derive(DeserializeRow)]"), "{de}");
    assert!(udt_ser.starts_with("#[derive(SerializeValue)]"), "{udt_ser}");
    assert!(udt_de.starts_with("#[derive(DeserializeValue)]"), "{udt_de}");
}

#[test]
fn flavor_is_for_rows_and_value_lists() {
    let input: DeriveInput = parse_quote! {
        #[shardwise(flavor = "in_order")]
        struct S { a: i32 }
    };
    assert!(ser::derive(&input).is_ok());
    assert!(de::derive(&input).is_ok());
    for r in [udt_ser::derive(&input), udt_de::derive(&input)] {
        let msg = r.map(|t| t.to_string()).unwrap_err().to_string();
        assert!(msg.contains("`flavor` applies to SerializeValues and DeserializeRow"), "{msg}");
    }
}

#[test]
fn bad_attributes() {
    assert_both(
        parse_quote! {
            #[shardwise(flavour = "in_order")]
            struct S { a: i32 }
        },
        "unknown attribute",
    );
    assert_both(
        parse_quote! {
            #[shardwise(flavor = "sideways")]
            struct S { a: i32 }
        },
        "unknown flavor",
    );
    assert_both(
        parse_quote! {
            #[shardwise(skip)]
            struct S { a: i32 }
        },
        "field attributes",
    );
    assert_both(
        parse_quote! {
            struct S { #[shardwise(default)] a: i32 }
        },
        "unknown field attribute",
    );
    assert_both(
        parse_quote! {
            struct S { #[shardwise(rename = 5)] a: i32 }
        },
        "expected string literal",
    );
    assert_both(
        parse_quote! {
            #[shardwise(crate = "not a path")]
            struct S { a: i32 }
        },
        "unexpected token",
    );
}

#[test]
fn duplicate_column_names() {
    assert_both(
        parse_quote! {
            struct S { #[shardwise(rename = "b")] a: i32, b: i32 }
        },
        "two fields use the column name `b`",
    );
    // Skipped fields have no column.
    let ok: DeriveInput = parse_quote! {
        struct S { #[shardwise(rename = "b", skip)] a: i32, b: i32 }
    };
    assert!(all_ok(&ok));
    // Raw identifiers are named without `r#`.
    assert_both(
        parse_quote! {
            struct S { r#type: i32, #[shardwise(rename = "type")] t: i32 }
        },
        "column name `type`",
    );
}

#[test]
fn crate_path_is_used() {
    let input: DeriveInput = parse_quote! {
        #[shardwise(crate = "shardwise::protocol")]
        struct S<'a> { a: &'a str }
    };
    for tokens in [ser::derive(&input), de::derive(&input), udt_ser::derive(&input), udt_de::derive(&input)] {
        let code = tokens.map(|t| t.to_string()).unwrap_or_default();
        assert!(code.contains("shardwise :: protocol :: types"), "{code}");
        assert!(!code.contains("shardwise_protocol"), "{code}");
    }
}

#[test]
fn default_crate_path_comes_from_the_manifest() {
    // This crate reaches the protocol crate as a dev-dependency.
    let input: DeriveInput = parse_quote! {
        struct S { a: i32 }
    };
    let code = udt_ser::derive(&input).map(|t| t.to_string()).unwrap_or_default();
    assert!(code.contains(":: shardwise_protocol :: types :: derived"), "{code}");
}
