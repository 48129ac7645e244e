//! `#[derive(DeserializeValue)]`: a value of a user-defined type read into
//! a struct with named fields.
//!
//! The value's fields are read in the type's order and given to the
//! struct's fields by name; fields of the type that the struct lacks are
//! skipped, and fields missing at the end of a shorter value are null (an
//! `Option` field is `None`, another type fails with `UnexpectedNull`,
//! a `default_when_null` field is its default). A field with
//! `allow_missing` may be absent from the type: it is then its default.
//! With `#[shardwise(forbid_excess_udt_fields)]` on the struct, a type with
//! a field the struct does not read (not one of its fields, or a skipped
//! one) fails the type check instead, naming it.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::DeriveInput;

use crate::attrs::{lit, Input};
use crate::de::Gen;

pub(crate) fn derive(ast: &DeriveInput) -> syn::Result<TokenStream> {
    let input = Input::parse(ast, "DeserializeValue")?;
    if let Some(span) = input.attrs.flavor_span {
        return Err(syn::Error::new(
            span,
            "#[derive(DeserializeValue)] matches a UDT's fields by name: `flavor` applies to \
             SerializeValues and DeserializeRow",
        ));
    }
    if let Some(span) = input.attrs.skip_name_checks {
        return Err(syn::Error::new(
            span,
            "#[derive(DeserializeValue)] matches a UDT's fields by name: `skip_name_checks` applies to \
             SerializeValues and DeserializeRow with flavor = \"in_order\"",
        ));
    }
    input.refuse(
        |f| f.flatten,
        "#[derive(DeserializeValue)] does not flatten: a UDT value's fields are its own \
         (`flatten` applies to SerializeValues and DeserializeRow)",
    )?;
    let name = &ast.ident;
    let (cg, impl_generics, where_clause) = Gen::new(&input);
    let (impl_generics, _, _) = impl_generics.split_for_impl();
    let (_, ty_generics, _) = ast.generics.split_for_impl();
    let (krate, de, lt) = (&cg.krate, &cg.de, &cg.lt);
    let derived = quote!(#krate::types::derived);

    let active = cg.active();
    let vars: Vec<_> = (0..active.len()).map(|i| format_ident!("__f{}", i)).collect();
    let checks = active.iter().map(|f| {
        let (field, value) = (lit(&f.name), cg.value_trait(f));
        if f.allow_missing.is_some() {
            // A type without the field is fine: the field reads as its default.
            quote! {
                if let ::core::option::Option::Some(__t) = #derived::udt_field_type_if_any(typ, #field) {
                    #value::type_check(__t).map_err(|e| #derived::in_udt_field_check(typ, #field, e))?;
                }
            }
        } else {
            quote! {
                #value::type_check(#derived::udt_field_type::<Self>(typ, #field)?)
                    .map_err(|e| #derived::in_udt_field_check(typ, #field, e))?;
            }
        }
    });
    let decls = active.iter().zip(&vars).map(|(f, var)| {
        let ty = cg.frame_ty(f);
        quote!(let mut #var: ::core::option::Option<#ty> = ::core::option::Option::None;)
    });
    let arms = active.iter().zip(&vars).map(|(f, var)| {
        let field = lit(&f.name);
        let read = cg.read_value(f, quote!(__t), quote!(__raw));
        quote! {
            #field => {
                #var = ::core::option::Option::Some(
                    #read.map_err(|e| #derived::in_udt_field_value(__name, e))?,
                );
            }
        }
    });
    let read = if active.is_empty() {
        quote!(__reader.next_field()?;)
    } else {
        quote! {
            let __raw = __reader.next_field()?;
            match __name.as_str() {
                #(#arms)*
                _ => {}
            }
        }
    };
    let takes = active.iter().zip(&vars).map(|(f, var)| {
        let field = lit(&f.name);
        if f.allow_missing.is_some() {
            let ty = cg.frame_ty(f);
            return quote! {
                let #var = #var.unwrap_or_else(<#ty as ::core::default::Default>::default);
            };
        }
        quote! {
            let ::core::option::Option::Some(#var) = #var else {
                return ::core::result::Result::Err(#derived::missing_udt_field::<Self>(typ, #field));
            };
        }
    });
    let construct = cg.construct();
    let excess = input.attrs.forbid_excess_udt_fields.map(|_| {
        let names = active.iter().map(|f| lit(&f.name));
        quote! {
            if let ::core::option::Option::Some(__fields) = #derived::udt_fields(typ) {
                let __read: &[&str] = &[#(#names),*];
                for (__name, _) in __fields {
                    if !__read.contains(&__name.as_str()) {
                        return ::core::result::Result::Err(#derived::excess_udt_field::<Self>(typ, __name));
                    }
                }
            }
        }
    });

    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #de::DeserializeValue<#lt> for #name #ty_generics #where_clause {
            fn type_check(
                typ: &#krate::types::ColumnType,
            ) -> ::core::result::Result<(), #de::TypeCheckError> {
                if #derived::udt_fields(typ).is_none() {
                    return ::core::result::Result::Err(#de::TypeCheckError::new::<Self>(typ));
                }
                #excess
                #(#checks)*
                ::core::result::Result::Ok(())
            }
            fn deserialize(
                typ: &#lt #krate::types::ColumnType,
                v: ::core::option::Option<#de::FrameSlice<#lt>>,
            ) -> ::core::result::Result<Self, #de::DeserializeError> {
                let ::core::option::Option::Some(__types) = #derived::udt_fields(typ) else {
                    return ::core::result::Result::Err(#de::TypeCheckError::new::<Self>(typ).into());
                };
                let ::core::option::Option::Some(__v) = v else {
                    return ::core::result::Result::Err(#de::DeserializeError::UnexpectedNull {
                        rust_type: ::core::any::type_name::<Self>(),
                    });
                };
                let mut __reader = #derived::UdtReader::new(typ, __v);
                #(#decls)*
                for (__name, __t) in __types {
                    #read
                }
                __reader.finish()?;
                #(#takes)*
                #construct
            }
        }
    })
}
