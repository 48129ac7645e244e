//! Compile errors of the derives, checked on the macro functions directly
//! (the doc tests of `compile_fail` show them end to end).

use syn::{parse_quote, DeriveInput};

use crate::{de, newtype, ser, udt_de, udt_ser};

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
        struct T(i32, i32);
    ));
    assert!(ser.starts_with("#[derive(SerializeValues)]"), "{ser}");
    assert!(de.starts_with("#[derive(DeserializeRow)]"), "{de}");
    assert!(udt_ser.starts_with("#[derive(SerializeValue)]"), "{udt_ser}");
    assert!(udt_de.starts_with("#[derive(DeserializeValue)]"), "{udt_de}");
    // A newtype is a value (see `newtypes`), not a row.
    let newtype: DeriveInput = parse_quote!(
        struct T(i32);
    );
    for r in [ser::derive(&newtype), de::derive(&newtype)] {
        let msg = r.map(|t| t.to_string()).unwrap_err().to_string();
        assert!(msg.contains("named fields"), "{msg}");
    }
}

/// The error of the `SerializeValue` and `DeserializeValue` derives on a
/// newtype (as `lib.rs` dispatches them).
fn newtype_errors(input: DeriveInput) -> [String; 2] {
    let field = newtype::field(&input).expect("a newtype");
    let message = |r: syn::Result<proc_macro2::TokenStream>| match r {
        Ok(tokens) => panic!("expected an error, got {tokens}"),
        Err(e) => e.to_string(),
    };
    [message(newtype::serialize(&input, field)), message(newtype::deserialize(&input, field))]
}

#[test]
fn newtypes() {
    let ok: DeriveInput = parse_quote!(
        struct UserId(uuid::Uuid);
    );
    let field = newtype::field(&ok).expect("a newtype");
    let code = newtype::serialize(&ok, field).map(|t| t.to_string()).unwrap_or_default();
    assert!(code.contains("check_type (& self . 0 , typ)"), "{code}");
    let code = newtype::deserialize(&ok, field).map(|t| t.to_string()).unwrap_or_default();
    assert!(code.contains("Ok (Self ("), "{code}");
    // Two fields, a named field or a unit struct are no newtype.
    for s in [
        parse_quote!(
            struct P(i32, i32);
        ),
        parse_quote!(
            struct N {
                a: i32,
            }
        ),
        parse_quote!(
            struct U;
        ),
    ] {
        assert!(newtype::field(&s).is_none());
    }
    for msg in newtype_errors(parse_quote!(
        struct Id(#[shardwise(rename = "x")] i64);
    )) {
        assert!(msg.contains("on a newtype takes no field attributes"), "{msg}");
    }
    for msg in newtype_errors(parse_quote!(
        #[shardwise(flavor = "in_order")]
        struct Id(i64);
    )) {
        assert!(msg.contains("do not apply"), "{msg}");
    }
}

#[test]
fn attributes_each_derive_refuses() {
    // `flatten` is for value lists and rows.
    let input: DeriveInput = parse_quote! {
        struct S { a: i32, #[shardwise(flatten)] inner: Inner }
    };
    assert!(ser::derive(&input).is_ok());
    assert!(de::derive(&input).is_ok());
    for r in [udt_ser::derive(&input), udt_de::derive(&input)] {
        let msg = r.map(|t| t.to_string()).unwrap_err().to_string();
        assert!(msg.contains("does not flatten"), "{msg}");
    }
    // `allow_missing` is for UDTs read.
    let input: DeriveInput = parse_quote! {
        struct S { a: i32, #[shardwise(allow_missing)] b: i32 }
    };
    assert!(udt_de::derive(&input).is_ok());
    let [ser, de, udt_ser, _] =
        [ser::derive(&input), de::derive(&input), udt_ser::derive(&input), Ok(proc_macro2::TokenStream::new())]
            .map(|r| r.map(|t| t.to_string()).err().map(|e| e.to_string()).unwrap_or_default());
    for msg in [&ser, &de] {
        assert!(msg.contains("`allow_missing` applies to #[derive(DeserializeValue)]"), "{msg}");
    }
    assert!(udt_ser.contains("cannot leave out a field the UDT lacks"), "{udt_ser}");
    // `default_when_null` is read by the reading derives, ignored by the others.
    let input: DeriveInput = parse_quote! {
        struct S { a: i32, #[shardwise(default_when_null)] b: i32 }
    };
    assert!(all_ok(&input));
}

/// `forbid_excess_udt_fields` is `DeserializeValue`'s alone, and makes its
/// type check refuse a type field the struct does not read.
#[test]
fn forbid_excess_udt_fields_is_for_udts_read() {
    let input: DeriveInput = parse_quote! {
        #[shardwise(forbid_excess_udt_fields)]
        struct S { a: i32, #[shardwise(skip)] b: i32 }
    };
    let tokens = udt_de::derive(&input).expect("DeserializeValue takes it").to_string();
    assert!(tokens.contains("excess_udt_field"), "{tokens}");
    let plain: DeriveInput = parse_quote! { struct S { a: i32 } };
    assert!(!udt_de::derive(&plain).expect("plain").to_string().contains("excess_udt_field"));
    for r in [ser::derive(&input), de::derive(&input), udt_ser::derive(&input)] {
        let msg = r.map(|t| t.to_string()).unwrap_err().to_string();
        assert!(msg.contains("`forbid_excess_udt_fields` applies to #[derive(DeserializeValue)]"), "{msg}");
    }
}

#[test]
fn skip_name_checks_needs_in_order() {
    assert_both(
        parse_quote! {
            #[shardwise(skip_name_checks)]
            struct S { a: i32 }
        },
        "skip_name_checks",
    );
    let [ser, de, udt_ser, udt_de] = errors(parse_quote! {
        #[shardwise(skip_name_checks)]
        struct S { a: i32 }
    });
    for msg in [ser, de] {
        assert!(msg.contains("needs `#[shardwise(flavor = \"in_order\")]`"), "{msg}");
    }
    for msg in [udt_ser, udt_de] {
        assert!(msg.contains("applies to SerializeValues and DeserializeRow"), "{msg}");
    }
    let ok: DeriveInput = parse_quote! {
        #[shardwise(flavor = "in_order", skip_name_checks)]
        struct S { a: i32, b: i32 }
    };
    assert!(ser::derive(&ok).is_ok() && de::derive(&ok).is_ok());
    // As official: `rename` means nothing then.
    assert_both(
        parse_quote! {
            #[shardwise(flavor = "in_order", skip_name_checks)]
            struct S { #[shardwise(rename = "x")] a: i32 }
        },
        "`rename` means nothing with `skip_name_checks`",
    );
}

#[test]
fn flatten_conflicts() {
    assert_both(
        parse_quote! {
            struct S { #[shardwise(flatten, rename = "x")] inner: Inner }
        },
        "`rename` and `flatten` do not go together",
    );
    assert_both(
        parse_quote! {
            struct S { #[shardwise(flatten, default_when_null)] inner: Inner }
        },
        "not to a flattened field",
    );
    // A flattened field has no name: it does not clash with a field named
    // like it.
    let ok: DeriveInput = parse_quote! {
        struct S { inner: i32, #[shardwise(flatten)] other: Inner, #[shardwise(rename = "other")] o: i32 }
    };
    assert!(ser::derive(&ok).is_ok() && de::derive(&ok).is_ok());
    assert_both(
        parse_quote! {
            struct S { #[shardwise(skip_name_checks)] a: i32 }
        },
        "struct attributes",
    );
    assert_both(
        parse_quote! {
            #[shardwise(flatten)]
            struct S { a: i32 }
        },
        "field attributes",
    );
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
